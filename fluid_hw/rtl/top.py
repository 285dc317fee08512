"""Top-level generator: a list of stage specifications -> one accelerator with a flat
AXI top (``clk``, ``rst``, ``s_axis_*``, ``m_axis_*``, ``s_axil_*``).

Stream protocol (also in the generated ``registers.md``):

* A packet is one item (an input vector or an image) with TLAST on its last beat.
* ``s_axis_tdata``: ``in_lanes`` int8 elements per beat, element 0 in bits 7..0; an
  input packet is ``in_len`` elements (``in_len / in_lanes`` beats), ``s_axis_tlast``
  on its last beat (a mismatch sets STATUS.TLAST_ERROR; the data still flows).
* ``m_axis_tdata``: ``out_lanes`` elements of ``out_bits`` (8, or 32 when the last
  stage does not requantise), ``m_axis_tlast`` on the last beat of each output packet.
* Default lanes: the first stage's input beat width and the last stage's output beat
  width (``simd`` and ``pe`` of an MVAU).

Sequences (a recurrent first stage: its spec's ``sequence_io`` -- a ``recurrent`` kind's
``mode`` -- is ``"last"`` or ``"sequence"``, see :func:`sequence_mode`): an input packet
is one sequence of any number T >= 1 of time steps, ``T * in_len`` elements back to back
(``in_len``: one step's elements), no padding, TLAST on the sequence's last beat. The
framing assembles each step into one stage beat of ``8 * in_len + 1`` bits whose top bit
is the last-step flag (TLAST of the step's last beat; TLAST on any other beat sets
STATUS.TLAST_ERROR, the data still flows). Output: ``"last"`` -- one ordinary packet per
sequence (the stages behind the recurrent one are fixed-size); ``"sequence"`` -- the
recurrent stage is the last one and sends one beat of ``8 * out_len + 1`` bits per step,
the top bit its last-step flag, which becomes ``m_axis_tlast``.

Datapath: input skid buffer -> framing -> [lane converter -> FIFO -> stage] per stage
-> lane converter, reset as a whole by CONTROL.SOFT_RESET (not the weight memories,
nor the bus); then :class:`_OutPackets` (framing -> output skid buffer), which
SOFT_RESET does not reset: it completes a half-sent output packet with zero beats and
never drops ``m_axis_tvalid`` without a transfer.  A half-accepted input packet is
dropped whole (its remaining beats taken and discarded).  Counters and the in-flight
count behind STATUS.BUSY live here; the AXI4-Lite decoder is
:class:`~.axil.AXILiteRegisters` over :func:`~.regmap.register_map`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import gcd
from typing import Any

import numpy as np
from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._ff import check_ff_style
from ._util import Component, HardwareConfigError, ceil_log2
from .axil import AXILiteRegisters
from .fork import Fork
from .regmap import VERSION, design_constants, register_map
from .spec import (
    SPEC_KINDS,
    ParamSegment,
    StageSpec,
    design_hash,
    param_layout,
)
from .stream import SkidBuffer, StreamFIFO, WidthConverter

__all__ = ["AcceleratorTop", "StageGraph", "stage_lanes", "pipeline_model", "chain_inputs",
           "consumers"]


#: the producers of one stage's input ports: a stage index, or -1 for the accelerator's
#: input stream
Inputs = Sequence[Sequence[int]]


@dataclass(frozen=True)
class StageGraph:
    """How the stages of an accelerator connect: ``inputs[k]`` the producers of stage
    ``k``'s input ports (a stage index, or -1 for the input stream; the last stage's
    output is the accelerator's), ``edge_fifo`` FIFO depths of particular input ports
    ``(stage, port) -> depth`` (the skip paths of residual joins) where the default
    depth would not do."""

    inputs: tuple[tuple[int, ...], ...]
    edge_fifo: tuple[tuple[tuple[int, int], int], ...] = ()

    @classmethod
    def chain(cls, n: int) -> StageGraph:
        return cls(tuple(chain_inputs(n)))

    @classmethod
    def of(cls, inputs: Inputs, edge_fifo: dict[tuple[int, int], int] | None = None
           ) -> StageGraph:
        return cls(tuple(tuple(int(p) for p in ins) for ins in inputs),
                   tuple(sorted((edge_fifo or {}).items())))

    def fifo(self, k: int, port: int, default: int) -> int:
        return dict(self.edge_fifo).get((k, port), default)

    @property
    def is_chain(self) -> bool:
        return list(self.inputs) == chain_inputs(len(self.inputs))


def chain_inputs(n: int) -> list[tuple[int, ...]]:
    """The inputs of a chain of ``n`` stages: each reads the one before it."""
    return [(k - 1,) for k in range(n)]


#: the values of a recurrent stage spec's ``sequence_io``
SEQUENCE_MODES = ("last", "sequence")


def _sequence_io(spec: StageSpec) -> str | None:
    """A stage's ``sequence_io``; a ``recurrent`` kind's ``mode`` where it has none."""
    v = getattr(spec, "sequence_io", None)
    if v is None and getattr(spec, "kind", None) == "recurrent":
        v = getattr(spec, "mode", None)
    return v


def sequence_mode(specs: Sequence[StageSpec], inputs: Inputs | None = None,
                  name: str = "accelerator") -> str | None:
    """None for an accelerator of fixed-size items; ``"last"`` or ``"sequence"`` when
    its first stage is recurrent (``specs[0].sequence_io``, the stage's output: one
    vector per sequence or one per step).  A recurrent stage must be the first stage
    and the only reader of the input; in mode ``"sequence"`` also the last stage."""
    inputs = inputs if inputs is not None else chain_inputs(len(specs))
    modes = [_sequence_io(s) for s in specs]
    for k, (s, mode) in enumerate(zip(specs, modes)):
        if mode is None:
            continue
        if mode not in SEQUENCE_MODES:
            raise HardwareConfigError(f"stage {s.name!r}: sequence_io {mode!r} is none of "
                                      f"{SEQUENCE_MODES}")
        if k != 0:
            raise HardwareConfigError(
                f"accelerator {name!r}: the recurrent stage {s.name!r} is stage {k}; a "
                "recurrent stage must be the first stage (its input is the sequence stream)")
    mode = modes[0] if specs else None
    if mode is None:
        return None
    if [tuple(ins) for ins in inputs] != chain_inputs(len(specs)):
        raise HardwareConfigError(f"accelerator {name!r}: behind a recurrent stage the "
                                  "stages must form a chain (no forks or joins)")
    readers = [k for k, ins in enumerate(inputs) if -1 in ins]
    if readers != [0] or list(inputs[0]) != [-1]:
        raise HardwareConfigError(f"accelerator {name!r}: only the recurrent stage "
                                  f"{specs[0].name!r} may read the sequence input")
    if mode == "sequence" and len(specs) != 1:
        raise HardwareConfigError(
            f"accelerator {name!r}: the recurrent stage {specs[0].name!r} outputs the whole "
            "sequence (one vector per step), so it must be the last stage; stages after it "
            "take one vector per sequence (its last step) only")
    return mode


def consumers(inputs: Inputs, n: int) -> dict[int, list[tuple[int, int]]]:
    """Producer (-1: the input stream) -> its ``(stage, port)`` consumers, in order."""
    out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(-1, n)}
    for k, ins in enumerate(inputs):
        for port, p in enumerate(ins):
            out[p].append((k, port))
    return out


def pipeline_model(specs: Sequence[StageSpec], x: np.ndarray,
                   inputs: Inputs | None = None) -> np.ndarray:
    """Behavioural model of a whole accelerator: input vectors [N, in_len] (images in
    HWC order) -> output vectors [N, out_len] of the last stage.  ``inputs``: the
    stage graph (default: a chain).  Uses the specs' current arrays."""
    inputs = inputs if inputs is not None else chain_inputs(len(specs))
    vals: dict[int, np.ndarray] = {-1: np.asarray(x, np.int64)}
    for k, s in enumerate(specs):
        vals[k] = np.asarray(s.model(*(vals[p] for p in inputs[k])), np.int64)
    return vals[len(specs) - 1].astype(np.int8 if specs[-1].out_bits == 8 else np.int32)


