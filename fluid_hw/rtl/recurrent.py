"""Recurrent stage: a quantised LSTM, GRU or plain recurrence (docs/fixed_point.md,
"Recurrent cells", "Plain recurrences") over sequences streamed back to back, with its
input projection.

Stream format.  Input: one beat per time step, ``8 * in_dim`` bits of int8 ``x_t``
(element 0 lowest) and one more bit (bit ``8 * in_dim``): "this is the last step of its
sequence".  Output, ``mode="last"``: one beat of ``8 * hidden`` bits per sequence (the
last step's int8 hidden state, unit 0 lowest); ``mode="sequence"``: one such beat per
step with one more bit (bit ``8 * hidden``) marking the sequence's last step.  The state
(``h`` int8, ``c`` int16 per unit) is reset to 0 after each sequence's last step.

Datapath of one step, three parts run one after the other (the recurrence: step t+1's
hidden product needs step t's whole ``h``):

* the matrix engine (``pe`` x ``simd``, the MVAU's arrangement): for each group of
  ``pe`` gate columns it folds over ``in_dim / simd`` beats of ``x_t`` (the input
  projection, ``quantized_fc`` without requantiser, its int32 wrap-around) and then
  ``hidden / simd`` beats of the state (``h``; the GRU's candidate columns read ``r * h``
  instead), two accumulators per PE; weights in one ROM per PE (``(ncols / pe) * (in_dim
  + hidden) / simd`` words of ``8 * simd`` bits; block RAM from 4 kbit on, as
  :func:`~._mem.param_memory`), the operand (fold ``f`` of ``x_t`` and ``h``) from a
  shift register loaded at each group's first fold, products registered twice (a
  ``MULT18X18D`` with ``ff_style="trellis"``), the adder tree over a PE's lanes
  registered at every level (:func:`engine_tree_levels`); the accumulators land in
  small memories per gate and PE;
* the element-wise unit, one hidden unit per cycle, fully pipelined: the accumulators
  of a word (one per PE) loaded into a shift chain and read from its end (no PE-way
  multiplexer), the gate sum
  requantisers (per term multiplier and shift, one rounding), the gate tables (256 x 8
  ROMs), the cell / hidden updates, writing the unit's new state;
* the GRU runs the two twice: update and reset columns, then (after ``r * h`` is known)
  the candidate columns;
* the plain recurrence (``quantized_rnn``: ``h_t = T[SRQ(x_t W_x + b, h_{t-1} U)]``) has
  one gate column per unit, no state read in the element-wise unit (its ``h U`` is the
  engine's) and the table's output is the new ``h``.

Cycles per step (input waiting, output free): :func:`recurrent_step_cycles`.

Only the control has a reset (the FSM, the valid flags, the state ``h`` / ``c``): the
datapath's registers are reset-less, so SOFT_RESET's net reaches a few hundred
flip-flops instead of every one (every datapath value is used under a valid flag).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from amaranth import Array, Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ._dsp import dsp_product
from ._ff import copy_register
from ._mem import BLOCK_ROM_BITS
from ._util import Component, HardwareConfigError
from .mvau import adder_tree_depth

__all__ = ["RecurrentUnit", "RecurrentParams", "recurrent_step_cycles", "engine_drain",
           "engine_tree_levels", "elementwise_latency", "GATES"]

#: gate columns per hidden unit
GATES = {"lstm": 4, "gru": 3, "rnn": 1}
#: cycles of a sum requantiser: operands, products (two registers), aligned terms, sum
#: with the rounding term, the shift, the clamp
SRQ_LATENCY = 7
#: cycles of a registered product (two registers, as a MULT18X18D with its own)
PRODUCT_LATENCY = 2


@dataclass
class RecurrentParams:
    """The integers of a quantised cell and its projection (docs/fixed_point.md):
    ``wx`` int8 ``[in_dim, G D]``, ``bias`` int32 ``[G D]`` (the projection's, with the
    recurrence's folded in), ``wh`` int8 ``[D, G D]``, ``gm`` / ``gs`` ``[terms, G D]``,
    ``tables`` int8 ``[5 | 3, 256]`` (program layout ``Table[z + 128]``), ``peephole``
    int8 ``[3, D]`` or None, and the cell's scalar attributes (``attrs``)."""

    wx: np.ndarray
    bias: np.ndarray
    wh: np.ndarray
    gm: np.ndarray
    gs: np.ndarray
    tables: np.ndarray
    peephole: np.ndarray | None
    attrs: dict[str, Any]


def engine_tree_levels(simd: int) -> int:
    """Registered levels of a PE's adder tree over its ``simd`` lane products: one a
    level (:func:`~.mvau.adder_tree_depth`), at least one (the PE's sum register)."""
    return max(1, adder_tree_depth(simd))


def engine_drain(simd: int) -> int:
    """Cycles from the matrix engine's last issue to its last accumulator written: the
    weight read and the operand register, two product registers, the adder tree's
    levels (the last one the PE's sum)."""
    return 3 + engine_tree_levels(simd)


def elementwise_latency(cell: str, peepholes: bool, phase: int) -> int:
    """Stage (cycles after the unit's issue) at which its new state is written."""
    s = _ElemTiming(cell, peepholes)
    if cell == "rnn":
        return s.rnn()
    return s.lstm() if cell == "lstm" else (s.gru_a() if phase == 0 else s.gru_b())


class _ElemTiming:
    """The element-wise pipelines' stage arithmetic (shared by the hardware and the
    cycle model)."""

    def __init__(self, cell: str, peepholes: bool) -> None:
        self.cell, self.peep = cell, peepholes

    #: stage of the gate requantisers' operands (the projection plus its bias)
    OPERANDS = 3

    def lstm(self) -> int:
        z = self.OPERANDS + SRQ_LATENCY         # gate pre-activations (peepholes at 3)
        gates = z + 1                           # table read
        c_new = gates + PRODUCT_LATENCY + SRQ_LATENCY   # f * c_prev, i * g, requantised
        tc = c_new + SRQ_LATENCY + 1            # tanh input, cell table
        zo = max(self.OPERANDS, c_new + PRODUCT_LATENCY) + SRQ_LATENCY if self.peep else z
        return max(zo + 1, tc) + PRODUCT_LATENCY + SRQ_LATENCY

    def gru_a(self) -> int:
        gates = self.OPERANDS + SRQ_LATENCY + 1
        return gates + PRODUCT_LATENCY + SRQ_LATENCY   # r * h requantised

    def gru_b(self) -> int:
        cand = self.OPERANDS + SRQ_LATENCY + 1
        return cand + PRODUCT_LATENCY + SRQ_LATENCY    # the new h

    def rnn(self) -> int:
        return self.OPERANDS + SRQ_LATENCY + 1        # the table's output is the new h


def recurrent_step_cycles(cell: str, in_dim: int, hidden: int, pe: int, simd: int,
                          peepholes: bool) -> int:
    """Cycles of one time step with the input waiting and the output free: the input
    transfer, per phase the engine's ``groups * (in_dim + hidden) / simd`` issues and
    drain, the element-wise unit's ``hidden`` issues and latency, the output cycle."""
    sf = (in_dim + hidden) // simd
    if cell != "gru":
        phases = [(GATES[cell] * hidden // pe, elementwise_latency(cell, peepholes, 0))]
    else:
        phases = [(2 * hidden // pe, elementwise_latency("gru", False, 0)),
                  (hidden // pe, elementwise_latency("gru", False, 1))]
    return 2 + sum(g * sf + engine_drain(simd) + hidden + lat for g, lat in phases)


def state_read_split(hidden: int) -> tuple[int, int]:
    """The element-wise unit's two-level state read: (low index bits of its first
    multiplexer level, number of first-level groups); (0, 0) for one level, at a hidden
    size of 16 or less (a 16-way multiplexer is two LUT levels: the hidden-8 LSTM met
    113.6 MHz with it, and its router stalled with the split)."""
    if hidden <= 16:
        return 0, 0
    lo = (max(1, (hidden - 1).bit_length()) + 1) // 2
    return lo, -(-hidden // (1 << lo))


def _wrap(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


class _Pipe:
    """Free-running pipeline values: ``(signal, stage)`` pairs, delayed on demand.  The
    registers have no reset (a soft reset's net reaches only the control: every value
    here is used under a valid flag), except the delays of a signal that has one (the
    valid flags themselves)."""

    def __init__(self, m: Module, name: str) -> None:
        self.m, self.name, self.n = m, name, 0
        self._delays: dict[tuple[int, int], Value] = {}
        self._keep: list[Value] = []  # keeps the ids of the delayed values unique

    def sig(self, shape: Any, tag: str, reset_less: bool = True) -> Signal:
        self.n += 1
        return Signal(shape, name=f"{self.name}_{tag}{self.n}", reset_less=reset_less)

    def at(self, v: tuple[Value, int], stage: int) -> Value:
        sig, s = v
        if s > stage:
            raise HardwareConfigError(f"{self.name}: value at stage {s} wanted at {stage}")
        cur = sig
        data = not isinstance(sig, Signal) or sig.reset_less
        for k in range(s, stage):
            key = (id(sig), k + 1)
            if key not in self._delays:
                r = self.sig(cur.shape(), "d", reset_less=data)
                self.m.d.sync += r.eq(cur)
                self._delays[key] = r
                self._keep.append(sig)
            cur = self._delays[key]
        return cur

    def reg(self, shape: Any, expr: Value, stage: int, tag: str) -> tuple[Signal, int]:
        r = self.sig(shape, tag)
        self.m.d.sync += r.eq(expr)
        return r, stage + 1


def _bits(v: int) -> int:
    return max(1, int(v).bit_length())


class RecurrentUnit(Component):
    """A quantised LSTM / GRU / plain recurrence stage; see the module docstring."""

    def __init__(self, name: str, cell: str, in_dim: int, hidden: int, pe: int, simd: int,
                 params: RecurrentParams, *, mode: str = "last", ff_style: str = "plain"
                 ) -> None:
        who = f"recurrent stage {name!r}"
        if cell not in GATES:
            raise HardwareConfigError(f"{who}: cell must be one of {sorted(GATES)}, not {cell!r}")
        if mode not in ("last", "sequence"):
            raise HardwareConfigError(f"{who}: mode must be 'last' or 'sequence', not "
                                      f"{mode!r}")
        if hidden % pe or in_dim % simd or hidden % simd:
            raise HardwareConfigError(
                f"{who}: PE {pe} must divide the hidden size {hidden} and SIMD {simd} both "
                f"the input size {in_dim} and the hidden size; choose divisors")
        self.name, self.cell, self.in_dim, self.hidden = name, cell, in_dim, hidden
        self.pe, self.simd, self.mode, self.ff_style = pe, simd, mode, ff_style
        self.p = params
        self.peep = cell == "lstm" and params.peephole is not None
        g = GATES[cell]
        if params.wx.shape != (in_dim, g * hidden) or params.wh.shape != (hidden, g * hidden):
            raise HardwareConfigError(f"{who}: weights {params.wx.shape} / {params.wh.shape} "
                                      f"do not match in_dim {in_dim}, hidden {hidden}")
        self.step_cycles = recurrent_step_cycles(cell, in_dim, hidden, pe, simd, self.peep)
        out_bits = 8 * hidden + (1 if mode == "sequence" else 0)
        super().__init__({"i": In(stream.Signature(8 * in_dim + 1)),
                          "o": Out(stream.Signature(out_bits))})

    # ------------------------------------------------------------------ helpers
    def _product(self, m: Module, pp: _Pipe, a: tuple[Value, int], b: tuple[Value, int],
                 tag: str) -> tuple[Value, int]:
        """``a * b`` two cycles later (a MULT18X18D with ``ff_style="trellis"`` when both
        fit 18 bits)."""
        s = max(a[1], b[1])
        av, bv = pp.at(a, s), pp.at(b, s)
        if self.ff_style == "trellis" and len(av) <= 18 and len(bv) <= 18:
            p = dsp_product(m, av.as_signed(), bv.as_signed(), f"{pp.name}_{tag}")
            width = len(av) + len(bv)
            return p[0:width].as_signed(), s + PRODUCT_LATENCY
        shape = signed(len(av) + len(bv))
        r1, s1 = pp.reg(shape, av.as_signed() * bv.as_signed(), s, f"{tag}_p")
        return pp.reg(shape, r1, s1, f"{tag}_q")

    def _srq_dsp_term(self, m: Module, pp: _Pipe, p: tuple[Value, int], mult: Any, s: int,
                      tag: str) -> tuple[Value, int]:
        """A sum-requantiser term's product ``p * m`` at stage ``s + 3`` through
        MULT18X18Ds with their own registers (:func:`~._dsp.dsp_product`): the input
        registers are the operand stage (``s + 1``), the output register the first
        product stage, a fabric register (adding the two partial products of a ``p``
        wider than 18 bits: its low 17 bits and its high part) the second."""
        pv = pp.at(p, s).as_signed()
        mv = Const(mult, unsigned(16)) if isinstance(mult, int) else \
            pp.at(mult, s).as_unsigned()
        m18 = Cat(mv, Const(0, 1)).as_signed()
        if len(pv) > 35:
            raise HardwareConfigError(f"{self.name}: a {len(pv)}-bit requantiser operand")
        pieces = [(pv, 0)] if len(pv) <= 18 else \
            [(Cat(pv[:17], Const(0, 1)).as_signed(), 0), (pv[17:].as_signed(), 17)]
        total: Value | None = None
        for k, (a, sh) in enumerate(pieces):
            q = dsp_product(m, a, m18, f"{pp.name}_{tag}_m{k}")[:len(a) + 17].as_signed()
            total = q << sh if total is None else total + (q << sh)
        assert total is not None
        return pp.reg(signed(len(pv) + 17), total, s + 2, f"{tag}_u")

    def _srq(self, m: Module, pp: _Pipe, terms: Sequence[tuple[tuple[Value, int], Any, Any]],
             lo: int, hi: int, tag: str, max_dn: int = 47) -> tuple[Value, int]:
        """The sum requantiser over ``(product, m, n)`` terms (``m`` / ``n`` ints or
        pipeline values), result clamped to ``[lo, hi]``: :data:`SRQ_LATENCY` cycles
        after the latest operand."""
        s = max([t[0][1] for t in terms] +
                [x[1] for t in terms for x in t[1:] if isinstance(x, tuple)])
        # s + 1: the operands registered; s + 2, s + 3: each term's product p * m,
        # registered twice (HARDWARE.md: a register on each multiplier input, two after).
        # A product wider than one MULT18X18D (p over 18 bits: the int32 gate sums) is
        # two at s + 2 -- p's low 17 bits and its high part, each times m -- added at
        # s + 3: no multiplier and partial-product adder in one cycle
        prods = []
        for j, (p, mult, _) in enumerate(terms):
            if self.ff_style == "trellis":
                prods.append(self._srq_dsp_term(m, pp, p, mult, s, f"{tag}_{j}"))
                continue
            pv = pp.at(p, s + 1).as_signed()
            mv = Const(mult, unsigned(16)) if isinstance(mult, int) else \
                pp.at(mult, s + 1).as_unsigned()
            if len(pv) <= 18:
                q1 = pp.reg(signed(len(pv) + 17), pv * mv, s + 1, f"{tag}_t{j}")
                prods.append(pp.reg(signed(len(pv) + 17), q1[0], s + 2, f"{tag}_u{j}"))
                continue
            plo = pp.reg(unsigned(17 + len(mv)), pv[:17] * mv, s + 1, f"{tag}_tl{j}")
            phi = pp.reg(signed(len(pv) - 17 + len(mv) + 1), pv[17:].as_signed() * mv,
                         s + 1, f"{tag}_th{j}")
            prods.append(pp.reg(signed(len(pv) + 17), (phi[0] << 17) + plo[0], s + 2,
                                f"{tag}_u{j}"))
        s += 1
        # s + 3: each term aligned to the largest shift n (constant shifts: wiring)
        if all(isinstance(t[2], int) for t in terms):
            n_c = max(int(t[2]) for t in terms)
            aligned = [pp.reg(signed(len(q[0]) + n_c - int(t[2])),
                              q[0].as_signed() << (n_c - int(t[2])), s + 2, f"{tag}_a{j}")
                       for j, (q, t) in enumerate(zip(prods, terms))]
            n_at: Any = None
        else:
            ns = [pp.at(t[2], s) if isinstance(t[2], tuple) else Const(int(t[2]), 6)
                  for t in terms]
            nmax: Value = ns[0]
            for x in ns[1:]:
                nmax = Mux(x > nmax, x, nmax)
            nreg = pp.reg(6, nmax, s, f"{tag}_n")
            dnw = _bits(max_dn)
            aligned = []
            for j, (q, nj) in enumerate(zip(prods, ns)):
                dn = pp.reg(dnw, (nmax - nj)[0:dnw], s, f"{tag}_dn{j}")
                sh = q[0].as_signed() << pp.at(dn, s + 2)
                aligned.append(pp.reg(signed(len(sh)), sh, s + 2, f"{tag}_a{j}"))
            n_at = nreg
        # s + 4: the sum and the rounding term 2^(n-1); s + 5: >> n; s + 6: the clamp
        sums: Value = aligned[0][0]
        for a in aligned[1:]:
            sums = sums + a[0]
        width = max(len(a[0]) for a in aligned) + len(aligned) + 1
        if n_at is None:
            rnd: Value | int = (1 << (n_c - 1)) if n_c else 0
            total = pp.reg(signed(width), sums + rnd, s + 3, f"{tag}_s")
            r = pp.reg(signed(width), total[0] >> n_c, s + 4, f"{tag}_q")
        else:
            n3 = pp.at(n_at, s + 3)
            rnd = Mux(n3 == 0, 0, (Const(1, 64) << n3) >> 1)
            total = pp.reg(signed(width), sums + rnd, s + 3, f"{tag}_s")
            r = pp.reg(signed(width), total[0] >> pp.at(n_at, s + 4), s + 4, f"{tag}_q")
        out_w = _bits(max(-lo, hi)) + 1
        rv = r[0]
        return pp.reg(signed(out_w), Mux(rv > hi, hi, Mux(rv < lo, lo, rv)), s + 5,
                      f"{tag}_r")

    def _table(self, m: Module, pp: _Pipe, row: int, z: tuple[Value, int], tag: str
               ) -> tuple[Value, int]:
        """The gate table ``row`` at ``z`` (a 256 x 8 ROM, registered read)."""
        t = np.roll(np.asarray(self.p.tables[row], np.int64), -128)
        rom = Memory(shape=8, depth=256, init=[int(v) & 0xFF for v in t],
                     attrs={"rom_style": "logic"})
        m.submodules[f"{tag}_rom"] = rom
        rp = rom.read_port(domain="sync")
        m.d.comb += rp.addr.eq(z[0][0:8])
        return rp.data.as_signed(), z[1] + 1

    # ------------------------------------------------------------------ elaborate
    def elaborate(self, platform: object) -> Module:
        m = Module()
        d, pe, simd, ind = self.hidden, self.pe, self.simd, self.in_dim
        g = GATES[self.cell]
        sf, sfx = (ind + d) // simd, ind // simd
        per_gate = d // pe

        x_reg = Signal(8 * ind, reset_less=True)
        last_reg = Signal()
        h = Array(Signal(signed(8), name=f"h{k}") for k in range(d))
        c = Array(Signal(signed(16), name=f"c{k}") for k in range(d)) \
            if self.cell == "lstm" else None
        rh = Array(Signal(signed(8), name=f"rh{k}") for k in range(d)) \
            if self.cell == "gru" else None
        ug = Array(Signal(signed(8), name=f"ug{k}") for k in range(d)) \
            if self.cell == "gru" else None
        phase = Signal()

        # ---------------- matrix engine
        phases = [(0, g * per_gate)] if self.cell != "gru" else \
            [(0, 2 * per_gate), (2 * per_gate, per_gate)]
        grp, f = Signal(range(g * per_gate + 1)), Signal(range(sf + 1))
        issue = Signal()
        # the weight address (column group x sf + f) as a counter: the GRU's candidate
        # phase starts where the update / reset phase ended
        waddr = Signal(range(g * per_gate * sf + 1))
        with m.If(issue):
            m.d.sync += waddr.eq(waddr + 1)
        base = Signal(range(g * per_gate + 1))
        m.d.comb += base.eq(phases[1][0] if len(phases) > 1 else 0)
        col_grp = Signal(range(g * per_gate + 1))
        m.d.comb += col_grp.eq(Mux(phase, base, 0) + grp)
        hvec = Cat(*h) if rh is None else Mux(phase, Cat(*rh), Cat(*h))
        vall = Cat(x_reg, hvec)
        # the operand: fold f of (x_t, h) -- a shift register loaded at each group's
        # first fold (no sf-way multiplexer on the path: sf is 37 for the GRU KWS)
        opnd = Signal(8 * simd, reset_less=True)
        if sf > 1:
            rest = Signal(8 * simd * (sf - 1), reset_less=True)
            with m.If(issue):
                with m.If(f == 0):
                    m.d.sync += [opnd.eq(vall[:8 * simd]), rest.eq(vall[8 * simd:])]
                with m.Else():
                    m.d.sync += [opnd.eq(rest[:8 * simd]), rest.eq(rest[8 * simd:])]
        else:
            m.d.sync += opnd.eq(vall)
        # tags down the engine (valid, f, column group) to the stage after the tree
        drain = engine_drain(simd)
        vt, ft, gt = [issue], [f], [col_grp]
        for k in range(1, drain + 1):
            vt.append(Signal(name=f"eng_v{k}"))
            ft.append(Signal.like(f, name=f"eng_f{k}", reset_less=True))
            gt.append(Signal.like(col_grp, name=f"eng_g{k}", reset_less=True))
            m.d.sync += [vt[k].eq(vt[k - 1]), ft[k].eq(ft[k - 1]), gt[k].eq(gt[k - 1])]
        v4, f4, g4 = vt[drain], ft[drain], gt[drain]
        wx = np.asarray(self.p.wx, np.int64)
        wh = np.asarray(self.p.wh, np.int64)
        wall = np.concatenate([wx, wh], axis=0)      # [(in + D), G D]
        eng = _Pipe(m, "eng")
        # accumulator memories: [gate][pe] x (x, h)
        accx_w: list[list[Any]] = []
        acch_w: list[list[Any]] = []
        accx_r: list[list[Any]] = []
        acch_r: list[list[Any]] = []
        for k in range(g):
            rowx: list[Any] = []
            rowh: list[Any] = []
            rrx: list[Any] = []
            rrh: list[Any] = []
            for p in range(pe):
                for kind, roww, rowr in (("x", rowx, rrx), ("h", rowh, rrh)):
                    mem = Memory(shape=signed(32), depth=per_gate, init=[])
                    m.submodules[f"acc{kind}_{k}_{p}"] = mem
                    roww.append(mem.write_port())
                    # read without a register (the element-wise unit's shift chain is
                    # the register; engine writes and these reads never overlap)
                    rowr.append(mem.read_port(domain="comb"))
            accx_w.append(rowx)
            acch_w.append(rowh)
            accx_r.append(rrx)
            acch_r.append(rrh)
        for p in range(pe):
            words = []
            for gg in range(g * per_gate):
                j = gg * pe + p
                for ff in range(sf):
                    lanes = wall[ff * simd:(ff + 1) * simd, j]
                    words.append(sum((int(v) & 0xFF) << (8 * s) for s, v in enumerate(lanes)))
            big = len(words) * 8 * simd >= BLOCK_ROM_BITS   # as rtl._mem.param_memory
            rom = Memory(shape=8 * simd, depth=len(words), init=words,
                         attrs={"rom_style": "block"} if big else {})
            m.submodules[f"w{p}"] = rom
            rp = rom.read_port(domain="sync")
            m.d.comb += rp.addr.eq(waddr)
            prods = []
            for s in range(simd):
                pr, _ = self._product(m, eng, (rp.data.word_select(s, 8).as_signed(), 1),
                                      (opnd.word_select(s, 8).as_signed(), 1), f"pe{p}_l{s}")
                prods.append(pr)
            # the adder tree, every level registered (stages 4 ..), the last the sum
            levels = engine_tree_levels(simd)
            vals: list[Value] = prods
            for lv in range(levels):
                nxt: list[Value] = []
                for j in range(0, len(vals), 2):
                    pair = vals[j:j + 2]
                    r = Signal(signed(len(pair[0]) + 1), name=f"pe{p}_sum" if
                               lv == levels - 1 else f"pe{p}_t{lv}_{j // 2}",
                               reset_less=True)
                    m.d.sync += r.eq(pair[0] + pair[1] if len(pair) == 2 else pair[0])
                    nxt.append(r)
                vals = nxt
            ssum = vals[0]
            accx, acch = Signal(signed(32), name=f"pe{p}_ax", reset_less=True), \
                Signal(signed(32), name=f"pe{p}_ah", reset_less=True)
            nx, nh = Signal(signed(32)), Signal(signed(32))
            m.d.comb += [nx.eq(Mux(f4 == 0, ssum, accx + ssum)),
                         nh.eq(Mux(f4 == sfx, ssum, acch + ssum))]
            with m.If(v4 & (f4 < sfx)):
                m.d.sync += accx.eq(nx)
            with m.If(v4 & (f4 >= sfx)):
                m.d.sync += acch.eq(nh)
            for k in range(g):
                wpx, wph = accx_w[k][p], acch_w[k][p]
                in_gate = (g4 >= k * per_gate) & (g4 < (k + 1) * per_gate)
                m.d.comb += [wpx.addr.eq(g4 - k * per_gate), wpx.data.eq(nx),
                             wpx.en.eq(v4 & in_gate & (f4 == sfx - 1)),
                             wph.addr.eq(g4 - k * per_gate), wph.data.eq(nh),
                             wph.en.eq(v4 & in_gate & (f4 == sf - 1))]

        # ---------------- element-wise unit
        dcnt = Signal(range(d + 1))
        dword, dlane = Signal(range(per_gate + 1)), Signal(range(pe))  # d // pe, d % pe
        elem = Signal()
        ep = _Pipe(m, "el")
        dword1 = Signal.like(dword, name="el_dword1", reset_less=True)  # at stage 1
        m.d.sync += dword1.eq(dword)
        for k in range(g):
            for p in range(pe):
                m.d.comb += [accx_r[k][p].addr.eq(dword1), acch_r[k][p].addr.eq(dword1)]
        d1, _ = ep.reg(range(d + 1), dcnt, 0, "d")
        lo_bits, _ = state_read_split(d)
        # dcnt's low bits next cycle: counting in ELEM (``dinc``, a register kept at
        # ``dcnt + 1``: no carry chain on the path), 0 after DRAIN (else unused)
        dinc = Signal(max(1, lo_bits), name="el_dinc", reset_less=True)
        dnext_lo = Signal(max(1, lo_bits), name="el_dnext_lo")
        m.d.comb += dnext_lo.eq(Mux(elem, dinc, 0))

        def state_at(arr: Any, width: int, tag: str) -> tuple[Value, int]:
            """``arr[dcnt]`` at stage 1 without a ``d``-way multiplexer on one path: a
            first level, selected by the low bits ``dcnt`` will have next cycle, picks
            one word of each group of ``2**lo_bits`` a cycle ahead; the second, by the
            high bits, picks the group.  A state word is written only ``latency``
            cycles after its own read, so reading it a cycle early is exact."""
            items = list(arr)
            if not lo_bits:
                return ep.reg(signed(width), arr[dcnt], 0, tag)
            size = 1 << lo_bits
            first_level = []
            for j in range(0, d, size):
                grp_items = items[j:j + size] + [Const(0, signed(width))] * (j + size - d)
                r = Signal(signed(width), name=f"el_{tag}_g{j // size}", reset_less=True)
                m.d.sync += r.eq(Array(grp_items)[dnext_lo])
                first_level.append(r)
            return ep.reg(signed(width), Array(first_level)[dcnt[lo_bits:]], 0, tag)
        first = Signal()   # stage 1: the unit is its word's first (lane 0)
        m.d.comb += first.eq(dlane == 0)

        def acc_of(k: int, kind: str) -> tuple[Value, int]:
            """Accumulator ``kind`` of gate ``k`` for the unit issued at stage 0, at
            stage 2: the PEs' word, read at stage 1 without a read register, is loaded
            into a shift chain at the word's first unit and moved one PE down a cycle
            -- neighbour-to-neighbour wiring instead of a PE-way multiplexer gathering
            ``32 * pe`` wires into one place (at PE 32 the full models did not route);
            the chain's load flag is a copy per accumulator
            (:func:`~._ff.copy_register`: a fan-out of ``32 * pe``, not all eight's)."""
            ports = accx_r[k] if kind == "x" else acch_r[k]
            if pe == 1:
                return ep.reg(signed(32), ports[0].data, 1, f"{kind}{k}")
            load = copy_register(m, first, Const(1, 1), f"el_ld_{kind}{k}", self.ff_style)
            chain = [Signal(signed(32), name=f"el_{kind}{k}_sh{p}", reset_less=True)
                     for p in range(pe)]
            for p in range(pe - 1):
                m.d.sync += chain[p].eq(Mux(load, ports[p].data, chain[p + 1]))
            m.d.sync += chain[-1].eq(ports[-1].data)  # read only right after a load
            return chain[0], 2

        def rom_of(values: list[int], width: int, tag: str) -> tuple[Value, int]:
            rom = Memory(shape=width, depth=len(values), init=values,
                         attrs={"rom_style": "logic"})
            m.submodules[f"{tag}_rom"] = rom
            rp = rom.read_port(domain="sync")
            m.d.comb += rp.addr.eq(dcnt)
            return rp.data, 1

        gm = np.asarray(self.p.gm, np.int64)
        gs = np.asarray(self.p.gs, np.int64)
        bias = np.asarray(self.p.bias, np.int64)
        nterms = gm.shape[0]

        def gate_terms(k: int, extra: tuple[Value, int] | None) -> list[Any]:
            cols = range(k * d, (k + 1) * d)
            b = rom_of([_wrap(int(bias[j]), 32) for j in cols], 32, f"b{k}")
            xk = acc_of(k, "x")
            s = max(xk[1], b[1])
            xs = ep.at(xk, s)
            xb, sx = ep.reg(signed(32), xs + ep.at((b[0].as_signed(), b[1]), s), s, f"xb{k}")
            terms: list[Any] = []
            ms = [rom_of([int(gm[t, j]) for j in cols], 16, f"m{t}_{k}") for t in range(nterms)]
            nsh = [rom_of([int(gs[t, j]) for j in cols], 6, f"n{t}_{k}") for t in range(nterms)]
            ops: list[tuple[Value, int] | None] = [(xb, sx), acc_of(k, "h"), extra]
            for t in range(nterms):
                if ops[t] is None:
                    continue
                terms.append((ops[t], ms[t], nsh[t]))
            return terms

        def max_dn(k: int) -> int:
            cols = slice(k * d, (k + 1) * d)
            s = gs[:, cols]
            return int((s.max(axis=0) - s.min(axis=0)).max(initial=0))

        a = self.p.attrs
        lat_phase: list[int] = []
        if self.cell == "lstm":
            assert c is not None
            cp = state_at(c, 16, "cp")
            peep = np.asarray(self.p.peephole, np.int64) if self.peep else None
            pps: list[tuple[Value, int] | None] = [None, None, None]
            if peep is not None:
                for r in range(2):
                    pk = rom_of([int(v) & 0xFF for v in peep[r]], 8, f"pk{r}")
                    pps[r] = self._product(m, ep, cp, (pk[0].as_signed(), pk[1]), f"pp{r}")
            zs = {}
            for k, pp_v in ((0, None), (1, pps[0]), (2, pps[1])):
                zs[k] = self._srq(m, ep, gate_terms(k, pp_v), -128, 127, f"z{k}", max_dn(k))
            zmax = max(v[1] for v in zs.values())
            gts = {k: self._table(m, ep, k, (ep.at(zs[k], zmax), zmax), f"t{k}") for k in zs}
            gv, iv, fv = gts[0], gts[1], gts[2]
            fc = self._product(m, ep, fv, cp, "fc")
            ig = self._product(m, ep, iv, gv, "ig")
            cm, cs = [int(v) for v in a["cell_multipliers"]], [int(v) for v in a["cell_shifts"]]
            cn = self._srq(m, ep, [(fc, cm[0], cs[0]), (ig, cm[1], cs[1])], -32768, 32767,
                           "cn")
            u = self._srq(m, ep, [(cn, int(a["cell_tanh_multiplier"]),
                                   int(a["cell_tanh_shift"]))], -128, 127, "u")
            tc = self._table(m, ep, 4, u, "tc")
            if peep is not None:
                pk2 = rom_of([int(v) & 0xFF for v in peep[2]], 8, "pk2")
                extra = self._product(m, ep, cn, (pk2[0].as_signed(), pk2[1]), "pp2")
            else:
                extra = None
            zo = self._srq(m, ep, gate_terms(3, extra), -128, 127, "z3", max_dn(3))
            ov = self._table(m, ep, 3, zo, "t3")
            oc = self._product(m, ep, ov, tc, "oc")
            hn = self._srq(m, ep, [(oc, int(a["hidden_multiplier"]),
                                    int(a["hidden_shift"]))], -128, 127, "hn")
            lat = hn[1]
            dl = ep.at((d1, 1), lat)
            vl = Signal()
            m.d.comb += vl.eq(ep.at((elem, 0), lat))
            c_late = ep.at(cn, lat)  # (delay registers outside the If: free-running)
            with m.If(vl):
                m.d.sync += [h[dl].eq(hn[0]), c[dl].eq(c_late)]
            lat_phase.append(lat)
        elif self.cell == "rnn":
            # h_t = T[SRQ(x_t W_x + b, h_{t-1} U)]: the table's output is the new state
            zr = self._srq(m, ep, gate_terms(0, None), -128, 127, "z", max_dn(0))
            hv = self._table(m, ep, 0, zr, "t")
            lat = hv[1]
            dl = ep.at((d1, 1), lat)
            vl = Signal()
            m.d.comb += vl.eq(ep.at((elem, 0), lat))
            with m.If(vl):
                m.d.sync += h[dl].eq(hv[0])
            lat_phase.append(lat)
        else:
            assert rh is not None and ug is not None
            hp = state_at(h, 8, "hp")
            # phase A: update, reset
            zu = self._srq(m, ep, gate_terms(0, None), -128, 127, "zu", max_dn(0))
            zr = self._srq(m, ep, gate_terms(1, None), -128, 127, "zr", max_dn(1))
            uv = self._table(m, ep, 0, zu, "tu")
            rv = self._table(m, ep, 1, zr, "tr")
            rhp = self._product(m, ep, rv, hp, "rh")
            rhv = self._srq(m, ep, [(rhp, int(a["reset_multiplier"]), int(a["reset_shift"]))],
                            -128, 127, "rhq")
            lat_a = rhv[1]
            dl = ep.at((d1, 1), lat_a)
            va = Signal()
            m.d.comb += va.eq(ep.at((elem, 0), lat_a) & ~ep.at((phase, 0), lat_a))
            u_late = ep.at(uv, lat_a)  # (delay registers outside the If: free-running)
            with m.If(va):
                m.d.sync += [rh[dl].eq(rhv[0]), ug[dl].eq(u_late)]
            # phase B: candidate, new h
            zc = self._srq(m, ep, gate_terms(2, None), -128, 127, "zc", max_dn(2))
            cand = self._table(m, ep, 2, zc, "tcand")
            uu = state_at(ug, 8, "u")
            one_minus = ep.reg(signed(9), 127 - uu[0], uu[1], "omu")
            if a["origin_mode"]:
                gc, gh = one_minus, uu
            else:
                gc, gh = uu, one_minus
            t1 = self._product(m, ep, gc, cand, "uc")
            t2 = self._product(m, ep, gh, hp, "uh")
            hm = [int(v) for v in a["hidden_multipliers"]]
            hs = [int(v) for v in a["hidden_shifts"]]
            hn = self._srq(m, ep, [(t1, hm[0], hs[0]), (t2, hm[1], hs[1])], -128, 127, "hn")
            lat_b = hn[1]
            dlb = ep.at((d1, 1), lat_b)
            vb = Signal()
            m.d.comb += vb.eq(ep.at((elem, 0), lat_b) & ep.at((phase, 0), lat_b))
            with m.If(vb):
                m.d.sync += h[dlb].eq(hn[0])
            lat_phase += [lat_a, lat_b]
        self.elem_latency = lat_phase
        want = [elementwise_latency(self.cell, self.peep, k) for k in range(len(lat_phase))]
        if want != lat_phase:
            raise HardwareConfigError(f"recurrent stage {self.name!r}: element-wise "
                                      f"latencies {lat_phase} differ from the model {want}")

        # ---------------- control
        emit = Signal()
        m.d.comb += emit.eq(Const(int(self.mode == "sequence"), 1) | last_reg)
        wait = Signal(range(64))
        o_valid = Signal()
        o_data = Signal(len(self.o.payload), reset_less=True)
        m.d.comb += [self.o.valid.eq(o_valid), self.o.payload.eq(o_data)]
        with m.If(self.o.ready):
            m.d.sync += o_valid.eq(0)
        ng = Signal(range(g * per_gate + 1))
        m.d.comb += ng.eq(Mux(phase, phases[-1][1], phases[0][1]))
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += [x_reg.eq(self.i.payload[:8 * ind]),
                                 last_reg.eq(self.i.payload[8 * ind]),
                                 phase.eq(0), grp.eq(0), f.eq(0), waddr.eq(0)]
                    m.next = "ENG"
            with m.State("ENG"):
                m.d.comb += issue.eq(1)
                with m.If(f == sf - 1):
                    m.d.sync += [f.eq(0), grp.eq(grp + 1)]
                    with m.If(grp == ng - 1):
                        m.d.sync += wait.eq(drain - 1)
                        m.next = "DRAIN"
                with m.Else():
                    m.d.sync += f.eq(f + 1)
            with m.State("DRAIN"):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    m.d.sync += [dcnt.eq(0), dinc.eq(1), dword.eq(0), dlane.eq(0)]
                    m.next = "ELEM"
            with m.State("ELEM"):
                m.d.comb += elem.eq(1)
                m.d.sync += [dcnt.eq(dcnt + 1), dinc.eq(dinc + 1)]
                with m.If(dlane == pe - 1):
                    m.d.sync += [dlane.eq(0), dword.eq(dword + 1)]
                with m.Else():
                    m.d.sync += dlane.eq(dlane + 1)
                with m.If(dcnt == d - 1):
                    lat_now = lat_phase[-1] if len(lat_phase) == 1 else \
                        Mux(phase, lat_phase[1], lat_phase[0])
                    m.d.sync += wait.eq(lat_now - 1)
                    m.next = "FLUSH"
            with m.State("FLUSH"):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    if self.cell == "gru":
                        with m.If(~phase):
                            m.d.sync += [phase.eq(1), grp.eq(0), f.eq(0)]
                            m.next = "ENG"
                        with m.Else():
                            m.next = "OUT"
                    else:
                        m.next = "OUT"
            with m.State("OUT"):
                free = ~o_valid | self.o.ready
                with m.If(~emit | free):
                    with m.If(emit):
                        payload = Cat(*h) if self.mode == "last" else Cat(*h, last_reg)
                        m.d.sync += [o_data.eq(payload), o_valid.eq(1)]
                    with m.If(last_reg):
                        m.d.sync += [s.eq(0) for s in h]
                        if c is not None:
                            m.d.sync += [s.eq(0) for s in c]
                    m.next = "IDLE"
        return m
