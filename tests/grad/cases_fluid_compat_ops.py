"""Gradient-check cases for cvm, im2sequence and hierarchical_sigmoid (issue 20)."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(30)

CASES = [
    GradCase("cvm", {"X": R.uniform(0.5, 2, (3, 4)), "CVM": R.uniform(0, 1, (3, 2))},
             {"use_cvm": True}, check=["X"], id="cvm-use"),
    GradCase("cvm", {"X": R.uniform(0.5, 2, (3, 4)), "CVM": R.uniform(0, 1, (3, 2))},
             {"use_cvm": False}, check=["X"], id="cvm-drop"),
    GradCase("im2sequence", {"X": R.uniform(-1, 1, (1, 2, 3, 3))},
             {"kernels": [2, 2], "strides": [1, 1], "paddings": [1, 0, 0, 1]}),
    GradCase("hierarchical_sigmoid",
             {"X": R.uniform(-1, 1, (4, 3)), "W": R.uniform(-1, 1, (4, 3)),
              "Label": np.array([[0], [4], [2], [3]], np.int64),
              "Bias": R.uniform(-1, 1, (4, 1))}, {"num_classes": 5}),
]
