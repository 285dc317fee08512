"""Ops on a tensor's LoD and size (issue 20): ``lod_reset`` (the data with another
LoD) and ``is_empty`` (whether it has no elements)."""

from __future__ import annotations

import itertools

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op


@define_op("lod_reset", ["X", Slot("Y", dispensable=True)], ["Out"],
           [Attr("target_lod", "ints", [])],
           doc="Out = X's data with Y's LoD (Y has one), Y's values as level-0 offsets "
               "(Y has none), or the offsets target_lod.")
def _lod_reset(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    level = 1
    if ctx.has_input("Y"):
        y = ctx.input_var("Y")
        level = max(y.lod_level, 1)
    else:
        t = list(ctx.attr("target_lod"))
        ctx.check(bool(t), "needs Y or a non-empty target_lod (offsets: 0, ..., rows of X)")
        ctx.check(t[0] == 0 and all(a <= b for a, b in itertools.pairwise(t)),
                  f"target_lod {t} must be offsets: start at 0 and never decrease")
    ctx.set_output("Out", x.shape, x.dtype, lod_level=level)


@define_op("is_empty", ["X"], ["Out"], doc="Out = [X has no elements] (bool [1]).")
def _is_empty(ctx: InferContext) -> None:
    ctx.set_output("Out", [1], VarType.BOOL)


def _declare() -> None:
    from ..grad import define_default_grad, no_grad

    define_default_grad("lod_reset", uses=(), in_grads=["X"])
    no_grad("integer", "is_empty")


_declare()
