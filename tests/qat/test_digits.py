"""Acceptance (issue 16): QAT on the digits MLP (64-128-64-10) at int8, w2a2 and w1a1;
each frozen program runs on the golden model (the CPU executor's integer kernels)
and agrees with the fake-quantised float program it came from."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat_freeze import freeze
from tests.qat._digits import data, qat

pytestmark = pytest.mark.slow


def _report(name, r):
    print(f"\n{name}: float {r.float_accuracy:.4f}, QAT (fake-quantised) {r.qat_accuracy:.4f}, "
          f"frozen on the golden model {r.golden_accuracy:.4f}, argmax agreement "
          f"{r.argmax_agreement:.4f}, logits equal {r.logits_equal:.4f}, max deviation "
          f"{r.max_step_deviation:g} steps")


def test_int8_qat_is_within_half_a_point_of_float():
    r = qat(Precision(8, 8))
    _report("int8", r)
    assert r.qat_accuracy >= r.float_accuracy - 0.005
    assert r.golden_accuracy >= r.float_accuracy - 0.005
    assert r.argmax_agreement >= 0.99 and r.logits_equal >= 0.99 and r.max_step_deviation <= 1
    ops = [op.type for op in r.frozen.global_block().ops]
    assert ops == ["quantize"] + ["quantized_fc", "requantize"] * 3 + ["dequantize", "softmax"]


def test_w2a2_reaches_90_percent():
    r = qat(Precision(2, 2))
    _report("w2a2", r)
    assert r.qat_accuracy >= 0.90 and r.golden_accuracy >= 0.90
    assert r.argmax_agreement >= 0.99 and r.logits_equal >= 0.99 and r.max_step_deviation <= 1
    fc = [op for op in r.frozen.global_block().ops if op.type == "quantized_fc"]
    rq = [op for op in r.frozen.global_block().ops if op.type == "requantize"]
    # first and last layer 8-bit weights; the hidden layer ternary; 2-bit unsigned hidden
    # activations (after relu), 8-bit logits
    assert [op.attr("weight_bits") for op in fc] == [8, 2, 8]
    assert [(op.attr("bits"), op.attr("signed")) for op in rq] == [(2, False), (2, False),
                                                                   (8, True)]
    w1 = r.scope.find_value(fc[1].input("W")[0])
    assert set(w1.reshape(-1).tolist()) <= {-1, 0, 1}


def test_w1a1_bipolar_reaches_85_percent():
    r = qat(Precision(1, 1))
    _report("w1a1", r)
    assert r.qat_accuracy >= 0.85 and r.golden_accuracy >= 0.85
    assert r.argmax_agreement >= 0.99 and r.logits_equal >= 0.99 and r.max_step_deviation <= 1
    ops = r.frozen.global_block().ops
    fc = [op for op in ops if op.type == "quantized_fc"]
    rq = [op for op in ops if op.type == "requantize"]
    assert [(op.attr("weight_bits"), op.attr("weight_type")) for op in fc] == \
        [(8, "signed"), (1, "bipolar"), (8, "signed")]
    assert [op.attr("bipolar") for op in rq] == [True, True, False]
    assert set(r.scope.find_value(fc[1].input("W")[0]).reshape(-1).tolist()) == {-1, 1}
    # the hidden layer's inputs are bipolar: its sum is the XNOR/popcount form
    assert fc[1].attr("acc_bits") <= 9  # 128 products of +-1 and a bias


@pytest.mark.parametrize("precision", [Precision(2, 2), Precision(1, 1)], ids=["w2a2", "w1a1"])
def test_thresholds_give_the_same_integers(precision):
    """freeze(thresholds=True): the 1-4-bit outputs come from multi_threshold (compare,
    no multiply), bit for bit what requantize gives."""
    r = qat(precision)
    th = freeze(r.qat.test_program, r.scope, feed_names=["pixels"],
                fetch_names=[r.model.prediction.name], thresholds=True)
    ops = [op.type for op in th.global_block().ops]
    assert ops.count("multi_threshold") == 2 and ops.count("requantize") == 1
    x = data()[1]
    exe = fluid.Executor()
    (a,) = exe.run(th, feed={"pixels": x}, fetch_list=[r.model.prediction.name], scope=r.scope)
    (b,) = exe.run(r.frozen, feed={"pixels": x}, fetch_list=[r.model.prediction.name],
                   scope=r.scope)
    np.testing.assert_array_equal(a, b)
