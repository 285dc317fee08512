"""docs/qat.md's example runs as written and reaches the accuracy its text implies."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "qat.md"


def test_the_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})  # our own document, not user input
    out = capsys.readouterr().out
    accs = [float(v) for v in re.findall(r"accuracy ([0-9.]+)", out)]
    assert len(accs) == 2 and all(a >= 0.85 for a in accs), out
