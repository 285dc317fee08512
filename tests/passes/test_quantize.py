"""quantize(): the quantised program is integer inside its region, serialisable and
bit-reproducible; its parameters follow docs/fixed_point.md; unsupported ops get a
clear error; and the trained digits models lose at most 1 point of accuracy."""

import math
from fractions import Fraction

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.ir import dtypes
from fluid_hw.passes import (
    QuantConfig,
    QuantizationError,
    quantization_report,
    quantize,
    quantized_region,
)
from fluid_hw.passes.quantize import requant_params
from tests.passes._util import Net, digits, op_types, run, trained_digits


def _calibration(b, n_batches=3):
    rng = np.random.default_rng(5)
    shape = b.feed["pixels"].shape[1:]
    return [{"pixels": rng.random((32, *shape), dtype=np.float32)} for _ in range(n_batches)]


def _quantize(b, config=None):
    return quantize(b.program, _calibration(b), config, scope=b.scope,
                    executor=fluid.Executor(), fetch_names=b.fetch)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_every_tensor_in_the_region_is_an_integer(kind):
    b = digits(kind)
    q = _quantize(b)
    region = quantized_region(q)
    assert len(region) > 10
    scope = fluid.Scope(b.scope)
    (prob,) = fluid.Executor().run(q, feed={"pixels": b.feed["pixels"]}, fetch_list=b.fetch,
                                   scope=scope)
    assert prob.dtype == np.float32 and np.allclose(prob.sum(axis=1), 1, atol=1e-5)
    gb = q.global_block()
    for name in region:  # walk the program: declared and actual dtypes
        assert dtypes.is_integer(gb.var(name).dtype), name
        value = scope.find_value(name)
        assert value is not None and np.asarray(value).dtype.kind in "iu", name
    types = op_types(q)
    layer = "quantized_conv2d" if kind == "cnn" else "quantized_fc"
    assert types[0] == "quantize" and layer in types
    assert types[-2:] == ["dequantize", "softmax"]
    assert not {"mul", "fc", "conv2d", "conv2d_fusion", "batch_norm", "pool2d"} & set(types)
    if kind == "cnn":
        # a stage: conv + requantize(relu folded) + max pool
        i = types.index("quantized_conv2d")
        assert types[i:i + 3] == ["quantized_conv2d", "requantize", "quantized_pool2d"]
        assert gb.ops[i + 1].attr("relu")


def test_parameters_follow_the_contract():
    b = digits("mlp")
    q = _quantize(b)
    gb = q.global_block()
    ops = gb.ops
    for i, op in enumerate(ops):
        if op.type != "quantized_fc":
            continue
        req = ops[i + 1]
        assert req.type == "requantize"
        w_q = b.scope.vars[op.input("W")[0]]
        b_q = b.scope.vars[op.input("Bias")[0]]
        m = b.scope.vars[req.input("Multiplier")[0]]
        n = b.scope.vars[req.input("Shift")[0]]
        assert w_q.dtype == np.int8 and np.abs(w_q).max() <= 127
        assert b_q.dtype == np.int32 and m.dtype == np.int32 and n.dtype == np.int32
        s_in, s_w, s_out = op.attr("in_scale"), op.attr("weight_scale"), req.attr("out_scale")
        assert len(s_w) == w_q.shape[1] == m.shape[0]
        for c in range(len(s_w)):
            big = Fraction(s_in) * Fraction(s_w[c]) / Fraction(s_out)
            n_ref = math.floor(math.log2(Fraction(32767) / big))
            while big * 2 ** (n_ref + 1) <= 32767:
                n_ref += 1
            while big * 2**n_ref > 32767:
                n_ref -= 1
            n_ref = min(max(n_ref, 0), 47)
            assert (int(m[c]), int(n[c])) == (round(big * 2**n_ref), n_ref)  # round: half even
        wname = op.input("W")[0].removesuffix(".int8")
        w = b.scope.vars[wname].astype(np.float64)
        np.testing.assert_array_equal(w_q, np.clip(np.rint(w / np.float32(s_w)), -127, 127))


@pytest.mark.parametrize("big", [1e-9, 3.7e-5, 0.0123, 0.5, 1.0, 1.999, 3000.5, 32767.0])
def test_requant_params(big):
    m, n = requant_params(big)
    assert 0 <= m <= 32767 and 0 <= n <= 47
    exact = Fraction(big)
    assert exact * 2**n <= 32767 and (n == 47 or exact * 2 ** (n + 1) > 32767)
    assert abs(Fraction(m, 2**n) - exact) <= Fraction(1, 2 ** (n + 1))
    with pytest.raises(QuantizationError, match="too large"):
        requant_params(70000.0)


