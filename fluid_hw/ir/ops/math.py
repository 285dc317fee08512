"""Matrix products, scaling, sums and reductions.

The pure shape functions here (:func:`matmul_shape`, :func:`reduce_axes`,
:func:`reduce_shape`) are shared by the op definitions and the kernels, so
inference and execution can not disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...errors import ShapeError
from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import flatten_to_2d, merge_dim


@define_op(
    "mul", ["X", "Y"], ["Out"],
    [Attr("x_num_col_dims", "int", 1, min=1), Attr("y_num_col_dims", "int", 1, min=1)],
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


def _same_dtype(ctx: InferContext, a: str = "X", b: str = "Y") -> None:
    ctx.check(ctx.input_dtype(a) == ctx.input_dtype(b),
              f"{a} and {b} must have the same dtype, got {ctx.input_var(a).dtype_name} "
              f"and {ctx.input_var(b).dtype_name}")


# -- matmul ------------------------------------------------------------------

def _known_prod(dims: Sequence[int]) -> int | None:
    return None if any(d < 0 for d in dims) else math.prod(dims)


def matmul_shape(x: Sequence[int], y: Sequence[int], transpose_x: bool,
                 transpose_y: bool) -> list[int]:
    """Out's shape for Fluid 1.x ``matmul``; raises :class:`ShapeError`.

    A 1-D X is a row vector [1, K], a 1-D Y a column vector [K, 1] (before any
    transpose); the 1 they add is dropped from Out again.  Dims before the last
    two are batch dims: both operands batched need the same batch size (Fluid
    compares the flattened sizes and Out takes X's batch dims); an unbatched
    operand is used for every batch.  Two vectors give Out of shape [1].
    """
    if not x or not y:
        raise ShapeError(f"X {list(x)} and Y {list(y)} must both have rank >= 1")
    xm = [1, *x] if len(x) == 1 else list(x)
    ym = [*y, 1] if len(y) == 1 else list(y)
    xh, xw = (xm[-1], xm[-2]) if transpose_x else (xm[-2], xm[-1])
    yh, yw = (ym[-1], ym[-2]) if transpose_y else (ym[-2], ym[-1])
    if merge_dim(xw, yh) is None:
        raise ShapeError(f"X {list(x)}{' transposed' if transpose_x else ''} has {xw} columns "
                         f"but Y {list(y)}{' transposed' if transpose_y else ''} has {yh} rows")
    xb, yb = xm[:-2], ym[:-2]
    if xb and yb:
        px, py = _known_prod(xb), _known_prod(yb)
        if px is not None and py is not None and px != py:
            raise ShapeError(f"batch dims {xb} of X and {yb} of Y hold {px} and {py} "
                             "matrices; they must hold the same number (or one operand "
                             "must have rank <= 2)")
    out = [*(xb or yb), xh, yw]
    if len(x) == 1 and out[-2] == 1:
        del out[-2]
    if len(y) == 1 and out[-1] == 1:
        del out[-1]
    return out or [1]


@define_op(
    "matmul", ["X", "Y"], ["Out"],
    [Attr("transpose_X", "bool", False, doc="use X's last two dims transposed"),
     Attr("transpose_Y", "bool", False, doc="use Y's last two dims transposed"),
     Attr("alpha", "float", 1.0, doc="Out is multiplied by alpha")],
    doc="Out = alpha * op(X) @ op(Y), batched over leading dims (see matmul_shape).",
)
def _matmul(ctx: InferContext) -> None:
    _same_dtype(ctx)
    try:
        out = matmul_shape(ctx.input_shape("X"), ctx.input_shape("Y"),
                           ctx.attr("transpose_X"), ctx.attr("transpose_Y"))
    except ShapeError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", out, ctx.input_dtype("X"))


# -- scale / sum / mean ---------------------------------------------------------

@define_op(
    "scale", ["X"], ["Out"],
    [Attr("scale", "float", 1.0), Attr("bias", "float", 0.0),
     Attr("bias_after_scale", "bool", True,
          doc="True: Out = scale * X + bias; False: Out = scale * (X + bias)")],
    doc="Out = scale * X + bias (or scale * (X + bias)); scale and bias are cast to X's "
    "dtype first, as Fluid does.",
)
def _scale(ctx: InferContext) -> None:
    ctx.share("X", "Out")


@define_op("sum", [Slot("X", duplicable=True)], ["Out"],
           doc="Out = X[0] + X[1] + ...; every X has the same shape and dtype.")
def _sum(ctx: InferContext) -> None:
    vs = ctx.input_vars("X")
    ctx.check(len(vs) >= 1, "needs at least one input in X")
    shape = list(vs[0].shape)
    for i, v in enumerate(vs[1:], 1):
        ctx.check(v.dtype == vs[0].dtype, f"X[{i}] {v.name!r} is {v.dtype_name}, "
                  f"X[0] {vs[0].name!r} is {vs[0].dtype_name}; all inputs need one dtype")
        merged = [merge_dim(a, b) for a, b in zip(shape, v.shape)]
        ctx.check(len(v.shape) == len(shape) and None not in merged,
                  f"X[{i}] {v.name!r} has shape {list(v.shape)}, X[0] {vs[0].name!r} has "
                  f"{list(vs[0].shape)}; all inputs need the same shape")
        shape = merged  # type: ignore[assignment]
    ctx.set_output("Out", shape, vs[0].dtype, lod_level=vs[0].lod_level)


@define_op("mean", ["X"], ["Out"], doc="Out = the mean of all elements of X, shape [1].")
def _mean(ctx: InferContext) -> None:
    ctx.check(dtypes.is_float(ctx.input_dtype("X")),
              f"X must be a float tensor, got {ctx.input_var('X').dtype_name}")
    ctx.set_output("Out", [1], ctx.input_dtype("X"))


# -- reductions ------------------------------------------------------------------

def reduce_axes(rank: int, dim: Sequence[int], reduce_all: bool) -> tuple[int, ...]:
    """The sorted, non-negative axes a ``reduce_*`` op reduces; raises :class:`ShapeError`.

    ``reduce_all``, an empty ``dim`` or a ``dim`` naming every axis reduce them all.
    Repeated axes count once (Fluid accepts them).
    """
    if reduce_all or not dim:
        return tuple(range(rank))
    for d in dim:
        if not -rank <= d < rank:
            raise ShapeError(f"dim {list(dim)}: {d} is out of range for X of rank {rank} "
                             f"(valid: {-rank}..{rank - 1})")
    return tuple(sorted({d % rank for d in dim}))


def reduce_shape(shape: Sequence[int], axes: Sequence[int], keep_dim: bool) -> list[int]:
    """Out's shape: reduced axes become 1 (keep_dim) or go; reducing all without
    keep_dim gives [1], as in Fluid."""
    if keep_dim:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    out = [d for i, d in enumerate(shape) if i not in axes]
    return out or [1]


def _reduce(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) >= 1, "X must have rank >= 1")
    try:
        axes = reduce_axes(len(xs), ctx.attr("dim"), ctx.attr("reduce_all"))
    except ShapeError as e:
        ctx.fail(str(e))
    keep_lod = len(axes) < len(xs) and 0 not in axes  # Fluid keeps LoD unless dim 0 goes
    ctx.set_output("Out", reduce_shape(xs, axes, ctx.attr("keep_dim")), ctx.input_dtype("X"),
                   lod_level=ctx.input_var("X").lod_level if keep_lod else 0)


REDUCE_OPS = ("reduce_sum", "reduce_mean", "reduce_max")

for _name in REDUCE_OPS:
    define_op(
        _name, ["X"], ["Out"],
        [Attr("dim", "ints", [0], doc="axes to reduce; negative counts from the end"),
         Attr("keep_dim", "bool", False, doc="keep reduced axes as size 1"),
         Attr("reduce_all", "bool", False, doc="reduce every axis (ignores dim)")],
        doc=f"Out = {_name[7:]} of X over the axes in `dim` (all of them with reduce_all).",
    )(_reduce)


# -- gradients ---------------------------------------------------------------------

def _declare_grads() -> None:
    from ..grad import define_default_grad

    define_default_grad("mul", uses=("X", "Y"))
    define_default_grad("sum", uses=())  # every X@GRAD is Out@GRAD
    define_default_grad("mean", uses=("X",))  # X for its shape
    define_default_grad("reduce_sum", uses=("X",))  # X for its shape
    define_default_grad("reduce_mean", uses=("X",))
    # reduce_max routes Out@GRAD to every element equal to the maximum (as Fluid)
    define_default_grad("reduce_max", uses=("X", "Out"))
    define_default_grad("matmul", uses=("X", "Y"))
    define_default_grad("scale", uses=())  # X@GRAD = scale * Out@GRAD, bias either way


_declare_grads()


def _declare_scale_category() -> None:
    from ..registry import mark_category

    mark_category("elementwise", "scale")
    mark_category("layer", "mul")


_declare_scale_category()
