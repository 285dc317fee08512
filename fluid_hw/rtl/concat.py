"""Channel concat: two or more int8 streams joined into one, each input rescaled to the
output's fixed-point format with the requantiser's rounding and saturation.

Golden contract (``quantized_concat``, ``docs/fixed_point.md``): an element ``x`` of
input ``p`` with multiplier ``m_p`` in [0, 2^15 - 1] and shift ``n_p`` in [0, 47]::

    r = (x * m_p + 2^(n_p - 1)) >> n_p     (x * m_p when n_p = 0; round half up)
    out = clamp(r, 0 if relu else -128, 127)

Order: the output is ``groups`` groups; each takes ``blocks[0]`` elements from port 0
(``a``), then ``blocks[1]`` from port 1 (``b``), and so on.  An image streamed HWC and
joined along its channels is one group per pixel, block ``p`` input ``p``'s channels;
vectors are one group, the whole vectors.  :func:`concat_positions` gives each
input element's place in the output, :func:`concat_model` the whole contract.

:class:`ConcatJoin` takes one beat a cycle from the port whose turn it is (a counter
over the blocks; the other ports see ``ready`` low), only when its output queue has
room.  Each of the ``lanes`` lanes (which divide every block) rescales with the
selected port's constants.  The hardware form of a port's ``(m, n)``: ``m = 2^n`` is
the identity ``(1, 0)``, and ``n >= 23`` gives 0 for every int8 (``|x * m| < 2^22``),
so ``(0, 0)``; when every port is then ``(1, 0)`` no multiplier is built (stage 1 the
input register, 2 the clamp), else stage 1 registers the input and the port's
multiplier (``ff_style`` as :func:`._ff.copy_register`), 2-3 the product and its
second register (with ``ff_style="trellis"`` a ``MULT18X18D`` with its own registers,
:func:`._dsp.dsp_product`), 4 the port's rounding term added, 5 its shift and the
clamp.  Then a :class:`~.stream.CreditQueue`, so ``o.valid`` never depends on any
``ready``.

``runtime=True``: the multipliers and shifts are loaded at run time instead, through
``wr`` (:func:`~._mem.ParamWriteSignature`: one memory of an entry per input, entry
``p`` input ``p``'s; the load format, :func:`concat_entry`: bits 14..0 ``m``, 21..16
``n``).  Every input then has a rescaler, whatever the values (new scales may need
it), with the join's runtime rescaling (:mod:`.join`, :func:`._lane.loaded_shift`):
registers per input take, as its entry is written, the multiplier (0 where ``n >=
24``), the shift in 5 bits and the rounding term ``2^(n-1)``.  Stages 1-4 as above with
the selected input's registers, 5 the variable shift, 6 the clamp:
:data:`CONCAT_RUNTIME_LATENCY` cycles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._ff import check_ff_style, copy_register
from ._lane import clamp_int8, loaded_shift, rescale_product, stage_reg
from ._mem import ParamWriteSignature
from ._util import Component, HardwareConfigError, ceil_log2
from .requant import requantize_model
from .stream import CreditQueue, credit_depth

__all__ = ["ConcatJoin", "concat_model", "concat_positions", "concat_rescale",
           "CONCAT_PORTS", "concat_latency", "concat_entry", "CONCAT_ENTRY_BITS",
           "CONCAT_RUNTIME_LATENCY"]

#: the component's input ports, in order (at most this many inputs)
CONCAT_PORTS = ("a", "b", "c", "d", "e", "f", "g", "h")
#: |x * m| < 2^22 for an int8 x and m < 2^15: a shift of 23 or more rounds it to 0
_ZERO_SHIFT = 23
#: bits of an input's runtime parameter entry (:func:`concat_entry`)
CONCAT_ENTRY_BITS = 22
#: cycles from a beat's transfer to its result in the output queue with the multipliers
#: and shifts loaded at run time (a variable shift: one stage more than built in)
CONCAT_RUNTIME_LATENCY = 6


def _check(name: str, blocks: Sequence[int], multipliers: Sequence[int],
           shifts: Sequence[int]) -> None:
    if not 2 <= len(blocks) <= len(CONCAT_PORTS):
        raise HardwareConfigError(f"{name}: a concat takes 2 to {len(CONCAT_PORTS)} inputs, "
                                  f"got {len(blocks)}")
    if len(multipliers) != len(blocks) or len(shifts) != len(blocks):
        raise HardwareConfigError(f"{name}: {len(multipliers)} multipliers and {len(shifts)} "
                                  f"shifts for {len(blocks)} inputs; give one of each per input")
    for what, vals, hi in (("block", blocks, None), ("multiplier", multipliers, 2**15 - 1),
                           ("shift", shifts, 47)):
        for p, v in enumerate(vals):
            lo = 1 if hi is None else 0
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo or \
                    (hi is not None and v > hi):
                rng = ">= 1" if hi is None else f"in [0, {hi}]"
                raise HardwareConfigError(f"{name}: input {p}'s {what} must be an integer "
                                          f"{rng}, got {v!r}")


def concat_entry(name: str, m: int, n: int) -> int:
    """An input's runtime parameter entry (the load format), after checking ranges."""
    for what, v, hi in (("multiplier", m, 2**15 - 1), ("shift", n, 47)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= hi:
            raise HardwareConfigError(f"{name}: {what} must be an integer in [0, {hi}], "
                                      f"got {v!r}")
    return int(m) | int(n) << 16


def concat_positions(blocks: Sequence[int], groups: int) -> list[np.ndarray]:
    """For each input, the output position of each of its ``groups * blocks[p]``
    elements (in its stream order)."""
    total = sum(blocks)
    offsets = np.cumsum([0, *blocks[:-1]])
    return [(np.arange(groups)[:, None] * total + off + np.arange(b)[None, :]).reshape(-1)
            for b, off in zip(blocks, offsets)]


def concat_rescale(m: int, n: int) -> tuple[int, int]:
    """The hardware form of one input's ``(m, n)`` (the same results for every int8):
    the identity ``m = 2^n`` as ``(1, 0)``, a shift past the product's width as
    ``(0, 0)``."""
    if m == 1 << n:
        return 1, 0
    if n >= _ZERO_SHIFT or m == 0:
        return 0, 0
    return int(m), int(n)


def concat_model(xs: Sequence[np.ndarray], blocks: Sequence[int], groups: int,
                 multipliers: Sequence[int], shifts: Sequence[int], relu: bool = False
                 ) -> np.ndarray:
    """Behavioural model: inputs ``[N, groups * blocks[p]]`` in stream order -> the
    output ``[N, groups * sum(blocks)]`` (int8), each input rescaled as the module
    docstring states."""
    _check("concat_model", blocks, multipliers, shifts)
    arrs = [np.asarray(x, np.int64) for x in xs]
    if len(arrs) != len(blocks):
        raise HardwareConfigError(f"concat_model: {len(arrs)} inputs for {len(blocks)} blocks")
    n = len(arrs[0])
    out = np.zeros((n, groups * sum(blocks)), np.int8)
    for p, (x, pos) in enumerate(zip(arrs, concat_positions(blocks, groups))):
        if x.shape != (n, len(pos)):
            raise HardwareConfigError(f"concat_model: input {p} is {list(x.shape)}, expected "
                                      f"[{n}, {len(pos)}]")
        out[:, pos] = requantize_model(x, None, np.int64(multipliers[p]),
                                       np.int64(shifts[p]), relu)
    return out


def concat_latency(multipliers: Sequence[int], shifts: Sequence[int],
                   runtime: bool = False) -> int:
    """Cycles from a beat's transfer to its result in the output queue: 2 without a
    multiplier (every input at the output's scale), else 5; loaded at run time
    :data:`CONCAT_RUNTIME_LATENCY` whatever the values."""
    if runtime:
        return CONCAT_RUNTIME_LATENCY
    plain = all(concat_rescale(int(m), int(n)) == (1, 0) for m, n in zip(multipliers, shifts))
    return 2 if plain else 5


class ConcatJoin(Component):
    """Inputs ``a``, ``b``, ... joined block by block into ``o`` (``lanes`` int8 lanes
    each), every input rescaled and the result saturated as the module docstring
    states (``runtime``: the multipliers and shifts loaded through ``wr``).
    ``latency``: :func:`concat_latency` (to the output queue)."""

    def __init__(self, name: str, lanes: int, blocks: Sequence[int], *,
                 multipliers: Sequence[int] | None = None,
                 shifts: Sequence[int] | None = None, relu: bool = False,
                 runtime: bool = False, ff_style: str = "plain") -> None:
        check_ff_style(name, ff_style)
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise HardwareConfigError(f"concat {name!r}: lanes must be an integer >= 1, "
                                      f"got {lanes!r}")
        if runtime:
            multipliers, shifts = [1] * len(blocks), [0] * len(blocks)
        elif multipliers is None or shifts is None:
            raise HardwareConfigError(f"concat {name!r}: give the multipliers and shifts, or "
                                      "runtime=True to load them through wr")
        _check(f"concat {name!r}", blocks, multipliers, shifts)
        if any(b % lanes for b in blocks):
            raise HardwareConfigError(f"concat {name!r}: lanes={lanes} must divide every "
                                      f"input's block of elements {list(blocks)}")
        self.name, self.lanes, self.relu, self.ff_style = name, lanes, relu, ff_style
        self.runtime = runtime
        self.blocks = [int(b) for b in blocks]
        self.multipliers, self.shifts = [int(v) for v in multipliers], [int(v) for v in shifts]
        self.rescale = [concat_rescale(int(m), int(n)) for m, n in zip(multipliers, shifts)]
        self.latency = concat_latency(multipliers, shifts, runtime)
        self.queue_depth = credit_depth(self.latency, 1)
        self.ports = CONCAT_PORTS[:len(self.blocks)]
        members = {**{p: In(stream.Signature(8 * lanes)) for p in self.ports},
                   "o": Out(stream.Signature(8 * lanes))}
        if runtime:
            members["wr"] = In(ParamWriteSignature(1, ceil_log2(len(self.blocks)),
                                                   CONCAT_ENTRY_BITS))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.queue = q = CreditQueue(8 * self.lanes, self.queue_depth)
        ports = [getattr(self, p) for p in self.ports]
        n_in = len(ports)
        beats = [b // self.lanes for b in self.blocks]
        sel = Signal(range(n_in))  # whose turn it is
        cnt = Signal(range(max(2, max(beats))))  # beats taken of its block
        valid_sel = Signal()
        payload = Signal(8 * self.lanes)
        with m.Switch(sel):
            for p, port in enumerate(ports):
                with m.Case(p):
                    m.d.comb += [valid_sel.eq(port.valid), payload.eq(port.payload)]
        go = valid_sel & q.can_issue
        for p, port in enumerate(ports):
            m.d.comb += port.ready.eq((sel == p) & q.can_issue)
        with m.If(go), m.Switch(sel):
            for p in range(n_in):
                with m.Case(p):
                    with m.If(cnt == beats[p] - 1):
                        m.d.sync += [cnt.eq(0), sel.eq((p + 1) % n_in)]
                    with m.Else():
                        m.d.sync += cnt.eq(cnt + 1)
        lat = self.latency
        valid = [Signal(name=f"v{i}") for i in range(lat + 1)]
        sels = [Signal(range(n_in), name=f"sel{i}") for i in range(lat + 1)]
        m.d.comb += [valid[0].eq(go), sels[0].eq(sel)]
        for i in range(lat):
            m.d.sync += valid[i + 1].eq(valid[i])
            with m.If(valid[i]):
                m.d.sync += sels[i + 1].eq(sels[i])
        m.d.comb += q.issue.eq(go)
        if self.runtime:
            prm = self._params(m)
            outs = [self._scaled_lane(m, k, payload.word_select(k, 8), valid, sels, prm)
                    for k in range(self.lanes)]
        else:
            lane = self._plain_lane if lat == 2 else self._scaled_lane
            outs = [lane(m, k, payload.word_select(k, 8), valid, sels)
                    for k in range(self.lanes)]
        m.d.comb += [q.w_valid.eq(valid[lat]), q.w_data.eq(Cat(*outs))]
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m

    def _clamp(self, r: Value) -> Value:
        return clamp_int8(r, self.relu)

    def _params(self, m: Module) -> list[dict[str, Signal]]:
        """Per input, the registers derived from its entry as it is written (static
        while streaming; see the module docstring)."""
        data = self.wr.data
        zero, ns, k = loaded_shift(data[16:22])
        prm = []
        for p in range(len(self.ports)):
            r = {"m": Signal(signed(16), name=f"m_{p}"), "ns": Signal(5, name=f"ns_{p}"),
                 "k": Signal(23, name=f"k_{p}")}
            with m.If(self.wr.en[0] & (self.wr.addr == p)):
                m.d.sync += [r["m"].eq(Mux(zero, 0, data[0:15])), r["ns"].eq(ns),
                             r["k"].eq(k)]
            prm.append(r)
        return prm

    def _plain_lane(self, m: Module, lane: int, x: Value, valid: list[Signal],
                    sels: list[Signal]) -> Signal:
        """Every input at the output's scale: the input register, then the clamp."""
        x1 = copy_register(m, x, valid[0], f"l{lane}_x1", self.ff_style).as_signed()
        out = Signal(8, name=f"l{lane}_out2")
        with m.If(valid[1]):
            m.d.sync += out.eq(self._clamp(x1) if self.relu else x1)
        return out

    def _scaled_lane(self, m: Module, lane: int, x: Value, valid: list[Signal],
                     sels: list[Signal], prm: list[dict[str, Signal]] | None = None
                     ) -> Signal:
        """Stages 1-3 the product with the selected input's multiplier, 4 its rounding
        term added, then its shift and the clamp: both in stage 5 where the shifts are
        built in, in stages 5 and 6 where they are loaded (``prm``)."""
        def reg(stage: int, shape: object, value: object, tag: str) -> Signal:
            return stage_reg(m, valid, stage, shape, value, f"l{lane}_{tag}")

        def by_port(sel: Signal, values: list[Any], shape: object, tag: str) -> Signal:
            """The selected port's value (a constant per port, or a wire)."""
            v = Signal(shape, name=f"l{lane}_{tag}")
            with m.Switch(sel):
                for p, value in enumerate(values):
                    with m.Case(p):
                        m.d.comb += v.eq(value)
            return v

        mults = [Const(mp, signed(16)) for mp, _ in self.rescale] if prm is None else \
            [r["m"] for r in prm]
        mult = by_port(sels[0], mults, signed(16), "m0")
        p3 = rescale_product(m, valid, x, mult, self.ff_style, x_name=f"l{lane}_x1",
                             k_name=f"l{lane}_k1", dsp_name=f"l{lane}_mul",
                             p_name=f"l{lane}_p")
        rnds = [(1 << (n - 1)) if n else 0 for _, n in self.rescale] if prm is None else \
            [r["k"] for r in prm]
        rnd = by_port(sels[3], rnds, signed(24), "rnd3")
        q4 = reg(4, signed(25), p3 + rnd, "q4")
        if prm is None:
            r4 = by_port(sels[4], [q4 >> n for _, n in self.rescale], signed(25), "r4")
            return reg(5, 8, self._clamp(r4), "out5")
        ns = by_port(sels[4], [r["ns"] for r in prm], 5, "ns4")
        r5 = reg(5, signed(25), q4 >> ns, "r5")
        return reg(6, 8, self._clamp(r5), "out6")
