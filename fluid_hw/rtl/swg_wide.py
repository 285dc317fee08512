"""Wide sliding-window generator for thin inputs: whole kernel positions per cycle.

:class:`~.swg.SlidingWindow` issues ``lanes`` channels a cycle, and its lanes must divide
the channels: over an image of fewer channels than the MVAU's SIMD (LeNet-5's and
DS-CNN's first convolutions read 1 channel) it gives ``gcd(C, SIMD)`` elements a cycle
whatever the folding.  :class:`WideWindow` gives ``simd`` elements a cycle in the same
``"kkc"`` order (kernel row, kernel column, channel fastest), so a convolution's cycles
per output pixel become ``(kh * kw * C / SIMD) * (M / PE)``.

Structure (for ``simd > C``, ``simd`` dividing ``kh * kw * C``):

* a writer fills a ring of :func:`~.swg.line_rows` image rows, as the narrow generator
  does, into one memory whose word is a column of every row slot (address ``x``; each
  slot's ``C`` channels written in beats of the input's ``lanes``);
* a loader waits until an output row's input rows are present, then reads the columns
  the row's windows touch, one a cycle; each read word, registered, is turned into the
  kernel's ``kh`` rows (a slot mux per kernel row; rows outside the image give
  ``pad_value``) and goes into a :class:`~.stream.CreditQueue`;
* an assembler shifts the columns into a register window of ``eff_kw`` columns x
  ``kh`` rows x ``C`` (left padding is the window's reset value, right padding columns
  it shifts in itself), ``eff_kw`` columns for a row's first window and ``stride_w``
  more for each next one;
* a complete window is copied into a snapshot register, which leaves as
  ``kh * kw * C / simd`` beats of ``simd`` lanes (a mux over the snapshot) while the
  assembler loads the next window.

Cycles per image (:func:`wide_window_cycles`): for each output row, the assembler's
``eff_kw - pad_left`` shifts of the first window, then ``max(stride_w, period)`` for each
further one (``period``: the consumer's cycles per window), and the loader's reads
of the row plus :data:`~.swg.ROW_OVERHEAD` cycles, whichever is longer.
"""

from __future__ import annotations

from math import gcd

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError, ceil_log2
from .stream import CreditQueue, SkidBuffer, credit_depth
from .swg import (
    INPUT_LATENCY,
    ROW_OVERHEAD,
    ROW_READY_DELAY,
    WindowGeometry,
    line_rows,
    ring_add,
    row_release,
)

__all__ = ["WideWindow", "use_wide_window", "wide_window_cycles", "wide_row_reads",
           "wide_window_registered", "WIDE_QUEUE_DEPTH", "WIDE_LOAD_LATENCY", "WIDE_READ_LATENCY",
           "WIDE_INPUT_LATENCY", "WIDE_ROW_READY_DELAY"]

#: Cycles from a loader read to the column entering the queue: the memory read, then
#: a fabric register (a block RAM's 5.6 ns clock-to-out, docs/HARDWARE rules).
WIDE_READ_LATENCY = 2
#: Cycles from a loader read to the column being readable at the queue's output.
WIDE_LOAD_LATENCY = WIDE_READ_LATENCY + CreditQueue.latency
#: Entries of the column queue: one read a cycle without bubbles.
WIDE_QUEUE_DEPTH = credit_depth(WIDE_READ_LATENCY, 1)
#: Cycles from an input beat's transfer to the writer taking it: the input skid buffer
#: of :data:`.swg.INPUT_LATENCY` (first here: LeNet-5 on the ULX3S-85F at 85.4 MHz ran
#: line-buffer count -> ``ready`` -> the upstream skid buffer -> the writer's row
#: counters -> the row count, 9.5 ns of its 11.7 routing across the device).
WIDE_INPUT_LATENCY = INPUT_LATENCY
#: Cycles from an input row's last beat (its transfer at the input) to the first read
#: for an output row that waited for it: the ordinary window generator's and one more,
#: the register between the writer's row count and the loader's (LeNet-5 on the
#: ULX3S-85F at 87.0 MHz ran ``filled < R`` -> the writer's ``take`` -> ``row_done`` ->
#: the loader's ``avail`` adder, 9.4 ns of its 11.5 routing).
WIDE_ROW_READY_DELAY = ROW_READY_DELAY + 1


