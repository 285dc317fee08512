"""Ops that only the backward pass emits."""

from __future__ import annotations

from ..grad import no_grad
from ..registry import InferContext, define_op


@define_op("fill_zeros_like", ["X"], ["Out"],
           doc="Out = zeros with X's shape and dtype (the gradient of an unused output).")
def _fill_zeros_like(ctx: InferContext) -> None:
    ctx.share("X", "Out")


no_grad("backward", "fill_zeros_like")
