"""A small training loop over numpy arrays, with progress per epoch."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.program import Program, Variable
from .executor import Executor


@dataclass
class EpochStats:
    epoch: int
    loss: float
    test_accuracy: float | None
    seconds: float


@dataclass
class History:
    epochs: list[EpochStats] = field(default_factory=list)

    @property
    def losses(self) -> list[float]:
        return [e.loss for e in self.epochs]

    @property
    def final_accuracy(self) -> float | None:
        return self.epochs[-1].test_accuracy if self.epochs else None


def minibatches(n: int, batch_size: int, rng: np.random.Generator | None) -> list[np.ndarray]:
    order = rng.permutation(n) if rng is not None else np.arange(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def evaluate(exe: Executor, program: Program, feed_names: Sequence[str], target: Variable,
             arrays: Sequence[np.ndarray], batch_size: int = 512) -> float:
    """Example-weighted mean of a per-batch scalar (e.g. accuracy) over the arrays."""
    n = len(arrays[0])
    total = 0.0
    for idx in minibatches(n, batch_size, None):
        (v,) = exe.run(program, feed={k: a[idx] for k, a in zip(feed_names, arrays)},
                       fetch_list=[target])
        total += float(np.asarray(v).reshape(-1)[0]) * len(idx)
    return total / n


def train(exe: Executor, main: Program, feed_names: Sequence[str], loss: Variable,
          train_arrays: Sequence[np.ndarray], epochs: int, batch_size: int = 32, seed: int = 0,
          test: tuple[Program, Variable, Sequence[np.ndarray]] | None = None,
          log: Callable[[str], Any] | None = print) -> History:
    """Run ``epochs`` passes of shuffled minibatches; report mean loss (and test
    accuracy when ``test=(test_program, accuracy_var, test_arrays)``) per epoch."""
    rng = np.random.default_rng(seed)
    hist = History()
    n = len(train_arrays[0])
    for ep in range(epochs):
        t0 = time.perf_counter()
        losses = []
        for idx in minibatches(n, batch_size, rng):
            (lv,) = exe.run(main, feed={k: a[idx] for k, a in zip(feed_names, train_arrays)},
                            fetch_list=[loss])
            losses.append(float(np.asarray(lv).reshape(-1)[0]) * len(idx))
        acc = evaluate(exe, test[0], feed_names, test[1], test[2]) if test else None
        st = EpochStats(ep + 1, sum(losses) / n, acc, time.perf_counter() - t0)
        hist.epochs.append(st)
        if log is not None:
            extra = f"  test accuracy {acc:.4f}" if acc is not None else ""
            log(f"epoch {st.epoch:3d}/{epochs}  loss {st.loss:.4f}{extra}  ({st.seconds:.1f}s)")
    return hist
