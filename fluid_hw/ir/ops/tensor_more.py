"""Tensor ops of Paddle 1.5 that fluid-hw lacked (issue 20): ``shape``, ``arg_min``,
``argsort``, ``reverse``, ``isfinite`` / ``isinf`` / ``isnan`` (one bool for the whole
tensor, as Paddle's), ``reduce_all`` / ``reduce_any``, ``one_hot``, ``gather``,
``scatter``, ``diag`` and ``multiplex``."""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op


def _axis_ok(ctx: InferContext, axis: int, rank: int) -> int:
    ctx.check(-rank <= axis < rank, f"axis {axis} out of range for rank {rank}")
    return axis % rank


@define_op("shape", ["Input"], ["Out"], doc="Out = the shape of Input (int32 [rank]).")
def _shape(ctx: InferContext) -> None:
    ctx.set_output("Out", [len(ctx.input_shape("Input"))], VarType.INT32)


@define_op("arg_min", ["X"], ["Out"], [Attr("axis", "int", 0)],
           doc="Out = the index of the smallest element along `axis` (int64; that axis "
               "removed).")
def _arg_min(ctx: InferContext) -> None:
    s = ctx.input_shape("X")
    ax = _axis_ok(ctx, ctx.attr("axis"), len(s))
    ctx.set_output("Out", s[:ax] + s[ax + 1:] or [1], VarType.INT64)


@define_op("argsort", ["X"], ["Out", "Indices"], [Attr("axis", "int", -1)],
           doc="Out = X sorted ascending along `axis`; Indices = where each came from.")
def _argsort(ctx: InferContext) -> None:
    s = ctx.input_shape("X")
    _axis_ok(ctx, ctx.attr("axis"), len(s))
    ctx.share("X", "Out")
    ctx.set_output("Indices", s, VarType.INT64)


@define_op("reverse", ["X"], ["Out"], [Attr("axis", "ints")],
           doc="Out = X with the order of its elements reversed along each of `axis`.")
def _reverse(ctx: InferContext) -> None:
    rank = len(ctx.input_shape("X"))
    for a in ctx.attr("axis"):
        _axis_ok(ctx, a, rank)
    ctx.share("X", "Out")


def _one_bool(ctx: InferContext) -> None:
    ctx.set_output("Out", [1], VarType.BOOL)


for _t, _what in (("isfinite", "every element is finite"), ("isinf", "some element is ±inf"),
                  ("isnan", "some element is NaN")):
    define_op(_t, ["X"], ["Out"], doc=f"Out = [{_what}] (bool [1]).")(_one_bool)


def _reduce_bool(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype == VarType.BOOL, f"X {x.name!r} must be bool, is {x.dtype_name}")
    s = list(x.shape)
    if ctx.attr("reduce_all"):
        out = [1] * len(s) if ctx.attr("keep_dim") else [1]
    else:
        dims = {_axis_ok(ctx, d, len(s)) for d in ctx.attr("dim")}
        out = [1 if i in dims else d for i, d in enumerate(s)] if ctx.attr("keep_dim") \
            else [d for i, d in enumerate(s) if i not in dims] or [1]
    ctx.set_output("Out", out, VarType.BOOL)


for _t in ("reduce_all", "reduce_any"):
    define_op(_t, ["X"], ["Out"],
              [Attr("dim", "ints", [0]), Attr("keep_dim", "bool", False),
               Attr("reduce_all", "bool", False)],
              doc=f"Logical {'and' if _t == 'reduce_all' else 'or'} over `dim` (every dim "
                  "with reduce_all).")(_reduce_bool)


@define_op("one_hot", ["X"], ["Out"], [Attr("depth", "int", min=1),
                                      Attr("dtype", "int", int(VarType.FP32))],
           doc="Out[..., k] = 1 where X[..., 0] == k (X: int ids [..., 1]).")
def _one_hot(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    s = list(x.shape)
    ctx.check(x.dtype in (VarType.INT32, VarType.INT64), f"X {x.name!r} must hold int ids")
    ctx.check(len(s) >= 1 and s[-1] == 1, f"X must be [..., 1] ids, got {s}")
    ctx.set_output("Out", [*s[:-1], ctx.attr("depth")], ctx.attr("dtype"),
                   lod_level=x.lod_level)


@define_op("gather", ["X", "Index"], ["Out"],
           doc="Out = the rows X[Index[i]] (Index: int [M] or [M, 1]).")
def _gather(ctx: InferContext) -> None:
    s, i = ctx.input_shape("X"), ctx.input_shape("Index")
    ctx.check(len(i) == 1 or (len(i) == 2 and i[1] == 1), f"Index must be [M] or [M, 1], "
              f"got {i}")
    ctx.check(ctx.input_dtype("Index") in (VarType.INT32, VarType.INT64), "Index must be int")
    ctx.set_output("Out", [i[0], *s[1:]], ctx.input_dtype("X"))


@define_op("scatter", ["X", "Ids", "Updates"], ["Out"], [Attr("overwrite", "bool", True)],
           doc="Out = X with rows Ids[i] replaced by Updates[i] (added to X's row when not "
               "overwrite).")
def _scatter(ctx: InferContext) -> None:
    s, u = ctx.input_shape("X"), ctx.input_shape("Updates")
    ctx.check(u[1:] == s[1:], f"Updates {u} must be rows of X {s}")
    ctx.check(ctx.input_dtype("Ids") in (VarType.INT32, VarType.INT64), "Ids must be int")
    ctx.share("X", "Out")


@define_op("diag", ["Diagonal"], ["Out"], doc="Out = the square matrix with Diagonal on its "
           "diagonal.")
def _diag(ctx: InferContext) -> None:
    s = ctx.input_shape("Diagonal")
    ctx.check(len(s) == 1, f"Diagonal must be 1-D, got {s}")
    ctx.set_output("Out", [s[0], s[0]], ctx.input_dtype("Diagonal"))


@define_op("multiplex", [Slot("X", duplicable=True), "Ids"], ["Out"],
           doc="Out[i] = X[Ids[i]][i]: row i from the candidate Ids[i].")
def _multiplex(ctx: InferContext) -> None:
    xs = ctx.input_vars("X")
    ctx.check(len(xs) >= 2, "needs at least two candidate inputs")
    ctx.check(all(list(x.shape) == list(xs[0].shape) for x in xs),
              f"the candidates must share one shape, got {[list(x.shape) for x in xs]}")
    ctx.set_output("Out", xs[0].shape, xs[0].dtype)


def _declare() -> None:
    from ..grad import define_default_grad, no_grad

    no_grad("metric", "shape", "arg_min", "isfinite", "isinf", "isnan")
    no_grad("integer", "reduce_all", "reduce_any", "one_hot")
    define_default_grad("argsort", uses=("Indices",), out_grads=["Out"], in_grads=["X"])
    define_default_grad("reverse", uses=(), in_grads=["X"])
    define_default_grad("gather", uses=("X", "Index"), in_grads=["X"])
    define_default_grad("scatter", uses=("Ids",), in_grads=["X", "Updates"])
    define_default_grad("diag", uses=(), in_grads=["Diagonal"])
    define_default_grad("multiplex", uses=("X", "Ids"), in_grads=["X"])


_declare()
