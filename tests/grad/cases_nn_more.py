"""Gradient-check cases for row_conv, add_position_encoding and random_crop (issue 20)."""

import numpy as np

from tests.grad_harness import GradCase
from tests.grad_lod_harness import LoDGradCase

R = np.random.default_rng(28)


def f64(*shape):
    return R.uniform(-1, 1, size=shape)


CASES = [
    LoDGradCase("row_conv", {"X": f64(6, 3), "Filter": f64(3, 3)}, lod={"X": [[4, 0, 2]]}),
    GradCase("add_position_encoding", {"X": f64(2, 3, 4)}, {"alpha": 0.5, "beta": 2.0}),
    GradCase("random_crop", {"X": f64(2, 4, 5)}, {"shape": [2, 3], "seed": 7}),
]
