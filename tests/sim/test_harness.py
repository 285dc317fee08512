"""Whole accelerators on Verilator through the ctypes batch harness: bit-exact against
the integer reference, with random back-pressure; runtime weights; AXI4-Lite;
measured II and latency against the estimates."""

import numpy as np
import pytest

from fluid_hw.hls import estimate_pipeline
from fluid_hw.rtl import param_image
from fluid_hw.rtl.regmap import OKAY, SLVERR, VERSION
from fluid_hw.sim import Harness, SimulationError, measure

from . import reference as ref
from .designs import conv_top, mlp_params, mlp_stages, mlp_top

pytestmark = pytest.mark.slow


def mlp_reference(params, x):
    h = np.asarray(x, np.int64)
    for i, p in enumerate(params):
        h = ref.requantize(ref.fc(h, p["w"], p["b"]), p["m"], p["n"], relu=i < len(params) - 1)
    return h


@pytest.fixture(scope="module")
def mlp():
    top, params = mlp_top()
    with Harness(top) as h:
        yield top, params, h


def test_mlp_bit_exact_with_backpressure(mlp):
    _, params, h = mlp
    x = np.random.default_rng(1).integers(-128, 128, (400, 64))
    want = mlp_reference(params, x)
    inside = ((want > -128) & (want < 127)).mean()
    assert inside > 0.5, "the test's scales saturate too much to be meaningful"
    before = h.counters()
    res = h.run(x, ready_prob=0.6, valid_prob=0.8, seed=7)
    np.testing.assert_array_equal(res.outputs, want)
    after = h.counters()
    assert after["INFERENCES"] - before["INFERENCES"] == 400
    assert after["INPUTS"] - before["INPUTS"] == 400
    assert after["OUT_STALL_CYCLES"] > before["OUT_STALL_CYCLES"]
    ts = res.timestamps
    assert (np.diff(ts["out_last"]) > 0).all() and (ts["out_last"] > ts["in_first"]).all()


def test_mlp_ii_and_latency_match_estimates(mlp):
    top, params, h = mlp
    est = estimate_pipeline(top.specs)
    x = np.random.default_rng(2).integers(-128, 128, (64, 64))
    h.write("CONTROL", 0b101)  # keep enabled, clear counters
    res = h.run(x)
    np.testing.assert_array_equal(res.outputs, mlp_reference(params, x))
    m = measure(res.timestamps)
    assert abs(m["initiation_interval"] - est.initiation_interval) <= 0.1 * est.initiation_interval
    assert abs(m["latency_cycles"] - est.latency_cycles) <= 0.1 * est.latency_cycles
    c = h.counters()  # the hardware counters agree with the harness's own clock
    assert c["INFERENCES"] == 64 and abs(c["BUSY_CYCLES"] - res.cycles) <= 2
    assert abs(c["BUSY_CYCLES"] / 64 - est.initiation_interval) <= 0.1 * est.initiation_interval


def test_axil_protocol(mlp):
    top, _, h = mlp
    assert h.read("ID") == 0x464C4857 and h.read("VERSION") == VERSION[0] << 16 | VERSION[1]
    assert h.read("DESIGN_HASH") == int(top.design_hash[:8], 16)
    assert h.read("IN_FORMAT") == 64 | 8 << 16 | 8 << 24
    assert h.read("OUT_FORMAT") == 10 | 2 << 16 | 8 << 24
    assert h.read_resp(0xFFC) == (0, SLVERR)       # unmapped
    assert h.write_resp(0xFFC, 1) == SLVERR
    assert h.write_resp("ID", 1) == SLVERR         # read-only
    assert h.write_resp(0x48, 1) == SLVERR         # no PARAM window in a const design
    for order in ("together", "aw_first", "w_first"):
        assert h.write_resp("CONTROL", 1, order=order) == OKAY
    assert h.write_resp("CONTROL", 0, strb=0b0010) == OKAY  # byte 1 only: ENABLE kept
    assert h.read("CONTROL") == 1
    h.write("CONTROL", 0)  # disabled: the input is held back, and it says so
    with pytest.raises(SimulationError, match="no stream transfer"):
        h.run(np.zeros((1, 64), np.int8), max_idle=200)
    assert h.read("STATUS") & 0b100 == 0 and h.read("IN_STALL_CYCLES") > 0
    h.write("CONTROL", 0b011)  # soft reset flushes the stuck vector; enable again
    x = np.random.default_rng(3).integers(-128, 128, (3, 64))
    np.testing.assert_array_equal(h.run(x).outputs, mlp_reference(h_params(top), x))


