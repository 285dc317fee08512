"""Ops that model importers need beyond the core set: clip, log_softmax, pad, strided_slice.

Each follows the Fluid 1.x op of the same name (attribute names, slots), with
the extensions noted in its doc.  The pure shape functions (:func:`pad_shape`,
:func:`strided_slice_index`) are shared with the CPU kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ShapeError
from .. import dtypes
from ..registry import Attr, InferContext, define_op
from .nn import attr_fail

PAD_MODES = ("constant", "reflect", "edge", "wrap")


# -- clip ------------------------------------------------------------------------

@define_op(
    "clip", ["X"], ["Out"],
    [Attr("min", "float", doc="lower bound (may be -inf)"),
     Attr("max", "float", doc="upper bound (may be inf)")],
    doc="Out = min(max(X, min), max) element-wise; the bounds are cast to X's dtype "
    "(clamped to its range for integer X).  With min > max every cell is max.",
)
def _clip(ctx: InferContext) -> None:
    ctx.share("X", "Out")


# -- log_softmax -------------------------------------------------------------------

@define_op(
    "log_softmax", ["X"], ["Out"], [Attr("axis", "int", -1)],
    doc="Out = X - max - log(sum(exp(X - max))) along `axis` (numerically stable log of "
    "softmax).",
)
def _log_softmax(ctx: InferContext) -> None:
    rank = len(ctx.input_shape("X"))
    ax = ctx.attr("axis")
    ctx.check(-rank <= ax < rank, f"axis {ax} out of range for rank {rank}")
    ctx.check(dtypes.is_float(ctx.input_dtype("X")),
              f"X must be a float tensor, got {ctx.input_var('X').dtype_name}")
    ctx.share("X", "Out")


# -- pad ------------------------------------------------------------------------------

def pad_shape(x: Sequence[int], paddings: Sequence[int], mode: str = "constant") -> list[int]:
    """Out's shape for ``pad``: dim i grows by ``paddings[2i] + paddings[2i+1]`` (negative
    paddings crop).  Raises :class:`ShapeError`."""
    if len(paddings) != 2 * len(x):
        raise ShapeError(f"paddings {list(paddings)} must hold 2 values (before, after) per "
                         f"dim of X {list(x)}, i.e. {2 * len(x)} values")
    out = []
    for i, d in enumerate(x):
        before, after = paddings[2 * i], paddings[2 * i + 1]
        if d < 0:
            out.append(-1)
            continue
        kept = d + min(before, 0) + min(after, 0)
        if kept < 0:
            raise ShapeError(f"paddings {list(paddings)} crop {-min(before, 0) - min(after, 0)}"
                             f" cells from dim {i} of size {d}")
        if mode != "constant" and kept == 0 and (before > 0 or after > 0):
            raise ShapeError(f"mode {mode!r} cannot pad dim {i}: it has no cells left to "
                             "copy from")
        out.append(d + before + after)
    return out


@define_op(
    "pad", ["X"], ["Out"],
    [Attr("paddings", "ints", doc="[before_0, after_0, before_1, after_1, ...], one pair per "
          "dim of X; negative values crop"),
     Attr("pad_value", "float", 0.0, doc="the value of new cells (mode constant)"),
     Attr("mode", "string", "constant", allowed=PAD_MODES,
          doc="constant; reflect (mirror without the edge); edge (repeat the edge); wrap "
          "(cyclic).  An extension of Fluid's pad, which is constant only")],
    doc="Out = X padded (or cropped, for negative paddings) along every dim.  Crops are "
    "applied first, then the padding copies from what is left.",
)
def _pad(ctx: InferContext) -> None:
    try:
        out = pad_shape(ctx.input_shape("X"), ctx.attr("paddings"), ctx.attr("mode"))
    except ShapeError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", out, ctx.input_dtype("X"))


# -- strided_slice ------------------------------------------------------------------------

def strided_slice_index(shape: Sequence[int], axes: Sequence[int], starts: Sequence[int],
                        ends: Sequence[int], strides: Sequence[int]) -> tuple[slice, ...]:
    """The Python index of ``strided_slice`` on a tensor of ``shape``: along each of
    ``axes``, ``[start:end:stride]`` with Python's rules (negatives count from the end,
    out-of-range bounds clamp, a negative stride walks backwards).  Raises ShapeError."""
    if not len(axes) == len(starts) == len(ends) == len(strides):
        raise ShapeError(f"axes {list(axes)}, starts {list(starts)}, ends {list(ends)} and "
                         f"strides {list(strides)} must have the same length")
    rank = len(shape)
    index = [slice(None)] * rank
    seen: set[int] = set()
    for a, s, e, st in zip(axes, starts, ends, strides):
        if not -rank <= a < rank:
            raise ShapeError(f"axes entry {a} is out of range for rank {rank}")
        a %= rank
        if a in seen:
            raise ShapeError(f"axes {list(axes)} names axis {a} twice")
        seen.add(a)
        if st == 0:
            raise ShapeError(f"strides {list(strides)}: a stride cannot be 0")
        index[a] = slice(s, e, st)
    return tuple(index)


def strided_slice_shape(shape: Sequence[int], axes: Sequence[int], starts: Sequence[int],
                        ends: Sequence[int], strides: Sequence[int]) -> list[int]:
    """Out's shape for ``strided_slice``; unknown dims stay unknown."""
    index = strided_slice_index(shape, axes, starts, ends, strides)
    return [d if d < 0 else len(range(*sl.indices(d))) for d, sl in zip(shape, index)]


@define_op(
    "strided_slice", ["Input"], ["Out"],
    [Attr("axes", "ints"), Attr("starts", "ints"), Attr("ends", "ints"),
     Attr("strides", "ints", doc="step along each axis; negative walks backwards, 0 is an "
          "error"),
     Attr("infer_flags", "ints", [], doc="accepted for Fluid programs; unused")],
    doc="Out = Input[start:end:stride] along each of `axes`, with Python's slicing rules "
    "(negative indices count from the end, out-of-range bounds are clamped).",
)
def _strided_slice(ctx: InferContext) -> None:
    v = ctx.input_var("Input")
    for name in ("starts", "ends", "strides"):
        if len(ctx.attr(name)) != len(ctx.attr("axes")):
            attr_fail(ctx, f"{name} {ctx.attr(name)} needs one value per entry of axes "
                           f"{ctx.attr('axes')}")
    try:
        out = strided_slice_shape(list(v.shape), ctx.attr("axes"), ctx.attr("starts"),
                                  ctx.attr("ends"), ctx.attr("strides"))
    except ShapeError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", out, v.dtype)


# -- gradients ---------------------------------------------------------------------------

def _declare_grads() -> None:
    """clip: dX = dOut where min < X < max (Fluid's rule), else 0; log_softmax:
    dX = dOut - exp(Out) * sum(dOut); pad: each cell of X collects the dOut of every
    output cell copied from it; strided_slice: dOut scattered into zeros."""
    from ..grad import define_default_grad

    define_default_grad("clip", uses=("X",))
    define_default_grad("log_softmax", uses=("Out",))
    define_default_grad("pad", uses=("X",))
    define_default_grad("strided_slice", uses=("Input",))


_declare_grads()


def _declare_clip_category() -> None:
    from ..registry import mark_category

    mark_category("elementwise", "clip")


_declare_clip_category()
