"""Ops that ONNX models need and no composition of other fluid ops expresses exactly,
named and defined as in Paddle 1.5: ``erf``, ``hard_sigmoid``, ``hard_swish``,
``where``, ``expand`` (tiling), ``cumsum``, ``reduce_min``, ``reduce_prod``,
``elementwise_mod`` and ``elementwise_fmod`` (Paddle 2's remainder and fmod),
``cumprod`` (Paddle 2's, with cumsum's exclusive and reverse) and ``tan``, ``sinh``,
``cosh``, ``asin``, ``acos``, ``atan``, ``asinh``, ``acosh``, ``atanh``."""

from __future__ import annotations

import math

from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .elementwise import _infer as _infer_elementwise
from .math import _reduce


def _same(ctx: InferContext) -> None:
    ctx.share("X", "Out")


define_op("erf", ["X"], ["Out"], doc="Out = erf(X), the Gauss error function.")(_same)
#: trigonometric and hyperbolic functions and their inverses (Paddle's names; asin, acos
#: and atan are also Paddle 1.5 activations, whose layers use these ops)
TRIG = {"tan": "tan(X)", "sinh": "sinh(X)", "cosh": "cosh(X)", "asin": "arcsin(X), X in [-1, 1]",
        "acos": "arccos(X), X in [-1, 1]", "atan": "arctan(X)", "asinh": "arsinh(X)",
        "acosh": "arcosh(X), X >= 1", "atanh": "artanh(X), X in (-1, 1)"}
for _name, _what in TRIG.items():
    define_op(_name, ["X"], ["Out"], doc=f"Out = {_what}, element-wise (NaN outside the "
              "domain).")(_same)
define_op("hard_sigmoid", ["X"], ["Out"],
          [Attr("slope", "float", 0.2), Attr("offset", "float", 0.5)],
          doc="Out = min(max(slope * X + offset, 0), 1).")(_same)
define_op("hard_swish", ["X"], ["Out"],
          [Attr("threshold", "float", 6.0, min=0), Attr("scale", "float", 6.0, min=0),
           Attr("offset", "float", 3.0)],
          doc="Out = X * min(max(X + offset, 0), threshold) / scale.")(_same)


def broadcast_shapes(a: list[int], b: list[int]) -> list[int] | None:
    """numpy's broadcast of two shapes (-1: unknown), or None when they do not broadcast."""
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x < 0 or y < 0:
            out.append(max(x, y) if min(x, y) < 0 and max(x, y) > 1 else -1)
        else:
            return None
    return out


@define_op("where", [Slot("Condition", doc="bool"), Slot("X"), Slot("Y")], [Slot("Out")],
           doc="Out = X where Condition else Y, the three broadcast together (numpy's rule).")
def _infer_where(ctx: InferContext) -> None:
    c, x, y = (ctx.input_shape(s) for s in ("Condition", "X", "Y"))
    ctx.check(ctx.input_dtype("Condition") == dtypes.VarType.BOOL,
              "Condition must be a bool tensor")
    ctx.check(ctx.input_dtype("X") == ctx.input_dtype("Y"),
              "X and Y must have the same dtype")
    out = broadcast_shapes(x, y)
    out = broadcast_shapes(out, c) if out is not None else None
    ctx.check(out is not None, f"shapes {c}, {x} and {y} do not broadcast together")
    ctx.set_output("Out", out, ctx.input_dtype("X"))


@define_op("expand", ["X"], ["Out"],
           [Attr("expand_times", "ints", [], doc="repeats per dim (rank of X values)")],
           doc="Out = X tiled expand_times[i] times along dim i (Paddle 1.5 expand, numpy's "
               "tile).")
def _infer_expand(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    t = list(ctx.attr("expand_times"))
    ctx.check(len(t) == len(xs), f"expand_times {t} needs one value per dim of X {xs}")
    ctx.check(all(v >= 0 for v in t), f"expand_times {t} must be >= 0")
    ctx.set_output("Out", [d * k if d >= 0 else -1 for d, k in zip(xs, t)],
                   ctx.input_dtype("X"))


@define_op("cumsum", ["X"], ["Out"],
           [Attr("axis", "int", -1), Attr("exclusive", "bool", False),
            Attr("reverse", "bool", False), Attr("flatten", "bool", False)],
           doc="Cumulative sum along axis (flatten: over X flattened); exclusive leaves "
               "out each element itself, reverse sums from the end.")
def _infer_cumsum(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    if ctx.attr("flatten"):
        n = -1 if any(d < 0 for d in xs) else math.prod(xs)
        ctx.set_output("Out", [n], ctx.input_dtype("X"))
        return
    ax = ctx.attr("axis")
    ctx.check(-len(xs) <= ax < len(xs), f"axis {ax} out of range for rank {len(xs)}")
    ctx.share("X", "Out")


for _name, _what in (("reduce_min", "minimum"), ("reduce_prod", "product")):
    define_op(
        _name, ["X"], ["Out"],
        [Attr("dim", "ints", [0], doc="axes to reduce; negative counts from the end"),
         Attr("keep_dim", "bool", False, doc="keep reduced axes as size 1"),
         Attr("reduce_all", "bool", False, doc="reduce every axis (ignores dim)")],
        doc=f"Out = {_what} of X over the axes in `dim` (all of them with reduce_all); "
            "over an empty axis the identity (min: +inf, or the type's largest value; "
            "prod: 1).",
    )(_reduce)


@define_op("cumprod", ["X"], ["Out"],
           [Attr("axis", "int", -1), Attr("exclusive", "bool", False),
            Attr("reverse", "bool", False)],
           doc="Cumulative product along axis; exclusive leaves out each element itself "
               "(the first product is 1), reverse multiplies from the end.")
def _infer_cumprod(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ax = ctx.attr("axis")
    ctx.check(-len(xs) <= ax < len(xs), f"axis {ax} out of range for rank {len(xs)}")
    ctx.share("X", "Out")


for _name, _what in (("mod", "X mod Y with the divisor's sign (Python's %, numpy's mod)"),
                     ("fmod", "X mod Y with the dividend's sign (C's fmod, numpy's fmod)")):
    define_op(
        f"elementwise_{_name}", ["X", "Y"], ["Out"],
        [Attr("axis", "int", -1, doc="where Y's dims start in X's; -1 aligns to the right")],
        doc=f"Out = {_what}, Y broadcast into X from dim `axis`; integers and floats (an "
            "integer Y of 0 gives 0).",
    )(_infer_elementwise)


def _declare() -> None:
    from ..grad import define_default_grad
    from ..registry import mark_category

    for t in ("erf", "hard_sigmoid", "hard_swish", *TRIG):
        define_default_grad(t, uses=("X",))
    mark_category("elementwise", "erf", "hard_sigmoid", "hard_swish", *TRIG)
    define_default_grad("where", uses=("Condition", "X", "Y"), in_grads=("X", "Y"))
    define_default_grad("expand", uses=("X",))
    define_default_grad("cumsum", uses=("X",))
    define_default_grad("cumprod", uses=("X",))
    # reduce_min routes Out@GRAD to every element equal to the minimum (as reduce_max)
    define_default_grad("reduce_min", uses=("X", "Out"))
    define_default_grad("reduce_prod", uses=("X", "Out"))
    # dX = dOut, dY = -q * dOut with q the (floored / truncated) quotient
    define_default_grad("elementwise_mod", uses=("X", "Y"))
    define_default_grad("elementwise_fmod", uses=("X", "Y"))


_declare()