def test_golden_model_equals_an_integer_reference():
    """The MLP's quantised logits, recomputed with Python ints from its parameters."""
    b = digits("mlp", batch=4)
    q = _quantize(b)
    scope = fluid.Scope(b.scope)
    logits_name = next(op.input("X")[0] for op in q.global_block().ops
                       if op.type == "dequantize")
    (got,) = fluid.Executor().run(q, feed={"pixels": b.feed["pixels"]},
                                  fetch_list=[logits_name], scope=scope)
    ops = q.global_block().ops
    s = ops[0].attr("scale")
    h = [[max(-128, min(127, round(float(v) / s))) for v in row] for row in b.feed["pixels"]]
    for i, op in enumerate(ops):
        if op.type != "quantized_fc":
            continue
        w = b.scope.vars[op.input("W")[0]].tolist()
        bias = b.scope.vars[op.input("Bias")[0]].tolist()
        req = ops[i + 1]
        m = b.scope.vars[req.input("Multiplier")[0]].tolist()
        n = b.scope.vars[req.input("Shift")[0]].tolist()
        lo = 0 if req.attr("relu") else -128
        out = []
        for row in h:
            acc = [sum(row[k] * w[k][c] for k in range(len(row))) + bias[c]
                   for c in range(len(bias))]
            out.append([max(lo, min(127, (a * m[c] + (1 << (n[c] - 1))) >> n[c] if n[c] else
                                      a * m[c])) for c, a in enumerate(acc)])
        h = out
    assert got.tolist() == h


def test_quantized_program_round_trips_through_save_and_load(tmp_path):
    b = digits("cnn")
    q = _quantize(b)
    exe = fluid.Executor()
    target = q.global_block().var(b.fetch[0])
    with fluid.scope_guard(b.scope):
        fluid.io.save_inference_model(str(tmp_path), ["pixels"], [target], exe, main_program=q)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert feeds == ["pixels"] and [v.name for v in fetches] == b.fetch
    saved_w = [n for n in scope.vars if n.endswith(".int8")]
    assert saved_w and all(scope.vars[n].dtype == np.int8 for n in saved_w)
    (want,) = run(q, b.scope, {"pixels": b.feed["pixels"]}, b.fetch)
    (got,) = run(prog, scope, {"pixels": b.feed["pixels"]}, b.fetch)
    np.testing.assert_array_equal(got, want)


def test_quantize_a_loaded_inference_model(tmp_path):
    """What ``fluid-hw compile`` does: load a saved float model, quantise it (outputs
    from its fetch ops), keep its feed and fetch ops."""
    b = digits("mlp")
    exe = fluid.Executor()
    with fluid.scope_guard(b.scope):
        fluid.io.save_inference_model(str(tmp_path), ["pixels", "label"],
                                      [b.program.global_block().var(b.fetch[0])], exe,
                                      main_program=b.program)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        prog, _, _ = fluid.io.load_inference_model(str(tmp_path), exe)
    q = quantize(prog, _calibration(b), scope=scope, executor=exe)
    types = op_types(q)
    assert types[:2] == ["feed", "quantize"] and types[-1] == "fetch"
    assert types.count("feed") == 1  # the label feed is not needed
    (want,) = run(prog, scope, b.feed, b.fetch)
    (got,) = run(q, scope, b.feed, b.fetch)
    assert np.abs(got - want).max() < 0.05


def test_input_program_and_existing_values_are_untouched():
    b = digits("cnn")
    before = b.program.desc.SerializeToString()
    values = {k: np.array(v) for k, v in b.scope.vars.items()}
    _quantize(b)
    assert b.program.desc.SerializeToString() == before
    for k, v in values.items():
        np.testing.assert_array_equal(b.scope.vars[k], v)


@pytest.mark.parametrize("config", [
    QuantConfig(per_channel=False),
    QuantConfig(weight_bits=4),
    QuantConfig(activation_bits=16),
    QuantConfig(weight_bits=16),
    QuantConfig(observer="percentile", percentile=99.9),
], ids=["per-tensor", "int4-weights", "int16-activations", "int16-weights", "percentile"])
def test_options_give_working_integer_programs(config):
    b = digits("cnn")
    q = _quantize(b, config)
    (want,) = run(b.program, b.scope, b.feed, b.fetch)
    scope = fluid.Scope(b.scope)
    (got,) = fluid.Executor().run(q, feed={"pixels": b.feed["pixels"]}, fetch_list=b.fetch,
                                  scope=scope)
    for name in quantized_region(q):
        assert np.asarray(scope.find_value(name)).dtype.kind in "iu", name
    tol = 0.25 if config.weight_bits == 4 else 0.05
    assert np.abs(got - want).max() < tol
    rows = quantization_report(q)
    assert {r["op"] for r in rows} >= {"quantize", "quantized_conv2d", "requantize", "dequantize"}
    if config.activation_bits == 16:
        assert q.global_block().var(rows[0]["out"]).dtype == dtypes.VarType.INT16


