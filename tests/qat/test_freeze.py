"""freeze: the integer program of a QAT program -- its ops and attributes, its integer
values against the fake quantisers', and a convolutional network."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.ir.ops.fake_quant import grid
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat import QATConfig, quant_aware
from fluid_hw.passes.qat_freeze import freeze
from fluid_hw.passes.quantize import requant_params
from tests.qat._digits import build, data, qat_cnn

XTR, XTE, YTR, YTE = data()


def _train(m_main, m_startup, loss, feed_of, steps=40):
    scope = fluid.Scope()
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(m_startup)
        for i in range(steps):
            exe.run(m_main, feed=feed_of(i), fetch_list=[loss])
    return scope


def _trained_mlp(precision, steps=10):
    """The digits MLP with fake quantisers at ``precision`` (``build``) after ``steps``
    SGD steps (lr 0.05) on 32-image batches: the model, its QAT program and the scope."""
    m, q = build(precision)
    with fluid.program_guard(m.main, m.startup):
        fluid.optimizer.SGD(learning_rate=0.05).minimize(m.loss)

    def feed(i):
        sl = slice(32 * i, 32 * i + 32)
        return {"pixels": XTR[sl], "label": YTR[sl]}

    return m, q, _train(m.main, m.startup, m.loss, feed, steps=steps)


def test_frozen_small_cnn_matches_the_fake_quantised_program():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = layers.data(name="img", shape=[1, 8, 8], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        h = layers.conv2d(img, num_filters=4, filter_size=3, padding=1, act="relu")
        h = layers.conv2d(h, num_filters=6, filter_size=3, stride=2, act="relu")
        logits = layers.fc(h, size=10)
        prob = layers.softmax(logits)
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
        q = quant_aware(main, startup, QATConfig(Precision(4, 4), keep_first_last=False))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    ximg = XTR.reshape(-1, 1, 8, 8)

    def feed(i):
        sl = slice(32 * i, 32 * i + 32)
        return {"img": ximg[sl], "label": YTR[sl]}

    scope = _train(main, startup, loss, feed)
    assert [lay.op_type for lay in q.layers] == ["conv2d", "conv2d", "mul"]
    frozen = freeze(q.test_program, scope, feed_names=["img"], fetch_names=[prob.name])
    ops = [op.type for op in frozen.global_block().ops]
    assert ops[:5] == ["quantize", "quantized_conv2d", "requantize", "quantized_conv2d",
                       "requantize"] and "conv2d" not in ops
    convs = [op for op in frozen.global_block().ops if op.type == "quantized_conv2d"]
    assert [op.attr("weight_bits") for op in convs] == [4, 4]
    assert convs[1].attr("strides") == [2, 2]
    for op in convs:
        w = scope.find_value(op.input("Filter")[0])
        assert w.dtype == np.int8 and np.abs(w).max() <= 7
    x = XTE.reshape(-1, 1, 8, 8)
    exe = fluid.Executor()
    (pf,) = exe.run(q.test_program, feed={"img": x, "label": YTE}, fetch_list=[prob],
                    scope=scope)
    (pi,) = exe.run(frozen, feed={"img": x}, fetch_list=[prob.name], scope=scope)
    assert (pi.argmax(1) == pf.argmax(1)).mean() >= 0.97
    assert (pi.argmax(1) == YTE[:, 0]).mean() >= 0.5  # it learned something in 40 steps


def test_integer_values_are_the_fake_quantisers_integers():
    """The frozen input quantiser gives exactly the fake quantiser's integers; weights,
    bias, multiplier and shift follow docs/qat.md's formulas."""
    m, q, scope = _trained_mlp(Precision(3, 3))
    frozen = freeze(q.test_program, scope, feed_names=["pixels"],
                    fetch_names=[m.prediction.name])
    ops = frozen.global_block().ops
    quant = ops[0]
    assert quant.type == "quantize" and (quant.attr("bits"), quant.attr("signed")) == (8, True)
    s_in = np.float32(scope.find_value("pixels.scale")[0]) / np.float32(127)
    assert quant.attr("scale") == float(s_in)
    exe = fluid.Executor()
    (xq_fake,) = exe.run(q.test_program, feed={"pixels": XTE, "label": YTE},
                         fetch_list=["pixels.quantized"], scope=scope)
    (xq_int,) = exe.run(frozen, feed={"pixels": XTE}, fetch_list=[quant.output("Out")[0]],
                        scope=scope)
    np.testing.assert_array_equal((xq_int * np.float64(s_in)).astype(np.float32), xq_fake)
    fc1 = [op for op in ops if op.type == "quantized_fc"][1]
    w = np.asarray(scope.find_value("fc_1.w_0"), np.float64)
    s_w = np.abs(w).max(axis=0).astype(np.float32) / np.float32(3)
    np.testing.assert_array_equal(scope.find_value(fc1.input("W")[0]),
                                  np.clip(np.rint(w / s_w.astype(np.float64)), -3, 3))
    assert fc1.attr("weight_bits") == 3 and fc1.attr("weight_type") == "signed"
    s_h = np.float32(scope.find_value("fc_0.tmp_2.scale")[0]) / np.float32(grid(3, "unsigned")[2])
    acc = np.float64(s_h) * s_w.astype(np.float64)
    b = np.asarray(scope.find_value("fc_1.b_0"), np.float64)
    np.testing.assert_array_equal(scope.find_value(fc1.input("Bias")[0]), np.rint(b / acc))
    rq = ops[ops.index(fc1) + 1]
    s_o = np.float32(scope.find_value("fc_1.tmp_2.scale")[0]) / np.float32(7)
    mn = [requant_params(v) for v in acc / np.float64(s_o)]
    np.testing.assert_array_equal(scope.find_value(rq.input("Multiplier")[0]), [p[0] for p in mn])
    np.testing.assert_array_equal(scope.find_value(rq.input("Shift")[0]), [p[1] for p in mn])
    assert (rq.attr("bits"), rq.attr("signed"), rq.attr("relu")) == (3, False, True)


