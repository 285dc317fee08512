"""quantize(): a batch norm that folds into no layer and element-wise ops by per-channel
constants become ``quantized_affine`` + ``requantize`` (chains of them one, a relu after
folded into the clamp), as close to the float program as leaving them in float; the
integer parameters follow the rule of ``passes/_quant_affine`` (the scale in the
requantiser's multiplier, the sign in the weight, the bias within the accumulator);
what is not per-channel stays float; a scale the requantiser cannot hold is refused by
name."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.passes import QuantConfig, QuantizationError, quantize
from fluid_hw.passes._quant_affine import AFFINE_OPS, integer_affine
from fluid_hw.passes.quantize import requant_params
from tests.passes._util import op_types

L = fluid.layers
B = 2**31 - 1 - 127 * 128


def _const(name: str, shape: list[int]):
    return fluid.default_main_program().global_block().create_parameter(
        name=name, shape=shape, dtype="float32")


def _build(body, shape, values: dict[str, np.ndarray], seed: int = 0):
    """``body(x)`` on an input of ``shape``: (test program, scope, fetch)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed + 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=list(shape), dtype="float32")
        y = body(x)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    scope.vars.update({k: np.asarray(v, np.float32) for k, v in values.items()})
    return main.clone(for_test=True), scope, y.name


def _data(shape, seed):
    return np.random.default_rng(seed).standard_normal((32, *shape)).astype(np.float32)


def _quantise(prog, scope, fetch, shape, config=None):
    return quantize(prog, [{"x": _data(shape, 0)}], config, scope=scope,
                    executor=fluid.Executor(), feed_names=["x"], fetch_names=[fetch])


def _bn_stats(c, rng):
    return {"batch_norm_0.w_0": rng.uniform(0.5, 2, c) * np.resize([1, -1], c),
            "batch_norm_0.b_0": rng.normal(0, 0.5, c), "batch_norm_0.w_1": rng.normal(0, 1, c),
            "batch_norm_0.w_2": rng.uniform(0.3, 2, c)}


def _residual_bn(x):
    h = L.conv2d(x, 4, 3, padding=1, act="relu")
    h = L.elementwise_add(L.conv2d(h, 4, 3, padding=1), h)
    return L.fc(L.batch_norm(h), 3)


