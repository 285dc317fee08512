"""The build as named steps: stop after any and inspect; report.json merged atomically;
errors that name the file or option and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import (
    COMPILE_STEPS,
    BuildError,
    compile_model,
    read_report,
    simulate,
    update_report,
)
from fluid_hw.backends.fpga.report import ReportError
from fluid_hw.cli.main import main
from fluid_hw.errors import UnknownNameError
from tests.passes._util import digits


@pytest.fixture(scope="module")
def float_mlp(tmp_path_factory):
    """An (untrained) float digits MLP saved as an inference model, and calibration data."""
    b = digits("mlp")
    d = tmp_path_factory.mktemp("model")
    with fluid.scope_guard(b.scope):
        fluid.io.save_inference_model(str(d / "mlp"), ["pixels"],
                                      [b.program.global_block().var(b.fetch[0])],
                                      fluid.Executor(), main_program=b.program)
    calib = d / "calib.npy"
    np.save(calib, np.random.default_rng(0).random((64, 64), dtype=np.float32))
    return d / "mlp", calib


def test_stop_after_lower_leaves_the_lowering_to_inspect(float_mlp, tmp_path):
    model, calib = float_mlp
    out = tmp_path / "b"
    st = compile_model(model, out, calibration=calib, folding={"fc_1": (2, 4)},
                       stop_after="lower")
    assert st.lowered is not None and st.top is None
    assert sorted(p.name for p in out.iterdir()) == ["lowering.json"]
    low = json.loads((out / "lowering.json").read_text())
    assert low["folding"]["fc_1"] == {"pe": 2, "simd": 4}
    assert [s["name"] for s in low["stages"]] == ["fc_0", "fc_1", "fc_2"]
    assert low["partition"]["post"] == ["dequantize", "softmax"]
    assert read_report(out) == {}  # no report: write_report has not run
    assert [s.name for s in COMPILE_STEPS][:3] == ["load_model", "quantize", "lower"]


def test_compile_errors_name_the_fix(float_mlp, tmp_path):
    model, calib = float_mlp
    with pytest.raises(BuildError, match=r"float model: give calibration data.*--calibration"):
        compile_model(model, tmp_path / "x")
    with pytest.raises(UnknownNameError, match=r"unknown target 'ulx3s'.*Known:.*sim.*ulx3s-85f"):
        compile_model(model, tmp_path / "x", target="ulx3s")
    with pytest.raises(UnknownNameError, match=r"unknown compile step 'lowr'.*Did you mean lower"):
        compile_model(model, tmp_path / "x", calibration=calib, stop_after="lowr")
    with pytest.raises(BuildError, match="no such model folder"):
        compile_model(tmp_path / "nothing", tmp_path / "x")
    with pytest.raises(BuildError, match=r"calibration file .* not found"):
        compile_model(model, tmp_path / "x", calibration=tmp_path / "none.npy")
    with pytest.raises(ReportError, match="run `fluid-hw compile`"):
        simulate(tmp_path / "x", {"pixels": np.zeros((1, 64), np.float32)})


def test_cli_reports_errors_with_exit_code_2(float_mlp, tmp_path, capsys):
    model, calib = float_mlp
    assert main(["compile", str(model), "--out", str(tmp_path / "b"), "--calibration",
                 str(calib), "--fold", "fc_0=4"]) == 2
    assert "layer=PExSIMD" in capsys.readouterr().err
    assert main(["compile", str(model), "--out", str(tmp_path / "b"), "--calibration",
                 str(calib), "--fold", "fc_0=3x8"]) == 2
    assert "PE=3 must divide its 128 outputs" in capsys.readouterr().err
    assert main(["compile", str(model), "--out", str(tmp_path / "b"), "--calibration",
                 str(calib), "--stop-after", "lower", "--macs", "16"]) == 0
    low = json.loads((tmp_path / "b" / "lowering.json").read_text())
    assert sum(f["pe"] * f["simd"] for f in low["folding"].values()) <= 16


def test_report_merges_atomically(tmp_path):
    update_report(tmp_path, {"a": 1, "b": np.float32(0.5), "c": np.arange(3)})
    update_report(tmp_path, {"b": 2, "d": {"e": np.int64(4)}}, drop=["a"])
    r = read_report(tmp_path)
    assert r == {"b": 2, "c": [0, 1, 2], "d": {"e": 4}}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left
    (tmp_path / "report.json").write_text("{oops")
    with pytest.raises(ReportError, match="not valid JSON"):
        read_report(tmp_path)


@pytest.mark.slow
def test_recompiling_a_new_design_drops_stale_results(float_mlp, tmp_path):
    """Needs Yosys (Verilog emission), not Verilator."""
    model, calib = float_mlp
    out = tmp_path / "b"
    compile_model(model, out, calibration=calib, folding={"fc_2": (1, 1)})
    r = read_report(out)
    assert r["stages"][2]["folding"] == {"pe": 1, "simd": 1}
    update_report(out, {"measured": {"initiation_interval": 1}, "bit_exact": True})
    compile_model(model, out, calibration=calib, folding={"fc_2": (1, 1)})  # same design
    assert read_report(out)["bit_exact"] is True
    compile_model(model, out, calibration=calib, folding={"fc_2": (2, 1)})  # a new one
    r = read_report(out)
    assert "bit_exact" not in r and "measured" not in r
    assert r["stages"][2]["folding"] == {"pe": 2, "simd": 1}
    # an already quantised model (the build's model/) compiles as it is
    again = compile_model(out / "model", tmp_path / "c", stop_after="lower")
    assert again.quantized_here is False and again.lowered is not None
    assert [s.name for s in again.lowered.stages] == ["fc_0", "fc_1", "fc_2"]


def test_debug_stages_finds_the_first_divergent_stage_and_element():
    from fluid_hw.backends.fpga.simulate import compare_stages
    from fluid_hw.hls.lower import lower
    from fluid_hw.passes import quantize
    from fluid_hw.rtl import pipeline_model

    b = digits("cnn")
    rng = np.random.default_rng(0)
    calib = [{"pixels": rng.random((32, 1, 8, 8), dtype=np.float32)}]
    q = quantize(b.program, calib, scope=b.scope, executor=fluid.Executor(),
                 fetch_names=b.fetch)
    low = lower(q, b.scope, feed_names=["pixels"], fetch_names=b.fetch)
    names = [low.partition.hw_input, *(s.out_var for s in low.stages)]
    vals = fluid.Executor().run(q, feed={"pixels": b.feed["pixels"]}, fetch_list=names,
                                scope=fluid.Scope(b.scope))
    golden = dict(zip(names, vals))
    x = low.to_stream(golden[low.partition.hw_input])
    ok = compare_stages(low, golden, pipeline_model(low.specs, x))
    assert ok["first_divergence"] is None and ok["hardware_vs_model"]["mismatches"] == 0
    assert [r["stage"] for r in ok["stages"]] == [s.name for s in low.stages]
    # a wrong multiplier in the second convolution: found there, at its channel 5
    spec = low.stages[2].spec
    spec.multiplier = spec.multiplier.copy()
    spec.multiplier[5] = spec.multiplier[5] // 2 + 1
    bad = compare_stages(low, golden)
    first = bad["first_divergence"]
    assert first["stage"] == "conv2d_1" and first["golden"] == low.stages[2].out_var
    assert first["element"][1] == 5  # [n, channel, y, x] of the golden NCHW value
    assert [r["mismatches"] > 0 for r in bad["stages"]] == [False, False, True, False, False]
    # the hardware's stream against the model: the element in program order
    hw = pipeline_model(low.specs, x).copy()
    hw[1, 7] += 1
    row = compare_stages(low, golden, hw)["hardware_vs_model"]
    assert row["mismatches"] == 1 and row["input"] == 1 and row["element"] == [1, 7]


def test_a_label_input_saved_with_the_model_is_dropped(tmp_path):
    b = digits("mlp")
    with fluid.scope_guard(b.scope):
        fluid.io.save_inference_model(str(tmp_path / "m"), ["pixels", "label"],
                                      [b.program.global_block().var(b.fetch[0])],
                                      fluid.Executor(), main_program=b.program)
    calib = {"pixels": np.random.default_rng(0).random((32, 64), dtype=np.float32),
             "label": np.zeros((32, 1), np.int64)}
    st = compile_model(tmp_path / "m", tmp_path / "b", calibration=calib, stop_after="lower")
    assert st.feeds == ["pixels"] and st.lowered.partition.feeds == ["pixels"]
