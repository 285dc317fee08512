"""Tensor manipulation: cast, assign, reshape, transpose, concat, split, slice,
squeeze, unsqueeze, flatten.

The ``*2`` ops have Fluid's intermediate ``XShape`` output: a variable of dims
``[0, *X.dims]`` that only records X's shape for the backward pass.

The pure shape functions here are shared by the op definitions and the kernels
(which call them with the run-time shapes), so the two can not disagree.  They
raise :class:`ShapeError`; the infer functions add the op's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...errors import ShapeError
from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim

_DTYPE_ENUMS = tuple(sorted(dtypes.TENSOR_DTYPES))
_XSHAPE = Slot("XShape", intermediate=True, doc="dims [0, *X.dims]: X's shape for backward")


def _prod(dims: Sequence[int]) -> int:
    """Product of dims; -1 when any is unknown."""
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank} "
                         f"(valid: {-rank}..{rank - 1})")
    return axis % rank


def _set_xshape(ctx: InferContext) -> None:
    ctx.set_output("XShape", [0, *ctx.input_shape("X")], ctx.input_dtype("X"))


def _shape_op(fn: Callable[[list[int], InferContext], list[int]],
              xshape: bool = True) -> Callable[[InferContext], None]:
    """An infer function: Out = fn(X's shape), same dtype (and XShape)."""

    def infer(ctx: InferContext) -> None:
        try:
            out = fn(ctx.input_shape("X"), ctx)
        except ShapeError as e:
            ctx.fail(str(e))
        ctx.set_output("Out", out, ctx.input_dtype("X"))
        if xshape:
            _set_xshape(ctx)

    return infer


# -- cast / assign -------------------------------------------------------------

@define_op(
    "cast", ["X"], ["Out"],
    [Attr("in_dtype", "int", allowed=_DTYPE_ENUMS, doc="X's VarType (checked)"),
     Attr("out_dtype", "int", allowed=_DTYPE_ENUMS, doc="Out's VarType")],
    doc="Out = X converted to out_dtype (floats to ints truncate toward zero).",
)
def _cast(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype == ctx.attr("in_dtype"),
              f"in_dtype is {dtypes.name(ctx.attr('in_dtype'))} but X {x.name!r} is "
              f"{x.dtype_name}")
    ctx.set_output("Out", x.shape, ctx.attr("out_dtype"), lod_level=x.lod_level)


@define_op("assign", ["X"], ["Out"], doc="Out = a copy of X.")
def _assign(ctx: InferContext) -> None:
    ctx.share("X", "Out")


#: dtypes ``assign_value`` can hold, with the attribute holding the values
ASSIGN_VALUE_ATTRS = {int(dtypes.VarType.FP32): "fp32_values",
                      int(dtypes.VarType.INT32): "int32_values"}


@define_op(
    "assign_value", [], ["Out"],
    [Attr("shape", "ints", min=0), Attr("dtype", "int", allowed=tuple(ASSIGN_VALUE_ATTRS)),
     Attr("fp32_values", "floats", []), Attr("int32_values", "ints", [])],
    doc="Out = a constant tensor of `shape` whose values are stored in the attributes.",
)
def _assign_value(ctx: InferContext) -> None:
    shape, dt = ctx.attr("shape"), ctx.attr("dtype")
    ctx.check(all(d >= 0 for d in shape), f"shape {shape} must be non-negative")
    key = ASSIGN_VALUE_ATTRS[dt]
    n = len(ctx.attr(key))
    ctx.check(n == math.prod(shape),
              f"{key} holds {n} values, shape {shape} needs {math.prod(shape)}")
    ctx.set_output("Out", shape, dt)


# -- reshape2 ------------------------------------------------------------------

def reshape_shape(x: Sequence[int], shape: Sequence[int]) -> list[int]:
    """Fluid's reshape rule: 0 copies X's dim at that index, one -1 is inferred.

    With unknown (-1) dims in X the inferred dim stays -1 unless every unknown dim
    is copied by a 0 (``[0, -1]`` on ``[-1, 4, 5]`` gives ``[-1, 20]``); a size
    check that needs an unknown dim is left to run time.
    """
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ShapeError(f"shape {list(shape)} has more than one -1; only one dim can be "
                         "inferred")
    out: list[int] = []
    for i, s in enumerate(shape):
        if s == 0:
            if i >= len(x):
                raise ShapeError(f"shape[{i}] is 0 (copy X's dim {i}) but X {list(x)} has "
                                 f"rank {len(x)}")
            out.append(x[i])
        elif s < -1:
            raise ShapeError(f"shape[{i}] is {s}; dims must be positive, 0 (copy) or -1 (infer)")
        else:
            out.append(s)
    copied = {i for i, s in enumerate(shape) if s == 0}
    n_in = _prod([d for i, d in enumerate(x) if i not in copied])
    n_out = _prod([d for i, d in enumerate(out) if i not in copied and shape[i] != -1])
    if unknown:
        if n_in >= 0:
            if n_out == 0 or n_in % n_out:
                raise ShapeError(f"cannot infer the -1 in shape {list(shape)}: X {list(x)} has "
                                 f"{n_in} elements outside the copied dims, not a multiple "
                                 f"of {n_out}")
            out[unknown[0]] = n_in // n_out
    elif n_in >= 0 and n_out >= 0 and n_in != n_out:
        raise ShapeError(f"shape {list(shape)} (that is {out}) does not hold as many "
                         f"elements as X {list(x)}")
    return out


@define_op(
    "reshape2", ["X"], ["Out", _XSHAPE],
    [Attr("shape", "ints", doc="new shape; 0 copies X's dim, one -1 is inferred", min=-1)],
    doc="Out = X with a new shape (same elements in the same order).",
)
def _reshape2(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    try:
        out = reshape_shape(xs, ctx.attr("shape"))
    except ShapeError as e:
        ctx.fail(str(e))
    keep_lod = bool(xs) and bool(out) and xs[0] == out[0]  # Fluid shares LoD then
    x = ctx.input_var("X")
    ctx.set_output("Out", out, x.dtype, lod_level=x.lod_level if keep_lod else 0)
    _set_xshape(ctx)


# -- transpose2 ----------------------------------------------------------------

def _transpose_shape(x: list[int], ctx: InferContext) -> list[int]:
    axis = list(ctx.attr("axis"))
    if sorted(axis) != list(range(len(x))):
        raise ShapeError(f"axis {axis} must be a permutation of 0..{len(x) - 1} for X of "
                         f"rank {len(x)}")
    return [x[a] for a in axis]


define_op(
    "transpose2", ["X"], ["Out", _XSHAPE],
    [Attr("axis", "ints", doc="Out's dim i is X's dim axis[i]")],
    doc="Out = X with its dims permuted by `axis`.",
)(_shape_op(_transpose_shape))


# -- concat / split ------------------------------------------------------------

@define_op(
    "concat", [Slot("X", duplicable=True)], ["Out"],
    [Attr("axis", "int", 0, doc="negative counts from the end")],
    doc="Out = the X joined along `axis`; other dims must agree.",
)
def _concat(ctx: InferContext) -> None:
    vs = ctx.input_vars("X")
    ctx.check(len(vs) >= 1, "needs at least one input in X")
    first = list(vs[0].shape)
    try:
        axis = _norm_axis(ctx.attr("axis"), len(first))
    except ShapeError as e:
        ctx.fail(str(e))
    out = list(first)
    for i, v in enumerate(vs[1:], 1):
        s = list(v.shape)
        ctx.check(v.dtype == vs[0].dtype, f"X[{i}] {v.name!r} is {v.dtype_name}, X[0] "
                  f"{vs[0].name!r} is {vs[0].dtype_name}; all inputs need one dtype")
        ctx.check(len(s) == len(first), f"X[{i}] {v.name!r} {s} has rank {len(s)}, X[0] "
                  f"{vs[0].name!r} {first} has rank {len(first)}")
        for d in range(len(s)):
            if d == axis:
                out[d] = -1 if out[d] < 0 or s[d] < 0 else out[d] + s[d]
                continue
            m = merge_dim(out[d], s[d])
            ctx.check(m is not None, f"X[{i}] {v.name!r} {s} and X[0] {vs[0].name!r} {first} "
                      f"differ in dim {d}; only dim {axis} (the concat axis) may differ")
            out[d] = m  # type: ignore[assignment]
    ctx.set_output("Out", out, vs[0].dtype,
                   lod_level=vs[0].lod_level if axis != 0 else 0)


def split_sizes(dim: int, num: int, sections: Sequence[int], n_out: int | None = None
                ) -> list[int]:
    """The sizes of ``split``'s pieces along its axis (-1: unknown until run time)."""
    if num < 0 or (num > 0) == bool(sections):
        raise ShapeError(f"give exactly one of num > 0 (got {num}) and sections "
                         f"(got {list(sections)})")
    if num > 0:
        if n_out is not None and n_out != num:
            raise ShapeError(f"num={num} but Out has {n_out} variables")
        if dim >= 0 and dim % num:
            raise ShapeError(f"dim of size {dim} does not split into {num} equal pieces")
        return [dim // num if dim >= 0 else -1] * num
    if n_out is not None and n_out != len(sections):
        raise ShapeError(f"sections {list(sections)} has {len(sections)} entries but Out has "
                         f"{n_out} variables")
    unknown = [i for i, s in enumerate(sections) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in sections):
        raise ShapeError(f"sections {list(sections)}: sizes must be >= 0, with at most one -1")
    sizes = list(sections)
    known = sum(s for s in sections if s >= 0)
    if dim >= 0:
        if unknown and known <= dim:
            sizes[unknown[0]] = dim - known
        elif known != dim or unknown:
            raise ShapeError(f"sections {list(sections)} add up to {known}, the split dim has "
                             f"size {dim}")
    return sizes


@define_op(
    "split", ["X"], [Slot("Out", duplicable=True)],
    [Attr("num", "int", 0, doc="split into num equal pieces (or use sections)", min=0),
     Attr("sections", "ints", [], doc="piece sizes; one may be -1 (the rest)", min=-1),
     Attr("axis", "int", 0, doc="negative counts from the end")],
    doc="Out[i] = the i-th piece of X along `axis`.",
)
def _split(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    x = ctx.input_var("X")
    try:
        axis = _norm_axis(ctx.attr("axis"), len(xs))
        sizes = split_sizes(xs[axis], ctx.attr("num"), ctx.attr("sections"),
                            len(ctx.op.output("Out")))
    except ShapeError as e:
        ctx.fail(str(e))
    for i, s in enumerate(sizes):
        ctx.set_output("Out", [*xs[:axis], s, *xs[axis + 1:]], x.dtype, i,
                       lod_level=x.lod_level if axis != 0 else 0)


# -- slice -----------------------------------------------------------------------

def slice_bounds(dim: int, start: int, end: int) -> tuple[int, int]:
    """Fluid's [start, end) on a dim of size ``dim``: negatives count from the end,
    then both are clamped to [0, dim] and start to <= end."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    end = min(max(end, 0), dim)
    start = min(max(start, 0), end)
    return start, end


def slice_shape(x: Sequence[int], axes: Sequence[int], starts: Sequence[int],
                ends: Sequence[int], decrease_axis: Sequence[int]) -> list[int]:
    """Out's shape for ``slice``; unknown dims stay unknown."""
    if not len(axes) == len(starts) == len(ends):
        raise ShapeError(f"axes {list(axes)}, starts {list(starts)} and ends {list(ends)} "
                         "must have the same length")
    rank = len(x)
    norm = [_norm_axis(a, rank, "axes entry") for a in axes]
    if len(set(norm)) != len(norm):
        raise ShapeError(f"axes {list(axes)} names an axis twice")
    out = list(x)
    for a, s, e in zip(norm, starts, ends):
        if out[a] >= 0:
            lo, hi = slice_bounds(out[a], s, e)
            out[a] = hi - lo
    drop = {_norm_axis(a, rank, "decrease_axis entry") for a in decrease_axis}
    for a in sorted(drop):
        if out[a] not in (1, -1):
            raise ShapeError(f"decrease_axis {list(decrease_axis)} removes dim {a}, which "
                             f"has size {out[a]} after slicing; it must be 1")
    if drop:
        out = [d for i, d in enumerate(out) if i not in drop] or [1]
    return out


@define_op(
    "slice", ["Input"], ["Out"],
    [Attr("axes", "ints"), Attr("starts", "ints"), Attr("ends", "ints"),
     Attr("decrease_axis", "ints", [], doc="sliced axes (of size 1) to remove from Out"),
     Attr("infer_flags", "ints", [], doc="accepted for Fluid >= 1.5 programs; unused")],
    doc="Out = Input[starts:ends] along each of `axes` (negative indices count from the "
    "end; out-of-range ones are clamped).",
)
def _slice(ctx: InferContext) -> None:
    v = ctx.input_var("Input")
    try:
        out = slice_shape(list(v.shape), ctx.attr("axes"), ctx.attr("starts"),
                          ctx.attr("ends"), ctx.attr("decrease_axis"))
    except ShapeError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", out, v.dtype)


# -- squeeze2 / unsqueeze2 / flatten2 ---------------------------------------------

def squeeze_shape(x: Sequence[int], axes: Sequence[int]) -> list[int]:
    """Drop the size-1 dims named by ``axes`` (all size-1 dims when empty).

    A named dim must be 1 (an unknown one is assumed to be).  Squeezing every dim
    gives rank 0, as in Fluid.
    """
    if not axes:
        return [d for d in x if d != 1]
    drop = {_norm_axis(a, len(x), "axes entry") for a in axes}
    for a in sorted(drop):
        if x[a] not in (1, -1):
            raise ShapeError(f"axes {list(axes)} squeezes dim {a} of X {list(x)}, which has "
                             f"size {x[a]}; only size-1 dims can be squeezed")
    return [d for i, d in enumerate(x) if i not in drop]


def unsqueeze_shape(x: Sequence[int], axes: Sequence[int]) -> list[int]:
    """Insert size-1 dims one axis at a time, as Fluid does: each axis indexes the
    shape built so far; a negative one counts from its end (-1 appends)."""
    out = list(x)
    for a in axes:
        cur = a + len(out) + 1 if a < 0 else a
        if not 0 <= cur <= len(out):
            raise ShapeError(f"axes {list(axes)}: {a} is out of range when unsqueezing a "
                             f"shape of rank {len(out)} (valid: {-len(out) - 1}..{len(out)})")
        out.insert(cur, 1)
    return out


def flatten_shape(x: Sequence[int], axis: int) -> list[int]:
    """[prod(x[:axis]), prod(x[axis:])] with 0 <= axis <= rank."""
    if not 0 <= axis <= len(x):
        raise ShapeError(f"axis {axis} must be in 0..{len(x)} for X {list(x)}")
    return [_prod(x[:axis]), _prod(x[axis:])]


define_op(
    "squeeze2", ["X"], ["Out", _XSHAPE],
    [Attr("axes", "ints", [], doc="size-1 dims to remove; empty: all of them")],
    doc="Out = X without the size-1 dims in `axes`.",
)(_shape_op(lambda x, ctx: squeeze_shape(x, ctx.attr("axes"))))

define_op(
    "unsqueeze2", ["X"], ["Out", _XSHAPE],
    [Attr("axes", "ints", doc="where to insert size-1 dims, applied in order")],
    doc="Out = X with size-1 dims inserted at `axes`.",
)(_shape_op(lambda x, ctx: unsqueeze_shape(x, ctx.attr("axes"))))

define_op(
    "flatten2", ["X"], ["Out", _XSHAPE],
    [Attr("axis", "int", 1, doc="dims before it become Out's rows, the rest its columns")],
    doc="Out = X as a matrix [prod(X.dims[:axis]), prod(X.dims[axis:])].",
)(_shape_op(lambda x, ctx: flatten_shape(x, ctx.attr("axis"))))


# -- gradients ---------------------------------------------------------------------

def _declare_grads() -> None:
    from ..grad import define_default_grad, no_grad

    # cast: X@GRAD = Out@GRAD cast back to in_dtype.  Only float -> float paths carry
    # a gradient: append_backward gives none to integer variables.
    define_default_grad("cast", uses=())
    define_default_grad("assign", uses=())
    # the *2 ops' grads recover X's shape from XShape (dims [0, *X.dims]), as Fluid's
    for t in ("reshape2", "transpose2", "squeeze2", "unsqueeze2", "flatten2"):
        define_default_grad(t, uses=("XShape",))
    define_default_grad("concat", uses=("X",))  # the X give the split sizes
    define_default_grad("split", uses=())  # every Out@GRAD is given (zeros if unused)
    define_default_grad("slice", uses=("Input",))  # Input for its shape
    no_grad("creation", "assign_value")


_declare_grads()


def _declare_layout_category() -> None:
    from ..registry import mark_category

    mark_category("layout", "reshape2", "flatten2", "transpose2", "squeeze2", "unsqueeze2")


_declare_layout_category()
