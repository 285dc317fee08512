"""Board targets: ``fluid-hw compile --target ulx3s-85f`` folds automatically for the
board's device (hls.autofold), overrides and a throughput target are honoured, and the
choice is in report.json; options that contradict automatic folding are refused."""

from __future__ import annotations

import json

import pytest

from fluid_hw.backends.fpga import BuildError, compile_model, read_report
from fluid_hw.backends.fpga.compile import TARGETS, get_target
from fluid_hw.boards import get_device
from fluid_hw.cli.main import main
from fluid_hw.hls.autofold import AutoFoldError, autofold
from fluid_hw.hls.folding import FoldingError

from .test_steps import float_mlp  # noqa: F401  (module fixture)


def test_every_board_is_a_target_also_by_device_name():
    assert {"sim", "ulx3s-25f", "ulx3s-45f", "ulx3s-85f", "icebreaker"} <= set(TARGETS)
    assert get_target("ecp5-85f").board == "ulx3s-85f"
    assert get_target("LFE5U-45F").board == "ulx3s-45f"
    assert get_target("up5k").board == "icebreaker"
    assert get_target("up5k").clock_mhz == 30.0 and get_target("ulx3s-85f").clock_mhz == 100.0
    assert get_target("sim").board is None
    assert get_target("ulx3s-25f").ff_style == "trellis"
    assert get_target("icebreaker").ff_style == get_target("sim").ff_style == "plain"


def test_board_target_folds_for_the_device(float_mlp, tmp_path):  # noqa: F811
    model, calib = float_mlp
    st = compile_model(model, tmp_path / "b", target="ecp5-85f", calibration=calib)
    a = st.autofold
    assert a is not None and a.device == "LFE5U-85F"
    # the lowering uses exactly what autofold chose for the stages on that device
    again = autofold(st.lowered.specs, get_device("LFE5U-85F"),
                     fifo_depth=st.lowered.fifo_depth)
    assert st.lowered.folding == a.folding == again.folding
    for r in ("dsp", "lut", "bram"):
        assert a.resources[r] <= a.limits[r]
    rep = read_report(tmp_path / "b")
    assert rep["target"] == "ulx3s-85f"
    assert rep["autofold"]["device"] == "LFE5U-85F"
    assert rep["autofold"]["initiation_interval"] == rep["estimate"]["initiation_interval"]
    assert {k: (v["pe"], v["simd"]) for k, v in rep["folding"].items()} == a.folding
    # ECP5: the per-PE input copies and the requantisers' multiplier inputs are explicit
    # TRELLIS_FF cells, so that Yosys cannot merge them (HARDWARE.md)
    design = json.loads((tmp_path / "b" / "design.json").read_text())
    assert design["ff_style"] == "trellis"
    assert "TRELLIS_FF" in (tmp_path / "b" / "accelerator.v").read_text()


def test_overrides_and_target_fps(float_mlp, tmp_path):  # noqa: F811
    model, calib = float_mlp
    fast = compile_model(model, tmp_path / "a", target="ulx3s-85f", calibration=calib,
                         stop_after="lower")
    fixed = compile_model(model, tmp_path / "b", target="ulx3s-85f", calibration=calib,
                          folding={"fc_2": (2, 2)}, stop_after="lower")
    assert fixed.lowered.folding["fc_2"] == (2, 2)
    assert fixed.autofold.overrides == {"fc_2": (2, 2)}
    rate = 0.25 * fast.autofold.throughput_per_s
    slow = compile_model(model, tmp_path / "c", target="ulx3s-85f", calibration=calib,
                         target_fps=rate, stop_after="lower")
    assert slow.autofold.throughput_per_s >= rate
    assert slow.autofold.resources["dsp"] < fast.autofold.resources["dsp"]


def test_contradicting_options_are_refused(float_mlp, tmp_path):  # noqa: F811
    model, calib = float_mlp
    with pytest.raises(BuildError, match="automatic folding needs a board target"):
        compile_model(model, tmp_path / "x", calibration=calib, auto_fold=True)
    with pytest.raises(BuildError, match="give --target-fps instead of --ii"):
        compile_model(model, tmp_path / "x", target="ulx3s-85f", calibration=calib,
                      auto_fold=True, ii_target=64)
    # a throughput target on the sim target folds for the matching interval
    st = compile_model(model, tmp_path / "z", calibration=calib, target_fps=100e6 / 512,
                       stop_after="lower")
    assert st.autofold is None and st.lowered.estimate().initiation_interval <= 512
    with pytest.raises(FoldingError, match="target_fps must be positive"):
        compile_model(model, tmp_path / "z", calibration=calib, target_fps=0)
    # an initiation interval alone keeps the balanced folding on a board target
    st = compile_model(model, tmp_path / "y", target="ulx3s-85f", calibration=calib,
                       ii_target=512, stop_after="lower")
    assert st.autofold is None and st.lowered.estimate().initiation_interval <= 512


def test_the_big_mlp_does_not_fit_the_up5k_and_the_error_names_the_way_out(
        float_mlp, tmp_path):  # noqa: F811
    model, calib = float_mlp
    with pytest.raises(AutoFoldError, match=r"does not fit iCE40UP5K.*block RAMs: needs "
                                            r"\d+, budget \d+.*SPRAM"):
        compile_model(model, tmp_path / "x", target="icebreaker", calibration=calib)


def test_cli_fold_auto_and_target_fps(float_mlp, tmp_path, capsys):  # noqa: F811
    model, calib = float_mlp
    assert main(["compile", str(model), "--out", str(tmp_path / "b"), "--calibration",
                 str(calib), "--target", "ulx3s-85f", "--fold", "auto,fc_2=2x2",
                 "--target-fps", "100000"]) == 0
    out = capsys.readouterr().out
    assert "folded automatically for LFE5U-85F" in out
    rep = json.loads((tmp_path / "b" / "report.json").read_text())
    assert rep["folding"]["fc_2"] == {"pe": 2, "simd": 2}
    assert rep["autofold"]["target_fps"] == 100000
    assert main(["compile", str(model), "--out", str(tmp_path / "c"), "--calibration",
                 str(calib), "--fold", "auto"]) == 2
    assert "automatic folding needs a board target" in capsys.readouterr().err
