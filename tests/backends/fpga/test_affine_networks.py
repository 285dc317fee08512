"""Per-channel affine stages in whole networks: a batch norm after a pool (no
convolution to fold it into) and a multiply then an add by per-channel constants after
a convolution quantise to ``quantized_affine`` + ``requantize`` and lower to ``affine``
stages; the stage models equal the golden model bit for bit (also after an ONNX round
trip, where the batch norm is a BatchNormalization node); in Verilator the network is
bit-exact with runtime weights, and follows the golden model after another parameter
set is loaded into the affine stages through the register interface.  (The units
themselves are fuzzed in amaranth.sim, tests/rtl/test_affine.py: this build is their
Verilator test, to keep the builds few.)"""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, load_build, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.hls.folding import FoldingBudget
from fluid_hw.hls.lower import lower
from fluid_hw.passes import QuantConfig, quantize
from tests.backends.fpga._reload import assert_reload_is_bit_exact
from tests.hls.test_lower import check_stages

L = fluid.layers
N = 32
SHAPE = (3, 8, 8)
KINDS = ["conv", "maxpool", "affine", "conv", "affine"]


def _network() -> tuple[fluid.Program, fluid.Scope, str]:
    """conv -> relu -> max pool -> batch norm -> relu -> conv -> * s[c] -> + t[c] -> relu,
    with trained-looking batch-norm statistics (negative gammas, one zero variance) and
    per-channel constants (one negative)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=list(SHAPE), dtype="float32")
        h = L.pool2d(L.conv2d(x, 4, 3, padding=1, act="relu"), 2, "max", 2)
        h = L.batch_norm(h, act="relu")
        h = L.conv2d(h, 6, 3, padding=1)
        gb = main.global_block()
        s = gb.create_parameter(name="chan_scale", shape=[6], dtype="float32")
        t = gb.create_parameter(name="chan_shift", shape=[6], dtype="float32")
        y = L.relu(L.elementwise_add(L.elementwise_mul(h, s, axis=1), t, axis=1))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    rng = np.random.default_rng(3)
    stats = {"batch_norm_0.w_0": rng.uniform(0.5, 2, 4) * [1, -1, 1, -1],  # gamma
             "batch_norm_0.b_0": rng.normal(0, 0.5, 4),                    # beta
             "batch_norm_0.w_1": rng.uniform(0, 1, 4),                     # mean
             "batch_norm_0.w_2": np.array([0.0, 0.5, 2.0, 1.0]),           # variance
             "chan_scale": rng.uniform(0.2, 3, 6) * [1, -1, 1, 1, -1, 1],
             "chan_shift": rng.normal(0, 1, 6)}
    scope.vars.update({k: np.asarray(v, np.float32) for k, v in stats.items()})
    return main.clone(for_test=True), scope, y.name


def _data(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((N, *SHAPE)).astype(np.float32)


def _quantised(program, scope, fetch, feed="x"):
    q = quantize(program, [{feed: _data(0)}], scope=scope, executor=fluid.Executor(),
                 feed_names=[feed], fetch_names=[fetch])
    return q, lower(q, scope, feed_names=[feed], fetch_names=[fetch])


def test_batch_norm_after_a_pool_and_channel_scales_lower_to_affine_stages():
    program, scope, fetch = _network()
    q, low = _quantised(program, scope, fetch)
    types = [op.type for op in q.global_block().ops]
    assert types.count("quantized_affine") == 2
    assert not {"batch_norm", "elementwise_mul", "elementwise_add", "relu"} & set(types)
    assert [s.kind for s in low.stages] == KINDS
    assert [s.relu for s in low.stages] == [True, False, True, False, True]
    assert [s.name for s in low.stages if s.kind == "affine"] == ["batch_norm_0",
                                                                  "chan_scale"]
    check_stages(low, q, scope, {"x": _data(1)})
    # about as close to the float network as with the affine ops left in float (host
    # islands; tests/passes/test_quantize_affine.py)
    exe = fluid.Executor()
    island = quantize(program, [{"x": _data(0)}], QuantConfig(
        float_fallback=True, exclude=("batch_norm", "elementwise_mul", "elementwise_add")),
        scope=scope, executor=exe, feed_names=["x"], fetch_names=[fetch])
    assert "batch_norm" in [op.type for op in island.global_block().ops]
    (want,) = exe.run(program, feed={"x": _data(1)}, fetch_list=[fetch], scope=scope)
    err = [np.abs(exe.run(p, feed={"x": _data(1)}, fetch_list=[fetch],
                          scope=fluid.Scope(scope))[0] - want) for p in (q, island)]
    assert err[0].mean() <= 1.3 * err[1].mean() and err[0].max() <= 2 * err[1].max()


@pytest.mark.slow
def test_an_onnx_batch_normalization_after_a_pool_lowers_the_same_way(tmp_path):
    from fluid_hw.frontend import onnx as fonnx

    program, scope, fetch = _network()
    fonnx.export(program, tmp_path / "m.onnx", feed_names=["x"], fetch_names=[fetch],
                 scope=scope)
    m = fonnx.load(tmp_path / "m.onnx")
    assert "batch_norm" in [op.type for op in m.program.global_block().ops]
    q, low = _quantised(m.program, m.scope, m.fetch_names[0], m.feed_names[0])
    assert [s.kind for s in low.stages] == KINDS
    check_stages(low, q, m.scope, {m.feed_names[0]: _data(1)})


@pytest.mark.slow
def test_affine_network_with_runtime_weights_is_bit_exact_in_verilator(tmp_path):
    program, scope, fetch = _network()
    out = tmp_path / "b"
    st = compile_program(program, scope, out, feeds=["x"], fetches=[fetch], target="sim",
                         calibration={"x": _data(0)}, budget=FoldingBudget(macs=8),
                         weights="runtime", folding={"chan_scale": (2, 1)})
    assert [s.kind for s in st.lowered.stages] == KINDS
    keys = simulate_build(out, {"x": _data(1)})
    assert keys["bit_exact"] and keys["mismatches"] == 0 and keys["inputs"] == N
    est = read_report(out)["estimate"]["initiation_interval"]
    assert keys["measured"]["initiation_interval"] == est
    keys = simulate_build(out, {"x": _data(2)[:8]}, ready_prob=0.4)  # random backpressure
    assert keys["bit_exact"] and keys["mismatches"] == 0
    # another parameter set for both affine stages, loaded at run time
    b = load_build(out)
    rng = np.random.default_rng(9)
    values = {}
    for s in (s for s in b.lowered.stages if s.kind == "affine"):
        old = {k: np.asarray(b.scope.find_value(s.params[k])) for k in
               ("weights", "bias", "multiplier")}
        values[s.params["weights"]] = rng.integers(-127, 128, old["weights"].shape) \
            .astype(np.int8)
        values[s.params["bias"]] = rng.integers(-2000, 2000, old["bias"].shape) \
            .astype(np.int32)
        values[s.params["multiplier"]] = (old["multiplier"] // rng.integers(
            1, 4, old["multiplier"].shape)).astype(np.int32)
    x = _data(2)[:8]
    assert_reload_is_bit_exact(out, b, values, x)
