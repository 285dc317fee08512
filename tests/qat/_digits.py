"""Quantisation-aware training of the digits MLP, shared by the QAT tests.

``float_model()`` trains the float 64-128-64-10 MLP once per session (Adam, 30
epochs); ``qat(precision)`` starts from its weights, inserts the fake quantisers
(``quant_aware``), fine-tunes, freezes, and measures both programs on the 360 test
images.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import evaluate, train
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from fluid_hw.ir.program import Program
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat import QATConfig, QATProgram, quant_aware
from fluid_hw.passes.qat_freeze import freeze

#: (epochs, learning rate) of the QAT fine-tuning per precision
SCHEDULE = {8: (3, 0.001), 2: (10, 0.002), 1: (20, 0.002)}


@functools.cache
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return load_digits_split()


@functools.cache
def float_model() -> tuple[dict[str, np.ndarray], float]:
    """The trained float parameters and the float test accuracy."""
    xtr, xte, ytr, yte = data()
    m = models.digits_mlp(optimizer=fluid.optimizer.Adam(learning_rate=0.002))
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=30, batch_size=32, log=None)
        acc = evaluate(exe, m.test_program, m.feed_names, m.accuracy, (xte, yte))
    params = {p.name: np.array(scope.find_value(p.name)) for p in m.main.all_parameters()
              if p.trainable}
    return params, acc


@dataclass
class QATResult:
    qat: QATProgram
    model: models.Model
    scope: fluid.Scope
    frozen: Program
    float_accuracy: float  # the float model before QAT
    qat_accuracy: float  # the fake-quantised test program
    golden_accuracy: float  # the frozen integer program on the golden model
    argmax_agreement: float  # frozen vs fake-quantised predictions
    max_step_deviation: float  # |frozen - fake-quantised| logits, in output steps
    logits_equal: float  # share of logits equal in both programs


def build(precision: Precision) -> tuple[models.Model, QATProgram]:
    m = models.digits_mlp()
    with fluid.program_guard(m.main, m.startup):
        q = quant_aware(m.main, m.startup, QATConfig(precision))
    return m, q


def qat(precision: Precision) -> QATResult:
    xtr, xte, ytr, yte = data()
    params, facc = float_model()
    epochs, lr = SCHEDULE[min(precision.w, precision.a)]
    m, q = build(precision)
    with fluid.program_guard(m.main, m.startup):
        fluid.optimizer.Adam(learning_rate=lr).minimize(m.loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        for n, v in params.items():
            scope.vars[n] = v.copy()
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=epochs, batch_size=32,
              log=None)
        acc = evaluate(exe, q.test_program, m.feed_names, m.accuracy, (xte, yte))
    logits = q.layers[-1].output  # the last layer's quantised output, in both programs
    frozen = freeze(q.test_program, scope, feed_names=["pixels"],
                    fetch_names=[m.prediction.name, logits])
    pf, lf = exe.run(q.test_program, feed={"pixels": xte, "label": yte},
                     fetch_list=[m.prediction, logits], scope=scope)
    pi, li = exe.run(frozen, feed={"pixels": xte}, fetch_list=[m.prediction.name, logits],
                     scope=scope)
    step = next(op.attr("scale") for op in frozen.global_block().ops
                if op.type == "dequantize" and op.output("Out") == [logits])
    dev = np.abs(li.astype(np.float64) - lf.astype(np.float64)) / step
    return QATResult(q, m, scope, frozen, facc, acc, float((pi.argmax(1) == yte[:, 0]).mean()),
                     float((pi.argmax(1) == pf.argmax(1)).mean()), float(np.round(dev.max())),
                     float((np.round(dev) == 0).mean()))


@functools.cache
def qat_cnn(w: int = 4, a: int = 4, epochs: int = 8
            ) -> tuple[models.Model, QATProgram, fluid.Scope, float]:
    """The digits CNN (conv-bn-relu-pool x 2, fc) trained with QAT from scratch (Adam
    0.003): model, QAT program, scope, fake-quantised test accuracy."""
    xtr, xte, ytr, yte = load_digits_split(image=True)
    m = models.digits_cnn()
    with fluid.program_guard(m.main, m.startup):
        q = quant_aware(m.main, m.startup, QATConfig(Precision(w, a)))
        fluid.optimizer.Adam(learning_rate=0.003).minimize(m.loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=epochs, batch_size=32,
              log=None)
        acc = evaluate(exe, q.test_program, m.feed_names, m.accuracy, (xte, yte))
    return m, q, scope, acc
