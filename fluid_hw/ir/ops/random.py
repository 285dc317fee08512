"""Constant and random tensor creation (used by initializers in the startup program)."""

from __future__ import annotations

from ..registry import Attr, InferContext, define_op

_SHAPE_DTYPE = (Attr("shape", "longs", doc="output shape", min=0),
                Attr("dtype", "int", 5, doc="VarType"))


def _from_attrs(ctx: InferContext) -> None:
    ctx.check(all(d >= 0 for d in ctx.attr("shape")),
              f"shape attribute {ctx.attr('shape')} must be non-negative")
    ctx.set_output("Out", ctx.attr("shape"), ctx.attr("dtype"))


define_op("fill_constant", [], ["Out"], [*_SHAPE_DTYPE, Attr("value", "float", 0.0)],
          doc="Out = a tensor of `shape` filled with `value`.")(_from_attrs)
define_op(
    "uniform_random", [], ["Out"],
    [*_SHAPE_DTYPE, Attr("min", "float", -1.0), Attr("max", "float", 1.0),
     Attr("seed", "int", 0, doc="0: from the executor's generator; else deterministic")],
    doc="Out ~ U[min, max).",
)(_from_attrs)
define_op(
    "gaussian_random", [], ["Out"],
    [*_SHAPE_DTYPE, Attr("mean", "float", 0.0), Attr("std", "float", 1.0),
     Attr("seed", "int", 0, doc="0: from the executor's generator; else deterministic")],
    doc="Out ~ N(mean, std^2).",
)(_from_attrs)


def _declare_grads() -> None:
    from ..grad import no_grad

    no_grad("creation", "fill_constant", "uniform_random", "gaussian_random")


_declare_grads()
