"""Kernels of ``ir/ops/roi.py`` (Paddle 1.5's bin and sampling rules) and gradients."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from ..context import KernelContext
from . import register_kernel

_Bin = TypeVar("_Bin")

def _c_round(v: float) -> float:
    """C's round(): halves away from zero."""
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _boxes(ctx: KernelContext) -> Iterator[tuple[int, int, np.ndarray]]:
    """(roi index, image index, box) of each ROI."""
    rois, lod = ctx.input_with_lod("ROIs")
    n_img = ctx.input("X").shape[0]
    if not lod or len(lod[-1]) - 1 != n_img:
        raise ValueError(f"{ctx.op_type}: ROIs need a LoD with one sequence of boxes per image "
                         f"of X ({n_img}), got {lod}")
    offs = lod[-1]
    for img in range(n_img):
        for r in range(offs[img], offs[img + 1]):
            yield r, img, rois[r].astype(np.float64)


def _pool_bins(ctx: KernelContext, box: np.ndarray, h: int, w: int
               ) -> Iterator[tuple[int, int, int, int, int, int]]:
    a = ctx.attrs
    s = a["spatial_scale"]
    x1, y1, x2, y2 = (_c_round(v * s) for v in box)
    rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
    bh, bw = rh / a["pooled_height"], rw / a["pooled_width"]
    for i in range(a["pooled_height"]):
        hs = min(max(math.floor(i * bh) + y1, 0), h)
        he = min(max(math.ceil((i + 1) * bh) + y1, 0), h)
        for j in range(a["pooled_width"]):
            ws = min(max(math.floor(j * bw) + x1, 0), w)
            we = min(max(math.ceil((j + 1) * bw) + x1, 0), w)
            yield i, j, int(hs), int(he), int(ws), int(we)


