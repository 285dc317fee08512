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

from tests.grad_lod_harness import LoDGradCase  # noqa: E402


def _off_integers(g, size):
    """grid points kept away from pixel centres (where bilinear weights have kinks)."""
    pix = (g + 1) * (size - 1) / 2
    frac = pix - np.floor(pix)
    pix = np.where(frac < 0.1, pix + 0.15, np.where(frac > 0.9, pix - 0.15, pix))
    return pix * 2 / (size - 1) - 1


_G = R.uniform(-0.9, 0.9, (1, 2, 2, 2))
_G[..., 0] = _off_integers(_G[..., 0], 4)
_G[..., 1] = _off_integers(_G[..., 1], 3)

CASES += [
    LoDGradCase("warpctc", {"Logits": R.uniform(-1, 1, (7, 4)),
                            "Label": np.array([[1], [2], [3]], np.int32)},
                lod={"Logits": [[4, 3]], "Label": [[2, 1]]}, outputs=["Loss"]),
    GradCase("grid_sampler", {"X": R.uniform(-1, 1, (1, 2, 3, 4)), "Grid": _G}),
]

CASES += [
    GradCase("nce", {"Input": R.uniform(-1, 1, (3, 4)),
                     "Label": np.array([[1], [4], [0]], np.int64),
                     "Weight": R.uniform(-1, 1, (6, 4)), "Bias": R.uniform(-1, 1, (6, 1)),
                     "SampleWeight": R.uniform(0.5, 1.5, (3, 1))},
             {"num_total_classes": 6, "num_neg_samples": 2, "custom_neg_classes": [2, 5]},
             check=["Input", "Weight", "Bias"], outputs=["Cost"]),
]

CASES += [
    GradCase("teacher_student_sigmoid_loss",
             {"X": R.uniform(-3, 3, (4, 1)),
              "Label": np.array([[-2.0], [-1.0], [0.3], [1.8]])}, check=["X"]),
]
