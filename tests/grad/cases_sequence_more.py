"""Gradient-check cases for the sequence ops of ir/ops/sequence_more.py (issue 20)."""

import numpy as np

from tests.grad_lod_harness import LoDGradCase

R = np.random.default_rng(25)


def f64(*shape):
    return R.uniform(-1, 1, size=shape).astype(np.float64)


CASES = [
    LoDGradCase("sequence_reverse", {"X": f64(6, 2)}, lod={"X": [[2, 0, 4]]},
                outputs=["Y"]),
    LoDGradCase("sequence_slice", {"X": f64(7, 2), "Offset": np.array([[1], [0]], np.int64),
                                   "Length": np.array([[2], [3]], np.int64)},
                lod={"X": [[3, 4]]}),
    LoDGradCase("sequence_expand_as", {"X": f64(3, 2), "Y": f64(6, 1)},
                lod={"Y": [[2, 1, 3]]}, check=["X"]),
    LoDGradCase("sequence_scatter", {"X": f64(2, 4), "Ids": np.array([[0], [3], [1]], np.int64),
                                     "Updates": f64(3, 1)},
                lod={"Ids": [[2, 1]], "Updates": [[2, 1]]}),
]
