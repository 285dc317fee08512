"""Gradient-check cases for conv3d, conv2d/3d_transpose and pool3d (issue 20)."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(27)


def f64(*shape):
    return R.uniform(-1, 1, size=shape)


def distinct(*shape):
    n = int(np.prod(shape))
    return (R.permutation(n) * 0.1 - n * 0.05).reshape(shape)


CASES = [
    GradCase("conv3d", {"Input": f64(1, 2, 3, 3, 2), "Filter": f64(2, 1, 2, 2, 1)},
             {"strides": [1, 2, 1], "paddings": [1, 0, 0], "dilations": [1, 1, 1],
              "groups": 2}),
    GradCase("conv2d_transpose", {"Input": f64(1, 2, 2, 3), "Filter": f64(2, 2, 2, 2)},
             {"strides": [2, 1], "paddings": [1, 0], "dilations": [1, 1], "groups": 1,
              "output_size": [3, 4]}, id="conv2d_transpose-output_size"),
    GradCase("conv2d_transpose", {"Input": f64(1, 2, 2, 2), "Filter": f64(2, 1, 2, 1)},
             {"strides": [1, 1], "paddings": [0, 0], "dilations": [2, 1], "groups": 2},
             id="conv2d_transpose-groups"),
    GradCase("conv3d_transpose", {"Input": f64(1, 1, 2, 2, 1), "Filter": f64(1, 2, 2, 1, 2)},
             {"strides": [2, 1, 1], "paddings": [0, 0, 0], "dilations": [1, 1, 1],
              "groups": 1}),
    GradCase("pool3d", {"X": distinct(1, 2, 3, 3, 2)},
             {"pooling_type": "max", "ksize": [2, 2, 2], "strides": [1, 1, 1],
              "paddings": [0, 1, 0]}, id="pool3d-max"),
    GradCase("pool3d", {"X": f64(1, 2, 3, 3, 2)},
             {"pooling_type": "avg", "ksize": [2, 2, 2], "strides": [1, 2, 1],
              "paddings": [1, 0, 0], "exclusive": False}, id="pool3d-avg"),
    GradCase("pool3d", {"X": f64(1, 1, 3, 4, 2)},
             {"pooling_type": "avg", "ksize": [2, 3, 1], "adaptive": True},
             id="pool3d-adaptive"),
]
