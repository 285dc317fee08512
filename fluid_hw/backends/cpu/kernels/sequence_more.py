"""Kernels of ``ir/ops/sequence_more.py`` and their gradients."""

from __future__ import annotations

import itertools

import numpy as np

from ....ir.lod import reversed_rows
from ..context import KernelContext
from . import register_kernel


def _offsets(ctx: KernelContext, slot: str) -> tuple[np.ndarray, list[list[int]], list[int]]:
    x, lod = ctx.input_with_lod(slot)
    if not lod:
        raise ValueError(f"{ctx.op_type}: {slot} {ctx.in_names[slot][0]!r} has no LoD; feed a "
                         "LoDTensor of sequences")
    return x, lod, lod[-1]


@register_kernel("sequence_reverse")
def _sequence_reverse(ctx: KernelContext) -> None:
    x, lod, offs = _offsets(ctx, "X")
    ctx.set_output("Y", x[reversed_rows(offs)], lod=lod)


@register_kernel("sequence_reverse_grad")
def _sequence_reverse_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        _, lod, offs = _offsets(ctx, "X")
        ctx.set_output("X@GRAD", ctx.input("Y@GRAD")[reversed_rows(offs)], lod=lod)


def _slice_rows(ctx: KernelContext) -> tuple[np.ndarray, list[int]]:
    _, _, offs = _offsets(ctx, "X")
    off = ctx.input("Offset").reshape(-1).astype(np.int64)
    ln = ctx.input("Length").reshape(-1).astype(np.int64)
    n = len(offs) - 1
    if off.size != n or ln.size != n:
        raise ValueError(f"sequence_slice: Offset and Length need one entry per sequence ({n}),"
                         f" got {off.size} and {ln.size}")
    rows: list[int] = []
    for i, (b, e) in enumerate(itertools.pairwise(offs)):
        if off[i] < 0 or ln[i] < 0 or off[i] + ln[i] > e - b:
            raise ValueError(f"sequence_slice: sequence {i} has {e - b} rows; offset {off[i]} "
                             f"+ length {ln[i]} does not fit")
        rows += range(b + int(off[i]), b + int(off[i] + ln[i]))
    return np.asarray(rows, np.int64), [0, *itertools.accumulate(int(v) for v in ln)]


@register_kernel("sequence_slice")
def _sequence_slice(ctx: KernelContext) -> None:
    rows, lod = _slice_rows(ctx)
    ctx.set_output("Out", ctx.input("X")[rows], lod=[lod])


@register_kernel("sequence_slice_grad")
def _sequence_slice_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        x, lod, _ = _offsets(ctx, "X")
        rows, _ = _slice_rows(ctx)
        g = np.zeros(x.shape, ctx.input("Out@GRAD").dtype)
        g[rows] = ctx.input("Out@GRAD")
        ctx.set_output("X@GRAD", g, lod=lod)


def _expand_rows(ctx: KernelContext) -> tuple[np.ndarray, list[list[int]]]:
    x = ctx.input("X")
    _, _, offs = _offsets(ctx, "Y")
    lens = np.diff(np.asarray(offs))
    if x.shape[0] != lens.size:
        raise ValueError(f"sequence_expand_as: X has {x.shape[0]} rows, Y {lens.size} "
                         "sequences; one row of X per sequence of Y")
    return np.repeat(np.arange(lens.size), lens), [list(offs)]


@register_kernel("sequence_expand_as")
def _sequence_expand_as(ctx: KernelContext) -> None:
    rows, lod = _expand_rows(ctx)
    ctx.set_output("Out", ctx.input("X")[rows], lod=lod)


@register_kernel("sequence_expand_as_grad")
def _sequence_expand_as_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        rows, _ = _expand_rows(ctx)
        d = ctx.input("Out@GRAD")
        g = np.zeros((ctx.input("X").shape[0], *d.shape[1:]), d.dtype)
        np.add.at(g, rows, d)
        ctx.set_output("X@GRAD", g)


@register_kernel("sequence_enumerate")
def _sequence_enumerate(ctx: KernelContext) -> None:
    x, lod, offs = _offsets(ctx, "X")
    w, pad = ctx.attrs["win_size"], ctx.attrs["pad_value"]
    ids = x.reshape(-1)
    out = np.full((ids.size, w), pad, x.dtype)
    for b, e in itertools.pairwise(offs):
        for k in range(w):
            out[b:max(b, e - k), k] = ids[b + k:e]
    ctx.set_output("Out", out, lod=lod)


def _scatter_pos(ctx: KernelContext, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    ids, _, offs = _offsets(ctx, "Ids")
    rows = np.repeat(np.arange(len(offs) - 1), np.diff(np.asarray(offs)))
    cols = ids.reshape(-1).astype(np.int64)
    if len(offs) - 1 != shape[0] or (cols.size and (cols.min() < 0 or cols.max() >= shape[1])):
        raise ValueError(f"sequence_scatter: Ids needs one sequence per row of X ({shape[0]}) "
                         f"and columns in [0, {shape[1]})")
    return rows, cols


@register_kernel("sequence_scatter")
def _sequence_scatter(ctx: KernelContext) -> None:
    x = ctx.input("X")
    rows, cols = _scatter_pos(ctx, x.shape)
    out = x.copy()
    np.add.at(out, (rows, cols), ctx.input("Updates").reshape(-1))
    ctx.set_output("Out", out)


@register_kernel("sequence_scatter_grad")
def _sequence_scatter_grad(ctx: KernelContext) -> None:
    d = ctx.input("Out@GRAD")
    rows, cols = _scatter_pos(ctx, d.shape)
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", d.copy())
    if ctx.has_output("Updates@GRAD"):
        ctx.set_output("Updates@GRAD", d[rows, cols].reshape(-1, 1))
