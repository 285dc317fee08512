"""Matrix-product, scale, sum and reduction kernels."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.ops.math import matmul_shape, reduce_axes, reduce_shape
from ..context import KernelContext
from . import Kernel, register_kernel


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


def _make_reduce(fn: Callable[..., Any]) -> Kernel:
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


# -- gradients ---------------------------------------------------------------------
# Grad kernels write X@GRAD (and Y@GRAD) only when asked for, in X's (Y's) shape and
# dtype; they never write into an input (outputs may alias the incoming Out@GRAD).

def _as_2d(a: np.ndarray, k: int) -> np.ndarray:
    """``mul``'s matrix view: dims [:k] into rows, [k:] into columns."""
    return a.reshape(_prod(a.shape[:k]), _prod(a.shape[k:]))


@register_kernel("mul_grad")
def mul_grad(ctx: KernelContext) -> None:
    x, y, d = ctx.input("X"), ctx.input("Y"), ctx.input("Out@GRAD")
    x2 = _as_2d(x, ctx.attrs["x_num_col_dims"])
    y2 = _as_2d(y, ctx.attrs["y_num_col_dims"])
    d2 = d.reshape(x2.shape[0], y2.shape[1])
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", (d2 @ y2.T).reshape(x.shape).astype(x.dtype, copy=False))
    if ctx.has_output("Y@GRAD"):
        ctx.set_output("Y@GRAD", (x2.T @ d2).reshape(y.shape).astype(y.dtype, copy=False))


@register_kernel("sum_grad")
def sum_grad(ctx: KernelContext) -> None:
    d = ctx.input("Out@GRAD")
    for i in range(len(ctx.out_names.get("X@GRAD", ()))):
        ctx.set_output("X@GRAD", d, i)  # @EMPTY@ entries are skipped


@register_kernel("mean_grad")
def mean_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    g = d.reshape(()).astype(x.dtype) / x.dtype.type(max(x.size, 1))
    ctx.set_output("X@GRAD", np.full(x.shape, g, dtype=x.dtype))


def _spread(ctx: KernelContext, x: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """Out@GRAD with the reduced axes kept as size 1 (broadcastable to X), and the axes."""
    a = ctx.attrs
    axes = reduce_axes(x.ndim, a["dim"], a["reduce_all"])
    return d.reshape(reduce_shape(x.shape, axes, True)), axes


@register_kernel("reduce_sum_grad")
def reduce_sum_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X")
    d, _ = _spread(ctx, x, ctx.input("Out@GRAD"))
    ctx.set_output("X@GRAD", np.broadcast_to(d, x.shape).astype(x.dtype))


@register_kernel("reduce_mean_grad")
def reduce_mean_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X")
    d, axes = _spread(ctx, x, ctx.input("Out@GRAD"))
    n = max(math.prod(x.shape[a] for a in axes), 1)
    ctx.set_output("X@GRAD", (np.broadcast_to(d, x.shape) / x.dtype.type(n)).astype(x.dtype))


@register_kernel("reduce_max_grad")
def reduce_max_grad(ctx: KernelContext) -> None:
    """Every element equal to its maximum gets the whole gradient (ties: all of them)."""
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X")
    d, _ = _spread(ctx, x, ctx.input("Out@GRAD"))
    out = ctx.input("Out").reshape(d.shape)
    ctx.set_output("X@GRAD", np.where(x == out, d, x.dtype.type(0)).astype(x.dtype))


@register_kernel("scale_grad")
def scale_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d = ctx.input("Out@GRAD")
        ctx.set_output("X@GRAD", (d * d.dtype.type(ctx.attrs["scale"])).astype(d.dtype))


def _batch_sum_to(g: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Sum the batch axis of ``g`` away when its operand ``m`` was a single matrix."""
    return g.sum(axis=0) if g.ndim > m.ndim else g


@register_kernel("matmul_grad")
def matmul_grad(ctx: KernelContext) -> None:
    """dA = dOut @ B^T, dB = A^T @ dOut on the operands as the forward kernel used them
    (vectors as [1, K] / [K, 1], batch dims flattened, transposes applied); then the
    transposes, flattening and vector padding are undone, and the batch axis summed
    away for an operand that was used for every batch."""
    x, y, d = ctx.input("X"), ctx.input("Y"), ctx.input("Out@GRAD")
    tx, ty = ctx.attrs["transpose_X"], ctx.attrs["transpose_Y"]
    a = _as_batch(x.reshape(1, -1) if x.ndim == 1 else x, tx)
    b = _as_batch(y.reshape(-1, 1) if y.ndim == 1 else y, ty)
    batch = a.shape[:-2] or b.shape[:-2]
    d3 = d.reshape(*batch, a.shape[-2], b.shape[-1])
    alpha = ctx.attrs["alpha"]
    if alpha != 1.0:
        d3 = d3 * d3.dtype.type(alpha)
    if ctx.has_output("X@GRAD"):
        da = _batch_sum_to(np.matmul(d3, b.swapaxes(-1, -2)), a)
        if tx:
            da = da.swapaxes(-1, -2)
        ctx.set_output("X@GRAD", da.reshape(x.shape).astype(x.dtype, copy=False))
    if ctx.has_output("Y@GRAD"):
        db = _batch_sum_to(np.matmul(a.swapaxes(-1, -2), d3), b)
        if ty:
            db = db.swapaxes(-1, -2)
        ctx.set_output("Y@GRAD", db.reshape(y.shape).astype(y.dtype, copy=False))