def _layers_around(middle: str):
    """x -> mul -> fc -> `middle` -> mul -> y"""
    n = Net()
    n.data("x", [-1, 4])
    n.param("w0", [4, 4])
    n.param("w1", [4, 4])
    n.param("b1", [4])
    n.param("w2", [4, 3])
    n.op("mul", {"X": "x", "Y": "w0"}, {"Out": "x1"})
    n.op("mul", {"X": "x1", "Y": "w1"}, {"Out": "t0"})
    n.op("elementwise_add", {"X": "t0", "Y": "b1"}, {"Out": "h"}, {"axis": 1})
    n.op(middle, {"X": "h", "Y": "h"} if middle.startswith("elementwise") else {"X": "h"},
         {"Out": "g"})
    n.op("mul", {"X": "g", "Y": "w2"}, {"Out": "y"})
    calib = [{"x": np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)}]
    return n, calib


def test_an_op_without_a_fixed_point_definition_names_itself_and_the_options():
    n, calib = _layers_around("elementwise_mul")
    kw = {"scope": n.scope(), "executor": fluid.Executor(), "fetch_names": ["y"]}
    with pytest.raises(QuantizationError) as e:
        quantize(n.program, calib, **kw)
    msg = str(e.value)
    assert "op elementwise_mul (-> g) has no fixed-point definition" in msg
    assert "float_fallback=True" in msg and "exclude=['elementwise_mul']" in msg
    for cfg in (QuantConfig(float_fallback=True), QuantConfig(exclude=("g",))):
        scope = n.scope()
        q = quantize(n.program, calib, cfg, **{**kw, "scope": scope})
        types = op_types(q)
        assert types == ["quantize", "quantized_fc", "requantize", "quantized_fc",
                         "requantize", "dequantize", "elementwise_mul", "quantize",
                         "quantized_fc", "requantize", "dequantize"]
        (want,) = run(n.program, scope, calib[0], ["y"])
        (got,) = run(q, scope, calib[0], ["y"])
        assert np.abs(got - want).max() < 0.05 * np.abs(want).max()
    # an element-wise activation becomes a 256-entry table (fc fusion takes relu only)
    n, calib = _layers_around("sigmoid")
    scope = n.scope()
    q = quantize(n.program, calib, **{**kw, "scope": scope})
    assert "quantized_table" in op_types(q) and "sigmoid" not in op_types(q)
    (want,) = run(n.program, scope, calib[0], ["y"])
    (got,) = run(q, scope, calib[0], ["y"])
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()


def test_accumulator_overflow_is_refused():
    b = digits("cnn")
    with pytest.raises(QuantizationError, match="beyond the int32 accumulator"):
        _quantize(b, QuantConfig(weight_bits=16, activation_bits=16))


def test_bad_configs_and_calls():
    with pytest.raises(QuantizationError, match="weight_bits=9"):
        QuantConfig(weight_bits=9)
    with pytest.raises(QuantizationError, match="observer"):
        QuantConfig(observer="mse")
    b = digits("mlp")
    with pytest.raises(QuantizationError, match="calibration data"):
        quantize(b.program, [], scope=b.scope, executor=fluid.Executor(), fetch_names=b.fetch)
    with pytest.raises(QuantizationError, match="fetch_names"):
        quantize(b.program, _calibration(b), scope=b.scope, executor=fluid.Executor())


# -- accuracy of the trained digits models ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_int8_loses_at_most_one_point_of_accuracy(kind):
    m, scope, (xtr, xte, _ytr, yte) = trained_digits(kind)
    exe = fluid.Executor()
    (p_float,) = exe.run(m.test_program, feed={"pixels": xte, "label": yte},
                         fetch_list=[m.prediction], scope=fluid.Scope(scope))
    calib = [{"pixels": xtr[i:i + 128]} for i in range(0, 512, 128)]
    q = quantize(m.test_program, calib, scope=scope, executor=exe,
                 fetch_names=[m.prediction.name])
    (p_int8,) = exe.run(q, feed={"pixels": xte}, fetch_list=[m.prediction.name],
                        scope=fluid.Scope(scope))
    acc_float = float((p_float.argmax(1) == yte[:, 0]).mean())
    acc_int8 = float((p_int8.argmax(1) == yte[:, 0]).mean())
    assert acc_float >= (0.97 if kind == "cnn" else 0.96)
    assert acc_int8 >= acc_float - 0.01, f"{kind}: float {acc_float:.4f}, int8 {acc_int8:.4f}"