def stage_lanes(specs: Sequence[StageSpec], inputs: Inputs | None = None
                ) -> list[tuple[int, int]]:
    """(input lanes, output lanes) of every stage; a stage without lanes of its own (a
    max pool with ``lanes=None``, a join) takes what it can of its producers' lanes."""
    inputs = inputs if inputs is not None else chain_inputs(len(specs))
    out: list[tuple[int, int]] = []
    for k, s in enumerate(specs):
        prev = 0
        for p in inputs[k]:
            prev = gcd(prev, out[p][1] if p >= 0 else 1)
        out.append(s.lanes_after(prev or 1))
    return out


def _check_graph(specs: Sequence[StageSpec], inputs: Inputs) -> None:
    if not specs:
        raise HardwareConfigError("accelerator: no stages given")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise HardwareConfigError(f"accelerator: stage names must be unique, got {names}")
    if len(inputs) != len(specs):
        raise HardwareConfigError(f"accelerator: {len(inputs)} input lists for {len(specs)} "
                                  "stages")
    used = set()
    for k, (b, ins) in enumerate(zip(specs, inputs)):
        if len(ins) != b.n_inputs:
            raise HardwareConfigError(f"stage {b.name!r} takes {b.n_inputs} input(s), "
                                      f"given {len(ins)}")
        for port, p in enumerate(ins):
            if not -1 <= p < k:
                raise HardwareConfigError(f"stage {b.name!r} reads stage {p}: a stage reads "
                                          "the input (-1) or an earlier stage")
            used.add(p)
            if p < 0:
                continue
            a = specs[p]
            if a.out_len != b.port_len(port):
                raise HardwareConfigError(
                    f"stage {b.name!r} takes {b.port_len(port)} elements but stage "
                    f"{a.name!r} produces {a.out_len}")
            if a.out_bits != 8:
                raise HardwareConfigError(
                    f"stage {a.name!r} has int32 outputs (no requantisation); only the last "
                    "stage may")
            shape_a = getattr(a, "out_shape", None)
            shape_b = b.port_shape(port)
            if shape_a is not None and shape_b is not None and \
                    tuple(shape_a) != tuple(shape_b):
                raise HardwareConfigError(f"stage {b.name!r} expects an image of {shape_b} "
                                          f"but stage {a.name!r} produces {tuple(shape_a)}")
    dead = [specs[k].name for k in range(len(specs) - 1) if k not in used]
    if dead:
        raise HardwareConfigError(f"accelerator: the output of stage(s) {dead} is read by no "
                                  "stage (only the last stage's output leaves)")
    first = specs[next(k for k, ins in enumerate(inputs) if -1 in ins)]
    for k, ins in enumerate(inputs):
        if any(specs[k].port_len(port) != first.port_len(0)
               for port, p in enumerate(ins) if p < 0):
            raise HardwareConfigError(f"stages {first.name!r} and {specs[k].name!r} both read "
                                      "the input but take different lengths")


