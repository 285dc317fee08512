"""Gradient-check cases for roi_pool, roi_align and psroi_pool (issue 20)."""

import numpy as np

from tests.grad_lod_harness import LoDGradCase

R = np.random.default_rng(31)
X = (R.permutation(2 * 2 * 5 * 5) * 0.1).reshape(2, 2, 5, 5)
BOXES = np.array([[0, 0, 3, 2], [1, 1, 4, 4], [0.5, 1.2, 3.7, 3.9]])

CASES = [
    LoDGradCase("roi_pool", {"X": X, "ROIs": BOXES},
                {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0},
                lod={"ROIs": [[2, 1]]}, check=["X"], outputs=["Out"]),
    LoDGradCase("roi_align", {"X": R.uniform(-1, 1, (2, 2, 5, 5)), "ROIs": BOXES},
                {"pooled_height": 2, "pooled_width": 3, "spatial_scale": 1.0,
                 "sampling_ratio": 2}, lod={"ROIs": [[1, 2]]}, check=["X"]),
    LoDGradCase("psroi_pool", {"X": R.uniform(-1, 1, (2, 4, 5, 5)), "ROIs": BOXES},
                {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 1.0,
                 "output_channels": 1}, lod={"ROIs": [[2, 1]]}, check=["X"]),
]
