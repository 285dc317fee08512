"""Nearest-neighbour upsampling of an HWC-streamed int8 image by integer factors.

An image of ``C`` channels and ``W`` pixels a row streams in HWC order in beats of
``lanes`` channels (``lanes`` divides ``C``); out comes every row ``fy`` times and, in
each, every pixel ``fx`` times (:func:`upsample_model`): the image ``fy`` times as tall
and ``fx`` times as wide, the same numbers (int8 in, int8 out, scale unchanged).

One row buffer of ``W * C / lanes`` words of ``8 * lanes`` bits (a block RAM when
large) holds the input row.  The **writer** stores the incoming beats in order; the
**reader** issues one read a cycle in output order (pass ``p < fy`` of the row, pixel,
copy ``< fx``, beat), so the output needs no arithmetic but counters:

* in the row's first pass it reads only slots already written (the writer's index is
  past it); later passes read the whole, written, row;
* the writer moves on to the next row while the reader is in the last pass: it may
  overwrite a slot once the reader has issued that slot's last read (``free``).

Both wait only on registers (``i.ready`` never depends on ``o.ready``), and the image
boundary is no different from a row boundary: images follow each other back to back.
The read data is registered after the memory (stage 2) and written into a
:class:`~.stream.CreditQueue`, so ``o.valid`` never depends on any ``ready``: one
output beat per cycle while the writer keeps ahead, :data:`UPSAMPLE_LATENCY` cycles from
a read to the queue, the queue's own latency more to ``o.valid``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError
from .stream import CreditQueue, credit_depth

__all__ = ["Upsample", "upsample_model", "UPSAMPLE_LATENCY", "upsample_queue_depth"]

#: cycles from a read's issue to its beat being written into the output queue (the
#: memory's registered read, a fabric register after it)
UPSAMPLE_LATENCY = 2


def upsample_queue_depth() -> int:
    """Entries of the output queue: one read a cycle without bubbles."""
    return credit_depth(UPSAMPLE_LATENCY, 1)


def upsample_model(x: np.ndarray, factor: tuple[int, int]) -> np.ndarray:
    """Behavioural model: an image ``[H, W, C]`` (HWC) -> ``[H * fy, W * fx, C]``, every
    row ``fy`` times, every pixel ``fx`` times."""
    fy, fx = factor
    return np.repeat(np.repeat(np.asarray(x), fy, axis=0), fx, axis=1)


def _check(name: str, channels: int, width: int, factor: Sequence[int], lanes: int) -> None:
    for what, v in (("channels", channels), ("width", width), ("lanes", lanes),
                    ("vertical factor", factor[0]), ("horizontal factor", factor[1])):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise HardwareConfigError(f"upsample {name!r}: {what} must be an integer >= 1, "
                                      f"got {v!r}")
    if channels % lanes:
        raise HardwareConfigError(f"upsample {name!r}: lanes={lanes} must divide the "
                                  f"{channels} channels")


class Upsample(Component):
    """Nearest-neighbour upsampling by ``factor = (fy, fx)`` of rows of ``width`` pixels
    of ``channels`` int8 channels, ``lanes`` channels a beat (see the module
    docstring)."""

    def __init__(self, name: str, channels: int, width: int, factor: Sequence[int],
                 lanes: int) -> None:
        factor = tuple(factor)
        if len(factor) != 2:
            raise HardwareConfigError(f"upsample {name!r}: factor must be (fy, fx), got "
                                      f"{factor!r}")
        _check(name, channels, width, factor, lanes)
        self.name, self.channels, self.width, self.lanes = name, channels, width, lanes
        self.factor = (int(factor[0]), int(factor[1]))
        self.beats = channels // lanes          # beats a pixel
        self.words = width * self.beats         # row buffer entries
        self.latency = UPSAMPLE_LATENCY
        self.queue_depth = upsample_queue_depth()
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, cpb = self.words, self.beats
        fy, fx = self.factor
        m.submodules.queue = q = CreditQueue(8 * self.lanes, self.queue_depth)
        m.submodules.row = mem = Memory(shape=8 * self.lanes, depth=n, init=[])
        wp, rp = mem.write_port(), mem.read_port(domain="sync")

        w_idx = Signal(range(n + 1))   # next slot the writer fills
        ahead = Signal()               # the writer is on the row after the reader's
        r_addr = Signal(range(n + 1))  # the slot the reader reads next
        r_pix = Signal(range(n + 1))   # the first slot of the reader's pixel
        beat = Signal(range(cpb + 1))
        copy = Signal(range(fx + 1))
        pas = Signal(range(fy + 1))
        free = Signal(range(n + 1))    # slots of the row whose last read was issued

        last_beat, last_copy, last_pass = beat == cpb - 1, copy == fx - 1, pas == fy - 1
        row_end = (r_addr == n - 1) & last_copy
        write = self.i.valid & self.i.ready
        issue = Signal()
        m.d.comb += [
            self.i.ready.eq(~ahead | (w_idx < free)),
            issue.eq((ahead | (pas != 0) | (w_idx > r_addr)) & q.can_issue),
            q.issue.eq(issue),
            wp.en.eq(write), wp.addr.eq(w_idx), wp.data.eq(self.i.payload),
            rp.addr.eq(r_addr), rp.en.eq(issue),
        ]
        # the writer
        w_wrap = write & (w_idx == n - 1)
        with m.If(write):
            m.d.sync += w_idx.eq(Mux(w_wrap, 0, w_idx + 1))
        row_done = issue & row_end & last_pass
        with m.If(w_wrap & ~row_done):
            m.d.sync += ahead.eq(1)
        with m.Elif(row_done & ~w_wrap):
            m.d.sync += ahead.eq(0)
        # the reader: beat, copy, pixel, pass
        with m.If(issue):
            with m.If(last_pass & last_copy):
                m.d.sync += free.eq(r_addr + 1)
            with m.If(~last_beat):
                m.d.sync += [beat.eq(beat + 1), r_addr.eq(r_addr + 1)]
            with m.Elif(~last_copy):
                m.d.sync += [beat.eq(0), copy.eq(copy + 1), r_addr.eq(r_pix)]
            with m.Elif(~row_end):
                m.d.sync += [beat.eq(0), copy.eq(0), r_addr.eq(r_addr + 1),
                             r_pix.eq(r_addr + 1)]
            with m.Else():
                m.d.sync += [beat.eq(0), copy.eq(0), r_addr.eq(0), r_pix.eq(0),
                             pas.eq(0)]
                with m.If(last_pass):
                    m.d.sync += free.eq(0)
                with m.Else():
                    m.d.sync += pas.eq(pas + 1)
        # the read data: registered after the memory, then into the queue
        v1, v2 = Signal(), Signal()
        data = Signal(8 * self.lanes)
        m.d.sync += [v1.eq(issue), v2.eq(v1)]
        with m.If(v1):
            m.d.sync += data.eq(rp.data)
        m.d.comb += [q.w_valid.eq(v2), q.w_data.eq(data)]
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m