def test_a_saved_qat_inference_model_freezes_after_loading(tmp_path):
    """save_inference_model keeps the quantisers and their scales; the loaded model
    freezes to the same integer program results."""
    m, q, scope = _trained_mlp(Precision(4, 4))
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path / "qat"), ["pixels"], [m.prediction], exe,
                                      main_program=q.test_program)
    loaded_scope = fluid.Scope()
    with fluid.scope_guard(loaded_scope):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path / "qat"), exe)
    assert loaded_scope.find_value("pixels.scale") is not None
    a = freeze(prog, loaded_scope, feed_names=feeds, fetch_names=fetches)
    b = freeze(q.test_program, scope, feed_names=["pixels"], fetch_names=[m.prediction.name])
    (pa,) = exe.run(a, feed={"pixels": XTE}, fetch_list=fetches, scope=loaded_scope)
    (pb,) = exe.run(b, feed={"pixels": XTE}, fetch_list=[m.prediction.name], scope=scope)
    np.testing.assert_array_equal(pa, pb)


@pytest.mark.slow
def test_digits_cnn_with_batch_norm_freezes_all_integer():
    """conv-bn-relu-pool x 2, fc at w4a4: the batch norms fold into the integer
    convolutions, max pooling stays on the layers' grids, nothing float is left
    between the input's quantize and the logits' dequantize."""
    m, q, scope, acc = qat_cnn()
    assert [(lay.op_type, lay.act_kind) for lay in q.layers] == [
        ("conv2d", "unsigned"), ("conv2d", "unsigned"), ("mul", "signed")]
    frozen = freeze(q.test_program, scope, feed_names=["pixels"],
                    fetch_names=[m.prediction.name])
    assert [op.type for op in frozen.global_block().ops] == [
        "quantize", "quantized_conv2d", "requantize", "quantized_pool2d",
        "quantized_conv2d", "requantize", "quantized_pool2d", "flatten2", "quantized_fc",
        "requantize", "dequantize", "softmax"]
    x = XTE.reshape(-1, 1, 8, 8)
    exe = fluid.Executor()
    (pf,) = exe.run(q.test_program, feed={"pixels": x, "label": YTE}, fetch_list=[m.prediction],
                    scope=scope)
    (pi,) = exe.run(frozen, feed={"pixels": x}, fetch_list=[m.prediction.name], scope=scope)
    golden = (pi.argmax(1) == YTE[:, 0]).mean()
    print(f"\ndigits CNN w4a4: QAT {acc:.4f}, golden {golden:.4f}, argmax agreement "
          f"{(pi.argmax(1) == pf.argmax(1)).mean():.4f}")
    assert acc >= 0.95 and golden >= 0.95
    assert (pi.argmax(1) == pf.argmax(1)).mean() >= 0.99
