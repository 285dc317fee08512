"""The recurrent reference models (models.gru_kws, models.sequence_classifier) train
briefly in fluid-hw on synthetic variable-length data (the loss falls) and quantise with
the recurrent pass (quantized_fc + quantized_gru / quantized_lstm); float and int8
accuracy are measured on held-out sequences."""

from __future__ import annotations

import time

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.frontend import models
from fluid_hw.ir.prune import prune
from fluid_hw.passes.quantize import QuantConfig, quantize
from tests.passes.test_quantize_rnn import make_data, to_lod

KWS_CLASSES, FRAMES, COEFFS = 4, 49, 10


def kws_data(rng: np.random.Generator, n: int, lengths: tuple[int, int] = (FRAMES, FRAMES)
             ) -> tuple[fluid.LoDTensor, np.ndarray]:
    """Synthetic MFCC utterances: class k is a bump on coefficients 2k, 2k+1 over a
    random stretch of frames, in noise."""
    seqs, labels = [], []
    for _ in range(n):
        t = int(rng.integers(lengths[0], lengths[1] + 1))
        k = int(rng.integers(0, KWS_CLASSES))
        x = rng.standard_normal((t, COEFFS)).astype(np.float32)
        a = int(rng.integers(0, max(1, t - 10)))
        x[a:a + 10, 2 * k:2 * k + 2] += 2.0
        seqs.append(x)
        labels.append(k)
    lod = fluid.create_lod_tensor(np.concatenate(seqs), [[len(s) for s in seqs]])
    return lod, np.array(labels, np.int64).reshape(-1, 1)


def _train(model, batches, steps: int) -> list[float]:
    exe = fluid.Executor()
    exe.run(model.startup)
    losses = []
    for _ in range(steps):
        feed = batches()
        (loss,) = exe.run(model.main, feed=feed, fetch_list=[model.loss])
        losses.append(float(np.asarray(loss).reshape(-1)[0]))
    return losses


def _acc(prob: np.ndarray, y: np.ndarray) -> float:
    return float((np.argmax(np.asarray(prob), 1) == y[:, 0]).mean())


def _float_and_int8(model, feed_name: str, test_x, test_y, calib) -> tuple[float, float, list]:
    exe = fluid.Executor()
    infer = prune(model.test_program, [feed_name], [model.prediction.name])  # no label
    (fprob,) = exe.run(infer, feed={feed_name: test_x}, fetch_list=[model.prediction.name])
    qprog = quantize(infer, calib, QuantConfig(), scope=fluid.global_scope(),
                     executor=exe, fetch_names=[model.prediction.name],
                     feed_names=[feed_name])
    (qprob,) = exe.run(qprog, feed={feed_name: test_x}, fetch_list=[model.prediction.name])
    return _acc(fprob, test_y), _acc(qprob, test_y), [op.type for op in
                                                      qprog.global_block().ops]


@pytest.mark.slow
def test_sequence_classifier_trains_and_quantises():
    rng = np.random.default_rng(3)
    model = models.sequence_classifier(optimizer=lambda: fluid.optimizer.Adam(learning_rate=0.01))

    def batch():
        xs, ys = make_data(rng, 32)
        return {"words": to_lod(xs), "label": ys}

    scope = fluid.Scope()
    t0 = time.perf_counter()
    with fluid.scope_guard(scope):
        losses = _train(model, batch, 150)
        trained = time.perf_counter() - t0
        test_x, test_y = make_data(rng, 300)
        calib = [{"words": to_lod(make_data(rng, 64)[0])} for _ in range(4)]
        f_acc, q_acc, ops = _float_and_int8(model, "words", to_lod(test_x), test_y, calib)
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    print(f"sequence_classifier (LSTM, peepholes): loss {first:.3f} -> {last:.3f} in 150 "
          f"steps ({trained:.1f} s); accuracy on 300 sequences of 1..50: float {f_acc:.3f}, "
          f"int8 {q_acc:.3f}")
    assert "quantized_lstm" in ops and "quantized_fc" in ops
    assert last < 0.6 * first
    assert f_acc >= 0.8 and q_acc >= f_acc - 0.03


@pytest.mark.slow
def test_gru_kws_trains_and_quantises():
    rng = np.random.default_rng(4)
    model = models.gru_kws(hidden=32, num_classes=KWS_CLASSES,
                           optimizer=lambda: fluid.optimizer.Adam(learning_rate=0.01))

    def batch():
        x, y = kws_data(rng, 32)
        return {"mfcc": x, "label": y}

    scope = fluid.Scope()
    t0 = time.perf_counter()
    with fluid.scope_guard(scope):
        losses = _train(model, batch, 60)
        trained = time.perf_counter() - t0
        test_x, test_y = kws_data(rng, 200)
        calib = [{"mfcc": kws_data(rng, 64)[0]} for _ in range(2)]
        f_acc, q_acc, ops = _float_and_int8(model, "mfcc", test_x, test_y, calib)
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    print(f"gru_kws (hidden 32, {KWS_CLASSES} classes): loss {first:.3f} -> {last:.3f} in 60 "
          f"steps ({trained:.1f} s); accuracy on 200 utterances of 49 frames: float "
          f"{f_acc:.3f}, int8 {q_acc:.3f}")
    assert "quantized_gru" in ops and "quantized_fc" in ops
    assert last < 0.6 * first
    assert f_acc >= 0.8 and q_acc >= f_acc - 0.03
