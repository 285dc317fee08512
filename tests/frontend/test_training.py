"""Real models learn: the digits MLP and CNN reach their accuracy goals on the
project's fixed split, and a checkpoint resumes exactly."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import evaluate, train
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models


@pytest.mark.slow
def test_mlp_with_adam_reaches_96_percent():
    xtr, xte, ytr, yte = load_digits_split()
    m = models.digits_mlp(optimizer=fluid.optimizer.Adam(learning_rate=0.002))
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        hist = train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=30, batch_size=32,
                     log=None)
        acc = evaluate(exe, m.test_program, m.feed_names, m.accuracy, (xte, yte))
    assert hist.losses[-1] < hist.losses[0] / 5
    assert acc >= 0.96, f"MLP test accuracy {acc:.4f}"


@pytest.mark.slow
def test_cnn_reaches_97_percent():
    xtr, xte, ytr, yte = load_digits_split(image=True)
    m = models.digits_cnn(optimizer=fluid.optimizer.Adam(learning_rate=0.003))
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=15, batch_size=32,
              log=None)
        acc = evaluate(exe, m.test_program, m.feed_names, m.accuracy, (xte, yte))
    assert acc >= 0.97, f"CNN test accuracy {acc:.4f}"


def _steps(exe, m, xs, ys, n, start):
    out = []
    for i in range(start, start + n):
        sl = slice((i * 16) % 1400, (i * 16) % 1400 + 16)
        (lv,) = exe.run(m.main, feed={"pixels": xs[sl], "label": ys[sl]}, fetch_list=[m.loss])
        out.append(float(lv[0]))
    return out


@pytest.mark.parametrize("opt", ["adam", "momentum"])
def test_checkpoint_resume_gives_the_same_next_loss(tmp_path, opt):
    xtr, _, ytr, _ = load_digits_split()

    def make():
        o = (fluid.optimizer.Adam(learning_rate=0.01) if opt == "adam"
             else fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9))
        return models.digits_mlp(hidden=(32,), optimizer=o)

    exe = fluid.Executor()
    m = make()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        _steps(exe, m, xtr, ytr, 5, 0)
        fluid.io.save_persistables(exe, str(tmp_path), m.main)
        uninterrupted = _steps(exe, m, xtr, ytr, 3, 5)
    m2 = make()
    with fluid.scope_guard(fluid.Scope()):
        exe2 = fluid.Executor()
        exe2.run(m2.startup)
        fluid.io.load_persistables(exe2, str(tmp_path), m2.main)
        resumed = _steps(exe2, m2, xtr, ytr, 3, 5)
    np.testing.assert_array_equal(resumed, uninterrupted)
