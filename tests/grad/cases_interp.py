"""Gradient-check cases for nearest_interp: upsampling (every input cell copied to
several outputs, their gradients summed), downsampling (some cells copied to none) and
corner-aligned sizes."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(17)


def x(*shape):
    return R.uniform(-1.0, 1.0, size=shape).astype(np.float64)


CASES = [
    GradCase("nearest_interp", {"X": x(2, 2, 3, 4)}, {"scale": 2.0, "align_corners": False},
             id="nearest_interp-x2"),
    GradCase("nearest_interp", {"X": x(1, 2, 5, 4)}, {"out_h": 7, "out_w": 3},
             id="nearest_interp-corners-7x3"),
    GradCase("nearest_interp", {"X": x(1, 3, 4, 5)},
             {"out_h": 2, "out_w": 8, "align_corners": False}, id="nearest_interp-down-up"),
]
