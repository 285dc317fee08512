"""Image resizing: ``nearest_interp``, Fluid 1.5's nearest-neighbour interpolation.

The output size and the source row / column of every output cell are pure functions
(:func:`interp_out_size`, :func:`nearest_index`) shared by the op definition, the CPU
kernel and the FPGA lowering (the ``upsample`` stage kind), so they cannot disagree.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op

__all__ = ["interp_out_size", "nearest_index", "integer_factor"]


def interp_out_size(in_size: int, out_attr: int, scale: float) -> int:
    """One output extent as Fluid computes it: ``int(in * scale)`` (float32 product,
    truncated) when ``scale > 0``, else the ``out_h`` / ``out_w`` attribute; -1 when
    the input extent is unknown and a scale is given.  Raises ShapeError for an
    extent below 1."""
    if scale > 0:
        if in_size < 0:
            return -1
        out = int(np.float32(in_size) * np.float32(scale))
        what = f"{in_size} * scale {scale:g}"
    else:
        out, what = int(out_attr), "the out_h / out_w attribute"
    if out < 1:
        raise ShapeError(f"the output size ({what}) is {out}; it must be >= 1: give "
                         "out_shape (out_h, out_w >= 1) or a scale > 0")
    return out


def nearest_index(in_size: int, out_size: int, align_corners: bool) -> np.ndarray:
    """The input index read by each of ``out_size`` outputs along one axis, in exact
    integer arithmetic: ``floor(k * in / out)`` without ``align_corners``; with it,
    ``k * (in - 1) / (out - 1)`` rounded half up (0 for a single output).  (Fluid
    computes the ratio in float32, which can land one below an exact integer.)"""
    k = np.arange(out_size, dtype=np.int64)
    if not align_corners:
        return k * in_size // out_size
    if out_size == 1:
        return np.zeros(1, np.int64)
    return (2 * k * (in_size - 1) + out_size - 1) // (2 * (out_size - 1))


def integer_factor(in_size: int, out_size: int, align_corners: bool) -> int | None:
    """``f`` when output ``k`` reads input ``k // f`` along this axis (every input
    repeated ``f`` times, in order), else None."""
    if in_size < 1 or out_size % in_size:
        return None
    f = out_size // in_size
    ok = np.array_equal(nearest_index(in_size, out_size, align_corners),
                        np.arange(out_size) // f)
    return f if ok else None


@define_op(
    "nearest_interp",
    [Slot("X", doc="[N, C, H, W]"),
     Slot("OutSize", dispensable=True,
          doc="int32 [2]: (out_h, out_w) at run time, overriding scale and out_h/out_w")],
    [Slot("Out", doc="[N, C, out_h, out_w]")],
    [
        Attr("out_h", "int", 0, doc="output height when scale is 0"),
        Attr("out_w", "int", 0, doc="output width when scale is 0"),
        Attr("scale", "float", 0.0, min=0, doc="> 0: out = int(in * scale) on both axes"),
        Attr("interp_method", "string", "nearest", allowed=("nearest",)),
        Attr("align_corners", "bool", True,
             doc="True: corners align, index round(k (in-1)/(out-1)); False: floor(k in/out)"),
        Attr("align_mode", "int", 1, allowed=(0, 1), doc="bilinear only; no effect here"),
        Attr("data_layout", "string", "NCHW", allowed=("NCHW", "AnyLayout"),
             doc="only NCHW is implemented"),
    ],
    doc="""Nearest-neighbour resizing of an NCHW image (Fluid 1.5 ``nearest_interp``).

Output size: OutSize if given, else ``int(H * scale)`` x ``int(W * scale)`` when
``scale > 0``, else ``out_h`` x ``out_w``.  Output row ``k`` reads input row
``floor(k * H / out_h)`` (``align_corners=False``) or ``k * (H - 1) / (out_h - 1)``
rounded half up (``align_corners=True``, Fluid's default), columns likewise.  Any
dtype: integer values are copied exactly (in a quantised program it keeps the scale).""",
)
def _infer_nearest(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 4, f"X must be 4-D NCHW, got shape {xs}")
    if ctx.has_input("OutSize"):
        v = ctx.input_var("OutSize")
        ctx.check(v.dtype == dtypes.VarType.INT32 and list(v.shape) in ([2], [-1]),
                  f"OutSize must be int32 [2], got {v.dtype_name} {list(v.shape)}")
        ctx.set_output("Out", [xs[0], xs[1], -1, -1], ctx.input_dtype("X"))
        return
    try:
        out = [interp_out_size(xs[2 + i], ctx.attr(a), ctx.attr("scale"))
               for i, a in enumerate(("out_h", "out_w"))]
    except ShapeError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", [xs[0], xs[1], *out], ctx.input_dtype("X"))


def _declare() -> None:
    from ..grad import define_default_grad
    from ..registry import mark_category

    # dX: each output cell's gradient added to the input cell it copies
    define_default_grad("nearest_interp", uses=("X",), in_grads=("X",))
    mark_category("copy", "nearest_interp")


_declare()
