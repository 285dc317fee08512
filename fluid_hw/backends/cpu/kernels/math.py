"""Matrix-product, scale, sum and reduction kernels."""

from __future__ import annotations

import math

import numpy as np

from ....ir.ops.math import matmul_shape, reduce_axes, reduce_shape
from ..context import KernelContext
from . import register_kernel


@register_kernel("mul")
def mul(ctx: KernelContext) -> None:
    (x, lod), y = ctx.input_with_lod("X"), ctx.input("Y")
    xk, yk = ctx.attrs["x_num_col_dims"], ctx.attrs["y_num_col_dims"]
    x2 = x if x.ndim == 2 and xk == 1 else x.reshape(-1 if x.size else 0, _prod(x.shape[xk:]))
    y2 = y if y.ndim == 2 and yk == 1 else y.reshape(_prod(y.shape[:yk]), -1)
    out = x2 @ y2
    if x.ndim != 2 or y.ndim != 2:
        out = out.reshape(x.shape[:xk] + y.shape[yk:])
    ctx.set_output("Out", out, lod=lod)


def _prod(dims: tuple[int, ...]) -> int:
    p = 1
    for d in dims:
        p *= d
    return p


def _as_batch(m: np.ndarray, transpose: bool) -> np.ndarray:
    """A matrix, or a [batch, rows, cols] stack when ``m`` has batch dims."""
    if m.ndim > 2:
        m = m.reshape(math.prod(m.shape[:-2]), *m.shape[-2:])
    return m.swapaxes(-1, -2) if transpose else m


@register_kernel("matmul")
def matmul(ctx: KernelContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    tx, ty = ctx.attrs["transpose_X"], ctx.attrs["transpose_Y"]
    out_shape = matmul_shape(x.shape, y.shape, tx, ty)
    xm = _as_batch(x.reshape(1, -1) if x.ndim == 1 else x, tx)
    ym = _as_batch(y.reshape(-1, 1) if y.ndim == 1 else y, ty)
    out = np.matmul(xm, ym)
    alpha = ctx.attrs["alpha"]
    if alpha != 1.0:
        out = out * out.dtype.type(alpha)
    ctx.set_output("Out", out.reshape(out_shape))


@register_kernel("scale")
def scale(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    t = x.dtype.type  # Fluid casts scale and bias to X's type
    s, b = t(ctx.attrs["scale"]), t(ctx.attrs["bias"])
    out = x * s + b if ctx.attrs["bias_after_scale"] else (x + b) * s
    ctx.set_output("Out", out.astype(x.dtype, copy=False), lod=lod)


@register_kernel("sum")
def sum_(ctx: KernelContext) -> None:
    xs = ctx.inputs("X")
    out = xs[0].copy()
    for x in xs[1:]:
        out += x
    ctx.set_output("Out", out, lod=ctx.input_with_lod("X")[1])


@register_kernel("mean")
def mean(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", np.mean(x, dtype=_acc(x.dtype)).astype(x.dtype).reshape(1))


def _acc(dt: np.dtype) -> np.dtype:
    """Accumulator type: float16 sums in float32, everything else in its own type."""
    return np.dtype(np.float32) if dt == np.float16 else dt


def _reduce_mean(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    if x.dtype.kind in "iub":  # integer mean truncates toward zero, as Fluid's
        n = math.prod(x.shape[a] for a in axes)
        s = np.sum(x, axes, dtype=np.uint64 if x.dtype.kind == "u" else np.int64, keepdims=keep)
        return np.sign(s) * (np.abs(s) // n)
    return np.mean(x, axes, dtype=_acc(x.dtype), keepdims=keep)


_REDUCE = {
    "reduce_sum": lambda x, axes, keep: np.sum(x, axes, dtype=_acc(x.dtype), keepdims=keep),
    "reduce_mean": _reduce_mean,
    "reduce_max": lambda x, axes, keep: np.max(x, axes, keepdims=keep),
}


def _make_reduce(fn):  # type: ignore[no-untyped-def]
    def kernel(ctx: KernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        a = ctx.attrs
        axes = reduce_axes(x.ndim, a["dim"], a["reduce_all"])
        out = np.asarray(fn(x, axes, a["keep_dim"])).astype(x.dtype, copy=False)
        shape = reduce_shape(x.shape, axes, a["keep_dim"])
        keep_lod = len(axes) < x.ndim and 0 not in axes
        ctx.set_output("Out", out.reshape(shape), lod=lod if keep_lod else None)

    return kernel


for _t, _f in _REDUCE.items():
    register_kernel(_t)(_make_reduce(_f))
