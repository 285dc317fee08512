"""Golden kernels of the fixed-point recurrent cells (``ir/ops/quant_rnn.py``: the
arithmetic; docs/fixed_point.md, "Recurrent cells": the contract).

Integers only: a sum requantiser's terms are int64 when their aligned sum provably
fits (below 2^62), else Python ints; either way exact.  Time step ``t`` processes the
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


Term = tuple[np.ndarray | int, np.ndarray | int, np.ndarray | int]  # (p, m, n)


def srq(terms: list[Term], lo: int, hi: int) -> np.ndarray:
    """The sum requantiser: ``clamp((sum p * m * 2^(n - n_j) + R(n)) >> n, lo, hi)``
    with ``n`` the largest term shift, ``R(n) = 2^(n-1)`` (0 when ``n = 0``), ``>>``
    arithmetic (round half up)."""
    ts = [(np.asarray(p, I64), np.asarray(m, I64), np.asarray(k, I64)) for p, m, k in terms]
    n = ts[0][2]
    for _, _, k in ts[1:]:
        n = np.maximum(n, k)
    bound = sum(int(np.abs(p).max(initial=0)) * int(m.max(initial=0)) *
                2 ** int((n - k).max(initial=0)) for p, m, k in ts)
    big = bound >= 2**62
    acc: np.ndarray = np.asarray(0, object if big else I64)
    for p, m, k in ts:
        if big:  # exact in Python ints
            acc = acc + p.astype(object) * m.astype(object) * \
                (np.ones_like(n, object) << (n - k).astype(object))
        else:
            acc = acc + p * m * (I64(1) << (n - k))
    half = np.where(n > 0, I64(1) << np.maximum(n - 1, 0), I64(0))
    if big:
        r = (acc + half.astype(object)) >> n.astype(object)
        return np.clip(r, lo, hi).astype(I64)
    return np.clip((acc + half) >> n, lo, hi)


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


def _cell(a: dict, f: np.ndarray, cp: np.ndarray, i: np.ndarray, g: np.ndarray
          ) -> np.ndarray:
    """The new int16 cell: ``SRQ([(f * c_prev, ..), (i * g, ..)]; -32768, 32767)``."""
    mc, nc = list(a["cell_multipliers"]), list(a["cell_shifts"])
    return srq([(f * cp, mc[0], nc[0]), (i * g, mc[1], nc[1])], -32768, 32767)


def _hidden(a: dict, tables: np.ndarray, row: int, o: np.ndarray, cn: np.ndarray
            ) -> np.ndarray:
    """The new int8 hidden state: ``o`` times the cell table (row ``row``) of the cell
    requantised to 8 bits."""
    u = srq([(cn, a["cell_tanh_multiplier"], a["cell_tanh_shift"])], -128, 127)
    return srq([(o * _table(tables, row, u), a["hidden_multiplier"], a["hidden_shift"])],
               -128, 127)


def _gru_step(a: dict, xr: np.ndarray, hp: np.ndarray, w: np.ndarray, gm: np.ndarray,
              gs: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """One GRU step of int32 projections ``xr`` from int8 states ``hp``."""
    d = w.shape[0]
    ur, cc = slice(0, 2 * d), slice(2 * d, 3 * d)
    z = srq([(xr[:, ur], gm[0, ur], gs[0, ur]), (hp @ w[:, ur], gm[1, ur], gs[1, ur])],
            -128, 127)
    u, r = _table(tables, 0, z[:, :d]), _table(tables, 1, z[:, d:])
    rh = srq([(r * hp, a["reset_multiplier"], a["reset_shift"])], -128, 127)
    zc = srq([(xr[:, cc], gm[0, cc], gs[0, cc]), (rh @ w[:, cc], gm[1, cc], gs[1, cc])],
             -128, 127)
    cand = _table(tables, 2, zc)
    gc, gh = (GATE_ONE - u, u) if a["origin_mode"] else (u, GATE_ONE - u)
    mh, nh = list(a["hidden_multipliers"]), list(a["hidden_shifts"])
    return srq([(gc * cand, mh[0], nh[0]), (gh * hp, mh[1], nh[1])], -128, 127)


@register_kernel("quantized_lstm")
def quantized_lstm(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    a = ctx.attrs
    w = ctx.input("Weight").astype(I64)
    d = w.shape[0]
    gm, gs = _gate_params(ctx)
    tables = ctx.input("Tables")
    peep = ctx.input("Peephole").astype(I64) if a["use_peepholes"] else np.zeros((3, d), I64)
    steps = _Steps(lod, a["is_reverse"])
    h = steps.initial(ctx, "H0", d, np.dtype(np.int8)).astype(I64)
    c = steps.initial(ctx, "C0", d, np.dtype(np.int16)).astype(I64)
    hidden = np.empty((x.shape[0], d), np.int8)
    cell = np.empty((x.shape[0], d), np.int16)
    xs = x.astype(I64)

    def gate(k: int, xr: np.ndarray, acc: np.ndarray, pp: np.ndarray | int) -> np.ndarray:
        cols = slice(k * d, (k + 1) * d)
        z = srq([(xr[:, cols], gm[0, cols], gs[0, cols]),
                 (acc[:, cols], gm[1, cols], gs[1, cols]),
                 (pp, gm[2, cols], gs[2, cols])], -128, 127)
        return _table(tables, k, z)

    for n, rows in zip(steps.n, steps.rows):
        hp, cp = h[:n], c[:n]
        xr = xs[rows]
        acc = hp @ w
        g = gate(0, xr, acc, 0)
        i = gate(1, xr, acc, cp * peep[0])
        f = gate(2, xr, acc, cp * peep[1])
        cn = _cell(a, f, cp, i, g)
        hn = _hidden(a, tables, 4, gate(3, xr, acc, cn * peep[2]), cn)
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
    steps = _Steps(lod, a["is_reverse"])
    h = steps.initial(ctx, "H0", d, np.dtype(np.int8)).astype(I64)
    hidden = np.empty((x.shape[0], d), np.int8)
    xs = x.astype(I64)
    for n, rows in zip(steps.n, steps.rows):
        hn = _gru_step(a, xs[rows], h[:n], w, gm, gs, tables)
        hidden[rows] = hn
        h[:n] = hn
    ctx.set_output("Hidden", hidden, lod=lod)


@register_kernel("quantized_gru_unit")
def quantized_gru_unit(ctx: KernelContext) -> None:
    gm, gs = _gate_params(ctx)
    hn = _gru_step(ctx.attrs, ctx.input("Input").astype(I64),
                   ctx.input("HiddenPrev").astype(I64), ctx.input("Weight").astype(I64), gm,
                   gs, ctx.input("Tables"))
    ctx.set_output("Hidden", hn.astype(np.int8))


@register_kernel("quantized_lstm_unit")
def quantized_lstm_unit(ctx: KernelContext) -> None:
    a = ctx.attrs
    x = ctx.input("X").astype(I64)
    cp = ctx.input("C_prev").astype(I64)
    gm, gs = _gate_params(ctx)
    tables = ctx.input("Tables")
    z = srq([(x, gm[0], gs[0])], -128, 127)
    d = cp.shape[1]
    i, f, o, g = (_table(tables, k, z[:, k * d:(k + 1) * d]) for k in range(4))
    cn = _cell(a, f, cp, i, g)
    ctx.set_output("C", cn.astype(np.int16))
    ctx.set_output("H", _hidden(a, tables, 4, o, cn).astype(np.int8))
