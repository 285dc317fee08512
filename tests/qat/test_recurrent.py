"""QAT through the recurrent layers (docs/qat.md, 'Recurrent layers'): quant_aware on the
sequence classifier (embedding -> fc -> dynamic_lstm -> last step -> fc) and the GRU
keyword spotter, gradients through the fake quantisers (STE), training on synthetic
sequences of 1..50 steps, and freeze to the integer program (quantized_fc +
quantized_lstm / quantized_gru), whose predictions are compared with the QAT program's."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import QuantizationError
from fluid_hw.frontend import layers, models
from fluid_hw.ir.prune import prune
from fluid_hw.ir.verifier import verify_program
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat import QATConfig, quant_aware
from fluid_hw.passes.qat_freeze import freeze
from tests.frontend.test_recurrent_models import kws_data
from tests.passes.test_quantize_rnn import make_data, to_lod

W_CH = "fake_channel_wise_quantize_dequantize_abs_max"
ACT = "fake_quantize_dequantize_moving_average_abs_max"
W_ABS = "fake_quantize_dequantize_abs_max"
BIAS = "fake_quantize_dequantize_bias"


def _qat(model, lr: float = 0.01):
    q = quant_aware(model.main, model.startup)
    with fluid.program_guard(model.main, model.startup):
        fluid.optimizer.Adam(learning_rate=lr).minimize(model.loss)
    return q


def _classifier():
    return models.sequence_classifier()


def _kws():
    return models.gru_kws(hidden=16, num_classes=4)


def _lstm_batch(rng, n):
    xs, ys = make_data(rng, n)
    return to_lod(xs), ys


def _gru_batch(rng, n):
    return kws_data(rng, n, (1, 50))


def test_quantisers_around_the_lstm():
    m = _classifier()
    q = _qat(m)
    verify_program(m.main)
    ops = [op for op in m.main.global_block().ops if not op.type.endswith("_grad")]
    assert [op.type for op in ops][:15] == [
        W_ABS, "lookup_table", W_CH, "mul", "elementwise_add",  # table + weight quantisers
        W_CH, "lstm", ACT, ACT,  # hidden-to-hidden weight; cell observer, hidden quantiser
        "sequence_pool", W_CH, "mul", BIAS, "elementwise_add", ACT]
    by = {op.type: op for op in ops if op.type in ("lstm", "sequence_pool")}
    mul0 = next(op for op in ops if op.type == "mul")
    # the embedding's table is quantised (its rows are the projection's input)
    assert ops[1].input("W") == ["embedding_0.w_0.quantized"]
    assert mul0.input("X") == ops[1].output("Out") and mul0.input("Y") == ["fc_0.w_0.quantized"]
    # no output quantiser on the projection: the cell takes its int32 accumulator
    lstm = by["lstm"]
    assert lstm.input("Input") == ["fc_0.tmp_1"]
    w = lstm.input("Weight")[0]
    wq = next(op for op in ops if op.type == W_CH and op.output("Out") == [w])
    assert wq.attr("quant_axis") == 1 and wq.attr("bit_length") == 8
    hidden, cell = lstm.output("Hidden")[0], lstm.output("Cell")[0]
    quants = {op.input("X")[0]: op.attr("bit_length") for op in ops if op.type == ACT}
    assert quants[hidden] == 8 and quants[cell] == 16
    # the last step keeps the hidden grid: the last fc's bias is on hidden x weight steps
    assert by["sequence_pool"].input("X") == [f"{hidden}.quantized"]
    bias = next(op for op in ops if op.type == BIAS)
    assert bias.input("InScale") == [f"{hidden}.scale"]
    assert [lay.op_type for lay in q.layers] == ["mul", "mul", "lstm"]


def test_gradients_reach_every_weight_through_the_recurrence():
    m = _classifier()
    _qat(m)
    block = m.main.global_block()
    params = [n for n, v in block.vars.items() if v.persistable and n.endswith(("w_0", "b_0"))
              and not n.startswith("learning_rate")]
    assert any(n.startswith("lstm") for n in params) and any(n.startswith("embedding")
                                                             for n in params)
    rng = np.random.default_rng(0)
    x, y = _lstm_batch(rng, 16)
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        grads = exe.run(m.main, feed={"words": x, "label": y},
                        fetch_list=[f"{n}@GRAD" for n in params])
    for n, g in zip(params, grads):
        g = np.asarray(g)
        assert np.isfinite(g).all() and np.abs(g).max() > 0, n


def _train_and_freeze(m, feed_name, batch, steps, seed=0):
    q = _qat(m)
    rng = np.random.default_rng(seed)
    exe, scope = fluid.Executor(), fluid.Scope()
    losses = []
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        for _ in range(steps):
            x, y = batch(rng, 32)
            (loss,) = exe.run(m.main, feed={feed_name: x, "label": y}, fetch_list=[m.loss])
            losses.append(float(np.asarray(loss).reshape(-1)[0]))
        ip = freeze(q.test_program, scope, feed_names=[feed_name],
                    fetch_names=[m.prediction.name])
        x, y = batch(np.random.default_rng(99), 300)
        infer = prune(q.test_program, [feed_name], [m.prediction.name])
        (fprob,) = exe.run(infer, feed={feed_name: x}, fetch_list=[m.prediction.name])
        (qprob,) = exe.run(ip, feed={feed_name: x}, fetch_list=[m.prediction.name])
    fa, qa = np.argmax(np.asarray(fprob), 1), np.argmax(np.asarray(qprob), 1)
    return (losses, [op.type for op in ip.global_block().ops], float((fa == qa).mean()),
            float((fa == y[:, 0]).mean()), float((qa == y[:, 0]).mean()))


def _report(what, losses, agree, acc_qat, acc_int):
    print(f"{what}: loss {np.mean(losses[:10]):.3f} -> {np.mean(losses[-10:]):.3f}; "
          f"argmax agreement {agree:.3f}, accuracy QAT {acc_qat:.3f} / integer {acc_int:.3f}")


@pytest.mark.slow  # 22 s
def test_lstm_classifier_trains_with_qat_and_freezes():
    losses, ops, agree, acc_qat, acc_int = _train_and_freeze(
        _classifier(), "words", _lstm_batch, 120)
    _report("lstm", losses, agree, acc_qat, acc_int)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert ops[:5] == ["lookup_table", "quantize", "quantized_fc", "quantized_lstm",
                       "sequence_pool"] and "quantized_fc" in ops[5:]
    assert acc_qat > 0.75 and agree >= 0.95


def test_gru_kws_trains_with_qat_and_freezes():
    losses, ops, agree, acc_qat, acc_int = _train_and_freeze(_kws(), "mfcc", _gru_batch, 120)
    _report("gru", losses, agree, acc_qat, acc_int)
    assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10])
    assert ops[:3] == ["quantize", "quantized_fc", "quantized_gru"]
    assert acc_qat > 0.75 and agree >= 0.95


def test_recurrence_must_read_its_projection_alone():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[4], dtype="float32", lod_level=1)
        proj = layers.fc(x, size=12, act="relu")
        layers.dynamic_gru(proj, size=4)
    with pytest.raises(QuantizationError, match=r"gru .* must read its input projection"):
        quant_aware(main, startup)


def test_freeze_refuses_narrow_recurrent_programs():
    m = _classifier()
    q = quant_aware(m.main, m.startup, QATConfig(Precision(w=4, a=4), keep_first_last=False))
    exe, scope = fluid.Executor(), fluid.Scope()
    x, y = _lstm_batch(np.random.default_rng(0), 8)
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        exe.run(m.main, feed={"words": x, "label": y}, fetch_list=[m.loss])
        with pytest.raises(QuantizationError, match="8-bit"):
            freeze(q.test_program, scope, feed_names=["words"], fetch_names=[m.prediction.name])


def test_a_dynamic_rnn_body_stays_float_and_says_so(caplog):
    """quant_aware puts fake quantisers into the global block only: a DynamicRNN body's
    fc stays float, and the result and the log say which loop and layers, and what to do
    instead (dynamic_gru / dynamic_lstm, or post-training quantisation)."""
    from tests.rtl._recurrent_programs import dynamic_rnn_program

    main, startup, _ = dynamic_rnn_program(
        "x", 10, 8, lambda drnn, word, prev: layers.fc([word, prev], size=8, act="tanh"),
        lambda seq: layers.fc(layers.sequence_last_step(seq), size=2))
    with caplog.at_level("WARNING", logger="fluid_hw.quantize"):
        q = quant_aware(main, startup)
    assert [lay.name for lay in q.layers] == ["fc_1"]  # the head only
    (line,) = q.float_blocks
    assert "the while op" in line and "['fc_0']" in line and "dynamic_gru" in line
    assert "passes.quantize" in line and line in caplog.text
    loop = next(op for op in main.global_block().ops if op.type == "while")
    body = main.block(loop.attr("sub_block"))
    assert not any(op.type in (W_CH, ACT, W_ABS) for op in body.ops)
    # a program without control flow reports nothing
    assert _qat(_kws()).float_blocks == []
