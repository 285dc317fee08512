"""Fixed-point kernels: the golden model (the arithmetic is specified in ir/ops/quant.py).

Inside the quantised region (quantized_fc, quantized_conv2d, requantize,
quantized_pool2d) only integer numpy arithmetic runs: int64 products and sums,
floor division by powers of two, integer comparisons.  Int64 holds every
intermediate exactly (products < 2^46, sums of < 2^17 of them), and the final
``astype(int32)`` reduces modulo 2^32, which is the 32-bit accumulator's
wrap-around.  Only ``quantize`` (float in) and ``dequantize`` (float out), the
region's boundary, touch floats.
"""

from __future__ import annotations

import numpy as np

from ....ir.ops.quant import MULTIPLIER_MAX, SHIFT_MAX, int_range, weight_range
from ..context import KernelContext
from . import register_kernel
from .nn import _avg_counts, _conv_cols, _pad_hw, _windows, pool_geometry

I64 = np.int64


def _wrap32(acc: np.ndarray) -> np.ndarray:
    """Two's-complement int32 of exact int64 sums (numpy's astype reduces mod 2^32)."""
    return acc.astype(np.int32)


@register_kernel("quantize")
def quantize(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    a = ctx.attrs
    if not np.isfinite(x).all():
        bad = np.argwhere(~np.isfinite(x))[0].tolist()
        raise ValueError(f"X holds a non-finite value at index {bad}; quantize needs finite "
                         "input")
    if a["bipolar"]:  # the sign, 0 counted as +1
        q = np.where(x >= 0, 1, -1)
    else:
        lo, hi = int_range(a["bits"], a["signed"])
        q = np.clip(np.rint(x.astype(np.float64) / np.float64(a["scale"])), lo, hi)  # rint:
        # round half to even
    ctx.set_output("Out", q.astype(ctx.output_dtype("Out")), lod=lod)


@register_kernel("dequantize")
def dequantize(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    if ctx.has_input("Scale"):
        shape = [1] * x.ndim
        axis = ctx.attrs["axis"]
        shape[axis] = x.shape[axis]
        scale: np.ndarray | np.float64 = ctx.input("Scale").astype(np.float64).reshape(shape)
    else:
        scale = np.float64(ctx.attrs["scale"])
    ctx.set_output("Out", (x.astype(np.float64) * scale).astype(np.float32), lod=lod)


def _check_weight_values(ctx: KernelContext, w: np.ndarray, slot: str) -> None:
    """Narrow weights (weight_bits < 8) must lie in their range: symmetric signed, or
    {-1, +1} when bipolar (8- and 16-bit weights may use their dtype's whole range)."""
    bits, kind = ctx.attrs["weight_bits"], ctx.attrs["weight_type"]
    if bits >= 8 and kind == "signed":
        return
    lo, hi = weight_range(bits, kind)
    bad = (w < lo) | (w > hi) | ((w == 0) if kind == "bipolar" else False)
    if bad.any():
        i = np.argwhere(bad)[0].tolist()
        what = "{-1, +1}" if kind == "bipolar" else f"[{lo}, {hi}]"
        raise ValueError(f"{slot}{i} is {int(w[tuple(i)])}, outside the {bits}-bit {kind} "
                         f"weights' values {what} (weight_bits / weight_type; "
                         "docs/fixed_point.md)")


@register_kernel("quantized_fc")
def quantized_fc(ctx: KernelContext) -> None:
    (x, lod), w = ctx.input_with_lod("X"), ctx.input("W")
    _check_weight_values(ctx, w, "W")
    acc = x.astype(I64) @ w.astype(I64)
    if ctx.has_input("Bias"):
        acc += ctx.input("Bias").astype(I64).reshape(1, -1)
    ctx.set_output("Out", _wrap32(acc), lod=lod)


@register_kernel("quantized_conv2d")
def quantized_conv2d(ctx: KernelContext) -> None:
    """im2col (padding cells are integer 0) and one int64 matmul per group."""
    x, w = ctx.input("Input"), ctx.input("Filter")
    _check_weight_values(ctx, w, "Filter")
    n = x.shape[0]
    m, cg, kh, kw = w.shape
    g = ctx.attrs["groups"]
    cols, (oh, ow), _, _ = _conv_cols(x, w, ctx.attrs)
    wmat = w.astype(I64).reshape(g, m // g, cg * kh * kw).transpose(0, 2, 1)
    acc = np.matmul(cols.astype(I64), wmat)  # [g, N*OH*OW, M/g]
    acc = acc.reshape(g, n, oh, ow, m // g).transpose(1, 0, 4, 2, 3).reshape(n, m, oh, ow)
    if ctx.has_input("Bias"):
        acc = acc + ctx.input("Bias").astype(I64).reshape(1, m, 1, 1)
    ctx.set_output("Output", np.ascontiguousarray(_wrap32(acc)))


def _per_channel(v: np.ndarray, x: np.ndarray, what: str, lo: int, hi: int) -> np.ndarray:
    """Multiplier/Shift as int64 broadcastable along x's axis 1, range-checked."""
    if v.size not in (1, x.shape[1]):
        raise ValueError(f"{what} has {v.size} values; X has {x.shape[1]} channels "
                         "(give 1 or one per channel)")
    bad = (v < lo) | (v > hi)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise ValueError(f"{what}[{i}] is {int(v.reshape(-1)[i])}, outside [{lo}, {hi}] "
                         "(docs/fixed_point.md)")
    shape = [1] * x.ndim
    shape[1] = v.size
    return v.astype(I64).reshape(shape)


def _rescale(x: np.ndarray, m: np.ndarray | np.int64, n: np.ndarray | np.int64
             ) -> np.ndarray:
    """``(x * m + 2^(n-1)) >> n`` (``x * m`` when n = 0) in int64: requantize's rounding
    (half up); exact for |x| < 2^31, m < 2^15."""
    p = x.astype(I64) * m
    half = np.where(n > 0, np.left_shift(I64(1), np.maximum(n - 1, 0)), I64(0))
    return np.floor_divide(p + half, np.left_shift(I64(1), n))


@register_kernel("quantized_affine")
def quantized_affine(ctx: KernelContext) -> None:
    """``wrap32(x * Weight[c] + Bias[c])`` along axis 1 (exact in int64, then wrapped)."""
    x, lod = ctx.input_with_lod("X")
    acc = x.astype(I64) * _per_channel(ctx.input("Weight"), x, "Weight", -32768, 32767)
    if ctx.has_input("Bias"):
        acc = acc + _per_channel(ctx.input("Bias"), x, "Bias", -2**31, 2**31 - 1)
    ctx.set_output("Out", _wrap32(acc), lod=lod)


@register_kernel("requantize")
def requantize(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    a = ctx.attrs
    m = _per_channel(ctx.input("Multiplier"), x, "Multiplier", 0, MULTIPLIER_MAX)
    n = _per_channel(ctx.input("Shift"), x, "Shift", 0, SHIFT_MAX)
    r = _rescale(x, m, n)
    if a["bipolar"]:
        out = np.where(r >= 0, 1, -1)
    else:
        lo, hi = int_range(a["bits"], a["signed"])
        out = np.clip(r, max(lo, 0) if a["relu"] else lo, hi)
    ctx.set_output("Out", out.astype(ctx.output_dtype("Out")), lod=lod)


@register_kernel("multi_threshold")
def multi_threshold(ctx: KernelContext) -> None:
    """``out_bias + #{t : x >= T[c, t]}``: with each row sorted, the count is the
    number of thresholds ``<= x``, a right-sided binary search per channel."""
    x, lod = ctx.input_with_lod("X")
    th = np.asarray(ctx.input("Thresholds"))
    a = ctx.attrs
    if th.ndim != 2 or th.shape[0] not in (1, x.shape[1]):
        raise ValueError(f"Thresholds has shape {list(th.shape)}; give [{x.shape[1]}, T] (X's "
                         "channels) or [1, T]")
    down = np.diff(th.astype(I64), axis=1) < 0
    if down.any():
        c, t = np.argwhere(down)[0].tolist()
        raise ValueError(f"Thresholds row {c} decreases at column {t + 1} ({int(th[c, t])} "
                         f"then {int(th[c, t + 1])}); every row must be non-decreasing")
    xc = np.moveaxis(x.astype(I64), 1, 0)
    counts = np.empty(xc.shape, I64)
    for c in range(xc.shape[0]):
        row = th[c if th.shape[0] > 1 else 0].astype(I64)
        counts[c] = np.searchsorted(row, xc[c], side="right")
    counts = np.moveaxis(counts, 0, 1)
    out = np.where(counts > 0, 1, -1) if a["bipolar"] else counts + I64(a["out_bias"])
    ctx.set_output("Out", out.astype(ctx.output_dtype("Out")), lod=lod)


@register_kernel("quantized_pool2d")
def quantized_pool2d(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    is_max = a["pooling_type"] == "max"
    is_sum = a["pooling_type"] == "sum"
    dtype = np.dtype(np.int32) if is_sum else x.dtype
    low = np.iinfo(x.dtype).min
    if a["global_pooling"]:
        if is_max:
            out = x.max(axis=(2, 3), keepdims=True)
        elif is_sum:
            out = x.astype(I64).sum(axis=(2, 3), keepdims=True)
        else:
            s = x.astype(I64).sum(axis=(2, 3), keepdims=True)
            d = I64(x.shape[2] * x.shape[3])
            out = np.floor_divide(2 * s + d, 2 * d)
        ctx.set_output("Out", out.astype(dtype))
        return
    ksize, strides, out_hw, pads = pool_geometry(x.shape[2:], a)
    if is_max:  # padding holds the dtype's lowest value: it never wins over a real cell
        out = _windows(_pad_hw(x, pads, low), ksize, strides, [1, 1], out_hw).max(axis=(-2, -1))
    else:
        win = _windows(_pad_hw(x.astype(I64), pads, 0), ksize, strides, [1, 1], out_hw)
        s = win.sum(axis=(-2, -1))
        if is_sum:
            out = s
        else:
            counts = _avg_counts(a, x.shape[2:], ksize, strides, out_hw, pads, np.dtype(I64))
            out = np.floor_divide(2 * s + counts, 2 * counts)  # round half up
    ctx.set_output("Out", out.astype(dtype))


@register_kernel("quantized_table")
def quantized_table(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    table = np.asarray(ctx.input("Table")).reshape(-1)
    if table.size != 256:
        raise ValueError(f"Table has {table.size} entries, expected 256 (Table[x + 128])")
    out = table.astype(np.int8)[x.astype(I64) + 128]
    ctx.set_output("Out", out, lod=lod)


@register_kernel("quantized_add")
def quantized_add(ctx: KernelContext) -> None:
    (x, lod), y = ctx.input_with_lod("X"), ctx.input("Y")
    if x.shape != y.shape:
        raise ValueError(f"X {list(x.shape)} and Y {list(y.shape)} differ in shape")
    a = ctx.attrs
    nx, ny = int(a["x_shift"]), int(a["y_shift"])
    n = max(nx, ny)
    # int64: |x * m| < 2^22, times 2^(n - nx) <= 2^47: below 2^63 (Python ints beyond)
    if n <= 40:
        s = x.astype(I64) * I64(a["x_multiplier"]) * I64(2 ** (n - nx)) + \
            y.astype(I64) * I64(a["y_multiplier"]) * I64(2 ** (n - ny))
        r = (s + (I64(1) << I64(n - 1) if n > 0 else I64(0))) >> I64(n)
    else:  # exact in Python ints
        f = np.vectorize(lambda u, v: (u * a["x_multiplier"] * 2 ** (n - nx) +
                                       v * a["y_multiplier"] * 2 ** (n - ny) +
                                       (1 << (n - 1))) >> n, otypes=[object])
        r = f(x.astype(object), y.astype(object)).astype(np.float64)
    lo = 0 if a["relu"] else -128
    ctx.set_output("Out", np.clip(r, lo, 127).astype(np.int8), lod=lod)


@register_kernel("quantized_concat")
def quantized_concat(ctx: KernelContext) -> None:
    xs = ctx.inputs("X")
    a = ctx.attrs
    ms, ns = list(a["multipliers"]), list(a["shifts"])
    if not len(ms) == len(ns) == len(xs):
        raise ValueError(f"{len(xs)} inputs X but {len(ms)} multipliers and {len(ns)} shifts; "
                         "give one of each per input")
    lo = 0 if a["relu"] else -128
    parts = [np.clip(_rescale(x, I64(m), I64(n)), lo, 127) for x, m, n in zip(xs, ms, ns)]
    axis = a["axis"] % xs[0].ndim
    ctx.set_output("Out", np.concatenate(parts, axis=axis).astype(np.int8))
