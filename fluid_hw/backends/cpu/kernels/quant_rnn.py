"""Golden kernels of the fixed-point recurrent cells (``ir/ops/quant_rnn.py``: the
arithmetic; docs/fixed_point.md, "Recurrent cells": the contract).

Integers only: a sum requantiser's terms are int64 when their aligned sum provably
fits (below 2^62), else Python ints; either way exact.  Time step ``t`` processes the
sequences still active at ``t`` together, longest first, as the float ``lstm`` /
``gru`` kernels do: no padding, and each sequence's state starts from its row of
H0 / C0 (or zero).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ....ir.ops.quant import MULTIPLIER_MAX, SHIFT_MAX
from ....ir.ops.quant_rnn import GATE_ONE
from ..context import KernelContext
from . import register_kernel
from .sequence import _ACT, _DACT, _lod_of, _Steps

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


@dataclass
class _CellInputs:
    """What every whole-sequence cell kernel reads first: Input (int64) and its LoD, the
    attributes, Weight (int64), the gate requantisers, the tables, the time-step layout
    and the initial hidden state (int64, step order)."""

    x: np.ndarray
    lod: list
    a: dict
    w: np.ndarray
    d: int
    gm: np.ndarray
    gs: np.ndarray
    tables: np.ndarray
    steps: _Steps
    h: np.ndarray


def _cell_inputs(ctx: KernelContext) -> _CellInputs:
    x, lod = _lod_of(ctx, "Input")
    a = ctx.attrs
    w = ctx.input("Weight").astype(I64)
    d = w.shape[0]
    gm, gs = _gate_params(ctx)
    steps = _Steps(lod, a["is_reverse"])
    h = steps.initial(ctx, "H0", d, np.dtype(np.int8)).astype(I64)
    return _CellInputs(x.astype(I64), lod, a, w, d, gm, gs, ctx.input("Tables"), steps, h)


@register_kernel("quantized_lstm")
def quantized_lstm(ctx: KernelContext) -> None:
    k = _cell_inputs(ctx)
    a, d, gm, gs, tables, h = k.a, k.d, k.gm, k.gs, k.tables, k.h
    peep = ctx.input("Peephole").astype(I64) if a["use_peepholes"] else np.zeros((3, d), I64)
    c = k.steps.initial(ctx, "C0", d, np.dtype(np.int16)).astype(I64)
    hidden = np.empty((k.x.shape[0], d), np.int8)
    cell = np.empty((k.x.shape[0], d), np.int16)

    def gate(g: int, xr: np.ndarray, acc: np.ndarray, pp: np.ndarray | int) -> np.ndarray:
        cols = slice(g * d, (g + 1) * d)
        z = srq([(xr[:, cols], gm[0, cols], gs[0, cols]),
                 (acc[:, cols], gm[1, cols], gs[1, cols]),
                 (pp, gm[2, cols], gs[2, cols])], -128, 127)
        return _table(tables, g, z)

    for n, rows in zip(k.steps.n, k.steps.rows):
        hp, cp = h[:n], c[:n]
        xr = k.x[rows]
        acc = hp @ k.w
        g = gate(0, xr, acc, 0)
        i = gate(1, xr, acc, cp * peep[0])
        f = gate(2, xr, acc, cp * peep[1])
        cn = _cell(a, f, cp, i, g)
        hn = _hidden(a, tables, 4, gate(3, xr, acc, cn * peep[2]), cn)
        hidden[rows], cell[rows] = hn, cn
        h[:n], c[:n] = hn, cn
    ctx.set_output("Hidden", hidden, lod=k.lod)
    ctx.set_output("Cell", cell, lod=k.lod)


def _run_steps(ctx: KernelContext, k: _CellInputs,
               step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    """Hidden = ``step(x rows, previous h)`` at every time step, h carried per sequence."""
    hidden = np.empty((k.x.shape[0], k.d), np.int8)
    for n, rows in zip(k.steps.n, k.steps.rows):
        hn = step(k.x[rows], k.h[:n])
        hidden[rows] = hn
        k.h[:n] = hn
    ctx.set_output("Hidden", hidden, lod=k.lod)


@register_kernel("quantized_gru")
def quantized_gru(ctx: KernelContext) -> None:
    k = _cell_inputs(ctx)
    _run_steps(ctx, k, lambda xr, hp: _gru_step(k.a, xr, hp, k.w, k.gm, k.gs, k.tables))


@register_kernel("quantized_rnn")
def quantized_rnn(ctx: KernelContext) -> None:
    k = _cell_inputs(ctx)

    def step(xr: np.ndarray, hp: np.ndarray) -> np.ndarray:
        z = srq([(xr, k.gm[0], k.gs[0]), (hp @ k.w, k.gm[1], k.gs[1])], -128, 127)
        return _table(k.tables, 0, z)

    _run_steps(ctx, k, step)


@register_kernel("simple_rnn")
def simple_rnn(ctx: KernelContext) -> None:
    """The float plain recurrence ``h_t = act(Input_t + h_{t-1} Weight + Bias)``."""
    x, lod = _lod_of(ctx, "Input")
    w = ctx.input("Weight")
    d = w.shape[0]
    act = _ACT[ctx.attrs["activation"]]
    steps = _Steps(lod, ctx.attrs["is_reverse"])
    xb = x + (ctx.input("Bias").reshape(-1) if ctx.has_input("Bias") else x.dtype.type(0))
    h = steps.initial(ctx, "H0", d, x.dtype)
    hidden = np.empty((x.shape[0], d), x.dtype)
    for n, rows in zip(steps.n, steps.rows):
        hn = act(xb[rows] + h[:n] @ w)
        hidden[rows] = hn
        h[:n] = hn
    ctx.set_output("Hidden", hidden.astype(x.dtype, copy=False), lod=lod)


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


@register_kernel("simple_rnn_grad")
def simple_rnn_grad(ctx: KernelContext) -> None:
    """Back-propagation through time of ``simple_rnn``."""
    x, lod = _lod_of(ctx, "Input")
    w, hidden = ctx.input("Weight"), ctx.input("Hidden")
    d = w.shape[0]
    dact = _DACT[ctx.attrs["activation"]]
    steps = _Steps(lod, ctx.attrs["is_reverse"])
    h0 = steps.initial(ctx, "H0", d, x.dtype)
    dhid = ctx.input("Hidden@GRAD")
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    dh_next = np.zeros((steps.count, d), x.dtype)
    for t in range(len(steps.n) - 1, -1, -1):
        n, rows = steps.n[t], steps.rows[t]
        hp = hidden[steps.rows[t - 1][:n]] if t else h0[:n]
        dz = (dhid[rows] + dh_next[:n]) * dact(hidden[rows])
        dx[rows] = dz
        dw += hp.T @ dz
        dh_next[:n] = dz @ w.T
    ctx.set_output("Input@GRAD", dx)
    ctx.set_output("Weight@GRAD", dw)
    if ctx.has_output("Bias@GRAD"):
        b = ctx.input("Bias")
        ctx.set_output("Bias@GRAD", dx.sum(axis=0).reshape(b.shape).astype(x.dtype))
    if ctx.has_output("H0@GRAD"):
        ctx.set_output("H0@GRAD", dh_next[np.argsort(steps.order, kind="stable")])
