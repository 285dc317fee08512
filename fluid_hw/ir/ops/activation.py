"""Element-wise activations: Out has X's shape and dtype."""

from __future__ import annotations

from ..registry import Attr, InferContext, define_op


def _same(ctx: InferContext) -> None:
    ctx.share("X", "Out")


UNARY = {
    "relu": (), "sigmoid": (), "tanh": (), "exp": (), "log": (), "sqrt": (), "abs": (),
    "leaky_relu": (Attr("alpha", "float", 0.02),),
}

for _name, _attrs in UNARY.items():
    define_op(_name, ["X"], ["Out"], _attrs)(_same)


@define_op("softmax", ["X"], ["Out"], [Attr("axis", "int", -1)],
           doc="Out = exp(X) / sum(exp(X)) along `axis` (numerically stable).")
def _softmax(ctx: InferContext) -> None:
    rank = len(ctx.input_shape("X"))
    ax = ctx.attr("axis")
    ctx.check(-rank <= ax < rank, f"axis {ax} out of range for rank {rank}")
    ctx.share("X", "Out")
