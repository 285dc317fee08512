"""Matrix products."""

from __future__ import annotations

from ..registry import Attr, InferContext, define_op
from .common import flatten_to_2d, merge_dim


@define_op(
    "mul", ["X", "Y"], ["Out"],
    [Attr("x_num_col_dims", "int", 1), Attr("y_num_col_dims", "int", 1)],
    doc="Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims); "
    "Out's shape is X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:].",
)
def _mul(ctx: InferContext) -> None:
    xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
    xk, yk = ctx.attr("x_num_col_dims"), ctx.attr("y_num_col_dims")
    ctx.check(0 < xk < len(xs) or (xk == 1 and len(xs) == 1),
              f"x_num_col_dims={xk} must be in 1..{len(xs) - 1} for X of rank {len(xs)}")
    ctx.check(0 < yk < len(ys), f"y_num_col_dims={yk} must be in 1..{len(ys) - 1} "
              f"for Y of rank {len(ys)}")
    _, xc = flatten_to_2d(xs, xk)
    yr, _ = flatten_to_2d(ys, yk)
    ctx.check(merge_dim(xc, yr) is not None,
              f"X flattened to {xs[:xk]}x{xc} columns does not match Y flattened to {yr} rows "
              f"(X {xs}, Y {ys})")
    ctx.set_output("Out", xs[:xk] + ys[yk:], ctx.input_dtype("X"),
                   lod_level=ctx.input_var("X").lod_level)
