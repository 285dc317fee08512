"""Gradient-check cases for the fused float ops (fc, conv2d_fusion,
fused_elemwise_activation)."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(23)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def away_from_zero(*shape):
    """Values with |v| >= 0.1: relu's kink stays far from the perturbations."""
    v = f64(*shape, low=0.1, high=1.0)
    return v * R.choice([-1.0, 1.0], size=shape)


CASES = [
    GradCase("fc", {"Input": f64(3, 4), "W": f64(4, 5), "Bias": f64(5)}, id="fc-plain"),
    GradCase("fc", {"Input": f64(2, 3, 4), "W": f64(12, 3)},
             {"in_num_col_dims": 1, "activation_type": "tanh"}, id="fc-3d-input-tanh-no-bias"),
    GradCase("fc", {"Input": f64(2, 3, 4), "W": f64(4, 3), "Bias": f64(3)},
             {"in_num_col_dims": 2, "activation_type": "sigmoid"}, id="fc-num-col-dims-2-sigmoid"),
    GradCase("fc", {"Input": away_from_zero(4, 1), "W": np.ones((1, 3)), "Bias": np.zeros(3)},
             {"activation_type": "relu"}, id="fc-relu"),
    GradCase("conv2d_fusion", {"Input": f64(2, 2, 5, 5), "Filter": f64(3, 2, 3, 3),
                               "Bias": f64(3)}, {"paddings": [1, 1]}, id="conv2d_fusion-identity"),
    GradCase("conv2d_fusion", {"Input": f64(1, 4, 5, 4), "Filter": f64(4, 2, 2, 2),
                               "Bias": f64(4)},
             {"groups": 2, "strides": [2, 1], "activation": "tanh"},
             id="conv2d_fusion-groups-tanh"),
    GradCase("conv2d_fusion", {"Input": f64(1, 1, 4, 4), "Filter": f64(2, 1, 1, 1) + 2.0,
                               "Bias": np.array([0.5, -0.5])},
             {"activation": "relu"}, id="conv2d_fusion-relu-1x1"),
]

# relu cases keep the pre-activation away from 0: X in +-[0.1, 1] and Y tiny
for functors, kw in (
    (["relu", "elementwise_add"], {}),
    (["tanh", "elementwise_mul"], {}),
    (["sigmoid", "elementwise_sub"], {"axis": 1}),
    (["elementwise_add", "relu"], {}),
    (["elementwise_mul", "tanh"], {}),
    (["elementwise_max", "scale"], {"scale": 1.5}),
    (["scale", "elementwise_min"], {"scale": -2.0}),
):
    shape_y = (3,) if kw.get("axis") == 1 else (2, 3, 4)
    y = f64(*shape_y) * 0.01 if functors[0] == "relu" else f64(*shape_y)
    if functors == ["elementwise_max", "scale"] or functors == ["scale", "elementwise_min"]:
        y = y + 0.02 * np.sign(y)  # ties between X and Y stay away from the perturbations
    CASES.append(GradCase(
        "fused_elemwise_activation", {"X": away_from_zero(2, 3, 4), "Y": y},
        {"functor_list": functors, **kw}, id=f"fused_elemwise-{'-'.join(functors)}"))
