"""Kernels of ``ir/ops/conv_more.py``: N-d convolution, transposed convolution and
pooling by a loop over the kernel offsets (each offset one strided slice of the padded
input and one product with that filter tap), and their gradients."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ....ir.ops.conv_more import conv_out, convt_out, pool_out
from ..context import KernelContext
from . import register_kernel


def _taps(k: tuple[int, ...]) -> Any:
    return itertools.product(*(range(v) for v in k))


def _window(start: tuple[int, ...], step: list[int], count: tuple[int, ...]) -> tuple:
    return (slice(None), slice(None), *(slice(a, a + s * (c - 1) + 1, s)
                                        for a, s, c in zip(start, step, count)))


def _grouped(a: np.ndarray, g: int) -> np.ndarray:
    """[N, C, ...] -> [N, g, C/g, ...]."""
    return a.reshape(a.shape[0], g, a.shape[1] // g, *a.shape[2:])


def conv_nd(x: np.ndarray, w: np.ndarray, s: list[int], p: list[int], d: list[int], g: int
            ) -> np.ndarray:
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0), *((v, v) for v in p)])
    k = w.shape[2:]
    out_sp = tuple(conv_out(x.shape[2 + i], k[i], s[i], p[i], d[i]) for i in range(nd))
    m = w.shape[0]
    wg = w.reshape(g, m // g, *w.shape[1:])  # [g, M/g, C/g, k...]
    out = np.zeros((x.shape[0], g, m // g, *out_sp), np.float64)
    for t in _taps(k):
        xs = _grouped(xp[_window(tuple(ti * di for ti, di in zip(t, d)), s, out_sp)], g)
        out += np.einsum("ngc...,gmc->ngm...", xs, wg[(..., *t)])
    return out.reshape(x.shape[0], m, *out_sp)


def conv_nd_grads(x: np.ndarray, w: np.ndarray, dout: np.ndarray, s: list[int],
                  p: list[int], d: list[int], g: int) -> tuple[np.ndarray, np.ndarray]:
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *((v, v) for v in p)])
    dxp = np.zeros_like(xp)
    k = w.shape[2:]
    m = w.shape[0]
    wg = w.reshape(g, m // g, *w.shape[1:]).astype(np.float64)
    dwg = np.zeros_like(wg)
    dg = _grouped(dout.astype(np.float64), g)
    out_sp = dout.shape[2:]
    for t in _taps(k):
        win = _window(tuple(ti * di for ti, di in zip(t, d)), s, out_sp)
        xs = _grouped(xp[win], g)
        dwg[(..., *t)] = np.einsum("ngmo,ngco->gmc", dg.reshape(*dg.shape[:3], -1),
                                   xs.reshape(*xs.shape[:3], -1))
        dxp[win] += np.einsum("ngm...,gmc->ngc...", dg, wg[(..., *t)]).reshape(
            xp[win].shape)
    crop = (slice(None), slice(None), *(slice(v, v + n) for v, n in zip(p, x.shape[2:])))
    return dxp[crop], dwg.reshape(w.shape)


def _attrs(ctx: KernelContext) -> tuple[list[int], list[int], list[int], int]:
    a = ctx.attrs
    return list(a["strides"]), list(a["paddings"]), list(a["dilations"]), int(a["groups"])


def _convt_size(ctx: KernelContext, x: np.ndarray, w: np.ndarray) -> tuple[int, ...]:
    s, p, d, _ = _attrs(ctx)
    base = tuple(convt_out(x.shape[2 + i], w.shape[2 + i], s[i], p[i], d[i])
                 for i in range(x.ndim - 2))
    want = list(ctx.attrs["output_size"])
    return tuple(want) if want else base


def convt_nd(x: np.ndarray, w: np.ndarray, s: list[int], p: list[int], d: list[int], g: int,
             out_sp: tuple[int, ...]) -> np.ndarray:
    """The transposed convolution: the input gradient of conv_nd with filter ``w``
    ([C, M/g, k...] read as conv's [M, C/g, k...] the other way round)."""
    # as a conv whose output is x: conv filter [M = x's channels, C/g, k...]
    dummy = np.zeros((x.shape[0], w.shape[1] * g, *out_sp))
    dx, _ = conv_nd_grads(dummy, w, x, s, p, d, g)
    return dx


@register_kernel("conv3d")
def _conv3d(ctx: KernelContext) -> None:
    x, w = ctx.input("Input"), ctx.input("Filter")
    s, p, d, g = _attrs(ctx)
    ctx.set_output("Output", conv_nd(x.astype(np.float64), w.astype(np.float64), s, p, d, g)
                   .astype(x.dtype))


@register_kernel("conv3d_grad")
def _conv3d_grad(ctx: KernelContext) -> None:
    x, w, dout = ctx.input("Input"), ctx.input("Filter"), ctx.input("Output@GRAD")
    dx, dw = conv_nd_grads(x, w, dout, *_attrs(ctx))
    if ctx.has_output("Input@GRAD"):
        ctx.set_output("Input@GRAD", dx.astype(x.dtype))
    if ctx.has_output("Filter@GRAD"):
        ctx.set_output("Filter@GRAD", dw.astype(w.dtype))


@register_kernel("conv2d_transpose", "conv3d_transpose")
def _conv_transpose(ctx: KernelContext) -> None:
    x, w = ctx.input("Input"), ctx.input("Filter")
    out = convt_nd(x, w, *_attrs(ctx), _convt_size(ctx, x, w))
    ctx.set_output("Output", out.astype(x.dtype))


@register_kernel("conv2d_transpose_grad", "conv3d_transpose_grad")
def _conv_transpose_grad(ctx: KernelContext) -> None:
    x, w, dout = ctx.input("Input"), ctx.input("Filter"), ctx.input("Output@GRAD")
    s, p, d, g = _attrs(ctx)
    # Output = convT(x) means x plays conv's output gradient: dx = conv(dout), and the
    # filter gradient is conv's filter gradient with the roles of input and output swapped
    if ctx.has_output("Input@GRAD"):
        dx = conv_nd(dout.astype(np.float64), w.astype(np.float64), s, p, d, g)
        ctx.set_output("Input@GRAD", dx[(slice(None), slice(None),
                                         *(slice(0, n) for n in x.shape[2:]))]
                       .astype(x.dtype))
    if ctx.has_output("Filter@GRAD"):
        _, dw = conv_nd_grads(dout, w, x, s, p, d, g)
        ctx.set_output("Filter@GRAD", dw.astype(w.dtype))


def _pool_geometry(ctx: KernelContext, x: np.ndarray
                   ) -> tuple[list[int], list[int], list[int], tuple[int, ...]]:
    a = ctx.attrs
    sp = x.shape[2:]
    if a["global_pooling"]:
        return list(sp), [1, 1, 1], [0, 0, 0], (1, 1, 1)
    k, s, p = list(a["ksize"]), list(a["strides"]), list(a["paddings"])
    out = tuple(pool_out(sp[i], k[i], s[i], p[i], a["ceil_mode"]) for i in range(3))
    return k, s, p, out


def _adaptive_bins(size: int, o: int) -> list[tuple[int, int]]:
    return [(i * size // o, -(-(i + 1) * size // o)) for i in range(o)]


def _pool_windows(ctx: KernelContext, x: np.ndarray) -> Any:
    """(output index, the input block it pools, the count for exclusive avg)."""
    if ctx.attrs["adaptive"]:
        bins = [_adaptive_bins(x.shape[2 + i], ctx.attrs["ksize"][i]) for i in range(3)]
        for idx in itertools.product(*(range(len(b)) for b in bins)):
            sl = tuple(slice(*bins[i][j]) for i, j in enumerate(idx))
            n = int(np.prod([e - b for b, e in (bins[i][j] for i, j in enumerate(idx))]))
            yield idx, sl, n, n
        return
    k, s, p, out = _pool_geometry(ctx, x)
    for idx in itertools.product(*(range(o) for o in out)):
        lo = [j * s[i] - p[i] for i, j in enumerate(idx)]
        hi = [min(lo[i] + k[i], x.shape[2 + i] + p[i]) for i in range(3)]
        full = int(np.prod([h - lv for h, lv in zip(hi, lo)]))
        lo_c = [max(v, 0) for v in lo]
        hi_c = [min(h, x.shape[2 + i]) for i, h in enumerate(hi)]
        sl = tuple(slice(a, b) for a, b in zip(lo_c, hi_c))
        yield idx, sl, int(np.prod([b - a for a, b in zip(lo_c, hi_c)])), full


def _out_shape(ctx: KernelContext, x: np.ndarray) -> tuple[int, ...]:
    if ctx.attrs["adaptive"]:
        return tuple(ctx.attrs["ksize"])
    return _pool_geometry(ctx, x)[3]


@register_kernel("pool3d")
def _pool3d(ctx: KernelContext) -> None:
    x = ctx.input("X")
    is_max = ctx.attrs["pooling_type"] == "max"
    out = np.zeros((*x.shape[:2], *_out_shape(ctx, x)), np.float64)
    for idx, sl, n, full in _pool_windows(ctx, x):
        blk = x[(slice(None), slice(None), *sl)].astype(np.float64)
        if is_max:
            out[(slice(None), slice(None), *idx)] = blk.max(axis=(2, 3, 4))
        else:
            out[(slice(None), slice(None), *idx)] = blk.sum(axis=(2, 3, 4)) / (
                n if ctx.attrs["exclusive"] else full)
    ctx.set_output("Out", out.astype(x.dtype))


@register_kernel("pool3d_grad")
def _pool3d_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, out, d0 = ctx.input("X"), ctx.input("Out"), ctx.input("Out@GRAD")
    d = d0.astype(np.float64)
    is_max = ctx.attrs["pooling_type"] == "max"
    dx = np.zeros(x.shape, np.float64)
    for idx, sl, n, full in _pool_windows(ctx, x):
        where = (slice(None), slice(None), *sl)
        g = d[(slice(None), slice(None), *idx)][:, :, None, None, None]
        if is_max:
            blk = x[where]
            o = out[(slice(None), slice(None), *idx)][:, :, None, None, None]
            hit = blk == o
            first = hit.reshape(*hit.shape[:2], -1).argmax(-1)  # the first maximum only
            mask = np.zeros(hit.reshape(*hit.shape[:2], -1).shape, bool)
            np.put_along_axis(mask, first[..., None], True, -1)
            dx[where] += g * mask.reshape(hit.shape)
        else:
            dx[where] += g / (n if ctx.attrs["exclusive"] else full)
    ctx.set_output("X@GRAD", dx.astype(d0.dtype))
