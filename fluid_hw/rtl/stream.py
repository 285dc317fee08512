"""Stream helpers: skid buffer, FIFO, lane-width converters and the credit queue.

Every stream here is an Amaranth :class:`amaranth.lib.stream.Signature` with a flat
unsigned payload: ``lanes`` elements of ``width`` bits, lane 0 in the least
significant bits.  A transfer happens on a cycle where ``valid & ready``; ``valid``
never depends on ``ready`` and, once raised, stays up with a stable payload until the
transfer.

Behavioural model of all of them: the element sequence is passed through unchanged
(:func:`stream_model`), only the grouping into beats changes.
"""

from __future__ import annotations

from math import gcd

from amaranth import Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError

__all__ = [
    "SkidBuffer",
    "StreamFIFO",
    "Downsizer",
    "Upsizer",
    "WidthConverter",
    "CreditQueue",
    "credit_depth",
    "fifo_latency",
    "stream_model",
    "regroup",
]


def stream_model(elements: list[int]) -> list[int]:
    """Model of every component in this module: elements leave in the order they
    entered, none lost or duplicated."""
    return list(elements)


def regroup(elements: list[int], lanes: int) -> list[list[int]]:
    """Group an element sequence into beats of ``lanes`` elements (lane 0 first)."""
    if len(elements) % lanes:
        raise HardwareConfigError(f"{len(elements)} elements do not fill beats of {lanes} lanes")
    return [elements[i:i + lanes] for i in range(0, len(elements), lanes)]


class SkidBuffer(Component):
    """Two-entry skid buffer: registers ``valid``, ``payload`` *and* ``ready``, so a
    long ready path is cut while throughput stays one transfer per cycle.

    The skid register loads the input payload whenever it is empty (its enable is the
    ``skid_valid`` flip-flop alone), and the output register whenever it may change
    (``~o.valid | o.ready``, the input valid left out); only the valid flags say what
    holds a beat.  A wide beat (the digits MLPs: 513 bits) thus has no enable decoded
    from the upstream ``valid``: that decode into the skid registers' enables was the
    int8 digits MLP's critical path (11.71 ns at 4ef43d9, 10.93 ns at 24ec506)."""

    def __init__(self, width: int) -> None:
        self.width = width
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        skid = Signal(self.width)
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        out_free = ~self.o.valid | self.o.ready
        with m.If(out_free):
            m.d.sync += self.o.payload.eq(Mux(skid_valid, skid, self.i.payload))
            with m.If(skid_valid):
                m.d.sync += [self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Elif(self.i.valid):
                m.d.sync += self.o.valid.eq(1)
            with m.Else():
                m.d.sync += self.o.valid.eq(0)
        with m.Elif(self.i.valid & self.i.ready):
            m.d.sync += skid_valid.eq(1)
        with m.If(~skid_valid):
            m.d.sync += skid.eq(self.i.payload)
        return m


class StreamFIFO(Component):
    """Synchronous FIFO (``amaranth.lib.fifo.SyncFIFOBuffered``, block-RAM friendly)
    with stream ports: ``depth`` entries, two cycles from write to read when empty.
    ``SyncFIFOBuffered`` moves only one entry every other cycle below three entries, so
    ``depth`` 1 or 2 gives a :class:`SkidBuffer` (two entries, one cycle, full rate)."""

    def __init__(self, width: int, depth: int) -> None:
        if depth < 1:
            raise HardwareConfigError(f"StreamFIFO: depth must be >= 1, got {depth}")
        self.width, self.depth = width, depth
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width)),
                          "level": Out(range(depth + 1))})

    @property
    def latency(self) -> int:
        """Cycles from a write to the entry being readable (when empty)."""
        return fifo_latency(self.depth)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        if self.depth < 3:
            m.submodules.skid = skid = SkidBuffer(self.width)
            wiring.connect(m, wiring.flipped(self.i), skid.i)
            wiring.connect(m, skid.o, wiring.flipped(self.o))
            m.d.comb += self.level.eq(skid.o.valid + ~skid.i.ready)
            return m
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=self.width, depth=self.depth)
        m.d.comb += [
            q.w_data.eq(self.i.payload), q.w_en.eq(self.i.valid), self.i.ready.eq(q.w_rdy),
            self.o.payload.eq(q.r_data), self.o.valid.eq(q.r_rdy), q.r_en.eq(self.o.ready),
            self.level.eq(q.level),
        ]
        return m


