"""Gradient-check cases for the ops of ``fluid_hw/ir/ops/extra.py`` (clip, log_softmax,
pad, strided_slice)."""

import numpy as np

import fluid_hw.backends.cpu.kernels.extra
import fluid_hw.ir.ops.extra  # noqa: F401  (registers the ops)
from tests.grad_harness import GradCase

R = np.random.default_rng(13)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def away_from(bounds, *shape):
    """Random values at least 0.05 from each of ``bounds`` (no kink under the eps)."""
    x = f64(*shape, low=-2.0, high=2.0)
    for b in bounds:
        near = np.abs(x - b) < 0.05
        x[near] += 0.1
    return x


CASES = [
    GradCase("clip", {"X": away_from([-0.5, 0.7], 3, 4)}, {"min": -0.5, "max": 0.7},
             id="clip-both"),
    GradCase("clip", {"X": away_from([0.0], 2, 5)}, {"min": 0.0, "max": float("inf")},
             id="clip-min-only"),
    GradCase("log_softmax", {"X": f64(3, 5)}, id="log_softmax-last"),
    GradCase("log_softmax", {"X": f64(2, 3, 4)}, {"axis": 1}, id="log_softmax-axis1"),
    GradCase("pad", {"X": f64(2, 3)}, {"paddings": [1, 0, 2, 1], "pad_value": 0.5},
             id="pad-constant"),
    GradCase("pad", {"X": f64(2, 4, 3)}, {"paddings": [0, 0, 2, 1, 1, 2], "mode": "reflect"},
             id="pad-reflect"),
    GradCase("pad", {"X": f64(3, 3)}, {"paddings": [2, 1, 0, 3], "mode": "edge"},
             id="pad-edge"),
    GradCase("pad", {"X": f64(3, 4)}, {"paddings": [1, 2, 2, 1], "mode": "wrap"},
             id="pad-wrap"),
    GradCase("pad", {"X": f64(4, 5)}, {"paddings": [-1, 2, 1, -2]}, id="pad-crop"),
    GradCase("strided_slice", {"Input": f64(5, 6)},
             {"axes": [0, 1], "starts": [4, 1], "ends": [-10, 6], "strides": [-2, 2]},
             id="strided_slice-neg-stride"),
    GradCase("strided_slice", {"Input": f64(3, 4, 5)},
             {"axes": [2], "starts": [-1], "ends": [0], "strides": [-1]},
             id="strided_slice-reverse"),
]
