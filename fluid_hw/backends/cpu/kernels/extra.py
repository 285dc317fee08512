"""Kernels of clip, log_softmax, pad and strided_slice (``ir/ops/extra.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ....ir.ops.extra import pad_shape, strided_slice_index
from ..context import KernelContext
from . import register_kernel


def _bound(dtype: np.dtype, value: float) -> np.generic:
    """``value`` in ``dtype``; for integers rounded inwards and clamped to the range."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if math.isinf(value) or math.isnan(value):
            return dtype.type(info.max if value > 0 else info.min)
        return dtype.type(min(max(int(value), info.min), info.max))
    return dtype.type(value)


@register_kernel("clip")
def clip(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    lo, hi = _bound(x.dtype, ctx.attrs["min"]), _bound(x.dtype, ctx.attrs["max"])
    ctx.set_output("Out", np.minimum(np.maximum(x, lo), hi), lod=lod)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@register_kernel("log_softmax")
def _log_softmax(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", log_softmax(x, ctx.attrs["axis"]).astype(x.dtype, copy=False))


def pad_array(x: np.ndarray, paddings: Sequence[int], mode: str, value: float) -> np.ndarray:
    """``x`` cropped by the negative paddings, then padded by the positive ones."""
    pad_shape(x.shape, paddings, mode)  # raises on impossible paddings
    crop = tuple(slice(max(-paddings[2 * i], 0), x.shape[i] - max(-paddings[2 * i + 1], 0))
                 for i in range(x.ndim))
    x = x[crop]
    widths = [(max(paddings[2 * i], 0), max(paddings[2 * i + 1], 0)) for i in range(x.ndim)]
    if not any(b or a for b, a in widths):
        return x.copy()
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=_bound(x.dtype, value))
    return np.pad(x, widths, mode=mode)  # type: ignore[call-overload]  # mode: a str, checked


@register_kernel("pad")
def pad(ctx: KernelContext) -> None:
    a = ctx.attrs
    ctx.set_output("Out", pad_array(ctx.input("X"), a["paddings"], a["mode"], a["pad_value"]))


@register_kernel("strided_slice")
def strided_slice(ctx: KernelContext) -> None:
    x = ctx.input("Input")
    a = ctx.attrs
    index = strided_slice_index(x.shape, a["axes"], a["starts"], a["ends"], a["strides"])
    ctx.set_output("Out", x[index].copy())


# -- gradients ----------------------------------------------------------------------

@register_kernel("clip_grad")
def clip_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    lo, hi = _bound(x.dtype, ctx.attrs["min"]), _bound(x.dtype, ctx.attrs["max"])
    ctx.set_output("X@GRAD", np.where((x > lo) & (x < hi), d, d.dtype.type(0)))


@register_kernel("log_softmax_grad")
def log_softmax_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    out, d = ctx.input("Out"), ctx.input("Out@GRAD")
    g = d - np.exp(out) * d.sum(axis=ctx.attrs["axis"], keepdims=True)
    ctx.set_output("X@GRAD", g.astype(d.dtype, copy=False))


@register_kernel("pad_grad")
def pad_grad(ctx: KernelContext) -> None:
    """The forward applied to the cells' flat indices (new constant cells get -1) says
    where each output cell came from; dX sums dOut over those sources."""
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    a = ctx.attrs
    src = pad_array(np.arange(x.size, dtype=np.int64).reshape(x.shape), a["paddings"],
                    a["mode"], -1)
    keep = src >= 0
    dx = np.bincount(src[keep], weights=d[keep], minlength=x.size)
    ctx.set_output("X@GRAD", dx.reshape(x.shape).astype(x.dtype))


@register_kernel("strided_slice_grad")
def strided_slice_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("Input@GRAD"):
        return
    x, d = ctx.input("Input"), ctx.input("Out@GRAD")
    a = ctx.attrs
    g = np.zeros(x.shape, x.dtype)
    g[strided_slice_index(x.shape, a["axes"], a["starts"], a["ends"], a["strides"])] = d
    ctx.set_output("Input@GRAD", g)
