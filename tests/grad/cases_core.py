"""Gradient-check cases for the elementwise and activation ops."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(7)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def away_from_zero(*shape):
    x = f64(*shape)
    return np.where(np.abs(x) < 0.2, x + np.sign(x + 1e-9) * 0.3, x)


CASES = []
for name in ("add", "sub", "mul", "max", "min"):
    CASES += [
        GradCase(f"elementwise_{name}", {"X": f64(2, 3, 4), "Y": f64(2, 3, 4)},
                 id=f"elementwise_{name}-same"),
        GradCase(f"elementwise_{name}", {"X": f64(2, 3, 4), "Y": f64(3)}, {"axis": 1},
                 id=f"elementwise_{name}-axis1"),
        GradCase(f"elementwise_{name}", {"X": f64(2, 3, 4), "Y": f64(3, 1)}, {"axis": 1},
                 id=f"elementwise_{name}-size1"),
    ]
CASES += [
    GradCase("elementwise_div", {"X": f64(3, 4), "Y": f64(4, low=0.5, high=2.0)},
             id="elementwise_div-broadcast"),
    GradCase("elementwise_div", {"X": f64(3, 4), "Y": f64(3, 4, low=0.5, high=2.0)},
             id="elementwise_div-same"),
    GradCase("elementwise_pow", {"X": f64(3, 4, low=0.5, high=2.0), "Y": f64(4, low=0.5,
                                                                              high=2.0)},
             id="elementwise_pow"),
    GradCase("elementwise_add", {"X": f64(4), "Y": f64(2, 4)}, id="elementwise_add-y-bigger"),
    GradCase("relu", {"X": away_from_zero(3, 5)}),
    GradCase("leaky_relu", {"X": away_from_zero(3, 5)}, {"alpha": 0.1}),
    GradCase("sigmoid", {"X": f64(3, 5, low=-4, high=4)}),
    GradCase("tanh", {"X": f64(3, 5)}),
    GradCase("exp", {"X": f64(3, 5)}),
    GradCase("log", {"X": f64(3, 5, low=0.5, high=3)}),
    GradCase("sqrt", {"X": f64(3, 5, low=0.5, high=3)}),
    GradCase("abs", {"X": away_from_zero(3, 5)}),
    GradCase("square", {"X": f64(3, 5)}),
    GradCase("reciprocal", {"X": f64(3, 5, low=0.5, high=2)}),
    GradCase("cos", {"X": f64(3, 5)}),
    GradCase("sin", {"X": f64(3, 5)}),
    GradCase("softmax", {"X": f64(3, 5)}, id="softmax-last"),
    GradCase("softmax", {"X": f64(3, 4, 2)}, {"axis": 1}, id="softmax-axis1"),
]
# piecewise-constant ops: zero gradient, checked away from the jumps
for name in ("floor", "ceil", "round", "sign"):
    x = np.round(f64(3, 4) * 4) / 4 + 0.1
    CASES.append(GradCase(name, {"X": x}, eps=1e-4))
