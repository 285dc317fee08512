"""The README's quickstart runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {})  # our own README, not user input
    assert (tmp_path / "mlp" / "__model__").exists() and (tmp_path / "mlp.dot").exists()
