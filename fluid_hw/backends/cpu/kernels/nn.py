"""Kernels of the neural-network ops: convolution, pooling, batch_norm, dropout, lookup_table.

Convolution is im2col: a strided window view of the padded input
(``sliding_window_view``, no copy) is gathered once into a column matrix per
group and multiplied with the filters by one batched matmul; pooling reduces
the same window view directly.  No Python loop runs over pixels.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ....ir.ops.nn import window_geometry
from ..context import KernelContext
from . import register_kernel


def _pad_hw(x: np.ndarray, pads: list[int], value: float = 0.0) -> np.ndarray:
    """``x`` padded by ``[top, bottom, left, right]`` along its last two axes."""
    if not any(pads):
        return x
    t, b, l, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def _windows(xp: np.ndarray, ksize: list[int], strides: list[int], dilations: list[int],
             out_hw: list[int]) -> np.ndarray:
    """View [N, C, OH, OW, kh, kw] of the windows of the padded input (no copy)."""
    (kh, kw), (sh, sw), (dh, dw) = ksize, strides, dilations
    eff = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    win = sliding_window_view(xp, eff, axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :out_hw[0], :out_hw[1]]


@register_kernel("conv2d", "depthwise_conv2d")
def conv2d(ctx: KernelContext) -> None:
    x, w = ctx.input("Input"), ctx.input("Filter")
    a = ctx.attrs
    n = x.shape[0]
    m, cg, kh, kw = w.shape
    g = a["groups"]
    out_hw, pads, dil = window_geometry(x.shape[2:], (kh, kw), a["strides"], a["paddings"],
                                        a["dilations"], a["padding_algorithm"])
    oh, ow = out_hw
    win = _windows(_pad_hw(x, pads), [kh, kw], a["strides"], dil, out_hw)
    # im2col: [g, N*OH*OW, C/g*kh*kw] (the one copy) @ [g, C/g*kh*kw, M/g]
    cols = (win.reshape(n, g, cg, oh, ow, kh, kw)
            .transpose(1, 0, 3, 4, 2, 5, 6)
            .reshape(g, n * oh * ow, cg * kh * kw))
    wmat = w.reshape(g, m // g, cg * kh * kw).transpose(0, 2, 1)
    out = np.matmul(cols, wmat)  # [g, N*OH*OW, M/g]
    out = out.reshape(g, n, oh, ow, m // g).transpose(1, 0, 4, 2, 3).reshape(n, m, oh, ow)
    ctx.set_output("Output", np.ascontiguousarray(out, dtype=x.dtype))


def _valid_counts(out: int, k: int, s: int, pad: int, size: int) -> np.ndarray:
    """Real (unpadded) input cells in each of ``out`` windows along one axis."""
    start = np.arange(out) * s - pad
    return np.clip(np.minimum(start + k, size) - np.maximum(start, 0), 0, None)


def _adaptive_pool(x: np.ndarray, out_hw: list[int], is_max: bool) -> np.ndarray:
    """Fluid's adaptive bins: cell i pools floor(i*H/OH) .. ceil((i+1)*H/OH) - 1.

    Max and mean over a rectangle are separable, so rows then columns are
    reduced: one numpy reduction per output row / column, none per pixel.
    """
    red = np.max if is_max else np.mean
    for axis, o in ((2, out_hw[0]), (3, out_hw[1])):
        size = x.shape[axis]
        bins = [(i * size // o, -(-(i + 1) * size // o)) for i in range(o)]
        x = np.stack([red(x.take(range(s, e), axis=axis), axis=axis) for s, e in bins],
                     axis=axis)
    return x


@register_kernel("pool2d")
def pool2d(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    is_max = a["pooling_type"] == "max"
    h, w = x.shape[2:]
    if a["global_pooling"]:
        red = np.max if is_max else np.mean
        ctx.set_output("Out", red(x, axis=(2, 3), keepdims=True).astype(x.dtype, copy=False))
        return
    if a["adaptive"]:
        ctx.set_output("Out", _adaptive_pool(x, list(a["ksize"]), is_max).astype(x.dtype,
                                                                                 copy=False))
        return
    ksize, strides = list(a["ksize"]), list(a["strides"])
    out_hw, pads, _ = window_geometry((h, w), ksize, strides, a["paddings"],
                                      algorithm=a["padding_algorithm"], ceil_mode=a["ceil_mode"])
    # ceil_mode: extend the bottom/right padding so the last window is whole
    pads = list(pads)
    pads[1] += max(0, (out_hw[0] - 1) * strides[0] + ksize[0] - (h + pads[0] + pads[1]))
    pads[3] += max(0, (out_hw[1] - 1) * strides[1] + ksize[1] - (w + pads[2] + pads[3]))
    # max: Fluid starts from -FLT_MAX, which is also what a window with no real
    # cell (possible with ceil_mode) yields
    fill = np.finfo(x.dtype).min if is_max else 0.0
    win = _windows(_pad_hw(x, pads, fill), ksize, strides, [1, 1], out_hw)
    if is_max:
        out = win.max(axis=(-2, -1))
    else:
        total = win.sum(axis=(-2, -1))
        if a["exclusive"]:
            ch = _valid_counts(out_hw[0], ksize[0], strides[0], pads[0], h)
            cw = _valid_counts(out_hw[1], ksize[1], strides[1], pads[2], w)
            # a window wholly in the padding (possible with ceil_mode) averages to 0
            count = np.maximum(np.outer(ch, cw), 1).astype(x.dtype)
        else:
            count = x.dtype.type(ksize[0] * ksize[1])
        out = total / count
    ctx.set_output("Out", out.astype(x.dtype, copy=False))


@register_kernel("batch_norm")
def batch_norm(ctx: KernelContext) -> None:
    x = ctx.input("X")
    scale, bias = ctx.input("Scale"), ctx.input("Bias")
    mean, var = ctx.input("Mean"), ctx.input("Variance")
    a = ctx.attrs
    axis = x.ndim - 1 if a["data_layout"] == "NHWC" else 1
    reduce = tuple(i for i in range(x.ndim) if i != axis)
    bshape = [1] * x.ndim
    bshape[axis] = x.shape[axis]
    eps = a["epsilon"]
    if a["is_test"] or a["use_global_stats"]:
        use_mean, use_var = mean.astype(np.float64), var.astype(np.float64)
        mean_out, var_out = mean, var
    else:
        x64 = x.astype(np.float64)
        use_mean = x64.mean(axis=reduce)
        use_var = np.square(x64 - use_mean.reshape(bshape)).mean(axis=reduce)  # biased
        mom = a["momentum"]
        mean_out = (mom * mean.astype(np.float64) + (1 - mom) * use_mean).astype(mean.dtype)
        var_out = (mom * var.astype(np.float64) + (1 - mom) * use_var).astype(var.dtype)
    inv_std = 1.0 / np.sqrt(use_var + eps)
    mul = (inv_std * scale).reshape(bshape)
    y = (x - use_mean.reshape(bshape)) * mul + bias.reshape(bshape)
    ctx.set_output("Y", y.astype(x.dtype), lod=ctx.input_lod("X") or None)
    ctx.set_output("MeanOut", mean_out)
    ctx.set_output("VarianceOut", var_out)
    ctx.set_output("SavedMean", use_mean.astype(mean.dtype))
    ctx.set_output("SavedVariance", inv_std.astype(mean.dtype))


def _dropout_rng(ctx: KernelContext) -> np.random.Generator:
    """Fluid: the ``seed`` attr counts only with ``fix_seed``; else the executor's stream."""
    if ctx.attrs["fix_seed"]:
        return ctx.rng()
    ex = ctx.executor
    return ex.rng if ex is not None else np.random.default_rng()


