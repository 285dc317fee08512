"""Kernels of ``ir/ops/nn_more.py`` and their gradients."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..context import KernelContext
from . import register_kernel


def _offsets(ctx: KernelContext, slot: str) -> tuple[np.ndarray, list[list[int]], list[int]]:
    x, lod = ctx.input_with_lod(slot)
    if not lod:
        raise ValueError(f"{ctx.op_type}: {slot} {ctx.in_names[slot][0]!r} has no LoD; feed a "
                         "LoDTensor of sequences")
    return x, lod, lod[-1]


@register_kernel("row_conv")
def _row_conv(ctx: KernelContext) -> None:
    x, lod, offs = _offsets(ctx, "X")
    w = ctx.input("Filter")
    out = np.zeros_like(x)
    for b, e in itertools.pairwise(offs):
        for k in range(min(w.shape[0], e - b)):
            out[b:e - k] += x[b + k:e] * w[k]
    ctx.set_output("Out", out, lod=lod)


@register_kernel("row_conv_grad")
def _row_conv_grad(ctx: KernelContext) -> None:
    x, lod, offs = _offsets(ctx, "X")
    w, d = ctx.input("Filter"), ctx.input("Out@GRAD")
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for b, e in itertools.pairwise(offs):
        for k in range(min(w.shape[0], e - b)):
            dx[b + k:e] += d[b:e - k] * w[k]
            dw[k] += (d[b:e - k] * x[b + k:e]).sum(axis=0)
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", dx, lod=lod)
    if ctx.has_output("Filter@GRAD"):
        ctx.set_output("Filter@GRAD", dw)


def position_table(length: int, size: int) -> np.ndarray:
    """[length, size]: sin in the first half of the features, cos in the second."""
    half = size // 2
    pos = np.arange(length, dtype=np.float64)[:, None]
    k = np.arange(half, dtype=np.float64)[None, :]
    div = np.power(10000.0, k / (half - 1)) if half > 1 else np.full((1, 1), 10000.0)
    val = pos / div
    return np.concatenate([np.sin(val), np.cos(val)], axis=1)


@register_kernel("add_position_encoding")
def _add_position_encoding(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    a, b = ctx.attrs["alpha"], ctx.attrs["beta"]
    if lod:
        pe = np.zeros(x.shape)
        for s, e in itertools.pairwise(lod[-1]):
            pe[s:e] = position_table(e - s, x.shape[-1])
    else:
        pe = position_table(x.shape[1], x.shape[2])[None]
    ctx.set_output("Out", (a * x + b * pe).astype(x.dtype), lod=lod)


@register_kernel("add_position_encoding_grad")
def _add_position_encoding_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d = ctx.input("Out@GRAD")
        ctx.set_output("X@GRAD", (ctx.attrs["alpha"] * d).astype(d.dtype))


def _windows(shape: tuple[int, ...], crop: list[int], offs: np.ndarray
             ) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    lead = shape[:len(shape) - len(crop)]
    for i, idx in enumerate(itertools.product(*(range(v) for v in lead))):
        yield idx, tuple(slice(int(o), int(o) + c) for o, c in zip(offs[i], crop))


@register_kernel("random_crop")
def _random_crop(ctx: KernelContext) -> None:
    x = ctx.input("X")
    crop = list(ctx.attrs["shape"])
    lead = x.shape[:x.ndim - len(crop)]
    tail = x.shape[x.ndim - len(crop):]
    if any(c > t for c, t in zip(crop, tail)):
        raise ValueError(f"random_crop: crop {crop} is larger than X's last dims {list(tail)}")
    n = int(np.prod(lead)) if lead else 1
    rng = ctx.rng()
    offs = np.stack([rng.integers(0, t - c + 1, size=n) for c, t in zip(crop, tail)], axis=1)
    out = np.empty((*lead, *crop), x.dtype)
    for idx, win in _windows(x.shape, crop, offs):
        out[idx] = x[(*idx, *win)]
    ctx.set_output("Out", out)
    ctx.set_output("Offsets", offs.astype(np.int64))


@register_kernel("random_crop_grad")
def _random_crop_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        x, d = ctx.input("X"), ctx.input("Out@GRAD")
        dx = np.zeros(x.shape, d.dtype)
        for idx, win in _windows(x.shape, list(ctx.attrs["shape"]), ctx.input("Offsets")):
            dx[(*idx, *win)] = d[idx]
        ctx.set_output("X@GRAD", dx)
