"""Gradient-check cases for the ops of ir/ops/tensor_more.py (issue 20)."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(22)


def distinct(*shape):
    n = int(np.prod(shape))
    return (R.permutation(n).astype(np.float64) * 0.1 - n * 0.05).reshape(shape)


CASES = [
    GradCase("argsort", {"X": distinct(3, 4)}, {"axis": 1}, id="argsort-axis1"),
    GradCase("argsort", {"X": distinct(3, 4)}, {"axis": 0}, id="argsort-axis0"),
    GradCase("reverse", {"X": distinct(2, 3, 2)}, {"axis": [0, 2]}),
    GradCase("gather", {"X": distinct(4, 3), "Index": np.array([2, 0, 2], np.int64)}),
    GradCase("scatter", {"X": distinct(4, 3), "Ids": np.array([1, 3], np.int64),
                         "Updates": distinct(2, 3)}, id="scatter-overwrite"),
    GradCase("scatter", {"X": distinct(4, 3), "Ids": np.array([1, 1, 3], np.int64),
                         "Updates": distinct(3, 3)}, {"overwrite": False}, id="scatter-add"),
    GradCase("diag", {"Diagonal": distinct(4)}),
    GradCase("multiplex", {"X": [distinct(3, 2), distinct(3, 2)],
                           "Ids": np.array([[1], [0], [1]], np.int32)}),
]
