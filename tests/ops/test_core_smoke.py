"""Smoke test of the harness itself on mul (full op tests live beside it)."""

import numpy as np

from tests.op_harness import run_op


def test_mul_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype("float32")
    y = rng.standard_normal((20, 6)).astype("float32")
    out = run_op("mul", {"X": x, "Y": y}, {"x_num_col_dims": 1})["Out"]
    np.testing.assert_allclose(out, x.reshape(3, 20) @ y, rtol=1e-5)