FORMS = {
    # name: (body, input shape, constants(rng), affine ops, relu of each affine)
    "bn_after_pool": (lambda x: L.fc(L.batch_norm(L.pool2d(L.conv2d(x, 4, 3), 2, "max", 2),
                                                  act="relu"), 3),
                      [3, 6, 6], lambda r: _bn_stats(4, r), [True]),
    "bn_after_residual_add": (_residual_bn, [2, 5, 5], lambda r: _bn_stats(4, r), [False]),
    "bn_on_input": (lambda x: L.fc(L.conv2d(L.batch_norm(x), 4, 3), 3), [3, 5, 5],
                    lambda r: _bn_stats(3, r), [False]),
    "mul_add_relu": (lambda x: L.fc(L.relu(L.elementwise_add(L.elementwise_mul(
        L.pool2d(L.conv2d(x, 4, 3), 2, "avg", 2), _const("s", [4]), axis=1),
        _const("t", [4]), axis=1)), 3), [2, 6, 6],
        lambda r: {"s": r.uniform(-2, 2, 4), "t": r.normal(0, 1, 4)}, [True]),
    "sub_div": (lambda x: L.fc(L.elementwise_div(L.elementwise_sub(
        L.pool2d(L.conv2d(x, 3, 3), 2, "max", 2), _const("t", [3]), axis=1),
        _const("s", [3]), axis=1), 3), [2, 6, 6],
        lambda r: {"s": r.uniform(0.5, 2, 3) * [1, -1, 1], "t": r.normal(0, 1, 3)}, [False]),
    "scalar_mul_then_bn": (lambda x: L.fc(L.batch_norm(L.elementwise_mul(
        L.pool2d(L.conv2d(x, 4, 3), 2, "max", 2), _const("s", [1]))), 3), [2, 6, 6],
        lambda r: {"s": [-1.7], **_bn_stats(4, r)}, [False]),
    "vector_after_fc": (lambda x: L.fc(L.elementwise_mul(L.fc(x, 6, act="relu"),
                                                         _const("s", [6]), axis=1), 3),
                        [5], lambda r: {"s": r.uniform(-3, 3, 6)}, [False]),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_per_channel_affine_ops_quantise_to_one_affine_each(form):
    body, shape, consts, relus = FORMS[form]
    prog, scope, fetch = _build(body, shape, consts(np.random.default_rng(7)))
    q = _quantise(prog, scope, fetch, shape)
    types = op_types(q)
    assert not set(AFFINE_OPS) & set(types), types
    assert types.count("quantized_affine") == len(relus)
    ops = q.global_block().ops
    got = [ops[i + 1] for i, op in enumerate(ops) if op.type == "quantized_affine"]
    assert [r.type for r in got] == ["requantize"] * len(relus)
    assert [r.attr("relu") for r in got] == relus
    if relus[0]:
        assert "relu" not in types
    for op in ops:
        if op.type == "quantized_affine":
            w = scope.find_value(op.input("Weight")[0])
            assert w.dtype == np.int8 and np.abs(w).max() <= 127
            assert scope.find_value(op.input("Bias")[0]).dtype == np.int32
    # about as close to the float program as with the affine ops left in float (on
    # average; single outputs differ by a rounding either way)
    island = _quantise(prog, scope, fetch, shape, QuantConfig(float_fallback=True,
                                                              exclude=AFFINE_OPS))
    assert set(AFFINE_OPS) & set(op_types(island))
    exe = fluid.Executor()
    x = _data(shape, 1)
    (want,) = exe.run(prog, feed={"x": x}, fetch_list=[fetch], scope=scope)
    err = [np.abs(exe.run(p, feed={"x": x}, fetch_list=[fetch],
                          scope=fluid.Scope(scope))[0] - want) for p in (q, island)]
    tol = 1e-3 * np.abs(want).max()
    assert err[0].mean() <= 1.3 * err[1].mean() + tol, form
    assert err[0].max() <= 2 * err[1].max() + tol, form


def test_integer_parameters_hold_the_scale_in_the_requantiser():
    s_in, s_out = 0.02, 0.05
    # ordinary, negative, zero gamma, tiny factor beside a large offset, a zero variance
    a = np.array([1.5, -0.7, 0.0, 1e-9, 1 / np.sqrt(1e-5)])
    b = np.array([0.3, -1.0, 2.0, 5.0, -40.0])
    w, bias, s_w = integer_affine(a, b, s_in, s_out, B)
    assert w.dtype == np.int8 and bias.dtype == np.int32
    assert w.tolist() == [127, -127, 0, 0, 127]
    np.testing.assert_allclose(s_w[[0, 1, 4]], np.abs(a[[0, 1, 4]]) / 127)
    assert np.abs(bias.astype(np.int64)).max() <= B // 2 + 1
    # every channel's requantiser multiplier keeps its 15 bits
    mn = [requant_params(v) for v in s_in * s_w / s_out]
    assert min(m for m, _ in mn) >= 2**14
    # the real value of (w q + bias) at the accumulator's scale is a q s_in + b, to half a
    # bias step (which is 1/127 of an input step) -- and for the channels whose factor
    # lost its bits, to far less than an output step
    q = np.arange(-128, 128)[:, None]
    real = (w * q + bias.astype(np.float64)) * s_in * s_w
    err = np.abs(real - (a * q * s_in + b)).max(axis=0)
    assert np.all(err[[0, 1, 4]] <= s_in * s_w[[0, 1, 4]] / 2 * (1 + 1e-9))
    assert np.all(err[[2, 3]] < 1e-6 * s_out)


def test_zero_variance_negative_and_zero_gamma_channels():
    rng = np.random.default_rng(3)
    stats = _bn_stats(4, rng)
    stats["batch_norm_0.w_0"] = np.array([1.2, -0.8, 0.0, -1.5])
    stats["batch_norm_0.w_2"] = np.array([0.5, 0.0, 1.0, 2.0])   # a zero variance
    body, shape = FORMS["bn_after_pool"][:2]
    prog, scope, fetch = _build(body, shape, stats)
    q = _quantise(prog, scope, fetch, shape)
    (op,) = [op for op in q.global_block().ops if op.type == "quantized_affine"]
    assert scope.find_value(op.input("Weight")[0]).tolist() == [127, -127, 0, -127]


def test_a_chain_stops_where_a_value_branches():
    def body(x):
        h = L.elementwise_mul(L.pool2d(L.conv2d(x, 3, 3), 2, "max", 2), _const("s", [3]),
                              axis=1)
        a = L.elementwise_add(h, _const("t", [3]), axis=1)
        return L.fc(L.relu(L.elementwise_add(a, h)), 3)   # h read twice

    rng = np.random.default_rng(4)
    prog, scope, fetch = _build(body, [2, 6, 6], {"s": rng.uniform(0.5, 2, 3),
                                                  "t": rng.normal(0, 1, 3)})
    types = op_types(_quantise(prog, scope, fetch, [2, 6, 6]))
    assert types.count("quantized_affine") == 2 and "quantized_add" in types


def test_what_is_not_per_channel_stays_float():
    def body(x):  # a constant along the last axis (width), not the channels
        return L.fc(L.elementwise_mul(L.pool2d(L.conv2d(x, 3, 3), 2, "max", 2),
                                      _const("s", [2])), 3)

    prog, scope, fetch = _build(body, [2, 6, 6], {"s": [0.5, 2.0]})
    q = _quantise(prog, scope, fetch, [2, 6, 6], QuantConfig(float_fallback=True))
    types = op_types(q)
    assert "quantized_affine" not in types and "elementwise_mul" in types
    with pytest.raises(QuantizationError, match=r"op elementwise_mul \(-> .*\) has no "
                                                r"fixed-point definition.*batch_norm and "
                                                "elementwise_mul"):
        _quantise(prog, scope, fetch, [2, 6, 6])


def test_a_scale_beyond_the_requantiser_is_refused_by_name():
    """Channel 0 is constant in the calibration data and at its mean (a zero variance):
    its factor of 3e4 against a calibrated output scale set by channel 1's small
    values cannot be a requantiser multiplier below 2^15."""
    stats = {"batch_norm_0.w_0": [100.0, 1e-3], "batch_norm_0.b_0": [0.0, 0.0],
             "batch_norm_0.w_1": [0.0, 0.0], "batch_norm_0.w_2": [0.0, 1.0]}
    prog, scope, fetch = _build(lambda x: L.fc(L.batch_norm(x), 2), [2, 3, 3], stats)
    x = _data([2, 3, 3], 0) * 100
    x[:, 0] = 0.0
    with pytest.raises(QuantizationError, match=r"batch_norm \(-> batch_norm_0.tmp_\d\): "
                                                "requantisation multiplier .* too large.*"
                                                r"exclude it: QuantConfig\(exclude="):
        quantize(prog, [{"x": x}], scope=scope, executor=fluid.Executor(), feed_names=["x"],
                 fetch_names=[fetch])
