"""Comparisons, logical ops and ``increment``.

``less_than`` ... ``not_equal`` compare X and Y element-wise with Fluid's
``axis`` broadcasting (as ``elementwise_*``) and give a bool Out; the logical
ops take and give bool tensors; ``increment`` adds ``step`` to a one-element X.
None of them has a gradient.
"""

from __future__ import annotations

import math

from ...errors import ShapeError
from .. import dtypes
from ..grad import no_grad
from ..registry import Attr, InferContext, define_op
from .common import elementwise_shape

COMPARE_OPS = ("less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal")
LOGICAL_BINARY_OPS = ("logical_and", "logical_or", "logical_xor")

_BOOL = dtypes.VarType.BOOL


def _broadcast_out(ctx: InferContext) -> None:
    xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
    try:
        out = elementwise_shape(xs, ys, ctx.attr("axis") if ctx.op.has_attr("axis") else -1)
    except ShapeError as e:
        ctx.fail(str(e))
    big = "X" if len(xs) >= len(ys) else "Y"
    ctx.set_output("Out", out, _BOOL, lod_level=ctx.input_var(big).lod_level)


def _compare(ctx: InferContext) -> None:
    ctx.check(ctx.input_dtype("X") == ctx.input_dtype("Y"),
              f"X and Y must have the same dtype, got {ctx.input_var('X').dtype_name} "
              f"and {ctx.input_var('Y').dtype_name}")
    _broadcast_out(ctx)


for _name in COMPARE_OPS:
    define_op(
        _name, ["X", "Y"], ["Out"],
        [Attr("axis", "int", -1, doc="where Y's dims start in X's; -1 aligns to the right"),
         Attr("force_cpu", "bool", False, doc="accepted for Fluid programs; unused")],
        doc=f"Out = X {_name} Y element-wise (bool), Y broadcast into X from dim `axis`.",
    )(_compare)


def _check_bool(ctx: InferContext, slot: str) -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype == _BOOL, f"{slot} {v.name!r} must be bool, got {v.dtype_name}")


def _logical_binary(ctx: InferContext) -> None:
    _check_bool(ctx, "X")
    _check_bool(ctx, "Y")
    _broadcast_out(ctx)


for _name in LOGICAL_BINARY_OPS:
    define_op(
        _name, ["X", "Y"], ["Out"],
        doc=f"Out = X {_name[8:]} Y element-wise on bool tensors (numpy broadcasting, "
        "aligned to the right).",
    )(_logical_binary)


@define_op("logical_not", ["X"], ["Out"], doc="Out = not X element-wise (bool).")
def _logical_not(ctx: InferContext) -> None:
    _check_bool(ctx, "X")
    ctx.share("X", "Out")


@define_op(
    "increment", ["X"], ["Out"], [Attr("step", "float", 1.0)],
    doc="Out = X + step for a one-element X (step cast to X's dtype); Out is usually X.",
)
def _increment(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(math.prod(x.shape) in (1, -1),
              f"X {x.name!r} must hold one element, has shape {list(x.shape)}")
    ctx.share("X", "Out")


no_grad("integer", *COMPARE_OPS, *LOGICAL_BINARY_OPS, "logical_not", "increment")
