"""MLPerf Tiny's keyword-spotting DS-CNN and anomaly-detection autoencoder (scaled down,
randomly initialised), and a network with every new stage kind (depthwise convolution,
table activations, average and global average pooling), compiled from float programs
with calibration data and simulated in Verilator on 64 inputs: bit for bit against the
golden model, at the estimated initiation interval; the mixed network with constant
and with runtime weights (a second weight set loaded into the depthwise stage)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, load_build, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.frontend import models
from fluid_hw.hls.folding import FoldingBudget
from tests.backends.fpga._reload import assert_reload_is_bit_exact

pytestmark = pytest.mark.slow

L = fluid.layers
N = 64
#: few multipliers: small designs, quick to verilate
BUDGET = FoldingBudget(macs=8)


def _initialised(startup: fluid.Program) -> fluid.Scope:
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return scope


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((N, *shape)).astype(np.float32)


def _compile_and_simulate(program, scope, out, feed: str, fetch: str, shape, **kw):
    """compile_program (sim target, calibrated on N random inputs) then simulate on N
    others: (compile state, simulate keys, report)."""
    kw.setdefault("budget", BUDGET)
    st = compile_program(program, scope, out, feeds=[feed], fetches=[fetch], target="sim",
                         calibration={feed: _data(shape, 0)}, **kw)
    keys = simulate_build(out, inputs={feed: _data(shape, 1)}, debug_stages=True)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == N
    dbg = keys["debug_stages"]
    assert dbg["first_divergence"] is None and dbg["hardware_vs_model"]["mismatches"] == 0
    assert [s["mismatches"] for s in dbg["stages"]] == [0] * len(st.lowered.stages)
    return st, keys, read_report(out)


def _ii_ratio(report: dict) -> float:
    return report["measured"]["initiation_interval"] / report["estimate"]["initiation_interval"]


@pytest.mark.parametrize("name,build,kinds,post", [
    # the reference's blocks at a quarter of the size: 11x4 features (the 10x4 stride-2
    # convolution leaves 6x2, the 5x2 average pool drops the last row, as the 25x5 map's
    # 24x5 pool does), 4 filters, one depthwise-separable block
    ("ds_cnn", lambda: models.ds_cnn(filters=4, blocks=1, num_classes=4, input_shape=(11, 4)),
     ["conv", "dwconv", "conv", "avgpool", "mvau"], ["dequantize", "softmax"]),
    ("fc_autoencoder", lambda: models.fc_autoencoder(input_dim=16, hidden=8, depth=1,
                                                     bottleneck=4),
     ["mvau"] * 4, ["dequantize"]),
    # the reference's topology (three residual stacks, the 2nd and 3rd downsampling with
    # a 1x1 stride-2 convolution on the skip path) with 2 / 4 / 4 filters
    ("resnet8", lambda: models.resnet8(filters=(2, 4, 4), num_classes=4),
     ["conv"] * 3 + ["add"] + ["conv"] * 3 + ["add"] + ["conv"] * 3 + ["add", "avgpool",
                                                                        "mvau"],
     ["dequantize", "softmax"]),
], ids=["ds_cnn", "fc_autoencoder", "resnet8"])
def test_tiny_network_is_bit_exact_at_the_estimated_rate(name, build, kinds, post, tmp_path):
    t0 = time.perf_counter()
    model = build()
    scope = _initialised(model.startup)
    shape = tuple(model.image.shape[1:])
    # one multiplier a layer is the slowest folding: ResNet-8's ten layers need 10
    budget = FoldingBudget(macs=16) if name == "resnet8" else BUDGET
    st, _keys, r = _compile_and_simulate(model.test_program, scope, tmp_path / name,
                                         model.image.name, model.prediction.name, shape,
                                         budget=budget)
    assert [s.kind for s in st.lowered.stages] == kinds
    assert r["partition"]["pre"] == ["quantize"] and r["partition"]["post"] == post
    ratio = _ii_ratio(r)
    assert 0.75 <= ratio <= 1.25, r["measured"]
    print(f"\n{name}: II measured {r['measured']['initiation_interval']} / estimated "
          f"{r['estimate']['initiation_interval']} = {ratio:.3f}; "
          f"{time.perf_counter() - t0:.1f} s")


def _mixed() -> tuple[fluid.Program, fluid.Scope, str]:
    """conv -> depthwise conv -> 1x1 conv -> sigmoid -> avg pool 2x2 -> global avg pool
    -> tanh -> fc on [2, 4, 4] (test program, initialised; fetch name)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=[2, 4, 4], dtype="float32")
        h = L.conv2d(x, 4, 3, padding=1, act="relu")
        h = L.conv2d(h, 4, 3, padding=1, groups=4, act="relu")
        h = L.sigmoid(L.conv2d(h, 4, 1))
        h = L.pool2d(h, 2, "avg", 2)
        h = L.pool2d(h, pool_type="avg", global_pooling=True)
        y = L.fc(L.tanh(h), 3)
    return main.clone(for_test=True), _initialised(startup), y.name


MIXED_KINDS = ["conv", "dwconv", "conv", "table", "avgpool", "avgpool", "table", "mvau"]


@pytest.mark.parametrize("weights", ["const", "runtime"])
def test_mixed_network_with_every_new_kind_is_bit_exact(weights, tmp_path):
    t0 = time.perf_counter()
    program, scope, fetch = _mixed()
    out = tmp_path / weights
    # the depthwise stage two channels a cycle: its runtime memories interleave channels
    st, _keys, r = _compile_and_simulate(program, scope, out, "x", fetch, (2, 4, 4),
                                         weights=weights, folding={"conv2d_1": (2, 1)})
    low = st.lowered
    assert [s.kind for s in low.stages] == MIXED_KINDS
    assert low.folding["conv2d_1"] == (2, 1) and low.specs[1].runtime == (weights == "runtime")
    assert r["weights"] == weights and (out / "weights.npz").exists() == (weights == "runtime")
    assert [s["ops"] for s in r["stages"]][4:6] == [["quantized_pool2d", "requantize"]] * 2
    ratio = _ii_ratio(r)
    assert 0.75 <= ratio <= 1.25, r["measured"]
    if weights == "runtime":
        _second_weight_set(out)
    print(f"\nmixed ({weights}): II measured {r['measured']['initiation_interval']} / "
          f"estimated {r['estimate']['initiation_interval']} = {ratio:.3f}; "
          f"{time.perf_counter() - t0:.1f} s")


def _second_weight_set(out) -> None:
    """Other depthwise weights, bias and multipliers loaded through the register
    interface: the hardware follows the golden model with them."""
    b = load_build(out)
    (dw,) = [s for s in b.lowered.stages if s.kind == "dwconv"]
    rng = np.random.default_rng(7)
    old = {slot: np.asarray(b.scope.find_value(dw.params[slot]))
           for slot in ("weights", "bias", "multiplier")}
    values = {dw.params["weights"]: rng.integers(-127, 128, old["weights"].shape)
              .astype(np.int8),
              dw.params["bias"]: (old["bias"] // 2).astype(np.int32),
              dw.params["multiplier"]: rng.integers(1, 2**15, old["multiplier"].shape)
              .astype(np.int32)}
    x = _data((2, 4, 4), 2)[:16]
    assert_reload_is_bit_exact(out, b, values, x)