def h_params(top):
    return [{"w": s.weights.T, "b": s.bias, "m": s.multiplier, "n": s.shift}
            for s in top.specs]


def test_conv_pool_bit_exact():
    top, p = conv_top()
    rng = np.random.default_rng(4)
    x_nchw = rng.integers(-128, 128, (60, 1, 8, 8))
    want = ref.maxpool2d(ref.requantize(ref.conv2d(x_nchw, p["w"], p["b"], 1, 1), p["m"],
                                        p["n"], relu=True), 2, 2)
    with Harness(top) as h:
        res = h.run(x_nchw.transpose(0, 2, 3, 1).reshape(60, -1), ready_prob=0.7, seed=1)
        got = res.outputs.reshape(60, 4, 4, 4).transpose(0, 3, 1, 2)  # HWC -> CHW
        np.testing.assert_array_equal(got, want)
        res = h.run(x_nchw[:12].transpose(0, 2, 3, 1).reshape(12, -1))
    est = estimate_pipeline(top.specs)
    m = measure(res.timestamps)
    assert abs(m["initiation_interval"] - est.initiation_interval) <= 0.1 * est.initiation_interval
    assert abs(m["latency_cycles"] - est.latency_cycles) <= 0.1 * est.latency_cycles


def test_runtime_weights_one_build_several_weight_sets():
    top0, _ = mlp_top(seed=0, mode="runtime")
    with Harness(top0) as h:
        key = h.build.key
        x = np.random.default_rng(5).integers(-128, 128, (50, 64))
        for seed in (10, 11, 12):
            params = mlp_params(seed)
            specs = mlp_stages(params, mode="runtime")
            words = h.load_params(specs)
            assert words == sum(len(w) for _, w in param_image(specs))
            res = h.run(x, ready_prob=0.8, seed=seed)
            np.testing.assert_array_equal(res.outputs, mlp_reference(params, x))
        assert h.read("CONFIG") & 1 and h.read("PARAM_WORDS") == top0.param_words
        assert h.write_resp("PARAM_DATA", 0, strb=0x3) == SLVERR  # partial window write
    top1, _ = mlp_top(seed=99, mode="runtime")  # other weights: the same hardware
    assert top1.design_hash == top0.design_hash
    with Harness(top1) as h1:
        assert h1.build.key == key and h1.build.cached


def test_trace_file_and_int32_outputs(tmp_path):
    from fluid_hw.hls import MVAUStage
    from fluid_hw.rtl import AcceleratorTop

    rng = np.random.default_rng(6)
    w = rng.integers(-127, 128, (8, 4))
    b = rng.integers(-2**20, 2**20, 4)
    top = AcceleratorTop([MVAUStage.from_fc("logits", w, bias=b, requantize=False, pe=2,
                                            simd=4)], name="tiny_accel", out_lanes=1)
    vcd = tmp_path / "run.vcd"
    with Harness(top, trace=vcd) as h:
        x = rng.integers(-128, 128, (5, 8))
        out = h.run(x, ready_prob=0.5).outputs
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref.fc(x, w, b))
    text = vcd.read_text()
    assert "$enddefinitions" in text and "m_axis_tvalid" in text


def test_fst_trace_needs_lz4(tmp_path):
    from fluid_hw.sim import ToolNotFoundError
    from fluid_hw.sim.build import _check_fst

    try:
        _check_fst()
    except ToolNotFoundError as e:
        assert "liblz4-dev" in str(e)
    else:
        pytest.skip("lz4 headers present: FST traces build like VCD ones")
