"""Gradient-check cases for erf, hard_sigmoid, hard_swish, where, expand, cumsum,
reduce_min, reduce_prod, elementwise_mod, elementwise_fmod, cumprod, tan, sinh, cosh,
asin, acos, atan, asinh, acosh and atanh."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(23)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def away(x, kinks, gap=0.05):
    """``x`` with values near a kink of a piecewise function moved off it."""
    for k in kinks:
        x = np.where(np.abs(x - k) < gap, k + gap, x)
    return x


CASES = [
    GradCase("erf", {"X": f64(3, 4, low=-2, high=2)}),
    GradCase("hard_sigmoid", {"X": away(f64(4, 5, low=-4, high=4), (-2.5, 2.5))}),
    GradCase("hard_swish", {"X": away(f64(4, 5, low=-5, high=5), (-3.0, 3.0))},
             id="hard_swish"),
    GradCase("where", {"Condition": R.random((3, 4)) < 0.5, "X": f64(3, 4), "Y": f64(4)},
             id="where-broadcast-y"),
    GradCase("where", {"Condition": R.random((1, 4)) < 0.5, "X": f64(3, 1), "Y": f64(3, 4)},
             id="where-broadcast-all"),
    GradCase("expand", {"X": f64(2, 1, 3)}, {"expand_times": [2, 3, 1]}),
    GradCase("cumsum", {"X": f64(3, 4)}, {"axis": 1}, id="cumsum-axis1"),
    GradCase("cumsum", {"X": f64(3, 4)}, {"axis": 0, "exclusive": True, "reverse": True},
             id="cumsum-exclusive-reverse"),
    GradCase("reduce_min", {"X": f64(3, 4)}, {"dim": [1]}, id="reduce_min-axis1"),
    GradCase("reduce_min", {"X": f64(2, 3, 4)}, {"reduce_all": True}, id="reduce_min-all"),
    GradCase("reduce_prod", {"X": f64(3, 4, low=0.5, high=1.5)}, {"dim": [0]},
             id="reduce_prod-axis0"),
    GradCase("reduce_prod", {"X": f64(2, 3, 4)}, {"dim": [0, 2], "keep_dim": True},
             id="reduce_prod-two-axes"),
    # operands whose quotient stays away from the integers (the jumps of mod)
    GradCase("elementwise_mod", {"X": f64(3, 4, low=0.1, high=0.9) + np.arange(4) * 1.0,
                                 "Y": f64(4, low=1.0, high=1.05)}, id="elementwise_mod"),
    GradCase("elementwise_fmod", {"X": -(f64(3, 4, low=0.1, high=0.9) + 2.0),
                                  "Y": f64(3, 4, low=1.0, high=1.05)}, id="elementwise_fmod"),
    GradCase("cumprod", {"X": f64(3, 4, low=0.5, high=1.5)}, {"axis": 1}, id="cumprod-axis1"),
    GradCase("cumprod", {"X": f64(4, 3)}, {"axis": 0, "exclusive": True, "reverse": True},
             id="cumprod-exclusive-reverse"),
    GradCase("cumprod", {"X": np.array([[0.5, 0.0, 2.0, -1.5], [1.2, -0.7, 0.0, 0.0]])},
             {"axis": 1}, id="cumprod-zeros"),
    *[GradCase(op, {"X": f64(3, 4, low=lo, high=hi)}, id=op)
      for op, lo, hi in (("tan", -1.2, 1.2), ("sinh", -2, 2), ("cosh", -2, 2),
                         ("asin", -0.9, 0.9), ("acos", -0.9, 0.9), ("atan", -3, 3),
                         ("asinh", -3, 3), ("acosh", 1.1, 3), ("atanh", -0.9, 0.9))],
]
