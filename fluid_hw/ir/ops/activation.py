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


ROUNDING = ("floor", "ceil", "round", "sign")  # piecewise constant: zero gradient
for _name in ("cos", "sin", "square", "reciprocal", *ROUNDING):
    define_op(_name, ["X"], ["Out"])(_same)


def _declare_categories() -> None:
    from ..registry import mark_category

    mark_category("elementwise", *(t for t in UNARY if t != "softmax"), "cos", "sin",
                  "square", "reciprocal", *ROUNDING)


_declare_categories()


def _declare_grads() -> None:
    from ..grad import define_default_grad

    uses_out = ("relu", "sigmoid", "tanh", "exp", "sqrt", "reciprocal")
    uses_x = ("log", "abs", "leaky_relu", "cos", "sin", "square", *ROUNDING)
    for t in uses_out:
        define_default_grad(t, uses=("Out",))
    for t in uses_x:
        define_default_grad(t, uses=("X",))
    define_default_grad("softmax", uses=("Out",))


_declare_grads()
