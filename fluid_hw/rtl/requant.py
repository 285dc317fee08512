"""Bias add and requantisation, exactly as ``docs/fixed_point.md`` states.

For an int32 accumulator ``x`` of channel ``c``::

    s = int32(x + bias[c])                      (the quantised op's int32 output)
    p = int64(s) * m[c]                         (m in [0, 2^15 - 1])
    r = (p + 2^(n-1)) >> n   if n > 0 else p    (arithmetic shift: round half up)
    out = clamp(r, 0 if relu else -128, 127)    (int8; or a stage's own rails, _lane.Clamp)

:class:`RequantPipe` is the fixed-latency pipeline (``lanes`` channels in parallel,
per-lane parameter memories indexed by channel group); :class:`Requantiser` wraps
it into a stream component (``ff_style`` as :func:`._ff.copy_register`: the
multipliers' input registers).  With ``requantize=False`` the pipeline only adds the
bias and passes ``s`` on as int32 (a last stage whose output the host dequantises).

Latency mode (``early=True``, the MVAU's ``stream_input``): ``i_idx`` comes
:data:`EARLY_INDEX` cycles before its ``i_valid`` / ``i_acc``, so the parameters are
read and registered before the accumulator arrives, and the lane is
:data:`EARLY_LATENCY` stages deep (:data:`EARLY_BIAS_ONLY_LATENCY` without
requantisation): the bias add (1), the two products' ``MULT18X18D`` input and output
registers (2, 3), their sum (4), the rounding add (5), the whole shift (6) and the
clamp (7).  Unshared lanes, no thresholds.

Parameter memory entry (54 bits, also the runtime load format): bits 31..0 bias
(two's complement), 47..32 multiplier, 53..48 shift.

With ``thresholds`` (int32 ``[C, T]``, a ``multi_threshold`` in place of the
requantisation; const parameters only) the lanes compare instead of multiplying:
``s = int32(x + bias[c])``, ``out = lo + #{t : s >= thresholds[c, t]}`` with ``lo`` the
``clamp``'s (bipolar: ``hi`` where a threshold is crossed, else ``lo``), in the same
number of cycles; an entry is then ``32 * (T + 1)`` bits: the bias, then each threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from numpy.typing import ArrayLike

from ._dsp import dsp_product
from ._ff import check_ff_style, copy_register
from ._lane import Clamp, clamp_int8
from ._mem import ParamWriteSignature, param_memory
from ._util import Component, HardwareConfigError, as_int_array, ceil_log2
from .stream import CreditQueue, credit_depth

__all__ = ["RequantPipe", "Requantiser", "requantize_model", "requant_entries",
           "threshold_entries", "requant_units", "requant_steps", "requant_latency",
           "requant_param_depth",
           "PARAM_ENTRY_BITS", "REQUANT_LATENCY", "BIAS_ONLY_LATENCY", "EARLY_INDEX",
           "EARLY_LATENCY", "EARLY_BIAS_ONLY_LATENCY"]

PARAM_ENTRY_BITS = 54
#: pipeline depth of :class:`RequantPipe` with and without requantisation (one
#: physical lane per channel lane; a shared pipe adds ``steps - 1``, :func:`requant_latency`)
REQUANT_LATENCY = 11
BIAS_ONLY_LATENCY = 3
#: latency mode (``RequantPipe(early=True)``): cycles ``i_idx`` leads ``i_valid``, and
#: the pipeline depth with and without requantisation
EARLY_INDEX = 2
EARLY_LATENCY = 7
EARLY_BIAS_ONLY_LATENCY = 1


def requant_steps(lanes: int, units: int) -> int:
    """Cycles a pipe of ``units`` physical requantiser lanes takes to feed a group of
    ``lanes`` results through them: ``ceil(lanes / units)``."""
    return -(-lanes // max(1, min(units, lanes)))


def requant_units(lanes: int, period: int, multipliers: bool = True) -> int:
    """Physical requantiser lanes (two ``MULT18X18D`` each) for ``lanes`` results that
    arrive together at most once every ``period`` cycles: the fewest that take a group
    through in ``period`` cycles or less, ``ceil(lanes / period)`` (then as few as the
    same number of steps needs).  ``multipliers=False`` (a threshold or bias-only pipe:
    nothing to share) gives ``lanes``."""
    if not multipliers or period <= 1:
        return lanes
    steps = requant_steps(lanes, -(-lanes // period))
    return -(-lanes // steps)


def requant_latency(lanes: int, units: int, requantize: bool = True,
                    early: bool = False) -> int:
    """Cycles from ``i_valid`` to ``o_valid`` of a :class:`RequantPipe` of ``lanes``
    channel lanes over ``units`` physical lanes (``units`` as :func:`requant_units`
    gives it: ``lanes`` for threshold and bias-only pipes): the last slice of a group
    enters ``steps - 1`` cycles after the first.  ``early``: the latency mode's pipe
    (unshared, its index :data:`EARLY_INDEX` cycles ahead)."""
    if early:
        return EARLY_LATENCY if requantize else EARLY_BIAS_ONLY_LATENCY
    if not requantize:
        return BIAS_ONLY_LATENCY
    return REQUANT_LATENCY + requant_steps(lanes, units) - 1


def requant_param_depth(lanes: int, units: int, groups: int) -> int:
    """Entries of each physical lane's parameter memory (``units`` of them, of
    :data:`PARAM_ENTRY_BITS`; threshold pipes are never shared): ``groups`` unshared,
    else ``groups`` blocks of ``2^ceil(log2 steps)`` entries (entry ``g * 2^b + t``
    holds channel ``g * lanes + t * units + u`` of physical lane ``u``)."""
    steps = requant_steps(lanes, units)
    return groups if steps == 1 else groups << ceil_log2(steps)


def requantize_model(acc: ArrayLike, bias: ArrayLike | None, multiplier: ArrayLike | None,
                     shift: ArrayLike | None, relu: bool, clamp: Clamp | None = None,
                     thresholds: ArrayLike | None = None) -> np.ndarray:
    """Behavioural model.  ``acc`` is int [..., C] (last axis = channel).  Returns int8
    (``clamp``'s rails when given; with ``thresholds`` [C, T] the count of those crossed
    above ``clamp.lo``) or, without a multiplier, the int32 ``acc + bias``."""
    s = np.asarray(acc, dtype=np.int64)
    if bias is not None:
        s = s + np.asarray(bias, dtype=np.int64)
    s = ((s + 2**31) % 2**32) - 2**31  # int32 wrap, as the int32 kernel does
    if thresholds is not None:
        if clamp is None:
            raise HardwareConfigError("thresholds need the output's rails (a Clamp)")
        count = (s[..., None] >= np.asarray(thresholds, np.int64)).sum(axis=-1)
        if clamp.bipolar:
            return np.where(count > 0, clamp.hi, clamp.lo).astype(np.int8)
        return (clamp.lo + count).astype(np.int8)
    if multiplier is None:
        return s.astype(np.int32)
    m = np.asarray(multiplier, dtype=np.int64)
    n = np.asarray(shift, dtype=np.int64)
    p = s * m
    rnd = np.where(n > 0, np.left_shift(np.int64(1), np.maximum(n - 1, 0)), 0)
    r = np.right_shift(p + rnd, n)
    if clamp is not None:
        return clamp.model(r, relu)
    return np.clip(r, 0 if relu else -128, 127).astype(np.int8)


def threshold_entries(name: str, channels: int, bias: np.ndarray | None,
                      thresholds: np.ndarray) -> list[int]:
    """Parameter memory entries of a threshold stage: bias, then each threshold (32
    bits each, two's complement)."""
    th = as_int_array(name, "thresholds", thresholds, (channels, np.shape(thresholds)[1]),
                      -2**31, 2**31 - 1)
    b = (np.zeros(channels, np.int64) if bias is None else
         as_int_array(name, "bias", bias, (channels,), -2**31, 2**31 - 1))
    return [sum((int(v) & 0xFFFFFFFF) << (32 * k) for k, v in enumerate([b[c], *th[c]]))
            for c in range(channels)]


def requant_entries(name: str, channels: int, bias: np.ndarray | None,
                    multiplier: np.ndarray | None, shift: np.ndarray | None) -> list[int]:
    """Parameter memory entries, one per channel, after checking ranges."""
    b = (np.zeros(channels, np.int64) if bias is None else
         as_int_array(name, "bias", bias, (channels,), -2**31, 2**31 - 1))
    if multiplier is None:
        m = np.ones(channels, np.int64)
        n = np.zeros(channels, np.int64)
    else:
        m = as_int_array(name, "multiplier", multiplier, (channels,), 0, 2**15 - 1)
        n = as_int_array(name, "shift", shift, (channels,), 0, 47)
    return [(int(b[c]) & 0xFFFFFFFF) | (int(m[c]) << 32) | (int(n[c]) << 48)
            for c in range(channels)]


@dataclass(frozen=True)
class _Write:
    """A write port as :func:`~._mem.param_memory` takes it (``en`` one bit a memory)."""

    en: Value
    addr: Value
    data: Value


class RequantPipe(Component):
    """``lanes`` requantisers in parallel; never stalls.

    Ports: ``i_valid``, ``i_acc`` (lanes x int32), ``i_idx`` (channel group: lane ``l``
    holds channel ``i_idx * lanes + l``) in; ``o_valid``, ``o_data`` (lanes x int8,
    or int32 without requantisation) out, :attr:`latency` cycles later.  Runtime
    parameters: ``wr`` (:func:`~._mem.ParamWriteSignature`, memory ``l`` = lane ``l``).

    ``units`` (requantisation only, not thresholds) below ``lanes`` shares the
    multipliers: ``units`` physical lanes take a group in ``steps = ceil(lanes /
    units)`` slices, slice ``t`` (lanes ``t * units ..``) ``t`` cycles after
    ``i_valid`` (the first straight from ``i_acc``, the rest from a capture register);
    the results are collected and leave together as one ``o_data``, :attr:`latency` =
    :func:`requant_latency` cycles after ``i_valid``.  ``i_valid`` may then rise at most
    once every ``steps`` cycles (``busy`` is high in between).  Each physical lane
    ``u`` has one parameter memory (:func:`requant_param_depth`: entry ``g * 2^b + t``
    holds channel ``g * lanes + t * units + u``); ``wr`` keeps its per-lane format and
    is steered there.

    ``early`` (latency mode; unshared, no thresholds): ``i_idx`` is given
    :data:`EARLY_INDEX` cycles before ``i_valid`` and ``i_acc`` (and held by whoever
    drives it: the parameters are read every cycle), and the pipe is
    :func:`requant_latency` ``(early=True)`` deep.
    """

    def __init__(self, name: str, lanes: int, channels: int, *,
                 bias: np.ndarray | None = None, multiplier: np.ndarray | None = None,
                 shift: np.ndarray | None = None, relu: bool = False,
                 requantize: bool = True, runtime: bool = False,
                 ff_style: str = "plain", clamp: Clamp | None = None,
                 thresholds: np.ndarray | None = None, units: int | None = None,
                 early: bool = False) -> None:
        check_ff_style(name, ff_style)
        if early and (thresholds is not None or (units is not None and units < lanes)):
            raise HardwareConfigError(f"{name}: the latency mode's requantiser (early=True) "
                                      "has one lane a channel lane and no thresholds")
        if units is not None and not 1 <= units <= lanes:
            raise HardwareConfigError(
                f"{name}: {units} physical requantiser lanes for {lanes} lanes; give 1 to "
                f"{lanes} (requant_units)")
        if channels % lanes:
            raise HardwareConfigError(
                f"{name}: {channels} channels are not a multiple of {lanes} lanes")
        if thresholds is not None and (runtime or clamp is None or relu or not requantize):
            raise HardwareConfigError(
                f"{name}: thresholds need const parameters, the output's rails (clamp), "
                "requantisation and no relu (fold a relu into the thresholds' rails)")
        if requantize and not runtime and thresholds is None and \
                (multiplier is None or shift is None):
            raise HardwareConfigError(f"{name}: requantisation needs a multiplier and a shift")
        self.name, self.lanes, self.channels = name, lanes, channels
        self.groups = channels // lanes
        self.requantize, self.relu, self.runtime = requantize, relu, runtime
        self.ff_style, self.clamp = ff_style, clamp
        self.out_bits = 8 if requantize else 32
        self.n_thresholds = 0 if thresholds is None else int(np.shape(thresholds)[1])
        self.entry_bits = PARAM_ENTRY_BITS if thresholds is None else \
            32 * (self.n_thresholds + 1)
        if thresholds is not None:
            self.entries: list[int] | None = threshold_entries(name, channels, bias,
                                                               np.asarray(thresholds))
        else:
            self.entries = None if runtime else requant_entries(
                name, channels, bias, multiplier if requantize else None,
                shift if requantize else None)
        # comparisons and the bias add alone have no multipliers to share
        shareable = requantize and thresholds is None and units is not None
        self.steps = requant_steps(lanes, units) if shareable and units else 1
        self.units = -(-lanes // self.steps)
        self.early = early
        self.latency = requant_latency(lanes, self.units, requantize, early)
        members = {
            "i_valid": In(1), "i_acc": In(32 * lanes), "i_idx": In(range(max(2, self.groups))),
            "o_valid": Out(1), "o_data": Out(self.out_bits * lanes),
        }
        if self.steps > 1:
            members["busy"] = Out(1)
        if runtime:
            members["wr"] = In(ParamWriteSignature(lanes, ceil_log2(self.groups),
                                                   PARAM_ENTRY_BITS))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        if self.steps > 1:
            return self._elaborate_shared()
        m = Module()
        lat = self.latency
        valid = [Signal(name=f"v{i}") for i in range(lat + 1)]
        m.d.comb += valid[0].eq(self.i_valid)
        for i in range(lat):
            m.d.sync += valid[i + 1].eq(valid[i])
        m.d.comb += self.o_valid.eq(valid[lat])
        outs = []
        for lane in range(self.lanes):
            init = None if self.entries is None else self.entries[lane::self.lanes]
            rp = param_memory(m, f"params{lane}", depth=self.groups, width=self.entry_bits,
                              init=init, write=getattr(self, "wr", None), write_index=lane)
            m.d.comb += rp.addr.eq(self.i_idx)
            acc = self.i_acc.word_select(lane, 32)
            if self.early:
                outs.append(self._early_lane(m, lane, acc, rp.data, valid))
            elif self.n_thresholds:
                outs.append(self._threshold_lane(m, lane, rp.data, valid))
            else:
                outs.append(self._lane(m, lane, acc, rp.data, valid))
        m.d.comb += self.o_data.eq(Cat(*outs))
        return m

    def _elaborate_shared(self) -> Module:
        """``units`` physical lanes fed ``steps`` slices of a group, one a cycle."""
        m = Module()
        lanes, units, steps = self.lanes, self.units, self.steps
        lat = REQUANT_LATENCY  # of one physical lane
        step = Signal(range(steps), name="step")  # the slice entering; 0 when idle
        valid = [Signal(name=f"v{i}") for i in range(lat + 1)]
        last = [Signal(name=f"last{i}") for i in range(lat + 1)]
        m.d.comb += [self.busy.eq(step != 0), valid[0].eq(self.i_valid | self.busy),
                     last[0].eq(step == steps - 1)]
        for i in range(lat):
            m.d.sync += [valid[i + 1].eq(valid[i]), last[i + 1].eq(last[i])]
        with m.If(valid[0]):
            m.d.sync += step.eq(Mux(step == steps - 1, 0, step + 1))
        # slice 0 goes in straight from i_acc, slices 1.. from the capture register
        acc = Cat(self.i_acc, Const(0, 32 * (units * steps - lanes)))
        cap = Signal(32 * units * (steps - 1), name="cap")
        idx = Signal.like(self.i_idx, name="idx")
        with m.If(self.i_valid):
            m.d.sync += [cap.eq(acc[32 * units:]), idx.eq(self.i_idx)]
        feed = Cat(acc[:32 * units], cap).word_select(step, 32 * units)
        # parameters: entry g * 2^b + t of memory u is channel g * lanes + t * units + u
        b = ceil_log2(steps)
        depth = requant_param_depth(lanes, units, self.groups)
        write = None
        if self.runtime:
            # the loader's one-hot lane l goes to memory l % units, entry addr * 2^b + l // units
            wen = Signal(units, name="wr_en")
            wstep = Signal(b, name="wr_step")
            for u in range(units):
                m.d.comb += wen[u].eq(Cat(*(self.wr.en[t * units + u] for t in range(steps)
                                            if t * units + u < lanes)).any())
            for k in range(b):
                m.d.comb += wstep[k].eq(Cat(*(self.wr.en[lane] for lane in range(lanes)
                                              if (lane // units) >> k & 1)).any())
            write = _Write(wen, Cat(wstep, self.wr.addr), self.wr.data)
        outs = []
        for u in range(units):
            init = None
            if self.entries is not None:
                init = [0] * depth
                for g in range(self.groups):
                    for t in range(steps):
                        if t * units + u < lanes:
                            init[(g << b) | t] = self.entries[g * lanes + t * units + u]
            rp = param_memory(m, f"params{u}", depth=depth, width=self.entry_bits,
                              init=init, write=write, write_index=u)
            m.d.comb += rp.addr.eq(Cat(step, Mux(self.busy, idx, self.i_idx)))
            outs.append(self._lane(m, u, feed.word_select(u, 32), rp.data, valid))
        # slices 0 .. steps - 2 wait in a shift register for the last one
        held = Signal(8 * units * (steps - 1), name="held")
        with m.If(valid[lat]):
            m.d.sync += held.eq(Cat(held[8 * units:], *outs))
        m.d.comb += [self.o_valid.eq(valid[lat] & last[lat]),
                     self.o_data.eq(Cat(held, *outs)[:8 * lanes])]
        return m

    def _lane(self, m: Module, lane: int, acc: Value, entry: Signal, valid: list[Signal]
              ) -> Signal:
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            """Register of pipeline stage ``stage``, loaded when its input is valid."""
            r = Signal(shape, name=f"l{lane}_{tag}")
            with m.If(valid[stage - 1]):
                m.d.sync += r.eq(value)
            return r

        acc1 = reg(1, signed(32), acc.as_signed(), "acc1")
        acc2 = reg(2, signed(32), acc1, "acc2")  # beside the memory's own output register
        bias2 = reg(2, signed(32), entry[0:32].as_signed(), "bias2")
        mul2 = reg(2, unsigned(16), entry[32:47], "mul2")
        sh2 = reg(2, unsigned(6), entry[48:54], "sh2")
        s3 = reg(3, signed(32), acc2 + bias2, "s3")  # int32 wrap by truncation
        if not self.requantize:
            return s3
        mul3 = reg(3, signed(17), mul2, "mul3")
        sh3 = reg(3, unsigned(6), sh2, "sh3")
        # the multipliers' own input and output registers (stages 4 and 6), so that
        # neither route to or from a MULT18X18D shares a cycle with logic (HARDWARE.md);
        # the inputs as explicit copies (ff_style="trellis"): lanes whose parameters are
        # equal (one multiplier for every channel) would otherwise share one register
        # feeding DSPs placed apart
        s4 = copy_register(m, s3, valid[3], f"l{lane}_s4", self.ff_style).as_signed()
        mul4 = copy_register(m, mul3, valid[3], f"l{lane}_mul4", self.ff_style).as_signed()
        sh4 = reg(4, unsigned(6), sh3, "sh4")
        # s4 * mul4 as two 18x18 products summed a stage later: written as one 32x17
        # product Yosys splits it over two MULT18X18D but adds the partial products
        # in the same cycle (it was the design's critical path)
        hi4 = s4[16:32].as_signed()                   # s4 = hi4 * 2^16 + lo4
        lo4 = Cat(s4[0:16], Const(0, 1)).as_signed()  # 0 .. 2^16 - 1
        sh5 = reg(5, unsigned(6), sh4, "sh5")
        sh6 = reg(6, unsigned(6), sh5, "sh6")
        if self.ff_style == "trellis":  # the DSPs' own registers (rtl._dsp)
            ph6 = dsp_product(m, hi4, mul4, f"l{lane}_mh")[0:33].as_signed()
            pl6 = dsp_product(m, lo4, mul4, f"l{lane}_ml")[0:33].as_signed()
        else:
            ph5 = reg(5, signed(33), hi4 * mul4, "ph5")
            pl5 = reg(5, signed(33), lo4 * mul4, "pl5")
            ph6 = reg(6, signed(33), ph5, "ph6")
            pl6 = reg(6, signed(33), pl5, "pl6")
        p7 = reg(7, signed(48), (ph6 << 16) + pl6, "p7")
        sh7 = reg(7, unsigned(6), sh6, "sh7")
        rnd = Signal(unsigned(48), name=f"l{lane}_rnd")
        m.d.comb += rnd.eq((Const(1, 48) << sh7) >> 1)
        q8 = reg(8, signed(49), p7 + rnd, "q8")
        sh8 = reg(8, unsigned(6), sh7, "sh8")
        q9 = reg(9, signed(49), q8 >> Cat(Const(0, 3), sh8[3:6]), "q9")
        sh9 = reg(9, unsigned(3), sh8[0:3], "sh9")
        r10 = reg(10, signed(49), q9 >> sh9, "r10")
        return reg(11, unsigned(8), clamp_int8(r10, self.relu, self.clamp), "out11")


    def _early_lane(self, m: Module, lane: int, acc: Value, entry: Signal,
                    valid: list[Signal]) -> Signal:
        """The latency mode's lane (``early``): the entry read for ``i_idx`` two cycles
        ahead is registered the cycle before ``i_valid``; see the module docstring."""
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            r = Signal(shape, name=f"l{lane}_{tag}")
            with m.If(valid[stage - 1]):
                m.d.sync += r.eq(value)
            return r

        ent = Signal(PARAM_ENTRY_BITS, name=f"l{lane}_ent")
        m.d.sync += ent.eq(entry)  # the memory's data, registered: ready at i_valid
        s1 = reg(1, signed(32), acc.as_signed() + ent[0:32].as_signed(), "s1")  # int32 wrap
        if not self.requantize:
            return s1
        # the MULT18X18D input registers' source: a fabric register a lane (an explicit
        # copy, as in _lane: equal multipliers would otherwise share one register)
        mul1 = copy_register(m, ent[32:47], valid[0], f"l{lane}_mul1", self.ff_style)
        sh = reg(1, unsigned(6), ent[48:54], "sh1")
        for stage in range(2, 5):
            sh = reg(stage, unsigned(6), sh, f"sh{stage}")
        hi1 = s1[16:32].as_signed()                   # s1 = hi1 * 2^16 + lo1
        lo1 = Cat(s1[0:16], Const(0, 1)).as_signed()  # 0 .. 2^16 - 1
        mul = Cat(mul1, Const(0, 2)).as_signed()      # 0 .. 2^15 - 1
        if self.ff_style == "trellis":  # the DSPs' own registers (rtl._dsp)
            ph3 = dsp_product(m, hi1, mul, f"l{lane}_mh")[0:33].as_signed()
            pl3 = dsp_product(m, lo1, mul, f"l{lane}_ml")[0:33].as_signed()
        else:
            ph2 = reg(2, signed(33), hi1 * mul, "ph2")
            pl2 = reg(2, signed(33), lo1 * mul, "pl2")
            ph3 = reg(3, signed(33), ph2, "ph3")
            pl3 = reg(3, signed(33), pl2, "pl3")
        p4 = reg(4, signed(48), (ph3 << 16) + pl3, "p4")
        rnd = Signal(unsigned(48), name=f"l{lane}_rnd")
        m.d.comb += rnd.eq((Const(1, 48) << sh) >> 1)  # sh: stage 4's
        q5 = reg(5, signed(49), p4 + rnd, "q5")
        sh5 = reg(5, unsigned(6), sh, "sh5")
        r6 = reg(6, signed(49), q5 >> sh5, "r6")
        return reg(7, unsigned(8), clamp_int8(r6, self.relu, self.clamp), "out7")

    def _threshold_lane(self, m: Module, lane: int, entry: Signal, valid: list[Signal]
                        ) -> Signal:
        """Bias add (stage 3), the T comparisons (4), their count (5) above ``lo`` or the
        bipolar choice, then registers to the requantiser's latency."""
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            r = Signal(shape, name=f"l{lane}_{tag}")
            with m.If(valid[stage - 1]):
                m.d.sync += r.eq(value)
            return r

        t_n = self.n_thresholds
        assert self.clamp is not None
        lo, hi = self.clamp.lo, self.clamp.hi
        acc1 = reg(1, signed(32), self.i_acc.word_select(lane, 32).as_signed(), "acc1")
        acc2 = reg(2, signed(32), acc1, "acc2")
        bias2 = reg(2, signed(32), entry[0:32].as_signed(), "bias2")
        th2 = reg(2, unsigned(32 * t_n), entry[32:32 * (t_n + 1)], "th2")
        s3 = reg(3, signed(32), acc2 + bias2, "s3")  # int32 wrap by truncation
        th3 = reg(3, unsigned(32 * t_n), th2, "th3")
        c4 = reg(4, unsigned(t_n), Cat(*(s3 >= th3.word_select(t, 32).as_signed()
                                         for t in range(t_n))), "c4")
        count = sum((c4[t] for t in range(1, t_n)), c4[0].as_unsigned())
        if self.clamp.bipolar:
            value: Value = Mux(c4.any(), hi, lo)
        else:
            value = count + lo
        v = reg(5, unsigned(8), value, "v5")
        for stage in range(6, REQUANT_LATENCY + 1):
            v = reg(stage, unsigned(8), v, f"v{stage}")
        return v


class Requantiser(Component):
    """Stream requantiser: ``i`` carries vectors of ``channels`` int32 values in beats of
    ``lanes`` (channel order), ``o`` the int8 results in the same beats.  With ``units``
    (:class:`RequantPipe`) below ``lanes`` it takes a beat at most every ``steps``
    cycles."""

    def __init__(self, name: str, lanes: int, channels: int, **kwargs: Any) -> None:
        self.pipe = RequantPipe(name, lanes, channels, **kwargs)
        self.lanes, self.channels = lanes, channels
        super().__init__({"i": In(stream.Signature(32 * lanes)),
                          "o": Out(stream.Signature(self.pipe.out_bits * lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.pipe = pipe = self.pipe
        depth = credit_depth(pipe.latency, pipe.steps)
        m.submodules.queue = q = CreditQueue(pipe.out_bits * self.lanes, depth)
        idx = Signal(range(max(2, pipe.groups)))
        can = q.can_issue & ~pipe.busy if pipe.steps > 1 else q.can_issue
        go = self.i.valid & can
        m.d.comb += [
            self.i.ready.eq(can),
            q.issue.eq(go),
            pipe.i_valid.eq(go), pipe.i_acc.eq(self.i.payload), pipe.i_idx.eq(idx),
            q.w_valid.eq(pipe.o_valid), q.w_data.eq(pipe.o_data),
        ]
        with m.If(go):
            m.d.sync += idx.eq(Mux(idx == pipe.groups - 1, 0, idx + 1))
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m