class Downsizer(Component):
    """Splits each beat of ``in_lanes`` elements into ``in_lanes // out_lanes`` beats,
    lane 0 first.  One output beat per cycle."""

    def __init__(self, elem_width: int, in_lanes: int, out_lanes: int) -> None:
        if in_lanes % out_lanes:
            raise HardwareConfigError(
                f"Downsizer: {in_lanes} input lanes are not a multiple of {out_lanes}")
        self.elem_width, self.in_lanes, self.out_lanes = elem_width, in_lanes, out_lanes
        super().__init__({"i": In(stream.Signature(elem_width * in_lanes)),
                          "o": Out(stream.Signature(elem_width * out_lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        k = self.in_lanes // self.out_lanes
        if k == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        buf = Signal(self.elem_width * self.in_lanes)
        full = Signal()
        idx = Signal(range(k))
        last = idx == k - 1
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.eq(buf.word_select(idx, self.elem_width * self.out_lanes)),
            self.i.ready.eq(~full | (self.o.ready & last)),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [buf.eq(self.i.payload), full.eq(1), idx.eq(0)]
        with m.Elif(self.o.valid & self.o.ready):
            with m.If(last):
                m.d.sync += full.eq(0)
            with m.Else():
                m.d.sync += idx.eq(idx + 1)
        return m


class Upsizer(Component):
    """Collects ``out_lanes // in_lanes`` beats into one, the first beat in the low
    lanes.  One input beat per cycle."""

    def __init__(self, elem_width: int, in_lanes: int, out_lanes: int) -> None:
        if out_lanes % in_lanes:
            raise HardwareConfigError(
                f"Upsizer: {out_lanes} output lanes are not a multiple of {in_lanes}")
        self.elem_width, self.in_lanes, self.out_lanes = elem_width, in_lanes, out_lanes
        super().__init__({"i": In(stream.Signature(elem_width * in_lanes)),
                          "o": Out(stream.Signature(elem_width * out_lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        k = self.out_lanes // self.in_lanes
        if k == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        piece = self.elem_width * self.in_lanes
        buf = Signal(self.elem_width * self.out_lanes)
        full = Signal()
        idx = Signal(range(k))
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.eq(buf),
            self.i.ready.eq(~full | self.o.ready),
        ]
        take = self.i.valid & self.i.ready
        with m.If(take):
            m.d.sync += buf.word_select(idx, piece).eq(self.i.payload)
            with m.If(idx == k - 1):
                m.d.sync += [idx.eq(0), full.eq(1)]
            with m.Else():
                m.d.sync += idx.eq(idx + 1)
        with m.If(self.o.valid & self.o.ready & ~(take & (idx == k - 1))):
            m.d.sync += full.eq(0)
        return m


class WidthConverter(Component):
    """Any lane count to any other: down to ``gcd(in_lanes, out_lanes)`` lanes, then
    up.  Throughput is ``gcd(in_lanes, out_lanes)`` elements per cycle."""

    def __init__(self, elem_width: int, in_lanes: int, out_lanes: int) -> None:
        self.elem_width, self.in_lanes, self.out_lanes = elem_width, in_lanes, out_lanes
        self.mid_lanes = gcd(in_lanes, out_lanes)
        super().__init__({"i": In(stream.Signature(elem_width * in_lanes)),
                          "o": Out(stream.Signature(elem_width * out_lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.down = down = Downsizer(self.elem_width, self.in_lanes, self.mid_lanes)
        m.submodules.up = up = Upsizer(self.elem_width, self.mid_lanes, self.out_lanes)
        wiring.connect(m, wiring.flipped(self.i), down.i)
        wiring.connect(m, down.o, up.i)
        wiring.connect(m, up.o, wiring.flipped(self.o))
        return m


class CreditQueue(Component):
    """Output queue of a fixed-latency pipeline that never stalls.

    The pipeline asks ``can_issue`` before starting work that will produce an output,
    and pulses ``issue`` when it does; the result arrives later on ``w_valid``/``w_data``
    and leaves on the stream ``o``.  A credit counter (outputs issued and not yet read)
    keeps it from ever holding more than ``depth`` entries, so the pipeline needs no
    back-pressure of its own.  For no bubbles, ``depth`` must exceed the number of
    outputs in flight: ``ceil((latency + 3) / cycles_between_outputs)``.
    """

    #: cycles from ``w_valid`` to ``o.valid``
    latency = 2

    def __init__(self, width: int, depth: int) -> None:
        if depth < 1:
            raise HardwareConfigError(f"CreditQueue: depth must be >= 1, got {depth}")
        self.width, self.depth = width, depth
        super().__init__({
            "issue": In(1), "can_issue": Out(1),
            "w_valid": In(1), "w_data": In(width),
            "o": Out(stream.Signature(width)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        # at least 3 entries: SyncFIFOBuffered moves one entry per cycle from there on
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=self.width, depth=max(3, self.depth))
        credits = Signal(range(self.depth + 1))
        read = self.o.valid & self.o.ready
        m.d.comb += [
            q.w_data.eq(self.w_data), q.w_en.eq(self.w_valid),
            self.o.payload.eq(q.r_data), self.o.valid.eq(q.r_rdy), q.r_en.eq(self.o.ready),
            self.can_issue.eq(credits < self.depth),
        ]
        m.d.sync += credits.eq(credits + Mux(self.issue, 1, 0) - Mux(read, 1, 0))
        return m


def fifo_latency(depth: int) -> int:
    """Cycles through a :class:`StreamFIFO` of ``depth`` (0: none)."""
    return 0 if depth == 0 else 1 if depth < 3 else 2


def credit_depth(latency: int, interval: int, minimum: int = 2) -> int:
    """Credit-queue depth that lets a pipeline of ``latency`` cycles issue one output
    every ``interval`` cycles without bubbles (3 cycles: queue write to read)."""
    return max(minimum, -(-(latency + 3) // max(1, interval)) + 1)
