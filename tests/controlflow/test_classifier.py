"""End to end: a sequence classifier (embedding + recurrence + sequence_pool + fc) learns
"token 3 appears before token 7" on synthetic variable-length data, no padding."""

import contextlib
import time

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from tests.rtl._recurrent_programs import word_classifier

VOCAB, EMB, HIDDEN = 10, 16, 32


def make_data(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Sequences of 2..20 tokens; half have a 3 before a 7 (label 1), the rest have a 7
    before a 3, only one of them, or neither (label 0)."""
    fillers = np.array([0, 1, 2, 4, 5, 6, 8, 9])
    seqs, labels = [], []
    for _ in range(n):
        length = int(rng.integers(2, 21))
        s = rng.choice(fillers, size=length)
        positive = rng.random() < 0.5
        kind = "37" if positive else rng.choice(["73", "3", "7", ""])
        pos = np.sort(rng.choice(length, size=len(kind), replace=False))
        for p, tok in zip(pos, kind):
            s[p] = int(tok)
        seqs.append(s)
        labels.append(int(positive))
    return seqs, np.array(labels, np.int64).reshape(-1, 1)


def to_lod(seqs: list[np.ndarray]) -> fluid.LoDTensor:
    return fluid.create_lod_tensor(np.concatenate(seqs).reshape(-1, 1).astype(np.int64),
                                   [[len(s) for s in seqs]])


def build(recurrence: str):
    with word_classifier(VOCAB, EMB) as (main, startup, emb, label):
        if recurrence == "dynamic_lstm":
            proj = layers.fc(emb, size=4 * HIDDEN)
            hidden, _ = layers.dynamic_lstm(proj, size=4 * HIDDEN)
        else:
            drnn = layers.DynamicRNN()
            with drnn.block():
                w = drnn.step_input(emb)
                prev = drnn.memory(shape=[HIDDEN])
                h = layers.fc([w, prev], size=HIDDEN, act="tanh")
                drnn.update_memory(prev, h)
                drnn.output(h)
            hidden = drnn()
        pooled = layers.sequence_pool(hidden, "max")
        prob = layers.fc(pooled, size=2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        acc = layers.accuracy(prob, label)
        test_prog = main.clone(for_test=True)
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    return main, startup, test_prog, loss, acc


def train(recurrence: str, steps: int, batch: int = 32, seed: int = 0):
    rng = np.random.default_rng(seed)
    main, startup, test_prog, loss, acc = build(recurrence)
    test_x, test_y = make_data(rng, 500)
    exe = fluid.Executor()
    start = time.perf_counter()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        for _ in range(steps):
            xs, ys = make_data(rng, batch)
            exe.run(main, feed={"words": to_lod(xs), "label": ys}, fetch_list=[loss])
        (a,) = exe.run(test_prog, feed={"words": to_lod(test_x), "label": test_y},
                       fetch_list=[acc])
    return float(a[0]), time.perf_counter() - start


def _one_blas_thread():
    """The matrices here are tiny: one BLAS thread is faster than two on a shared
    2-core machine (OpenBLAS threads spin-wait for a busy core)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional (comes with scikit-learn)
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


@pytest.mark.slow
@pytest.mark.parametrize("recurrence", ["dynamic_lstm", "DynamicRNN"])
def test_sequence_classifier_learns_the_order_rule(recurrence):
    with _one_blas_thread():
        accuracy, seconds = train(recurrence, steps=250)
    print(f"{recurrence}: held-out accuracy {accuracy:.3f} after {seconds:.1f} s")
    assert accuracy >= 0.95
    assert seconds < 120
