"""The trained digits models end to end: ``fluid-hw compile`` (float model + calibration
-> int8 -> accelerator) and ``fluid-hw simulate`` over the 360 test images in
Verilator, bit for bit against the golden model; accuracy, saturation, measured vs
estimated II and latency, MAC utilisation; the cocotb bench on a subset; random
back-pressure through the driver."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import load_build, read_report, simulate
from fluid_hw.backends.fpga.compile import compile_model
from fluid_hw.cli.main import main
from fluid_hw.drivers import Accelerator
from fluid_hw.sim.cocotb_runner import run_cocotb

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mlp_build(trained, tmp_path_factory):
    t = trained("mlp")
    out = tmp_path_factory.mktemp("build") / "mlp"
    assert main(["compile", str(t.model_dir), "--target", "sim", "--out", str(out),
                 "--calibration", str(t.calibration)]) == 0
    assert main(["simulate", str(out), "--inputs", str(t.x_test), "--labels", str(t.y_test),
                 "--debug-stages"]) == 0
    return t, out


def _within(measured: float, estimate: float, tol: float = 0.10) -> bool:
    return abs(measured - estimate) <= tol * measured


def test_mlp_is_bit_exact_accurate_and_as_fast_as_estimated(mlp_build):
    t, out = mlp_build
    r = read_report(out)
    # what was built
    assert r["target"] == "sim" and r["weights"] == "const" and r["clock_mhz"] > 0
    assert [s["name"] for s in r["stages"]] == ["fc_0", "fc_1", "fc_2"]
    for s in r["stages"]:
        assert set(s["estimate"]) >= {"cycles", "ii", "lut", "ff", "dsp", "bram"}
        assert set(s["folding"]) == {"pe", "simd"} and s["op"] == "quantized_fc"
    est = r["estimate"]
    assert set(est) >= {"initiation_interval", "latency_cycles", "cycles_per_inference",
                        "resources"}
    assert r["throughput_per_s"] == pytest.approx(r["clock_mhz"] * 1e6 /
                                                  est["initiation_interval"])
    assert r["latency_us"] == pytest.approx(est["latency_cycles"] / r["clock_mhz"])
    # every output bit of all 360 test images
    assert r["bit_exact"] is True and r["mismatches"] == 0 and r["inputs"] == 360
    # accuracy: from outputs.npy, equal to the golden model's, within 1 point of float
    y = np.load(t.y_test)[:, 0]
    hw = float((np.load(out / "outputs.npy").argmax(1) == y).mean())
    acc = r["accuracy"]
    assert hw == acc["hardware_int8"] == acc["golden_int8"]
    assert acc["float"] >= 0.96 and abs(acc["float"] - hw) <= 0.01
    # saturation of the int8 activations (golden model's intermediate tensors)
    assert r["activations_at_rails"]["overall"] < 0.05
    # measured (handshake timestamps, counters) vs the analytic estimate
    m = r["measured"]
    assert _within(m["initiation_interval"], est["initiation_interval"])
    assert _within(m["latency_cycles"], est["latency_cycles"])
    assert _within(m["cycles_per_inference"], est["cycles_per_inference"])
    assert m["counters"]["INFERENCES"] == 360
    # balanced folding: the busiest MAC array is busy >= 90 % of the time
    u = r["mac_utilisation"]
    assert u["busiest_utilisation"] >= 0.9
    # --debug-stages: every stage agrees with the golden model's intermediate value
    dbg = r["debug_stages"]
    assert dbg["first_divergence"] is None and dbg["hardware_vs_model"]["mismatches"] == 0
    assert [s["mismatches"] for s in dbg["stages"]] == [0, 0, 0]


def test_mlp_build_folder_holds_what_it_says(mlp_build):
    t, out = mlp_build
    for f in ("accelerator.v", "registers.md", "registers.h", "design.json", "lowering.json",
              "host/pre.pb", "host/post.pb", "host/host.json", "model/__model__",
              "float_model/__model__", "outputs.npy"):
        assert (out / f).exists(), f
    assert "module fluid_accel" in (out / "accelerator.v").read_text()
    assert "PARAM_DATA" not in (out / "registers.md").read_text()  # const weights
    host = json.loads((out / "host" / "host.json").read_text())
    assert host["pre_ops"] == ["quantize"] and host["post_ops"] == ["dequantize", "softmax"]
    # model/ is the quantised program exactly as compiled: the golden model
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        prog, feeds, fetches = fluid.io.load_inference_model(str(out / "model"), exe)
    assert any(op.type == "quantized_fc" for op in prog.global_block().ops)
    x = np.load(t.x_test)
    (prob,) = exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches, scope=scope)
    assert prob.tobytes() == np.load(out / "outputs.npy").tobytes()


def test_mlp_cocotb_bench_on_a_subset(mlp_build):
    _t, out = mlp_build
    b = load_build(out)
    low = b.lowered
    x = np.load(_t.x_test)[:12]
    scope = fluid.Scope(b.scope)
    hw_in, hw_out = fluid.Executor().run(b.program, feed={"pixels": x}, scope=scope,
                                         fetch_list=[low.partition.hw_input,
                                                     low.partition.hw_output])
    res = run_cocotb(low.top(json.loads((out / "design.json").read_text())["name"]),
                     low.to_stream(hw_in), low.to_out_stream(hw_out), ready_prob=0.7,
                     valid_prob=0.8, seed=3)
    np.testing.assert_array_equal(res.outputs, low.to_out_stream(hw_out))
    assert res.raw["inferences_register"] == 12


def test_mlp_under_random_back_pressure(mlp_build):
    t, out = mlp_build
    x = np.load(t.x_test)[:60]
    with Accelerator.open(out, "sim", ready_prob=0.5, valid_prob=0.7, seed=11) as acc:
        (prob,) = acc.run(x)
        c = acc.counters()
    want = np.load(out / "outputs.npy")[:60]
    assert prob.tobytes() == want.tobytes()
    assert c["OUT_STALL_CYCLES"] > 0 and c["IN_STARVE_CYCLES"] > 0
    assert c["INFERENCES"] == c["INPUTS"] == 60


def test_cnn_is_bit_exact(trained, tmp_path_factory):
    t = trained("cnn")
    out = tmp_path_factory.mktemp("build") / "cnn"
    st = compile_model(t.model_dir, out, calibration=t.calibration)
    ops = [op.type for op in st.program.global_block().ops]
    assert "batch_norm" not in ops and ops.count("quantized_conv2d") == 2  # conv_bn_fuse ran
    keys = simulate(out, t.x_test, labels=t.y_test)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 360
    acc = keys["accuracy"]
    assert acc["hardware_int8"] == acc["golden_int8"]
    assert abs(acc["float"] - acc["hardware_int8"]) <= 0.01
    r = read_report(out)
    assert [s["op"] for s in r["stages"]] == ["quantized_conv2d", "quantized_pool2d"] * 2 + \
        ["quantized_fc"]
    assert r["stages"][1]["ops"] == ["quantized_pool2d"]
    m, est = r["measured"], r["estimate"]
    assert _within(m["initiation_interval"], est["initiation_interval"])
    assert _within(m["latency_cycles"], est["latency_cycles"])


def test_cnn_bitstream_for_the_ecp5_85f(trained, tmp_path_factory, capsys):
    """The trained CNN (conv_bn_fuse, int8), folded automatically for the LFE5U-85F, to a
    bitstream in one command; multipliers and block RAMs as estimated."""
    t = trained("cnn")
    out = tmp_path_factory.mktemp("build") / "cnn85"
    assert main(["compile", str(t.model_dir), "--target", "ulx3s-85f", "--out", str(out),
                 "--calibration", str(t.calibration), "--bitstream"]) == 0
    text = capsys.readouterr().out
    assert "folded automatically for LFE5U-85F" in text and "accelerator.bit" in text
    r = read_report(out)
    assert (out / "accelerator.bit").stat().st_size > 100_000
    assert r["autofold"]["device"] == "LFE5U-85F"
    cmp_ = r["resources_estimate_vs_actual"]
    assert cmp_["dsp"]["estimate"] == cmp_["dsp"]["actual"] > 0
    assert cmp_["bram"]["estimate"] == cmp_["bram"]["actual"] > 0
    assert abs(cmp_["lut"]["error_pct"]) <= 25
    assert r["fmax_mhz"] > 0 and r["critical_path"]["steps"]
    goals = r["bitstream"]["goals"]
    assert goals["macs_per_inference"] > 0 and goals["multiplier_bound_per_s"] > 0
    print(f"\nCNN on LFE5U-85F: Fmax {r['fmax_mhz']} MHz, {json.dumps(cmp_)}, "
          f"seconds {r['bitstream']['seconds']}")
