"""Gradient-check cases for the math (mul, matmul, scale, sum, mean, reduce_*) and
tensor-manipulation ops."""

import numpy as np

from fluid_hw.ir.dtypes import VarType
from tests.grad_harness import GradCase

R = np.random.default_rng(11)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


CASES = [
    # -- mul ------------------------------------------------------------------
    GradCase("mul", {"X": f64(3, 4), "Y": f64(4, 5)}, id="mul-2d"),
    GradCase("mul", {"X": f64(2, 3, 4), "Y": f64(4, 3)}, {"x_num_col_dims": 2},
             id="mul-x_num_col_dims2"),
    GradCase("mul", {"X": f64(3, 2, 2), "Y": f64(2, 2, 3)},
             {"x_num_col_dims": 1, "y_num_col_dims": 2}, id="mul-y_num_col_dims2"),
    # -- sum / mean -------------------------------------------------------------
    GradCase("sum", {"X": f64(3, 4)}, id="sum-1"),
    GradCase("sum", {"X": [f64(3, 4), f64(3, 4), f64(3, 4)]}, id="sum-3"),
    GradCase("mean", {"X": f64(3, 5)}),
    # -- reduce_sum ------------------------------------------------------------------
    GradCase("reduce_sum", {"X": f64(2, 3, 4)}, {"dim": [1]}, id="reduce_sum-axis1"),
    GradCase("reduce_sum", {"X": f64(2, 3, 4)}, {"dim": [0, -1], "keep_dim": True},
             id="reduce_sum-two-keep"),
    GradCase("reduce_sum", {"X": f64(2, 3, 4)}, {"reduce_all": True}, id="reduce_sum-all"),
    # -- reduce_mean / reduce_max (random data: no ties) -------------------------------
    GradCase("reduce_mean", {"X": f64(2, 3, 4)}, {"dim": [-1]}, id="reduce_mean-last"),
    GradCase("reduce_mean", {"X": f64(2, 3, 4)}, {"dim": [0, 2]}, id="reduce_mean-two"),
    GradCase("reduce_mean", {"X": f64(2, 3, 4)}, {"dim": [1], "keep_dim": True},
             id="reduce_mean-keep"),
    GradCase("reduce_mean", {"X": f64(2, 3, 4)}, {"reduce_all": True, "keep_dim": True},
             id="reduce_mean-all-keep"),
    GradCase("reduce_max", {"X": f64(2, 3, 4)}, {"dim": [1]}, id="reduce_max-axis1"),
    GradCase("reduce_max", {"X": f64(2, 3, 4)}, {"dim": [0, -1], "keep_dim": True},
             id="reduce_max-two-keep"),
    GradCase("reduce_max", {"X": f64(2, 3, 4)}, {"reduce_all": True}, id="reduce_max-all"),
    # -- scale -------------------------------------------------------------------------
    GradCase("scale", {"X": f64(3, 4)}, {"scale": 2.5, "bias": 0.7}, id="scale-bias-after"),
    GradCase("scale", {"X": f64(3, 4)}, {"scale": -1.5, "bias": 0.7, "bias_after_scale": False},
             id="scale-bias-before"),
    # -- matmul --------------------------------------------------------------------------
    GradCase("matmul", {"X": f64(3, 4), "Y": f64(4, 2)}, id="matmul-2d"),
    GradCase("matmul", {"X": f64(4, 3), "Y": f64(4, 2)}, {"transpose_X": True},
             id="matmul-tx"),
    GradCase("matmul", {"X": f64(3, 4), "Y": f64(2, 4)}, {"transpose_Y": True},
             id="matmul-ty"),
    GradCase("matmul", {"X": f64(4, 3), "Y": f64(2, 4)},
             {"transpose_X": True, "transpose_Y": True, "alpha": 0.5}, id="matmul-txty-alpha"),
    GradCase("matmul", {"X": f64(4), "Y": f64(4, 3)}, id="matmul-x1d"),
    GradCase("matmul", {"X": f64(3, 4), "Y": f64(4)}, id="matmul-y1d"),
    GradCase("matmul", {"X": f64(4), "Y": f64(4)}, id="matmul-both1d"),
    GradCase("matmul", {"X": f64(2, 3, 4), "Y": f64(2, 4, 2)}, id="matmul-batched"),
    GradCase("matmul", {"X": f64(2, 3, 4), "Y": f64(4, 2)}, id="matmul-batched-x"),
    GradCase("matmul", {"X": f64(3, 4), "Y": f64(2, 2, 4)}, {"transpose_Y": True},
             id="matmul-batched-y-ty"),
    GradCase("matmul", {"X": f64(2, 2, 4, 3), "Y": f64(2, 2, 4, 2)},
             {"transpose_X": True, "alpha": 2.0}, id="matmul-4d-tx"),
    GradCase("matmul", {"X": f64(2, 3, 4), "Y": f64(4)}, id="matmul-batched-y1d"),
    GradCase("matmul", {"X": f64(4), "Y": f64(2, 4, 3)}, id="matmul-x1d-batched"),
    # -- cast / assign ------------------------------------------------------------------
    # float32 -> float64: X's values and X +- eps are exact in float32 (multiples of 2**-10),
    # so the central differences are exact too
    GradCase("cast", {"X": (R.integers(-256, 256, size=(3, 4)) / 256).astype(np.float32)},
             {"in_dtype": int(VarType.FP32), "out_dtype": int(VarType.FP64)}, eps=2.0**-10,
             id="cast-fp32-fp64"),
    GradCase("cast", {"X": f64(3, 4)},
             {"in_dtype": int(VarType.FP64), "out_dtype": int(VarType.FP64)}, id="cast-fp64"),
    GradCase("assign", {"X": f64(3, 4)}),
    # -- reshape2 / transpose2 / squeeze2 / unsqueeze2 / flatten2 ---------------------------
    GradCase("reshape2", {"X": f64(2, 3, 4)}, {"shape": [0, -1]}, id="reshape2-0-minus1"),
    GradCase("reshape2", {"X": f64(2, 3, 4)}, {"shape": [4, -1, 2]}, id="reshape2-minus1"),
    GradCase("transpose2", {"X": f64(2, 3, 4)}, {"axis": [2, 0, 1]}),
    GradCase("squeeze2", {"X": f64(3, 1, 4)}, {"axes": [1]}, id="squeeze2-axis"),
    GradCase("squeeze2", {"X": f64(1, 3, 1, 2)}, {"axes": []}, id="squeeze2-all"),
    GradCase("unsqueeze2", {"X": f64(3, 4)}, {"axes": [0, -1]}),
    GradCase("flatten2", {"X": f64(2, 3, 2)}, {"axis": 2}, id="flatten2-axis2"),
    GradCase("flatten2", {"X": f64(2, 3)}, {"axis": 0}, id="flatten2-axis0"),
    # -- concat / split ------------------------------------------------------------------
    GradCase("concat", {"X": [f64(2, 3), f64(2, 1), f64(2, 4)]}, {"axis": -1},
             id="concat-3-neg-axis"),
    GradCase("concat", {"X": [f64(1, 3), f64(2, 3)]}, {"axis": 0}, id="concat-axis0"),
    GradCase("split", {"X": f64(2, 6, 2)}, {"num": 3, "axis": 1},
             output_counts={"Out": 3}, id="split-num"),
    GradCase("split", {"X": f64(2, 3, 5)}, {"sections": [2, -1, 1], "axis": -1},
             output_counts={"Out": 3}, id="split-sections"),
    # -- slice -----------------------------------------------------------------------------
    GradCase("slice", {"Input": f64(3, 4, 5)},
             {"axes": [0, 2], "starts": [-2, 1], "ends": [10, -1]}, id="slice-neg"),
    GradCase("slice", {"Input": f64(3, 4, 2)},
             {"axes": [1], "starts": [2], "ends": [3], "decrease_axis": [1]},
             id="slice-decrease"),
]
