"""Gradient-check cases for linear_chain_crf (issue 20): both the emissions and the
transition weights, sequences of several lengths (one of length 1, one empty)."""

import numpy as np

from tests.grad_lod_harness import LoDGradCase

R = np.random.default_rng(21)


def f64(*shape):
    return R.uniform(-1, 1, size=shape).astype(np.float64)


def labels(n, d):
    return R.integers(0, d, size=(n, 1)).astype(np.int64)


CASES = [
    LoDGradCase("linear_chain_crf", {"Emission": f64(7, 3), "Transition": f64(5, 3),
                                     "Label": labels(7, 3)},
                lod={"Emission": [[3, 1, 0, 3]]}, outputs=["LogLikelihood"],
                id="linear_chain_crf"),
    LoDGradCase("linear_chain_crf", {"Emission": f64(4, 2), "Transition": f64(4, 2),
                                     "Label": labels(4, 2)},
                lod={"Emission": [[4]]}, outputs=["LogLikelihood"],
                id="linear_chain_crf-one-sequence"),
]

CASES += [
    LoDGradCase("lod_reset", {"X": f64(4, 2)}, {"target_lod": [0, 1, 4]}, id="lod_reset"),
]