@register_kernel("dropout")
def dropout(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    p = a["dropout_prob"]
    upscale = a["dropout_implementation"] == "upscale_in_train"
    lod = ctx.input_lod("X") or None
    if a["is_test"]:
        out = x if upscale else x * x.dtype.type(1.0 - p)
        ctx.set_output("Out", out, lod=lod)
        return
    if p >= 1.0:
        mask = np.zeros(x.shape, np.uint8)
    else:
        mask = (_dropout_rng(ctx).random(x.shape) >= p).astype(np.uint8)
    keep = mask.astype(bool)
    if upscale and p < 1.0:
        out = np.where(keep, x / x.dtype.type(1.0 - p), x.dtype.type(0))
    else:
        out = np.where(keep, x, x.dtype.type(0))
    ctx.set_output("Out", out, lod=lod)
    ctx.set_output("Mask", mask)


@register_kernel("lookup_table")
def lookup_table(ctx: KernelContext) -> None:
    w, ids = ctx.input("W"), ctx.input("Ids")
    rows = w.shape[0]
    flat = ids.reshape(-1)
    bad = (flat < 0) | (flat >= rows)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"Ids[{i}] (flattened) is {int(flat[i])}, outside the {rows} rows "
                         f"[0, {rows}) of the table W {list(w.shape)}")
    out = w[flat]  # fancy indexing: a new array
    pad = ctx.attrs["padding_idx"]
    if pad != -1:
        out[flat == pad] = 0
    ctx.set_output("Out", out.reshape(*ids.shape[:-1], w.shape[1]),
                   lod=ctx.input_lod("Ids") or None)
