"""Golden kernels of the fixed-point recurrent cells (``ir/ops/quant_rnn.py``: the
arithmetic; docs/fixed_point.md, "Recurrent cells": the contract).

Integers only: int64 holds every intermediate exactly (a gate column's sum
requantiser adds at most three terms below 2^46 each).  Time step ``t`` processes the
sequences still active at ``t`` together, longest first, as the float ``lstm`` /
``gru`` kernels do: no padding, and each sequence's state starts from its row of
H0 / C0 (or zero).
"""

from __future__ import annotations

import numpy as np

from ....ir.ops.quant import MULTIPLIER_MAX, SHIFT_MAX
from ....ir.ops.quant_rnn import GATE_ONE
from ..context import KernelContext
from . import register_kernel
from .sequence import _lod_of, _Steps

I64 = np.int64


def srq(terms: list[tuple[np.ndarray | int, np.ndarray | int]], n: np.ndarray | int, lo: int,
        hi: int) -> np.ndarray:
    """The sum requantiser: ``clamp((sum p * m + R(n)) >> n, lo, hi)`` with ``R(n) =
    2^(n-1)`` (0 when ``n = 0``), ``>>`` arithmetic (round half up)."""
    acc = sum((np.asarray(p, I64) * np.asarray(m, I64) for p, m in terms), I64(0))
    nn = np.asarray(n, I64)
    half = np.where(nn > 0, I64(1) << np.maximum(nn - 1, 0), I64(0))
    return np.clip((acc + half) >> nn, lo, hi)


def _table(tables: np.ndarray, row: int, z: np.ndarray) -> np.ndarray:
    return tables[row].astype(I64)[z + 128]


def _gate_params(ctx: KernelContext) -> tuple[np.ndarray, np.ndarray]:
    """GateMultiplier and GateShift as int64, each within the requantiser's range."""
    gm, gs = ctx.input("GateMultiplier").astype(I64), ctx.input("GateShift").astype(I64)
    for what, v, hi in (("GateMultiplier", gm, MULTIPLIER_MAX), ("GateShift", gs, SHIFT_MAX)):
        if v.size and (v.min() < 0 or v.max() > hi):
            raise ValueError(f"{ctx.op_type}: {what} holds {int(v.min())} .. {int(v.max())}; "
                             f"each value must lie in [0, {hi}]")
    return gm, gs


@register_kernel("quantized_lstm")
def quantized_lstm(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    a = ctx.attrs
    w = ctx.input("Weight").astype(I64)
    d = w.shape[0]
    gm, gs = _gate_params(ctx)
    tables = ctx.input("Tables")
    peep = ctx.input("Peephole").astype(I64) if a["use_peepholes"] else np.zeros((3, d), I64)
    mc = [int(v) for v in a["cell_multipliers"]]
    steps = _Steps(lod, a["is_reverse"])
    h = steps.initial(ctx, "H0", d, np.dtype(np.int8)).astype(I64)
    c = steps.initial(ctx, "C0", d, np.dtype(np.int16)).astype(I64)
    hidden = np.empty((x.shape[0], d), np.int8)
    cell = np.empty((x.shape[0], d), np.int16)
    xs = x.astype(I64)

    def gate(k: int, xr: np.ndarray, acc: np.ndarray, pp: np.ndarray | int) -> np.ndarray:
        cols = slice(k * d, (k + 1) * d)
        z = srq([(xr[:, cols], gm[0, cols]), (acc[:, cols], gm[1, cols]),
                 (pp, gm[2, cols])], gs[cols], -128, 127)
        return _table(tables, k, z)

    for n, rows in zip(steps.n, steps.rows):
        hp, cp = h[:n], c[:n]
        xr = xs[rows]
        acc = hp @ w
        g = gate(0, xr, acc, 0)
        i = gate(1, xr, acc, cp * peep[0])
        f = gate(2, xr, acc, cp * peep[1])
        cn = srq([(f * cp, mc[0]), (i * g, mc[1])], a["cell_shift"], -32768, 32767)
        o = gate(3, xr, acc, cn * peep[2])
        u = srq([(cn, a["cell_tanh_multiplier"])], a["cell_tanh_shift"], -128, 127)
        hn = srq([(o * _table(tables, 4, u), a["hidden_multiplier"])], a["hidden_shift"],
                 -128, 127)
        hidden[rows], cell[rows] = hn, cn
        h[:n], c[:n] = hn, cn
    ctx.set_output("Hidden", hidden, lod=lod)
    ctx.set_output("Cell", cell, lod=lod)


@register_kernel("quantized_gru")
def quantized_gru(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    a = ctx.attrs
    w = ctx.input("Weight").astype(I64)
    d = w.shape[0]
    gm, gs = _gate_params(ctx)
    tables = ctx.input("Tables")
    mh = [int(v) for v in a["hidden_multipliers"]]
    steps = _Steps(lod, a["is_reverse"])
    h = steps.initial(ctx, "H0", d, np.dtype(np.int8)).astype(I64)
    hidden = np.empty((x.shape[0], d), np.int8)
    xs = x.astype(I64)
    ur, cc = slice(0, 2 * d), slice(2 * d, 3 * d)
    for n, rows in zip(steps.n, steps.rows):
        hp = h[:n]
        xr = xs[rows]
        z = srq([(xr[:, ur], gm[0, ur]), (hp @ w[:, ur], gm[1, ur])], gs[ur], -128, 127)
        u, r = _table(tables, 0, z[:, :d]), _table(tables, 1, z[:, d:])
        rh = srq([(r * hp, a["reset_multiplier"])], a["reset_shift"], -128, 127)
        zc = srq([(xr[:, cc], gm[0, cc]), (rh @ w[:, cc], gm[1, cc])], gs[cc], -128, 127)
        cand = _table(tables, 2, zc)
        gc, gh = (GATE_ONE - u, u) if a["origin_mode"] else (u, GATE_ONE - u)
        hn = srq([(gc * cand, mh[0]), (gh * hp, mh[1])], a["hidden_shift"], -128, 127)
        hidden[rows] = hn
        h[:n] = hn
    ctx.set_output("Hidden", hidden, lod=lod)
