"""Gradient-check cases for the activations of ir/ops/activation_more.py (issue 20)."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(20)


def f64(*shape, low=-2.0, high=2.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def away(x, kinks, gap=0.05):
    """``x`` with values near a kink of a piecewise function moved off it."""
    for k in kinks:
        x = np.where(np.abs(x - k) < gap, k + gap, x)
    return x


X = away(f64(3, 4, low=-3, high=3), (0.0,))
CASES = [
    GradCase("elu", {"X": X}, {"alpha": 0.7}),
    GradCase("relu6", {"X": away(f64(3, 4, low=-2, high=8), (0.0, 6.0))}),
    GradCase("selu", {"X": X}),
    GradCase("swish", {"X": X}, {"beta": 1.5}),
    GradCase("brelu", {"X": away(f64(3, 4, low=-2, high=3), (-1.0, 2.0))},
             {"t_min": -1.0, "t_max": 2.0}),
    GradCase("soft_relu", {"X": away(f64(3, 4, low=-3, high=3), (-2.0, 2.0))},
             {"threshold": 2.0}),
    GradCase("softplus", {"X": X}),
    GradCase("softsign", {"X": X}),
    GradCase("logsigmoid", {"X": X}),
    GradCase("rsqrt", {"X": f64(3, 4, low=0.5, high=3)}),
    GradCase("stanh", {"X": X}),
    GradCase("tanh_shrink", {"X": X}),
    GradCase("softshrink", {"X": away(X, (-0.5, 0.5))}),
    GradCase("hard_shrink", {"X": away(X, (-0.5, 0.5))}),
    GradCase("thresholded_relu", {"X": away(X, (1.0,))}),
    GradCase("pow", {"X": f64(3, 4, low=0.5, high=2)}, {"factor": 2.5}),
    GradCase("prelu", {"X": X, "Alpha": np.array([0.3])}, {"mode": "all"}, id="prelu-all"),
    GradCase("prelu", {"X": away(f64(2, 3, 2), (0.0,)), "Alpha": f64(3, low=0.1, high=0.5)},
             {"mode": "channel"}, id="prelu-channel"),
    GradCase("prelu", {"X": away(f64(2, 3, 2), (0.0,)), "Alpha": f64(3, 2, low=0.1, high=0.5)},
             {"mode": "element"}, id="prelu-element"),
]
