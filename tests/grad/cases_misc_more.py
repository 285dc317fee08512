"""Gradient-check cases for print (passes the gradient through) and py_func (the
backward function's gradient) of ir/ops/misc_more.py (issue 20)."""

import numpy as np

import fluid_hw as fluid
from fluid_hw import layers
from tests.grad_harness import GradCase
from tests.grad_lod_harness import Built, ProgramGradCase

R = np.random.default_rng(26)


def _py_func():
    x = layers.data("x", shape=[3, 2], dtype="float64", append_batch_size=False,
                    stop_gradient=False)
    out = fluid.default_main_program().global_block().create_var(
        name="sinx", shape=[3, 2], dtype="float64")
    layers.py_func(np.sin, x, out, backward_func=lambda a, o, d: np.cos(a) * d)
    return Built({"x": R.uniform(-1, 1, (3, 2))}, ["x"], [out.name])


CASES = [
    GradCase("print", {"In": R.uniform(-1, 1, (2, 3))}, {"print_phase": "forward"}),
    ProgramGradCase("py_func", _py_func),
]

CASES += [
    GradCase("bilinear_interp", {"X": R.uniform(-1, 1, (1, 2, 3, 4))},
             {"out_h": 5, "out_w": 3, "align_corners": True}, id="bilinear_interp-corners"),
    GradCase("bilinear_interp", {"X": R.uniform(-1, 1, (1, 1, 3, 4))},
             {"out_h": 4, "out_w": 7, "align_corners": False, "align_mode": 0},
             id="bilinear_interp-half-pixel"),
]
