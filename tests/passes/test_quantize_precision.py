"""Per-layer precision in post-training quantisation (docs/fixed_point.md): the first /
last rule, overrides by name and by type, narrow weights and activations recorded on the
ops, thresholds equal to requantize, and the accuracy of the trained digits MLP at
narrow widths on the golden model."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.passes import QuantConfig, QuantizationError, quantization_report, quantize
from fluid_hw.passes.precision import Precision, acc_bits, requant_thresholds
from tests.op_harness import run_op
from tests.passes._util import digits, run, trained_digits

RNG = np.random.default_rng(16)
I32_MIN, I32_MAX = -2**31, 2**31 - 1


def _quantize(b, config):
    rng = np.random.default_rng(5)
    calib = [{"pixels": rng.random((32, 64), dtype=np.float32)} for _ in range(3)]
    return quantize(b.program, calib, config, scope=b.scope, executor=fluid.Executor(),
                    fetch_names=b.fetch)


def _ops(q, *types):
    return [op for op in q.global_block().ops if op.type in types]


# -- thresholds --------------------------------------------------------------------------

CASES = [(1, True, False, True), (4, True, False, False), (4, True, True, False),
         (4, False, False, False), (2, True, False, False), (1, False, False, False),
         (2, False, True, False), (3, True, False, False), (2, True, True, False)]


@pytest.mark.parametrize(("bits", "signed", "relu", "bipolar"), CASES)
def test_thresholds_equal_requantize_on_a_dense_sweep(bits, signed, relu, bipolar):
    """For every int32 x tried (each threshold and its neighbours, a dense range, random
    values, the int32 ends but 2^31 - 1), multi_threshold == requantize."""
    m = np.array([0, 1, 7, 300, 32767, 12345, 1, 999], np.int32)
    n = np.array([0, 0, 3, 9, 47, 20, 30, 1], np.int32)
    lo, hi = (-1, 1) if bipolar else \
        ((-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1))
    lo = max(lo, 0) if relu else lo
    th = requant_thresholds(m, n, lo, hi, bipolar)
    assert th.shape == (len(m), 1 if bipolar else hi - lo)
    near = np.unique(np.clip(th.astype(np.int64).reshape(-1, 1) + np.arange(-3, 4), I32_MIN,
                             I32_MAX - 1))
    xs = np.concatenate([near, np.arange(-5000, 5000), RNG.integers(I32_MIN, I32_MAX, 4000),
                         [I32_MIN, I32_MIN + 1, I32_MAX - 1]])
    x = np.repeat(xs.reshape(-1, 1), len(m), axis=1).astype(np.int32)
    rq = run_op("requantize", {"X": x, "Multiplier": m, "Shift": n},
                {"bits": bits, "signed": signed, "bipolar": bipolar, "relu": relu})["Out"]
    mt = run_op("multi_threshold", {"X": x, "Thresholds": th},
                {"bits": bits, "signed": signed, "bipolar": bipolar,
                 "out_bias": 0 if bipolar else lo})["Out"]
    np.testing.assert_array_equal(mt, rq)
    assert len(np.unique(rq)) > 1  # the sweep reaches more than one level


# -- the first / last rule and overrides ---------------------------------------------------

def test_narrow_default_keeps_the_input_first_and_last_layers_at_8_bits():
    b = digits("mlp")
    q = _quantize(b, QuantConfig(precision=Precision(w=4, a=4)))
    (quant,) = _ops(q, "quantize")
    assert quant.attr("bits") == 8
    fcs = _ops(q, "quantized_fc")
    assert [op.attr("weight_bits") for op in fcs] == [8, 4, 8]
    rqs = _ops(q, "requantize")
    # hidden layers: relu'd 4-bit outputs are unsigned [0, 15]; the last one int8
    assert [(op.attr("bits"), op.attr("signed"), op.attr("relu")) for op in rqs] == \
        [(4, False, True), (4, False, True), (8, True, False)]
    scope = fluid.Scope(b.scope)
    for op in fcs:  # weights in their range, acc_bits from the formula
        w = np.asarray(scope.find_value(op.input("W")[0]))
        q_w = 2 ** (op.attr("weight_bits") - 1) - 1
        assert w.dtype == np.int8 and np.abs(w).max() <= q_w
        x_bits = 8 if op is fcs[0] else 4
        x_range = (-128, 127) if op is fcs[0] else (0, 15)
        bias = np.asarray(scope.find_value(op.input("Bias")[0]))
        assert op.attr("acc_bits") == acc_bits(x_range, (-q_w, q_w), w.shape[0],
                                               int(np.abs(bias).max())), x_bits
    names = [op.output("Out")[0] for op in rqs]
    vals = run(q, b.scope, b.feed, names)
    assert vals[0].min() >= 0 and vals[0].max() <= 15 and vals[1].max() <= 15
    rows = quantization_report(q)
    assert [r.get("weight_type") for r in rows if r["op"] == "quantized_fc"] == ["signed"] * 3


def test_overrides_by_name_and_type_and_the_rule_switched_off():
    b = digits("mlp")
    q = _quantize(b, QuantConfig(precision=Precision(w=4, a=4),
                                 overrides={"fc_1": Precision(w=8, a=8)}))
    assert [op.attr("weight_bits") for op in _ops(q, "quantized_fc")] == [8, 8, 8]
    assert [op.attr("bits") for op in _ops(q, "requantize")] == [4, 8, 8]
    q = _quantize(b, QuantConfig(precision=Precision(w=4, a=4), first_last_8bit=False))
    assert _ops(q, "quantize")[0].attr("bits") == 4
    assert [op.attr("weight_bits") for op in _ops(q, "quantized_fc")] == [4, 4, 4]
    q = _quantize(b, QuantConfig(overrides={"fc": Precision(w=2, a=3),
                                            "pixels": Precision(a=6)}))
    assert _ops(q, "quantize")[0].attr("bits") == 6
    assert [op.attr("weight_bits") for op in _ops(q, "quantized_fc")] == [2, 2, 2]
    assert [op.attr("bits") for op in _ops(q, "requantize")] == [3, 3, 3]
    # the simple spelling is the default precision
    q = _quantize(b, QuantConfig(weight_bits=3, activation_bits=5))
    assert [op.attr("weight_bits") for op in _ops(q, "quantized_fc")] == [8, 3, 8]
    with pytest.raises(QuantizationError, match="not both"):
        QuantConfig(weight_bits=4, precision=Precision(4, 4))
    with pytest.raises(QuantizationError, match="give a Precision"):
        QuantConfig(overrides={"fc_0": 4})


def test_bipolar_layers_are_signs_and_xnor_sums():
    b = digits("mlp")
    q = _quantize(b, QuantConfig(precision=Precision(w=1, a=1)))
    fcs = _ops(q, "quantized_fc")
    assert [(op.attr("weight_bits"), op.attr("weight_type")) for op in fcs] == \
        [(8, "signed"), (1, "bipolar"), (8, "signed")]
    mid = fcs[1]
    scope = fluid.Scope(b.scope)
    w = np.asarray(scope.find_value(mid.input("W")[0]))
    assert set(np.unique(w)) == {-1, 1}
    x_name = mid.input("X")[0]
    acc = mid.output("Out")[0]
    x, a = run(q, b.scope, b.feed, [x_name, acc])
    assert set(np.unique(x)) <= {-1, 1}
    bias = np.asarray(scope.find_value(mid.input("Bias")[0]))
    xb, wb = x > 0, w > 0
    pop = (xb[:, :, None] == wb[None, :, :]).sum(axis=1)  # popcount of xnor
    np.testing.assert_array_equal(a, 2 * pop - w.shape[0] + bias)


def test_thresholds_program_gives_the_same_integers():
    b = digits("mlp")
    for prec in (Precision(w=4, a=4), Precision(w=2, a=2), Precision(w=1, a=1),
                 Precision(w=3, a=3, a_type="unsigned", per_channel=False)):
        plain = _quantize(b, QuantConfig(precision=prec))
        thr = _quantize(b, QuantConfig(precision=prec, thresholds=True))
        mts = _ops(thr, "multi_threshold")
        assert len(mts) == 2 and len(_ops(thr, "requantize")) == 1
        names = [op.output("Out")[0] for op in mts] + b.fetch
        got = run(thr, b.scope, b.feed, names)
        want = run(plain, b.scope, b.feed, names)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# -- accuracy on the golden model ------------------------------------------------------------

def test_trained_digits_mlp_at_narrow_precisions():
    """Post-training quantisation of the trained 64-128-64-10 MLP on the held-out digits.
    Measured: float 97.5 %, w8a8 97.5, w4a4 97.8 (thresholds the same), w3a3 96.7, w2a2
    88.1 (91.1 with the 99th-percentile observer), w1a1 46.4 (a ReLU network binarised
    after training: quantisation-aware training is the way to 1 bit)."""
    m, scope, (xtr, xte, _ytr, yte) = trained_digits("mlp")
    exe = fluid.Executor()
    calib = [{"pixels": xtr[i:i + 128]} for i in range(0, 512, 128)]

    def accuracy(program):
        names = program.global_block().vars
        feed = {k: v for k, v in {"pixels": xte, "label": yte}.items() if k in names}
        (p,) = exe.run(program, feed=feed,
                       fetch_list=[m.prediction.name], scope=fluid.Scope(scope))
        return float((p.argmax(1) == yte[:, 0]).mean())

    def acc_at(**kw):
        q = quantize(m.test_program, calib, QuantConfig(**kw), scope=scope, executor=exe,
                     fetch_names=[m.prediction.name])
        return accuracy(q)

    acc_float = accuracy(m.test_program)
    got = {"w8a8": acc_at(), "w4a4": acc_at(precision=Precision(4, 4)),
           "w4a4 thresholds": acc_at(precision=Precision(4, 4), thresholds=True),
           "w3a3": acc_at(precision=Precision(3, 3)),
           "w2a2": acc_at(precision=Precision(2, 2), observer="percentile", percentile=99.0),
           "w1a1": acc_at(precision=Precision(1, 1))}
    print({"float": acc_float, **got})
    assert acc_float >= 0.96
    assert got["w8a8"] >= acc_float - 0.01
    assert got["w4a4"] >= acc_float - 0.02
    assert got["w4a4 thresholds"] == got["w4a4"]
    assert got["w3a3"] >= acc_float - 0.03
    assert got["w2a2"] >= 0.85
    assert got["w1a1"] > 0.2  # above chance; PTQ of a ReLU net to signs is crude


def test_unsigned_8_bit_values_into_a_table_are_refused_by_name():
    from tests.passes.test_quantize import _layers_around

    n, calib = _layers_around("sigmoid")
    kw = {"scope": n.scope(), "executor": fluid.Executor(), "fetch_names": ["y"]}
    cfg = QuantConfig(overrides={"h": Precision(w=8, a=8, a_type="unsigned")})
    with pytest.raises(QuantizationError, match=r"sigmoid \(-> g\) reads 'h.int8'|reads 'h'"):
        quantize(n.program, calib, cfg, **kw)
    # at 7 bits the unsigned values (negatives clip to 0: what was asked) fit int8
    cfg = QuantConfig(overrides={"h": Precision(w=8, a=7, a_type="unsigned")})
    scope = n.scope()
    q = quantize(n.program, calib, cfg, **{**kw, "scope": scope})
    table = [op for op in q.global_block().ops if op.type == "quantized_table"]
    assert len(table) == 1
    (h,) = run(q, scope, calib[0], [table[0].input("X")[0]])
    assert h.dtype == np.int8 and h.min() == 0 and 0 < h.max() <= 127
