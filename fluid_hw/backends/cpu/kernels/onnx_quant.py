"""Kernels of ``ir/ops/onnx_quant.py``: ONNX's and QONNX's quantisation arithmetic,
written as the ONNX operator specification's reference implementation computes it
(float32 division for QuantizeLinear, float64 products for the QLinear requantiser,
integer sums in int64 wrapped to int32)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....ir import dtypes
from ....ir.ops.onnx_quant import int_bounds
from ..context import KernelContext
from . import register_kernel
from .nn import _conv_cols

I64 = np.int64


def _along(v: np.ndarray, ndim: int, axis: int, x_shape: tuple[int, ...] = (),
           block: int = 0) -> np.ndarray:
    """A Scale/ZeroPoint broadcastable to a rank-``ndim`` tensor: one value as is, a
    1-D tensor along ``axis``; with ``block`` > 0, each value repeated over its block
    of ``x_shape`` along ``axis``."""
    if block > 0:
        return np.repeat(v, block, axis=axis)[tuple(
            slice(0, d) if k == axis % ndim else slice(None) for k, d in enumerate(x_shape))]
    if v.size == 1:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = v.size
    return v.reshape(shape)


def _saturate(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


@register_kernel("quantize_linear")
def quantize_linear(ctx: KernelContext) -> None:
    (x, lod), a = ctx.input_with_lod("X"), ctx.attrs
    blk = (x.shape, a["block_size"])
    scale = _along(ctx.input("Scale"), x.ndim, a["axis"], *blk).astype(x.dtype)
    q = np.rint(x / scale).astype(I64)  # x / scale in X's type, then half to even
    if ctx.has_input("ZeroPoint"):
        q = q + _along(ctx.input("ZeroPoint"), x.ndim, a["axis"], *blk).astype(I64)
    out = dtypes.to_numpy(a["out_dtype"])
    ctx.set_output("Out", _saturate(q, out), lod=lod)


@register_kernel("dequantize_linear")
def dequantize_linear(ctx: KernelContext) -> None:
    (x, lod), axis = ctx.input_with_lod("X"), ctx.attrs["axis"]
    blk = (x.shape, ctx.attrs["block_size"])
    scale = ctx.input("Scale")
    dx = x.astype(np.float32)
    if ctx.has_input("ZeroPoint"):
        dx = dx - _along(ctx.input("ZeroPoint"), x.ndim, axis, *blk).astype(np.float32)
    out = dx * _along(scale, x.ndim, axis, *blk)
    ctx.set_output("Out", out.astype(scale.dtype, copy=False), lod=lod)


def _minus(ctx: KernelContext, slot: str, zp_slot: str, along: Callable[[np.ndarray,
           np.ndarray], np.ndarray]) -> np.ndarray:
    v = ctx.input(slot).astype(I64)
    if ctx.has_input(zp_slot):
        v = v - along(ctx.input(zp_slot).astype(I64), v)
    return v


@register_kernel("matmul_integer")
def matmul_integer(ctx: KernelContext) -> None:
    def a_rows(z: np.ndarray, a: np.ndarray) -> np.ndarray:  # one per row of A
        return z.reshape(()) if z.size == 1 else z.reshape(-1, 1)

    def b_cols(z: np.ndarray, b: np.ndarray) -> np.ndarray:  # one per column of B
        return z.reshape(()) if z.size == 1 else z.reshape(-1)

    a = _minus(ctx, "A", "AZeroPoint", a_rows)
    b = _minus(ctx, "B", "BZeroPoint", b_cols)
    ctx.set_output("Out", np.matmul(a, b).astype(np.int32))


@register_kernel("conv_integer")
def conv_integer(ctx: KernelContext) -> None:
    """conv2d of the zero-point-free integers: im2col (padding 0) and an int64 matmul."""
    x = _minus(ctx, "Input", "InputZeroPoint", lambda z, v: z.reshape(()))
    w = _minus(ctx, "Filter", "FilterZeroPoint",
               lambda z, v: z.reshape(()) if z.size == 1 else z.reshape(-1, 1, 1, 1))
    n, (m, cg, kh, kw), g = x.shape[0], w.shape, ctx.attrs["groups"]
    cols, (oh, ow), _, _ = _conv_cols(x, w, ctx.attrs)
    wmat = w.reshape(g, m // g, cg * kh * kw).transpose(0, 2, 1)
    acc = np.matmul(cols, wmat)  # [g, N*OH*OW, M/g]
    acc = acc.reshape(g, n, oh, ow, m // g).transpose(1, 0, 4, 2, 3).reshape(n, m, oh, ow)
    ctx.set_output("Output", np.ascontiguousarray(acc.astype(np.int32)))


@register_kernel("requantize_linear")
def requantize_linear(ctx: KernelContext) -> None:
    (x, lod), a = ctx.input_with_lod("X"), ctx.attrs
    f32 = np.float32
    a_s = ctx.input("AScale").astype(f32).reshape(())
    b_s = _along(ctx.input("BScale").astype(f32), x.ndim, a["axis"])
    y_s = ctx.input("YScale").astype(f32).reshape(())
    mult = ((a_s * b_s) / y_s).astype(f32)  # float32 as the specification's scales
    d = x.astype(np.float64) * mult.astype(np.float64)
    q = np.rint(d)
    zp = 0.0
    if ctx.has_input("YZeroPoint"):
        zp = float(ctx.input("YZeroPoint").reshape(-1)[0])
    out = dtypes.to_numpy(a["out_dtype"])
    info = np.iinfo(out)
    lo = max(zp, info.min) if a["relu"] else info.min
    ctx.set_output("Out", np.clip(q + zp, lo, info.max).astype(out), lod=lod)


# -- QONNX ---------------------------------------------------------------------------

def _half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _half_toward(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.ceil(np.abs(v) - 0.5)


#: QONNX rounding mode -> numpy function (UP / DOWN: away from / toward zero)
ROUNDING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ROUND": np.rint, "CEIL": np.ceil, "FLOOR": np.floor,
    "UP": lambda v: np.sign(v) * np.ceil(np.abs(v)), "DOWN": np.trunc,
    "HALF_UP": _half_away, "HALF_DOWN": _half_toward,
}


@register_kernel("int_quant")
def int_quant(ctx: KernelContext) -> None:
    (x, lod), a = ctx.input_with_lod("X"), ctx.attrs
    t = x.dtype
    scale, zp = ctx.input("Scale").astype(t), ctx.input("ZeroPt").astype(t)
    lo, hi = int_bounds(a["bits"], a["signed"], a["narrow"])
    y = np.clip(x / scale + zp, t.type(lo), t.type(hi))
    y = ROUNDING[a["rounding_mode"]](y)
    ctx.set_output("Out", ((y - zp) * scale).astype(t, copy=False), lod=lod)


@register_kernel("bipolar_quant")
def bipolar_quant(ctx: KernelContext) -> None:
    (x, lod) = ctx.input_with_lod("X")
    t = x.dtype
    y = np.where(x >= 0, t.type(1), t.type(-1)) * ctx.input("Scale").astype(t)
    ctx.set_output("Out", y.astype(t, copy=False), lod=lod)


@register_kernel("trunc_quant")
def trunc_quant(ctx: KernelContext) -> None:
    (x, lod), a = ctx.input_with_lod("X"), ctx.attrs
    t = x.dtype
    scale, zp = ctx.input("Scale").astype(t), ctx.input("ZeroPt").astype(t)
    q = np.rint(x / scale + zp)
    rnd = ROUNDING[a["rounding_mode"]]
    if a["version"] == 1:
        y = rnd(q / t.type(2.0 ** (a["in_bits"] - a["out_bits"])))
        out = (y - zp) * scale
    else:
        out_scale = ctx.input("OutScale").astype(t)
        ts = (2.0 ** np.rint(np.log2(out_scale / scale))).astype(t)
        lo, hi = int_bounds(a["out_bits"], a["signed"], a["narrow"])
        y = rnd(np.clip(q / ts, t.type(lo), t.type(hi)))
        out = (y - zp / ts) * out_scale
    ctx.set_output("Out", np.asarray(out).astype(t, copy=False), lod=lod)
