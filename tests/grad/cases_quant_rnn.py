"""Gradient-check cases for ``simple_rnn`` (the float whole-sequence plain recurrence the
quantiser makes of a DynamicRNN / StaticRNN fc + activation loop)."""

import numpy as np

from tests.grad_lod_harness import LoDGradCase

R = np.random.default_rng(23)
D = 3
LENS = [[3, 1, 4, 2]]  # 10 rows


def f64(*shape):
    return R.uniform(-1.0, 1.0, size=shape).astype(np.float64)


CASES = [
    LoDGradCase("simple_rnn", {"Input": f64(10, D), "Weight": f64(D, D), "Bias": f64(1, D)},
                {"activation": act}, lod={"Input": LENS}, id=f"simple_rnn-{act}")
    for act in ("tanh", "sigmoid", "relu")
] + [
    LoDGradCase("simple_rnn", {"Input": f64(10, D), "H0": f64(4, D), "Weight": f64(D, D)},
                {"is_reverse": True}, lod={"Input": LENS}, id="simple_rnn-reverse-initial-state"),
]