def _unit(spec: StageSpec, lanes: tuple[int, int], ff_style: str) -> Component:
    if not isinstance(spec, StageSpec):
        raise HardwareConfigError(f"stage {getattr(spec, 'name', spec)!r}: not a stage "
                                  f"specification ({type(spec).__name__}); expected one of "
                                  f"{', '.join(sorted(SPEC_KINDS))}")
    return spec.component(lanes, ff_style)


class _Framing(Component):
    """Counts beats of fixed-length vectors on a pass-through stream: ``first``/``last``
    flags of the current beat and ``partial`` (a vector is under way)."""

    def __init__(self, width: int, beats: int) -> None:
        self.beats = beats
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width)),
                          "first": Out(1), "last": Out(1), "fire": Out(1), "partial": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
        cnt = Signal(range(max(2, self.beats)))
        fire = self.o.valid & self.o.ready
        m.d.comb += [self.first.eq(cnt == 0), self.last.eq(cnt == self.beats - 1),
                     self.fire.eq(fire), self.partial.eq(cnt != 0)]
        with m.If(fire):
            with m.If(self.last):
                m.d.sync += cnt.eq(0)
            with m.Else():
                m.d.sync += cnt.eq(cnt + 1)
        return m


class _StepFraming(Component):
    """Sequence input framing: beats of ``lanes`` int8 elements and TLAST (the top
    payload bit) -> one beat per time step of ``step`` elements with the last-step flag
    (TLAST of the step's last beat) on top.  ``fire``: an input beat is taken;
    ``seq_end``: it ends a sequence (TLAST on a step's last beat); ``partial``: a
    sequence is under way; ``tlast_error``: TLAST on a beat inside a step."""

    def __init__(self, lanes: int, step: int) -> None:
        self.lanes, self.step = lanes, step
        super().__init__({"i": In(stream.Signature(8 * lanes + 1)),
                          "o": Out(stream.Signature(8 * step + 1)),
                          "fire": Out(1), "seq_end": Out(1), "partial": Out(1),
                          "tlast_error": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        beats = self.step // self.lanes
        data, tlast = self.i.payload[:-1], self.i.payload[-1]
        fire = self.i.valid & self.i.ready
        mid = Signal()  # beats of a sequence taken, its TLAST not yet
        if beats == 1:
            at_end = 1
            m.d.comb += self.o.payload.eq(self.i.payload)
        else:
            cnt = Signal(range(beats))
            held = Signal(8 * self.lanes * (beats - 1))  # the step's earlier beats
            at_end = cnt == beats - 1
            m.d.comb += self.o.payload.eq(Cat(held, data, tlast))
            with m.If(fire):
                m.d.sync += cnt.eq(Mux(at_end, 0, cnt + 1))
                with m.If(~at_end):
                    m.d.sync += held.eq(Cat(held[8 * self.lanes:], data))
        m.d.comb += [
            self.o.valid.eq(self.i.valid & at_end),
            self.i.ready.eq(Mux(at_end, self.o.ready, 1)),
            self.fire.eq(fire),
            self.seq_end.eq(fire & at_end & tlast),
            self.partial.eq(mid),
            self.tlast_error.eq(fire & tlast & ~at_end),
        ]
        with m.If(fire):
            m.d.sync += mid.eq(~(tlast & at_end))
        return m


class _SeqOutPackets(Component):
    """The output end of mode ``"sequence"``: beats of ``width`` bits with the last-step
    flag on top -> ``tlast`` from the flag, through the output skid buffer; on
    ``flush`` a half-sent sequence is completed with one zero beat carrying ``tlast``
    (as :class:`_OutPackets` completes a fixed packet)."""

    def __init__(self, width: int) -> None:
        self.width = width
        super().__init__({"i": In(stream.Signature(width + 1)),
                          "o": Out(stream.Signature(width + 1)),
                          "flush": In(1), "flushing": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.skid = skid = SkidBuffer(self.width + 1)
        partial = Signal()  # beats of a sequence sent into the skid buffer, its last not
        flushing = self.flushing
        with m.If(flushing):  # one zero beat with tlast ends a half-sent sequence
            m.d.comb += [skid.i.valid.eq(partial), skid.i.payload.eq(1 << self.width)]
        with m.Else():
            m.d.comb += [skid.i.valid.eq(self.i.valid & ~self.flush),
                         skid.i.payload.eq(self.i.payload),
                         self.i.ready.eq(skid.i.ready & ~self.flush)]
        with m.If(skid.i.valid & skid.i.ready):
            m.d.sync += partial.eq(~skid.i.payload[-1])
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        with m.If(self.flush):
            m.d.sync += flushing.eq(partial | skid.o.valid)
        with m.Elif(~partial & ~skid.o.valid):
            m.d.sync += flushing.eq(0)
        return m


class _OutPackets(Component):
    """The output end: frames the datapath's beats into packets (``tlast`` on the last
    of ``beats``) through the output skid buffer, and keeps packets whole across
    SOFT_RESET, by which it is not reset.  On ``flush`` (the datapath is being reset)
    it stops taking beats, completes a half-framed packet with zero beats and lets the
    skid buffer deliver what it holds: ``o.valid`` never falls without a transfer.
    ``flushing`` is high until all of that has been sent (those packets are no
    inferences of the counters)."""

    def __init__(self, width: int, beats: int) -> None:
        self.width, self.beats = width, beats
        super().__init__({"i": In(stream.Signature(width)),
                          "o": Out(stream.Signature(width + 1)),
                          "flush": In(1), "flushing": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.frame = frame = _Framing(self.width, self.beats)
        m.submodules.skid = skid = SkidBuffer(self.width + 1)
        flushing = self.flushing
        with m.If(flushing):  # zero beats up to the end of a half-framed packet
            m.d.comb += [frame.i.valid.eq(frame.partial), frame.i.payload.eq(0)]
        with m.Else():
            m.d.comb += [frame.i.valid.eq(self.i.valid & ~self.flush),
                         frame.i.payload.eq(self.i.payload),
                         self.i.ready.eq(frame.i.ready & ~self.flush)]
        m.d.comb += [
            skid.i.payload.eq(Cat(frame.o.payload, frame.last)),
            skid.i.valid.eq(frame.o.valid),
            frame.o.ready.eq(skid.i.ready),
        ]
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        with m.If(self.flush):  # (nothing enters meanwhile) anything left to send?
            m.d.sync += flushing.eq(frame.partial | skid.o.valid)
        with m.Elif(~frame.partial & ~skid.o.valid):  # nothing left: the skid is empty
            m.d.sync += flushing.eq(0)
        return m


class _Datapath(Component):
    """Everything between the AXI-Stream ports but the output framing
    (:class:`_OutPackets`), reset as a whole by SOFT_RESET."""

    def __init__(self, top: AcceleratorTop) -> None:
        self.top = top
        self.units = [_unit(s, ln, top.ff_style) for s, ln in zip(top.specs, top.lanes)]
        last_flag = int(top.sequence == "sequence")  # the output's last-step bit
        members: dict[str, object] = {
            "i": In(stream.Signature(8 * top.in_lanes + 1)),
            "o": Out(stream.Signature(top.out_bits * top.out_lanes + last_flag)),
            "in_vector": Out(1), "in_partial": Out(1), "tlast_error": Out(1),
        }
        for k, u in enumerate(self.units):
            if "wr" in u.signature.members:
                members[f"wr{k}"] = u.signature.members["wr"]
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        top = self.top
        inl, outl = top.in_lanes, top.out_lanes
        if top.sequence is not None:
            return self._elaborate_sequence(m)
        m.submodules.in_skid = in_skid = SkidBuffer(8 * inl + 1)
        m.submodules.in_frame = in_frame = _Framing(8 * inl, top.in_len // inl)
        wiring.connect(m, wiring.flipped(self.i), in_skid.i)
        m.d.comb += [
            in_frame.i.payload.eq(in_skid.o.payload[:-1]),
            in_frame.i.valid.eq(in_skid.o.valid),
            in_skid.o.ready.eq(in_frame.i.ready),
            self.in_vector.eq(in_frame.fire & in_frame.last),
            self.in_partial.eq(in_frame.partial),
            self.tlast_error.eq(in_frame.fire & (in_skid.o.payload[-1] != in_frame.last)),
        ]
        # every producer's stream, forked where several stages read it
        n = len(top.specs)
        readers = consumers(top.inputs, n)
        taps: dict[tuple[int, int], Any] = {}  # (stage, port) -> its producer's stream

        def fan_out(p: int, src: Any, bits: int) -> None:
            who = readers[p]
            if len(who) == 1:
                taps[who[0]] = src
                return
            fork = Fork(bits * (inl if p < 0 else top.lanes[p][1]), len(who))
            m.submodules[f"fork{p if p >= 0 else 'in'}"] = fork
            wiring.connect(m, src, fork.i)
            for kp, o in zip(who, fork.outputs):
                taps[kp] = o

        fan_out(-1, in_frame.o, 8)
        last = None
        for k, (unit, (ul, _uo), spec) in enumerate(zip(self.units, top.lanes, top.specs)):
            m.submodules[f"stage{k}_{spec.name}"] = unit
            for port, (p, pname) in enumerate(zip(top.inputs[k], spec.input_ports)):
                plane = inl if p < 0 else top.lanes[p][1]
                pbits = 8 if p < 0 else top.specs[p].out_bits
                depth = top.edge_fifo.get((k, port), top.fifo_depth)
                src = self._link(m, f"s{k}p{port}", taps[(k, port)], pbits, plane, ul, depth)
                wiring.connect(m, src, getattr(unit, pname))
            if f"wr{k}" in self.signature.members:
                wiring.connect(m, wiring.flipped(getattr(self, f"wr{k}")), unit.wr)
            if k == n - 1:
                last = unit.o
            else:
                fan_out(k, unit.o, spec.out_bits)
        prev = self._link(m, "out", last, top.out_bits, top.lanes[-1][1], outl,
                          top.fifo_depth)
        wiring.connect(m, prev, wiring.flipped(self.o))  # framed by _OutPackets
        return m

    def _elaborate_sequence(self, m: Module) -> Module:
        """A chain behind a recurrent first stage: the step framing feeds it one beat
        per time step (with the last-step flag); in mode ``"sequence"`` its output
        beats keep their flag up to :class:`_SeqOutPackets`."""
        top = self.top
        m.submodules.in_skid = in_skid = SkidBuffer(8 * top.in_lanes + 1)
        m.submodules.in_frame = frame = _StepFraming(top.in_lanes, top.in_len)
        wiring.connect(m, wiring.flipped(self.i), in_skid.i)
        wiring.connect(m, in_skid.o, frame.i)
        m.d.comb += [self.in_vector.eq(frame.seq_end), self.in_partial.eq(frame.partial),
                     self.tlast_error.eq(frame.tlast_error)]
        prev: Any = frame.o
        if top.fifo_depth:
            m.submodules.s0p0_fifo = fifo = StreamFIFO(8 * top.in_len + 1, top.fifo_depth)
            wiring.connect(m, prev, fifo.i)
            prev = fifo.o
        n = len(top.specs)
        for k, (unit, (ul, _uo), spec) in enumerate(zip(self.units, top.lanes, top.specs)):
            m.submodules[f"stage{k}_{spec.name}"] = unit
            if k:
                pl = top.lanes[k - 1][1]
                prev = self._link(m, f"s{k}p0", prev, top.specs[k - 1].out_bits, pl, ul,
                                  top.edge_fifo.get((k, 0), top.fifo_depth))
            wiring.connect(m, prev, unit.i)
            if f"wr{k}" in self.signature.members:
                wiring.connect(m, wiring.flipped(getattr(self, f"wr{k}")), unit.wr)
            prev = unit.o
        if top.sequence == "sequence":  # one whole step per beat, flag on top
            if top.fifo_depth:
                m.submodules.out_fifo = fifo = StreamFIFO(top.out_bits * top.out_lanes + 1,
                                                          top.fifo_depth)
                wiring.connect(m, prev, fifo.i)
                prev = fifo.o
        else:
            prev = self._link(m, "out", prev, top.out_bits, top.lanes[n - 1][1], top.out_lanes,
                              top.fifo_depth)
        wiring.connect(m, prev, wiring.flipped(self.o))
        return m

    def _link(self, m: Module, tag: str, prev: Any, bits: int, lanes: int, want: int,
              depth: int) -> Any:
        """Lane converter (if needed) and FIFO from ``prev`` to a consumer of ``want``."""
        if lanes != want:
            conv = WidthConverter(bits, lanes, want)
            m.submodules[f"{tag}_conv"] = conv
            wiring.connect(m, prev, conv.i)
            prev = conv.o
        if depth:
            fifo = StreamFIFO(bits * want, depth)
            m.submodules[f"{tag}_fifo"] = fifo
            wiring.connect(m, prev, fifo.i)
            prev = fifo.o
        return prev


class AcceleratorTop(Component):
    """The accelerator.  ``specs``: the stages in order; ``in_lanes``/``out_lanes``:
    elements per AXI-Stream beat (defaults above); ``fifo_depth``: FIFO between
    stages (0: none; below 3 a two-entry skid buffer); ``addr_width``: AXI4-Lite
    address bits; ``ff_style``: ``"trellis"`` makes the per-PE input copies ECP5
    ``TRELLIS_FF`` primitives that synthesis cannot merge (simulators then need
    :data:`fluid_hw.rtl.TRELLIS_FF_SIM`, which :mod:`fluid_hw.sim` adds itself).

    :meth:`describe` gives the JSON-able facts a host or simulator needs (stream
    formats, register offsets, runtime parameter layout, design hash).
    """

    def __init__(self, specs: Sequence[StageSpec], *, name: str = "fluid_accel",
                 in_lanes: int | None = None, out_lanes: int | None = None,
                 fifo_depth: int = 2, addr_width: int = 12, ff_style: str = "plain",
                 inputs: Inputs | None = None,
                 edge_fifo: dict[tuple[int, int], int] | None = None,
                 graph: StageGraph | None = None) -> None:
        self.specs = list(specs)
        if graph is not None:
            inputs, edge_fifo = graph.inputs, dict(graph.edge_fifo)
        self.inputs = [tuple(int(p) for p in ins) for ins in
                       (inputs if inputs is not None else chain_inputs(len(self.specs)))]
        _check_graph(self.specs, self.inputs)
        self.sequence = sequence_mode(self.specs, self.inputs, name)
        self.edge_fifo = {(int(k), int(p)): int(d) for (k, p), d in (edge_fifo or {}).items()}
        if any(d < 0 for d in self.edge_fifo.values()):
            raise HardwareConfigError(f"accelerator {name!r}: edge FIFO depths must be >= 0")
        if not name.isidentifier():
            raise HardwareConfigError(f"accelerator name {name!r} is not a Verilog identifier")
        self.name = name
        self.lanes = stage_lanes(self.specs, self.inputs)
        self.in_len, self.out_len = self.specs[0].port_len(0), self.specs[-1].out_len
        self.in_lanes = in_lanes or self.lanes[0][0]
        self.out_lanes = out_lanes or self.lanes[-1][1]
        self.out_bits = self.specs[-1].out_bits
        if self.in_len % self.in_lanes or self.out_len % self.out_lanes:
            raise HardwareConfigError(
                f"accelerator {name!r}: {self.in_lanes} input lanes must divide the "
                f"{self.in_len}-element input and {self.out_lanes} output lanes the "
                f"{self.out_len}-element output")
        if self.sequence == "sequence" and self.out_lanes != self.out_len:
            raise HardwareConfigError(
                f"accelerator {name!r}: a sequence output travels one time step per beat "
                f"({self.out_len} elements); out_lanes {self.out_lanes} is not supported")
        if fifo_depth < 0 or addr_width < 8:
            raise HardwareConfigError(f"accelerator {name!r}: fifo_depth must be >= 0 and "
                                      "addr_width >= 8")
        check_ff_style(f"accelerator {name!r}", ff_style)
        self.fifo_depth, self.addr_width, self.ff_style = fifo_depth, addr_width, ff_style
        self.segments, self.segment_bits = param_layout(self.specs)
        self.runtime = bool(self.segments)
        self.registers = register_map(self.runtime)
        self.options = {"in_lanes": self.in_lanes, "out_lanes": self.out_lanes,
                        "fifo_depth": fifo_depth, "addr_width": addr_width, "name": name,
                        "version": list(VERSION), "ff_style": ff_style}
        if self.inputs != chain_inputs(len(self.specs)):  # a chain hashes as it always did
            self.options["inputs"] = [list(ins) for ins in self.inputs]
        if self.sequence is not None:  # (absent from designs of fixed-size items)
            self.options["sequence"] = self.sequence
        if self.edge_fifo:
            self.options["edge_fifo"] = sorted([k, p, d] for (k, p), d in
                                               self.edge_fifo.items())
        self.design_hash = design_hash(self.specs, self.options)
        aw = addr_width
        super().__init__({
            "s_axis_tdata": In(8 * self.in_lanes), "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1), "s_axis_tlast": In(1),
            "m_axis_tdata": Out(self.out_bits * self.out_lanes), "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1), "m_axis_tlast": Out(1),
            "s_axil_awaddr": In(aw), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
            "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1),
            "s_axil_wready": Out(1), "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1),
            "s_axil_bready": In(1), "s_axil_araddr": In(aw), "s_axil_arvalid": In(1),
            "s_axil_arready": Out(1), "s_axil_rdata": Out(32), "s_axil_rresp": Out(2),
            "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
        })

    @property
    def param_words(self) -> int:
        if not self.segments:
            return 0
        return (len(self.segments) - 1 << self.segment_bits) + self.segments[-1].words

    @property
    def cycle_bound(self) -> int:
        """A generous upper bound of the cycles one inference spends in any stage (for
        hang detection by simulators), from the folding."""
        return 1000 + self.in_len + self.out_len + sum(s.cycle_bound() for s in self.specs)

    def model(self, x: np.ndarray, lengths: Sequence[int] | None = None) -> np.ndarray:
        """Behavioural model (:func:`pipeline_model`); with a recurrent first stage
        ``x`` is the concatenated steps ``[sum T, in_len]`` of sequences of ``lengths``
        (its spec's ``model(x, lengths)``), the stages behind it take its rows."""
        if self.sequence is None:
            return pipeline_model(self.specs, x, self.inputs)
        if lengths is None:
            raise HardwareConfigError(f"accelerator {self.name!r} takes sequences: give "
                                      "their lengths")
        first = np.asarray(self.specs[0].model(x, list(lengths)), np.int64)  # type: ignore[call-arg]
        return pipeline_model(self.specs[1:], first) if len(self.specs) > 1 else \
            first.astype(np.int8 if self.out_bits == 8 else np.int32)

    def describe(self) -> dict[str, Any]:
        def seg(s: ParamSegment) -> dict[str, Any]:
            return {"stage": s.stage, "kind": s.kind, "pe": s.pe, "depth": s.depth,
                    "entry_bits": s.entry_bits, "words_per_entry": s.words_per_entry,
                    "base": s.base}
        return {
            "name": self.name, "design_hash": self.design_hash, "version": list(VERSION),
            "in_len": self.in_len, "in_lanes": self.in_lanes, "in_bits": 8,
            "out_len": self.out_len, "out_lanes": self.out_lanes, "out_bits": self.out_bits,
            "addr_width": self.addr_width, "fifo_depth": self.fifo_depth,
            "ff_style": self.ff_style,
            "runtime_params": self.runtime, "param_words": self.param_words,
            "cycle_bound": self.cycle_bound,
            "param_segments": [seg(s) for s in self.segments],
            "registers": {r.name: r.offset for r in self.registers},
            "stages": [{**s.structure(), "lanes": list(ln), "inputs": list(ins)}
                       for s, ln, ins in zip(self.specs, self.lanes, self.inputs)],
            "edge_fifo": sorted([k, p, d] for (k, p), d in self.edge_fifo.items()),
            **({"sequence": self.sequence} if self.sequence is not None else {}),
        }

    def elaborate(self, platform: object) -> Module:
        m = Module()
        soft_reset, clear = Signal(), Signal()
        dp = _Datapath(self)
        m.submodules.datapath = ResetInserter(soft_reset)(dp)
        out: _OutPackets | _SeqOutPackets
        if self.sequence == "sequence":
            out = _SeqOutPackets(self.out_bits * self.out_lanes)
        else:
            out = _OutPackets(self.out_bits * self.out_lanes, self.out_len // self.out_lanes)
        m.submodules.out_packets = out
        checked = ("PARAM_DATA",) if self.runtime else ()
        m.submodules.regs = regs = AXILiteRegisters(self.registers, self.addr_width, checked)

        # ---- AXI4-Lite pins ---------------------------------------------------------
        for n in ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr",
                  "arvalid", "rready"):
            m.d.comb += getattr(regs.bus, n).eq(getattr(self, f"s_axil_{n}"))
        for n in ("awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp",
                  "rvalid"):
            m.d.comb += getattr(self, f"s_axil_{n}").eq(getattr(regs.bus, n))

        # ---- control ----------------------------------------------------------------
        enable = Signal(init=1)
        m.d.sync += [soft_reset.eq(0), clear.eq(0)]
        with m.If(regs.we_control):
            m.d.sync += [enable.eq(regs.w_control[0]), soft_reset.eq(regs.w_control[1]),
                         clear.eq(regs.w_control[2])]

        # ---- AXI-Stream pins ----------------------------------------------------------
        # input packets counted in beats on the bus, as the datapath frames them: one cut
        # by SOFT_RESET is dropped whole (its remaining beats are taken and discarded); a
        # second SOFT_RESET while dropping ends the drop (the packet will not be finished)
        in_beats = self.in_len // self.in_lanes
        # (a sequence packet ends at TLAST: "position" 1 while one is under way)
        in_pos = Signal(range(max(2, in_beats)) if self.sequence is None else range(2))
        pos_next = Signal.like(in_pos)
        dropping = Signal()
        in_beat = self.s_axis_tvalid & self.s_axis_tready
        m.d.comb += pos_next.eq(in_pos)
        with m.If(in_beat):
            if self.sequence is None:
                m.d.comb += pos_next.eq(Mux(in_pos == in_beats - 1, 0, in_pos + 1))
            else:
                m.d.comb += pos_next.eq(~self.s_axis_tlast)
        m.d.sync += in_pos.eq(pos_next)
        with m.If(soft_reset):
            with m.If(dropping):
                m.d.sync += [dropping.eq(0), in_pos.eq(0)]
            with m.Else():
                m.d.sync += dropping.eq(pos_next != 0)
        with m.Elif(pos_next == 0):
            m.d.sync += dropping.eq(0)
        m.d.comb += [
            dp.i.payload.eq(Cat(self.s_axis_tdata, self.s_axis_tlast)),
            dp.i.valid.eq(self.s_axis_tvalid & enable & ~dropping),
            self.s_axis_tready.eq((dp.i.ready | dropping) & enable),
            out.flush.eq(soft_reset),
            self.m_axis_tdata.eq(out.o.payload[:-1]),
            self.m_axis_tlast.eq(out.o.payload[-1]),
            self.m_axis_tvalid.eq(out.o.valid),
            out.o.ready.eq(self.m_axis_tready),
        ]
        wiring.connect(m, dp.o, out.i)

        # ---- counters -----------------------------------------------------------------
        # SOFT_RESET clears what is in flight, the counters and the flags; CLEAR only the
        # counters and DONE.  BUSY comes from items in flight, which CLEAR leaves alone.
        zero = soft_reset | clear
        cycles = Signal(64)
        cycles_hi = Signal(32)
        counters = {n: Signal(32, name=n) for n in
                    ("busy_cycles", "inferences", "inputs", "in_stall", "in_starve",
                     "out_stall")}
        tlast_error, done = Signal(), Signal()
        in_flight = Signal(16)  # items whose input is in and output not all sent
        busy = Signal()
        out_vector = (self.m_axis_tvalid & self.m_axis_tready & self.m_axis_tlast
                      & ~out.flushing)  # packets completed by a flush are no inferences
        m.d.comb += busy.eq(dp.in_partial | (in_flight != 0) | out.flushing)
        with m.If(soft_reset):
            m.d.sync += [in_flight.eq(0), tlast_error.eq(0)]
        with m.Else():
            m.d.sync += in_flight.eq(in_flight + dp.in_vector - out_vector)
            with m.If(dp.tlast_error):
                m.d.sync += tlast_error.eq(1)
        events = {
            "busy_cycles": busy,
            "inferences": out_vector,
            "inputs": dp.in_vector,
            "in_stall": self.s_axis_tvalid & ~self.s_axis_tready,
            "in_starve": busy & self.s_axis_tready & ~self.s_axis_tvalid,
            "out_stall": self.m_axis_tvalid & ~self.m_axis_tready,
        }
        with m.If(zero):
            m.d.sync += [c.eq(0) for c in counters.values()]
            m.d.sync += [cycles.eq(0), done.eq(0)]
        with m.Else():
            m.d.sync += cycles.eq(cycles + 1)
            for n, c in counters.items():
                with m.If(events[n]):
                    m.d.sync += c.eq(c + 1)
            with m.If(out_vector):
                m.d.sync += done.eq(1)
        with m.If(regs.re_cycles_lo):
            m.d.sync += cycles_hi.eq(cycles[32:])

        # ---- register values -------------------------------------------------------------
        values: dict[str, Any] = {k.lower(): v for k, v in
                                  design_constants(self.describe()).items()}
        values.update({
            "control": Cat(enable, Signal(2)),
            "status": Cat(busy, done & ~busy, enable, tlast_error, dropping),
            "cycles_lo": cycles[:32], "cycles_hi": cycles_hi,
            "busy_cycles": counters["busy_cycles"], "inferences": counters["inferences"],
            "inputs": counters["inputs"], "in_stall_cycles": counters["in_stall"],
            "in_starve_cycles": counters["in_starve"],
            "out_stall_cycles": counters["out_stall"],
        })
        if self.runtime:
            self._param_loader(m, dp, regs, values)
        for r in self.registers:
            if r.readable:
                m.d.comb += getattr(regs, f"r_{r.name.lower()}").eq(values[r.name.lower()])
        return m

    def _param_loader(self, m: Module, dp: _Datapath, regs: AXILiteRegisters,
                      values: dict[str, Any]) -> None:
        """PARAM_ADDR / PARAM_DATA: assemble words into memory entries and write them.
        A PARAM_DATA write whose PARAM_ADDR is in no segment (a gap between segments, or
        at or beyond PARAM_WORDS) answers SLVERR and changes nothing."""
        addr = Signal(32)
        values["param_addr"] = addr
        maxw = max(s.words_per_entry for s in self.segments)
        hist = Signal(32 * maxw)  # the last words written, newest at the top
        fire = regs.we_param_data
        sb = self.segment_bits
        seg = addr[sb:]
        local = addr[:sb]
        in_segment = Signal()
        for s in self.segments:
            with m.If((seg == s.index) & (local < s.words)):
                m.d.comb += in_segment.eq(1)
        m.d.comb += regs.wok_param_data.eq(in_segment)
        with m.If(regs.we_param_addr):
            m.d.sync += addr.eq(regs.w_param_addr)
        with m.Elif(fire):
            m.d.sync += [addr.eq(addr + 1), hist.eq(Cat(hist[32:], regs.w_param_data))]
        window = Cat(hist, regs.w_param_data)  # ..., older words, the word being written
        by_stage: dict[int, list[ParamSegment]] = {}
        for s in self.segments:
            by_stage.setdefault(s.stage_index, []).append(s)
        for k, segs in by_stage.items():
            wr = getattr(dp, f"wr{k}")
            en = Signal(len(wr.en), name=f"wr{k}_en")
            waddr = Signal(len(wr.addr), name=f"wr{k}_addr")
            wdata = Signal(len(wr.data), name=f"wr{k}_data")
            m.d.sync += en.eq(0)
            for bit, s in enumerate(segs):  # weights of PE 0.., then requant of PE 0..
                lw = ceil_log2(s.words_per_entry)
                done = (local[:lw] == s.words_per_entry - 1) if lw else 1
                with m.If(fire & (seg == s.index) & done):
                    top_bits = 32 * (maxw + 1)
                    m.d.sync += [
                        en.eq(1 << bit),
                        waddr.eq(local[lw:]),
                        wdata.eq(window[top_bits - 32 * s.words_per_entry:]),
                    ]
            m.d.comb += [wr.en.eq(en), wr.addr.eq(waddr), wr.data.eq(wdata)]