def use_wide_window(geom: WindowGeometry, simd: int) -> bool:
    """Whether a convolution folded to ``simd`` lanes takes its windows from
    :class:`WideWindow`: where the input has fewer channels than ``simd`` (the narrow
    generator would give ``gcd(C, simd)`` elements a cycle), ``simd`` divides the
    window, and a window's beats or its column shifts take fewer cycles than the
    narrow generator's ``kh * kw * C / gcd(C, simd)`` beats."""
    c, n = geom.channels, geom.window_size
    if simd <= c or n % simd:
        return False
    return max(geom.stride[1], n // simd) < n // gcd(c, simd)


def wide_window_registered(geom: WindowGeometry, simd: int, period: int) -> bool:
    """Whether a :class:`WideWindow` whose consumer takes a window every ``period``
    cycles copies a window into its snapshot on registered state alone (the window
    full, the snapshot empty) instead of in the cycle the consumer takes the last beat
    (``ready``) or the assembler shifts: a cycle more per window for the emitter and the
    assembler, which the consumer's period hides when it exceeds both a window's beats
    and its column shifts by two cycles or more (by one, a padded row's start costs a
    cycle a row: measured in amaranth.sim, so the plain copy stays there).  It takes
    the consumer's ``ready`` and the copy decision off the window's and the snapshot's
    enables (LeNet-5's conv2 on the ULX3S-85F at 92.0 MHz: ``last_beat`` -> ``copy`` ->
    the window shift -> the window register, three 2.5 ns routes of a 1,200-bit
    fanout)."""
    return period >= max(geom.window_size // simd, geom.stride[1]) + 2


def wide_row_reads(geom: WindowGeometry) -> int:
    """Image columns the loader reads for each output row: those its windows touch."""
    ow = geom.out_hw[1]
    last = (ow - 1) * geom.stride[1] - geom.pads[1] + geom.eff_kernel[1]
    return min(geom.width, last)


def wide_window_cycles(geom: WindowGeometry, simd: int, period: int = 1) -> int:
    """Cycles per image of a :class:`WideWindow` whose consumer takes a window every
    ``period`` cycles (at least its ``kh * kw * C / simd`` beats): each output row the
    assembler's or the loader's work, whichever is longer.  No wait at an image
    boundary: the line buffer (:func:`~.swg.line_rows`) holds the image's last rows and
    the next image's first rows together."""
    oh, ow = geom.out_hw
    sw = geom.stride[1]
    sf = geom.window_size // simd
    p = max(period, sf)
    first = geom.eff_kernel[1] - geom.pads[1]
    assembler = max(first, p) + (ow - 1) * max(sw, p)
    loader = wide_row_reads(geom) + ROW_OVERHEAD
    return oh * max(assembler, loader)


class WideWindow(Component):
    """Wide sliding-window generator (see the module docstring): ``i`` carries ``lanes``
    int8 channels a beat (``lanes`` divides the channels), ``o`` ``simd`` int8 window
    elements a beat in ``"kkc"`` order."""

    def __init__(self, name: str, geom: WindowGeometry, lanes: int, simd: int, *,
                 pad_value: int = 0, period: int = 1) -> None:
        geom.check(name)
        c, n = geom.channels, geom.window_size
        if c % lanes:
            raise HardwareConfigError(f"{name}: {lanes} input lanes do not divide {c} "
                                      "channels")
        if simd <= c or n % simd:
            raise HardwareConfigError(
                f"{name}: the wide window generator gives SIMD lanes of a {geom.kernel[0]}x"
                f"{geom.kernel[1]}x{c} window ({n} elements): SIMD must be larger than the "
                f"{c} input channels and divide {n}, not {simd}; with SIMD <= {c} the "
                "narrow generator (SlidingWindow) serves")
        self.name, self.geom, self.lanes, self.simd = name, geom, lanes, simd
        self.pad_value = pad_value
        self.cf = c // lanes
        self.rows = line_rows(geom)
        self.sf = n // simd
        #: the copy on registered state (:func:`wide_window_registered`)
        self.registered = wide_window_registered(geom, simd, period)
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * simd))})

    @property
    def beats_per_pixel(self) -> int:
        return self.sf

    def elaborate(self, platform: object) -> Module:
        m = Module()
        g = self.geom
        C, H, W, R, CF = g.channels, g.height, g.width, self.rows, self.cf
        kh, kw = g.kernel
        (sh, sw), (dh, dw) = g.stride, g.dilation
        pt, pl, _pb, _pr = g.pads
        ekh, ekw = g.eff_kernel
        OH, OW = g.out_hw
        col_bits = 8 * C * kh
        pad = Const(self.pad_value & 0xFF, 8)

        # one word per image column: R slots of C channels, written lanes at a time
        m.submodules.lines = lines = Memory(shape=8 * C * R, depth=W, init=[])
        wp = lines.write_port(granularity=8 * self.lanes)
        rp = lines.read_port(domain="sync")
        m.submodules.queue = q = CreditQueue(col_bits, WIDE_QUEUE_DEPTH)

        # ---- writer: row slots in a ring, as SlidingWindow, behind a skid buffer -------
        m.submodules.inskid = inskid = SkidBuffer(8 * self.lanes)
        m.d.comb += [inskid.i.valid.eq(self.i.valid), inskid.i.payload.eq(self.i.payload),
                     self.i.ready.eq(inskid.i.ready)]
        filled = Signal(range(R + 1))
        wslot = Signal(range(max(2, R)))
        wx = Signal(range(max(2, W)))
        wcf = Signal(range(max(2, CF)))
        row_done = Signal()
        take = inskid.o.valid & inskid.o.ready
        lane = wslot * CF + wcf if CF > 1 else wslot
        m.d.comb += [
            inskid.o.ready.eq(filled < R),
            wp.addr.eq(wx), wp.data.eq(inskid.o.payload.replicate(R * CF)),
            wp.en.eq(Mux(take, Const(1, R * CF) << lane, 0)),
        ]
        with m.If(take):
            with m.If(wcf == CF - 1):
                m.d.sync += wcf.eq(0)
                with m.If(wx == W - 1):
                    m.d.sync += [wx.eq(0), wslot.eq(Mux(wslot == R - 1, 0, wslot + 1))]
                    m.d.comb += row_done.eq(1)
                with m.Else():
                    m.d.sync += wx.eq(wx + 1)
            with m.Else():
                m.d.sync += wcf.eq(wcf + 1)

        # ---- loader: an output row's columns, once its rows are present ---------------
        # Row y of image n lives in slot (n * H + y) mod R; kslot[ky] is the slot of the
        # current output row's kernel row ky (row iy_base + ky * dh), stepped by a
        # constant when the row moves on (stride_h) or the image ends.
        cbits = ceil_log2(H + W + 2 * (ekh + sh + sw + max(g.pads) + ekw)) + 2
        iy_base = Signal(signed(cbits), init=-pt)
        kslot = [Signal(range(max(2, R)), init=(-pt + ky * dh) % R, name=f"kslot{ky}")
                 for ky in range(kh)]
        row_in = [Signal(name=f"row_in{ky}") for ky in range(kh)]
        oy = Signal(range(max(2, OH)))
        n_reads = wide_row_reads(g)
        rx = Signal(range(max(2, n_reads)))
        release = Signal(range(R + 1))
        m.d.sync += filled.eq(filled + row_done - release)
        for ky in range(kh):
            iy = iy_base + ky * dh
            m.d.sync += row_in[ky].eq((iy >= 0) & (iy < H))

        def slot_add(slot: Value, k: int) -> Value:
            return ring_add(slot, k, R)

        avail = Signal(range(H + R + 2))
        need = Signal(signed(cbits + 1), init=-pt + ekh)
        last_row, rel_need, n_rel = row_release(m, iy_base, oy, OH, H, R, sh)
        issue = Signal()
        next_image = Signal()
        m.d.comb += rp.addr.eq(rx)
        with m.FSM(name="load"):
            with m.State("WAIT"), m.If((avail >= need) | (avail >= H)):
                m.next = "ISSUE"
            with m.State("ISSUE"):
                m.d.comb += issue.eq(q.can_issue)
                with m.If(issue):
                    m.d.sync += rx.eq(Mux(rx == n_reads - 1, 0, rx + 1))
                    with m.If(rx == n_reads - 1):
                        m.next = "RELEASE"
            with m.State("RELEASE"), m.If(avail >= rel_need):
                m.d.comb += release.eq(n_rel)
                with m.If(last_row):
                    m.d.comb += next_image.eq(1)
                    m.d.sync += [oy.eq(0), iy_base.eq(-pt), need.eq(-pt + ekh)]
                    m.d.sync += [ks.eq(slot_add(ks, H - (OH - 1) * sh)) for ks in kslot]
                with m.Else():
                    m.d.sync += [oy.eq(oy + 1), iy_base.eq(iy_base + sh), need.eq(need + sh)]
                    m.d.sync += [ks.eq(slot_add(ks, sh)) for ks in kslot]
                m.next = "WAIT"
        # the loader counts rows a cycle after the writer (a register between them);
        # late by a cycle, it is never ahead of the rows written
        row_done_l = Signal()
        m.d.sync += [row_done_l.eq(row_done),
                     avail.eq(avail + row_done_l - Mux(next_image, H, 0))]

        # the memory read, a register after it (with the row selects of the read's
        # output row: kslot and row_in move on at the row's release, the cycle after its
        # last read), then the kernel rows of the column (padding rows) into the queue
        issued = Signal()
        read_d = Signal()
        word = Signal(8 * C * R)
        kslot_d = [Signal.like(ks, name=f"{ks.name}_d") for ks in kslot]
        row_in_d = [Signal(name=f"row_in{ky}_d") for ky in range(kh)]
        m.d.sync += [issued.eq(issue), read_d.eq(issued), word.eq(rp.data),
                     *[d.eq(v) for d, v in zip(kslot_d, kslot)],
                     *[d.eq(v) for d, v in zip(row_in_d, row_in)]]
        pad_c = Cat(*[pad] * C)
        column = [Mux(row_in_d[ky], word.word_select(kslot_d[ky], 8 * C), pad_c)
                  for ky in range(kh)]
        m.d.comb += [q.issue.eq(issue), q.w_valid.eq(read_d), q.w_data.eq(Cat(*column))]

        # ---- assembler: a register window of ekw columns ------------------------------
        pad_col = Cat(*[pad] * (C * kh))
        pad_win = Cat(*[pad] * (C * kh * ekw))
        win = Signal(col_bits * ekw,
                     init=sum((self.pad_value & 0xFF) << (8 * k) for k in range(C * kh * ekw)))
        cnt = Signal(range(max(ekw, sw) + 1), init=pl)   # columns in for this window
        ix = Signal(range(W + max(ekw, sw) + (OW - 1) * sw + 1))  # next column (x)
        ax = Signal(range(max(2, OW)))                    # the window's output column
        full = Signal()                                   # complete, not yet copied

        # ---- emitter: snapshot of a complete window, read out in beats of simd ----------
        snap = Signal(8 * g.window_size)
        snap_valid = Signal()
        beat = Signal(range(max(2, self.sf)))
        last_beat = Signal(init=self.sf == 1)    # beat == sf - 1, registered
        # registered: the copy waits for the snapshot to be empty, a cycle after its
        # last beat, and the assembler shifts only into a window not full
        reg = self.registered
        snap_free = ~snap_valid if reg else ~snap_valid | (self.o.ready & last_beat)
        copy = Signal()
        m.d.comb += [copy.eq(full & snap_free),
                     self.o.valid.eq(snap_valid),
                     self.o.payload.eq(snap.word_select(beat, 8 * self.simd)
                                       if self.sf > 1 else snap)]

        # the assembler's state as the copy leaves it (a copy of a row's last window
        # resets it for the next row: all padding, pl columns in).  The comparisons
        # that decide it are registered flags stepped with their counters (ax_last:
        # ax == OW - 1, ax_zero: ax == 0, ix_pad: ix >= W), so the consumer's ready
        # reaches the window's shift enable through two LUT levels, not the counters'
        # comparators (the window is kh * ekw * C bytes of fanout)
        ax_last = Signal(init=OW == 1)
        ax_zero = Signal(init=1)
        ix_pad = Signal()                  # ix starts at 0 < W
        row_end = copy & ax_last
        # what a copy leaves, and a copy in the cycle of a shift (never when registered:
        # a shift needs ~full)
        c_cnt, c_ix, c_win = Mux(ax_last, pl, 0), Mux(ax_last, 0, ix), Mux(ax_last, pad_win, win)
        s_copy = Const(0, 1) if reg else copy
        s_end = s_copy & ax_last
        v_cnt = Mux(s_copy, c_cnt, cnt)
        v_ix = Mux(s_copy, c_ix, ix)
        v_ax = Mux(copy, Mux(row_end, 0, ax + 1), ax)
        v_win = Mux(s_copy, c_win, win)
        # v_cnt + 1 == (ekw if v_ax == 0 else sw), from registers and constants
        v_full = Mux(s_copy, Mux(s_end, pl + 1 == ekw, sw == 1),
                     cnt + 1 == Mux(ax_zero, ekw, sw))
        can_take = ~full | s_copy
        col_pad = ~s_end & ix_pad
        shift = Signal()
        m.d.comb += [q.o.ready.eq(can_take & ~col_pad),
                     shift.eq(can_take & (col_pad | q.o.valid))]
        new_col = Mux(col_pad, pad_col, q.o.payload)
        with m.If(shift):
            m.d.sync += [win.eq(Cat(v_win[col_bits:], new_col)), cnt.eq(v_cnt + 1),
                         ix.eq(v_ix + 1), full.eq(v_full),
                         ix_pad.eq(Mux(s_end, W == 1, ix >= W - 1))]
        with m.Elif(copy):
            m.d.sync += [win.eq(c_win), cnt.eq(c_cnt), ix.eq(c_ix), full.eq(0),
                         ix_pad.eq(~ax_last & ix_pad)]
        m.d.sync += [ax.eq(v_ax),
                     ax_last.eq(Mux(copy, Mux(row_end, OW == 1, ax == OW - 2 if OW > 1 else 1),
                                         ax_last)),
                     ax_zero.eq(Mux(copy, row_end, ax_zero))]

        # the window in "kkc" order: element (ky, kx, c) is channel c of kernel row ky
        # in window column kx * dw
        flat = [win[8 * C * (kx * dw * kh + ky):8 * C * (kx * dw * kh + ky + 1)]
                for ky in range(kh) for kx in range(kw)]
        with m.If(copy):
            m.d.sync += [snap.eq(Cat(*flat)), snap_valid.eq(1), beat.eq(0),
                         last_beat.eq(self.sf == 1)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += [beat.eq(Mux(last_beat, 0, beat + 1)),
                         last_beat.eq(Mux(last_beat, self.sf == 1,
                                             beat == self.sf - 2 if self.sf > 1 else 1))]
            with m.If(last_beat):
                m.d.sync += snap_valid.eq(0)
        return m