@register_kernel("roi_pool")
def _roi_pool(ctx: KernelContext) -> None:
    x = ctx.input("X")
    n_roi = ctx.input("ROIs").shape[0]
    ph, pw = ctx.attrs["pooled_height"], ctx.attrs["pooled_width"]
    out = np.zeros((n_roi, x.shape[1], ph, pw), x.dtype)
    arg = np.full(out.shape, -1, np.int64)
    h, w = x.shape[2:]
    for r, img, box in _boxes(ctx):
        for i, j, hs, he, ws, we in _pool_bins(ctx, box, h, w):
            if he <= hs or we <= ws:
                continue
            blk = x[img, :, hs:he, ws:we].reshape(x.shape[1], -1)
            k = blk.argmax(axis=1)
            out[r, :, i, j] = blk[np.arange(x.shape[1]), k]
            arg[r, :, i, j] = (hs + k // (we - ws)) * w + ws + k % (we - ws)
    ctx.set_output("Out", out)
    ctx.set_output("Argmax", arg)


@register_kernel("roi_pool_grad")
def _roi_pool_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, arg, d = ctx.input("X"), ctx.input("Argmax"), ctx.input("Out@GRAD")
    dx = np.zeros(x.shape, d.dtype)
    flat = dx.reshape(x.shape[0], x.shape[1], -1)
    for r, img, _ in _boxes(ctx):
        for c in range(x.shape[1]):
            a, g = arg[r, c].reshape(-1), d[r, c].reshape(-1)
            ok = a >= 0
            np.add.at(flat[img, c], a[ok], g[ok])
    ctx.set_output("X@GRAD", dx)


def _bilinear(h: int, w: int, y: float, x: float) -> list[tuple[int, int, float]]:
    """Paddle's roi_align sample: (row, col, weight) taps, none outside [-1, size]."""
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return []
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    return [(yl, xl, (1 - ly) * (1 - lx)), (yl, xh, (1 - ly) * lx),
            (yh, xl, ly * (1 - lx)), (yh, xh, ly * lx)]


def _align_taps(ctx: KernelContext, box: np.ndarray, h: int, w: int
                ) -> Iterator[tuple[int, int, list[tuple[int, int, float]]]]:
    a = ctx.attrs
    s = a["spatial_scale"]
    x1, y1, x2, y2 = (float(v) * s for v in box)
    rh, rw = max(y2 - y1, 1.0), max(x2 - x1, 1.0)
    ph, pw = a["pooled_height"], a["pooled_width"]
    bh, bw = rh / ph, rw / pw
    gh = a["sampling_ratio"] if a["sampling_ratio"] > 0 else math.ceil(rh / ph)
    gw = a["sampling_ratio"] if a["sampling_ratio"] > 0 else math.ceil(rw / pw)
    count = gh * gw
    for i in range(ph):
        for j in range(pw):
            taps: list[tuple[int, int, float]] = []
            for iy in range(gh):
                yy = y1 + i * bh + (iy + 0.5) * bh / gh
                for ix in range(gw):
                    xx = x1 + j * bw + (ix + 0.5) * bw / gw
                    taps += [(r, c, wt / count) for r, c, wt in _bilinear(h, w, yy, xx)]
            yield i, j, taps


def _each_bin(ctx: KernelContext, bins: Callable[[KernelContext, np.ndarray, int, int],
                                                  Iterator[_Bin]]
              ) -> Iterator[tuple[int, int, _Bin]]:
    """(roi index, image index, bin) of each bin ``bins`` gives for each ROI of X."""
    h, w = ctx.input("X").shape[2:]
    for r, img, box in _boxes(ctx):
        for b in bins(ctx, box, h, w):
            yield r, img, b


def _grad_by_bin(ctx: KernelContext, bins: Callable[[KernelContext, np.ndarray, int, int],
                                                    Iterator[_Bin]],
                 add: Callable[[np.ndarray, np.ndarray, int, int, _Bin], None]) -> None:
    """X@GRAD of an op linear in X: ``add(dx, dout, roi, image, bin)`` for each bin."""
    if not ctx.has_output("X@GRAD"):
        return
    d = ctx.input("Out@GRAD")
    dx = np.zeros(ctx.input("X").shape)
    for r, img, b in _each_bin(ctx, bins):
        add(dx, d, r, img, b)
    ctx.set_output("X@GRAD", dx.astype(d.dtype))


@register_kernel("roi_align")
def _roi_align(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ph, pw = ctx.attrs["pooled_height"], ctx.attrs["pooled_width"]
    out = np.zeros((ctx.input("ROIs").shape[0], x.shape[1], ph, pw))
    for r, img, (i, j, taps) in _each_bin(ctx, _align_taps):
        for yy, xx, wt in taps:
            out[r, :, i, j] += wt * x[img, :, yy, xx]
    ctx.set_output("Out", out.astype(x.dtype))


def _align_back(dx: np.ndarray, d: np.ndarray, r: int, img: int,
                cell: tuple[int, int, list[tuple[int, int, float]]]) -> None:
    i, j, taps = cell
    for yy, xx, wt in taps:
        dx[img, :, yy, xx] += wt * d[r, :, i, j]


@register_kernel("roi_align_grad")
def _roi_align_grad(ctx: KernelContext) -> None:
    _grad_by_bin(ctx, _align_taps, _align_back)


def _ps_bins(ctx: KernelContext, box: np.ndarray, h: int, w: int) -> Iterator[Any]:
    a = ctx.attrs
    s = a["spatial_scale"]
    x1, y1 = _c_round(box[0]) * s, _c_round(box[1]) * s
    x2, y2 = (_c_round(box[2]) + 1) * s, (_c_round(box[3]) + 1) * s
    rh, rw = max(y2 - y1, 0.1), max(x2 - x1, 0.1)
    ph, pw = a["pooled_height"], a["pooled_width"]
    bh, bw = rh / ph, rw / pw
    for c in range(a["output_channels"]):
        for i in range(ph):
            hs = min(max(math.floor(bh * i + y1), 0), h)
            he = min(max(math.ceil(bh * (i + 1) + y1), 0), h)
            for j in range(pw):
                ws = min(max(math.floor(bw * j + x1), 0), w)
                we = min(max(math.ceil(bw * (j + 1) + x1), 0), w)
                yield c, i, j, (c * ph + i) * pw + j, int(hs), int(he), int(ws), int(we)


@register_kernel("psroi_pool")
def _psroi_pool(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    out = np.zeros((ctx.input("ROIs").shape[0], a["output_channels"], a["pooled_height"],
                    a["pooled_width"]))
    for r, img, (c, i, j, ic, hs, he, ws, we) in _each_bin(ctx, _ps_bins):
        if he > hs and we > ws:
            out[r, c, i, j] = x[img, ic, hs:he, ws:we].mean()
    ctx.set_output("Out", out.astype(x.dtype))


def _ps_back(dx: np.ndarray, d: np.ndarray, r: int, img: int, b: Any) -> None:
    c, i, j, ic, hs, he, ws, we = b
    if he > hs and we > ws:
        dx[img, ic, hs:he, ws:we] += d[r, c, i, j] / ((he - hs) * (we - ws))


@register_kernel("psroi_pool_grad")
def _psroi_pool_grad(ctx: KernelContext) -> None:
    _grad_by_bin(ctx, _ps_bins, _ps_back)
