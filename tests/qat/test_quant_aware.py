"""quant_aware: where the fake quantisers go (Before / After on the digits MLP), the
per-layer precision, training through append_backward and an optimizer, the test
clone, and the errors."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import QuantizationError
from fluid_hw.frontend import models
from fluid_hw.ir.verifier import verify_program
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat import QATConfig, quant_aware
from fluid_hw.passes.qat_freeze import freeze
from tests.qat._digits import build, data

W_CH = "fake_channel_wise_quantize_dequantize_abs_max"
ACT = "fake_quantize_dequantize_moving_average_abs_max"
BIAS = "fake_quantize_dequantize_bias"


def _forward_ops(program):
    return [op.type for op in program.global_block().ops]


def test_int8_inserts_weight_input_and_output_quantisers():
    m, q = build(Precision())
    verify_program(m.main)
    assert _forward_ops(m.main)[:15] == [
        ACT, W_CH, "mul", BIAS, "elementwise_add", "relu", ACT,  # input quantiser, fc_0
        W_CH, "mul", BIAS, "elementwise_add", "relu", ACT,  # fc_1 reads fc_0's quantiser
        W_CH, "mul"]
    ops = m.main.global_block().ops
    muls = [op for op in ops if op.type == "mul"]
    assert [op.input("X")[0] for op in muls] == [
        "pixels.quantized", "fc_0.tmp_2.quantized", "fc_1.tmp_2.quantized"]
    assert [op.input("Y")[0] for op in muls] == [f"fc_{i}.w_0.quantized" for i in range(3)]
    # each bias on its accumulator's grid: the input's scale times the weight's
    biases = [op for op in ops if op.type == BIAS]
    assert [(op.input("X")[0], op.input("InScale")[0], op.input("WeightScale")[0])
            for op in biases] == [("fc_0.b_0", "pixels.scale", "fc_0.w_0.scale"),
                                  ("fc_1.b_0", "fc_0.tmp_2.scale", "fc_1.w_0.scale"),
                                  ("fc_2.b_0", "fc_1.tmp_2.scale", "fc_2.w_0.scale")]
    assert not any(op.attr("half_step") for op in biases)
    # the logits' quantiser feeds both the softmax and the loss
    assert {op.type for op in ops if "fc_2.tmp_1.quantized" in op.input_arg_names} == \
        {"softmax", "softmax_with_cross_entropy"}
    assert [(lay.name, lay.precision.w, lay.precision.a, lay.act_kind) for lay in q.layers] == \
        [("fc_0", 8, 8, "signed"), ("fc_1", 8, 8, "signed"), ("fc_2", 8, 8, "signed")]
    # the state is persistable and initialised by the startup program
    for n in ("pixels", "fc_0.tmp_2", "fc_2.tmp_1"):
        for what in ("scale", "accum", "state"):
            assert m.main.global_block().var(f"{n}.{what}").persistable
    inits = {op.output("Out")[0]: op.attr("value") for op in m.startup.global_block().ops
             if op.type == "fill_constant"}
    assert inits["pixels.scale"] == pytest.approx(0.001) and inits["pixels.state"] == 0
    # the test clone is in test mode; the training program is not
    assert all(op.attr("is_test") for op in q.test_program.global_block().ops if op.type == ACT)
    assert not any(op.attr("is_test") for op in ops if op.type == ACT)


def test_first_and_last_layers_stay_8_bit_and_bipolar_replaces_the_relu():
    m, q = build(Precision(1, 1))
    assert [(lay.precision.w, lay.precision.w_type, lay.precision.a, lay.act_kind, lay.relu)
            for lay in q.layers] == [(8, "signed", 1, "bipolar", False),
                                     (1, "bipolar", 1, "bipolar", False),
                                     (8, "signed", 8, "signed", False)]
    ops = m.main.global_block().ops
    assert "relu" not in [op.type for op in ops]  # sign(relu(x)) would always be +1
    acts = [op for op in ops if op.type == ACT]
    assert [op.input("X")[0] for op in acts] == ["pixels", "fc_0.tmp_1", "fc_1.tmp_1",
                                                 "fc_2.tmp_1"]
    assert [(op.attr("bit_length"), op.attr("kind")) for op in acts] == [
        (8, "signed"), (1, "bipolar"), (1, "bipolar"), (8, "signed")]
    biases = [op for op in ops if op.type == BIAS]
    assert [(op.attr("in_bit_length"), op.attr("in_kind"), op.attr("weight_kind"),
             op.attr("half_step")) for op in biases] == [
        (8, "signed", "signed", True), (1, "bipolar", "bipolar", True),
        (1, "bipolar", "signed", False)]


def test_overrides_by_layer_name_and_unsigned_after_relu():
    m = models.digits_mlp()
    cfg = QATConfig(Precision(4, 4), overrides={"fc_0": Precision(2, 3), "fc_2": Precision(6, 8)},
                    keep_first_last=True)
    q = quant_aware(m.main, m.startup, cfg)
    assert [(lay.precision.w, lay.precision.a, lay.act_kind) for lay in q.layers] == [
        (2, 3, "unsigned"), (4, 4, "unsigned"), (6, 8, "signed")]
    m2 = models.digits_mlp()
    q2 = quant_aware(m2.main, m2.startup, QATConfig(Precision(4, 4, a_type="unsigned"),
                                                    keep_first_last=False, skip=("fc_2",)))
    assert [lay.name for lay in q2.layers] == ["fc_0", "fc_1"]
    assert [lay.precision.w for lay in q2.layers] == [4, 4]


def test_qat_trains_through_append_backward_and_the_optimizer():
    """A few SGD steps: gradients reach every weight through the straight-through
    quantisers, the loss falls, the moving scales follow the activations."""
    xtr, _, ytr, _ = data()
    m, _ = build(Precision(4, 4))
    with fluid.program_guard(m.main, m.startup):
        fluid.optimizer.SGD(learning_rate=0.1).minimize(m.loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        w0 = {p: np.array(scope.find_value(p)) for p in ("fc_0.w_0", "fc_1.w_0", "fc_2.w_0")}
        losses = []
        for i in range(30):
            sl = slice(i * 32 % 1400, i * 32 % 1400 + 32)
            (lv,) = exe.run(m.main, feed={"pixels": xtr[sl], "label": ytr[sl]},
                            fetch_list=[m.loss])
            losses.append(float(lv[0]))
        for p, v in w0.items():
            assert not np.array_equal(np.array(scope.find_value(p)), v), p
        assert np.mean(losses[-5:]) < np.mean(losses[:5])
        # the input's scale is the moving average of max|pixels| (1.0 on these digits)
        assert float(scope.find_value("pixels.scale")[0]) == pytest.approx(
            float(np.max([xtr[i * 32 % 1400:i * 32 % 1400 + 32].max() for i in range(30)])),
            rel=0.05)


def test_errors_name_the_problem_and_the_fix():
    m = models.digits_mlp(optimizer=fluid.optimizer.SGD(learning_rate=0.1))
    with pytest.raises(QuantizationError, match="before append_backward"):
        quant_aware(m.main, m.startup)
    m = models.digits_mlp()
    quant_aware(m.main, m.startup)
    with pytest.raises(QuantizationError, match="run on this program before"):
        quant_aware(m.main, m.startup)
    with pytest.raises(QuantizationError, match="no layer to quantise"):
        quant_aware(fluid.Program(), fluid.Program())
    with pytest.raises(QuantizationError, match=r"no layer named \['fc_9'\].*'fc_0', 'fc_1'"):
        quant_aware(models.digits_mlp().main, fluid.Program(),
                    QATConfig(overrides={"fc_9": Precision(2, 2)}))
    with pytest.raises(QuantizationError, match="input_bits=12"):
        QATConfig(input_bits=12)
    with pytest.raises(QuantizationError, match="moving_rate"):
        QATConfig(moving_rate=1.0)
    # freezing before training: the scales were never observed
    m, q = build(Precision())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(m.startup)
    scope.vars["pixels.scale"] = np.zeros(1, np.float32)
    with pytest.raises(QuantizationError, match="train the program"):
        freeze(q.test_program, scope, feed_names=["pixels"], fetch_names=[m.prediction.name])
    # a float program has nothing to freeze
    with pytest.raises(QuantizationError, match="no quantised layer"):
        freeze(models.digits_mlp().test_program, scope, feed_names=["pixels"],
               fetch_names=["softmax_0.tmp_0"])
