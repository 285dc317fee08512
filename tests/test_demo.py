"""``make demo``'s flow (``fluid-hw demo``) runs end to end: here without the board
(the bitstream half is tested in tests/backends/fpga) and with few epochs."""

import json

import pytest

from fluid_hw.cli.main import main


@pytest.mark.slow
def test_demo_without_a_board(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--epochs", "3", "--board", "none"]) == 0
    text = capsys.readouterr().out
    assert "== summary ==" in text and "bit-exact vs golden model" in text
    report = json.loads((out / "build" / "report.json").read_text())
    assert report["target"] == "sim" and report["bit_exact"] is True
    assert report["inputs"] == 360 and report["autofold"] is None
    assert (out / "loss_curve.png").stat().st_size > 0
    assert (out / "build" / "report.html").is_file()
    # it ends with the bench table of the demo's model (quick mode)
    assert text.rstrip().splitlines()[-1].startswith("bench: ")
    bench = json.loads((out / "bench" / "bench.json").read_text())
    assert bench["options"]["quick"] is True
    assert {r["backend"] for r in bench["rows"] if r["status"] == "measured"} >= {
        "cpu", "onnxruntime", "fpga:sim"}
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["loss_per_epoch"]) == 3
