"""elementwise_{add,sub,mul,div,max,min,pow} with Fluid's ``axis`` broadcasting."""

from __future__ import annotations

from ...errors import ShapeError
from ..registry import Attr, InferContext, define_op
from .common import elementwise_shape

ELEMENTWISE_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")


def _infer(ctx: InferContext) -> None:
    xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
    ctx.check(ctx.input_dtype("X") == ctx.input_dtype("Y"),
              f"X and Y must have the same dtype, got {ctx.input_var('X').dtype_name} "
              f"and {ctx.input_var('Y').dtype_name}")
    try:
        out = elementwise_shape(xs, ys, ctx.attr("axis"))
    except ShapeError as e:
        ctx.fail(str(e))
    big = "X" if len(xs) >= len(ys) else "Y"
    ctx.set_output("Out", out, ctx.input_dtype("X"), lod_level=ctx.input_var(big).lod_level)


for _name in ELEMENTWISE_OPS:
    define_op(
        f"elementwise_{_name}", ["X", "Y"], ["Out"],
        [Attr("axis", "int", -1, doc="where Y's dims start in X's; -1 aligns to the right")],
        doc=f"Out = X {_name} Y, Y broadcast into X from dim `axis`.",
    )(_infer)


def _declare_grads() -> None:
    from ..grad import define_default_grad

    for name in ELEMENTWISE_OPS:
        uses = ("X", "Y", "Out") if name in ("div", "pow") else ("X", "Y")
        define_default_grad(f"elementwise_{name}", uses=uses)


_declare_grads()
