"""Sliding-window generator: streaming im2col with zero padding, strides, dilation.

Input: images of ``channels x height x width`` int8, streamed in HWC order (channel
fastest, then column, then row) in beats of ``lanes`` channels (``lanes`` divides
``channels``).  Output: for every output pixel (row-major), the window's elements
in beats of ``lanes``, in one of two orders:

* ``"kkc"`` (for a convolution): kernel row, kernel column, channel (fastest) -- the
  column order of the MVAU weight matrix ``W[m, (ky * kw + kx) * C + c]``;
* ``"ckk"`` (for pooling): channel group, kernel row, kernel column (fastest), so a
  reducer sees one channel group's ``kh * kw`` values back to back.

Positions outside the image give ``pad_value`` (0 for a convolution, -128 for max
pooling, so padding never wins).

Hardware: a ring of :func:`line_rows` line buffers (``eff_kh + stride_h`` rows) in one
memory (address ``{slot, x, channel group}``); a writer fills rows as they arrive, a
reader waits until an output row's input rows are present, issues one beat per cycle
through a one-cycle memory read into a :class:`~.stream.CreditQueue`, then releases
the rows the next output row no longer needs.  Consecutive images stream without
gaps: the writer runs ahead into the next image while the reader finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError, ceil_log2
from .stream import CreditQueue, SkidBuffer

__all__ = ["WindowGeometry", "SlidingWindow", "swg_model", "line_rows", "line_depth",
           "ring_add", "row_release",
           "ROW_OVERHEAD", "ROW_READY_DELAY", "INPUT_LATENCY", "QUEUE_DEPTH"]

#: Idle cycles of the reader between two output rows (release, then the row check).
ROW_OVERHEAD = 2
#: Cycles from an input beat's transfer to the writer taking it: a
#: :class:`~.stream.SkidBuffer` at the input registers ``ready`` and the beat, so the
#: upstream stage's handshake is one route to a register (DS-CNN on the ULX3S-85F at
#: 88.6 MHz: the critical path ran ``filled < R`` -> ``ready`` -> the upstream skid
#: buffer -> the writer's counters, 11.29 ns, 8 of it routing).
INPUT_LATENCY = 1
#: Cycles from an input row's last beat (its transfer at the input) to the first read
#: issued for an output row that waited for it: the input skid buffer, the write, the
#: row count.
ROW_READY_DELAY = 2 + INPUT_LATENCY
#: Entries of the output queue (issue to queue output: 1 + 2 cycles).
QUEUE_DEPTH = 4


@dataclass(frozen=True)
class WindowGeometry:
    """Window geometry of a convolution or pooling over a ``channels x height x
    width`` input.  ``pads`` = (top, left, bottom, right)."""

    channels: int
    height: int
    width: int
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)

    @property
    def eff_kernel(self) -> tuple[int, int]:
        return ((self.kernel[0] - 1) * self.dilation[0] + 1,
                (self.kernel[1] - 1) * self.dilation[1] + 1)

    @property
    def out_hw(self) -> tuple[int, int]:
        ekh, ekw = self.eff_kernel
        pt, pl, pb, pr = self.pads
        return ((self.height + pt + pb - ekh) // self.stride[0] + 1,
                (self.width + pl + pr - ekw) // self.stride[1] + 1)

    @property
    def window_size(self) -> int:
        return self.kernel[0] * self.kernel[1] * self.channels

    def check(self, name: str) -> None:
        vals = (self.channels, self.height, self.width, *self.kernel, *self.stride,
                *self.dilation)
        if min(vals) < 1 or min(self.pads) < 0:
            raise HardwareConfigError(f"{name}: window geometry {self} has a non-positive "
                                      "size or a negative padding")
        oh, ow = self.out_hw
        if oh < 1 or ow < 1:
            raise HardwareConfigError(f"{name}: the kernel {self.kernel} does not fit the "
                                      f"{self.height}x{self.width} input with pads {self.pads}")
        if max(self.pads[0], self.pads[2]) >= self.eff_kernel[0] or \
                max(self.pads[1], self.pads[3]) >= self.eff_kernel[1]:
            raise HardwareConfigError(f"{name}: padding {self.pads} must be smaller than the "
                                      f"kernel {self.eff_kernel}")


def line_rows(geom: WindowGeometry) -> int:
    """Rows of the line buffer: the window's rows and a row stride more, so the writer
    fills the next output row's rows while the reader issues this one.  Where that
    passes the image's height (a window over most of the image: a global pool), the
    rows held at the image's end and the rows the next image's first output row needs,
    so the next image streams in while the last output row is read instead of waiting
    for it.  Measured on the full DS-CNN (its 24x5 average pool on a 25x5 map), 90 %
    budget: with ``height`` rows the upstream stalled for the pool's whole read and the
    II was 38,388 cycles against 32,000 estimated; with these rows, 32,000.  A window
    without padding holds more rows at the image's end than one row stride can free
    (LeNet-5's conv2, 5x5 on 14x14: 5 held, 5 needed): there too the rows held and
    needed, so the next image's first rows stream in while the last output row is read
    -- with 6 rows conv2's writer stalled conv1 at each image boundary, II 4,258 cycles
    measured against 4,000 estimated."""
    ekh, sh, h = geom.eff_kernel[0], geom.stride[0], geom.height
    held_at_end = h - max(0, (geom.out_hw[0] - 1) * sh - geom.pads[0])
    need_first = min(h, ekh - geom.pads[0])
    # never fewer than the rows held and needed: the cycle models count no wait at an
    # image boundary
    return max(ekh + sh if ekh + sh <= h else h, held_at_end + need_first)


def line_depth(geom: WindowGeometry, lanes: int) -> int:
    """Words of the line buffer (address ``{slot, x, channel group}``)."""
    return 1 << (ceil_log2(line_rows(geom)) + ceil_log2(geom.width)
                 + ceil_log2(geom.channels // lanes))


def swg_model(image_hwc: np.ndarray, geom: WindowGeometry, lanes: int = 1,
              order: str = "kkc", pad_value: int = 0) -> np.ndarray:
    """Behavioural model: one image [H, W, C] -> windows [OH * OW, kh * kw * C], each
    row holding the window's elements in stream order (``order``, beats of ``lanes``)."""
    h, w, c = image_hwc.shape
    pt, pl, pb, pr = geom.pads
    padded = np.full((h + pt + pb, w + pl + pr, c), pad_value, dtype=np.int64)
    padded[pt:pt + h, pl:pl + w] = image_hwc
    oh, ow = geom.out_hw
    kh, kw = geom.kernel
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    rows = []
    for oy in range(oh):
        for ox in range(ow):
            win = padded[oy * sh:oy * sh + (kh - 1) * dh + 1:dh,
                         ox * sw:ox * sw + (kw - 1) * dw + 1:dw]  # [kh, kw, C]
            if order == "ckk":
                win = win.reshape(kh * kw, c // lanes, lanes).transpose(1, 0, 2)
            rows.append(win.reshape(-1))
    return np.stack(rows)


def ring_add(slot: Value, k: int, ring: int) -> Value:
    """``(slot + k) mod ring`` for a slot below ``ring`` and a constant ``k`` (the line
    buffer's ring of row slots)."""
    k %= ring
    if not k:
        return slot
    return Mux(slot >= ring - k, slot - (ring - k), slot + k)


def row_release(m: Module, iy_base: Value, oy: Value, out_h: int, height: int, ring: int,
                stride: int) -> tuple[Signal, Signal, Signal]:
    """The line buffer's release figures after output row ``oy`` (first input row
    ``iy_base``), registered: ``last_row`` (the image's last output row), ``rel_need``
    (rows that must be present before releasing) and ``n_rel`` (rows released, from
    ``head = max(iy_base, 0)``, the first row still held)."""
    last_row = Signal()
    rel_need = Signal(range(height + 1))
    n_rel = Signal(range(ring + 1))
    head = Mux(iy_base > 0, iy_base, 0)
    lo_next = Mux(iy_base + stride > 0, iy_base + stride, 0)
    m.d.sync += [
        last_row.eq(oy == out_h - 1),
        rel_need.eq(Mux(oy == out_h - 1, height, lo_next)),
        n_rel.eq(Mux(oy == out_h - 1, height - head, lo_next - head)),
    ]
    return last_row, rel_need, n_rel


class SlidingWindow(Component):
    """Sliding-window generator; see the module docstring.  ``i`` and ``o`` carry
    ``lanes`` int8 elements per beat."""

    def __init__(self, name: str, geom: WindowGeometry, lanes: int, *, order: str = "kkc",
                 pad_value: int = 0) -> None:
        geom.check(name)
        if geom.channels % lanes:
            raise HardwareConfigError(
                f"{name}: {lanes} lanes do not divide {geom.channels} channels")
        if order not in ("kkc", "ckk"):
            raise HardwareConfigError(f"{name}: window order must be 'kkc' or 'ckk', not "
                                      f"{order!r}")
        self.name, self.geom, self.lanes, self.order = name, geom, lanes, order
        self.pad_value = pad_value
        self.cf = geom.channels // lanes
        self.rows = line_rows(geom)
        self.latency = 1
        self.queue_depth = QUEUE_DEPTH
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * lanes))})

    @property
    def beats_per_pixel(self) -> int:
        return self.geom.kernel[0] * self.geom.kernel[1] * self.cf

    def elaborate(self, platform: object) -> Module:
        m = Module()
        g = self.geom
        H, W, R, CF = g.height, g.width, self.rows, self.cf
        kh, kw = g.kernel
        (sh, sw), (dh, dw) = g.stride, g.dilation
        pt, pl, _pb, _pr = g.pads
        ekh = g.eff_kernel[0]
        OH, OW = g.out_hw
        sb, xb, cb = ceil_log2(R), ceil_log2(W), ceil_log2(CF)

        m.submodules.lines = lines = Memory(shape=8 * self.lanes,
                                            depth=line_depth(g, self.lanes), init=[])
        wp = lines.write_port()
        rp = lines.read_port(domain="sync")
        m.submodules.queue = q = CreditQueue(8 * self.lanes, self.queue_depth)

        def addr(slot: Value, x: Value, c: Value) -> Value:
            used = [v[:b] for v, b in ((c, cb), (x, xb), (slot, sb)) if b]
            return Cat(*used) if used else Const(0, 1)

        # ---- writer, behind a skid buffer (INPUT_LATENCY) ---------------------------
        m.submodules.inskid = inskid = SkidBuffer(8 * self.lanes)
        m.d.comb += [inskid.i.valid.eq(self.i.valid), inskid.i.payload.eq(self.i.payload),
                     self.i.ready.eq(inskid.i.ready)]
        filled = Signal(range(R + 1))
        wslot = Signal(range(max(2, R)))
        wx = Signal(range(max(2, W)))
        wcf = Signal(range(max(2, CF)))
        row_done = Signal()
        take = inskid.o.valid & inskid.o.ready
        m.d.comb += [
            inskid.o.ready.eq(filled < R),
            wp.en.eq(take), wp.addr.eq(addr(wslot, wx, wcf)), wp.data.eq(inskid.o.payload),
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

        # ---- reader ---------------------------------------------------------------
        # Every value the read address and the row control need is a register,
        # stepped by a constant add when the loop nest moves (docs/bitstreams.md: the
        # address arithmetic ``iy_base + ky * dh - head_y + head_slot (mod R)`` was the
        # critical path of every convolutional design).  Row ``y`` of image ``n`` lives
        # in slot ``(n * H + y) mod R``: ``s0`` is the slot of the image's row 0,
        # ``base_slot`` that of row ``iy_base`` (the current output row's top), and
        # ``slot_cur`` / ``iy_cur`` / ``ix_cur`` the element being read.
        cbits = ceil_log2(H + W + 2 * (ekh + sh + sw + max(g.pads) + g.eff_kernel[1])) + 2
        iy_base = Signal(signed(cbits), init=-pt)
        ix_base = Signal(signed(cbits), init=-pl)
        iy_cur = Signal(signed(cbits), init=-pt)
        ix_cur = Signal(signed(cbits), init=-pl)
        s0 = Signal(range(max(2, R)))
        base_slot = Signal(range(max(2, R)), init=(-pt) % R)
        slot_cur = Signal(range(max(2, R)), init=(-pt) % R)
        oy = Signal(range(max(2, OH)))
        ox = Signal(range(max(2, OW)))
        ky = Signal(range(max(2, kh)))
        kx = Signal(range(max(2, kw)))
        rcf = Signal(range(max(2, CF)))
        release = Signal(range(R + 1))
        m.d.sync += filled.eq(filled + row_done - release)

        def slot_add(slot: Value, k: int) -> Value:
            return ring_add(slot, k, R)

        # rows of the current image present (written, not released): head + filled,
        # where head = max(iy_base, 0) is the first row still held
        avail = Signal(range(H + R + 2))
        # rows the current output row needs, and the release's figures, from the
        # registered iy_base (stable for at least two cycles before they are used)
        need = Signal(signed(cbits + 1), init=-pt + ekh)
        last_row, rel_need, n_rel = row_release(m, iy_base, oy, OH, H, R, sh)

        inside = Signal()
        m.d.comb += [
            inside.eq((iy_cur >= 0) & (iy_cur < H) & (ix_cur >= 0) & (ix_cur < W)),
            rp.addr.eq(addr(slot_cur, ix_cur, rcf)),
        ]

        # loop nest, innermost first
        if self.order == "kkc":
            nest = [(rcf, CF), (kx, kw), (ky, kh)]
        else:
            nest = [(kx, kw), (ky, kh), (rcf, CF)]
        at_end = {id(c): Signal(name=f"{c.name}_end") for c, _ in nest}
        for c, n in nest:
            m.d.comb += at_end[id(c)].eq(c == n - 1)
        inner_last = Signal()
        m.d.comb += inner_last.eq(Cat(*at_end.values()).all())
        row_last = inner_last & (ox == OW - 1)
        next_ix_base = Mux(ox == OW - 1, -pl, ix_base + sw)

        issue = Signal()
        next_image = Signal()
        rows_ok = (avail >= need) | (avail >= H)
        with m.FSM(name="swg"):
            with m.State("WAIT"), m.If(rows_ok):
                m.next = "ISSUE"
            with m.State("ISSUE"):
                m.d.comb += issue.eq(q.can_issue)
                with m.If(issue):
                    carry = Const(1, 1)
                    for c, _n in nest:
                        end_c = at_end[id(c)]
                        with m.If(carry):
                            m.d.sync += c.eq(Mux(end_c, 0, c + 1))
                            # the read position follows its counters
                            if c is kx:
                                m.d.sync += ix_cur.eq(Mux(end_c, Mux(inner_last, next_ix_base,
                                                                     ix_base), ix_cur + dw))
                            elif c is ky:
                                m.d.sync += [iy_cur.eq(Mux(end_c, iy_base, iy_cur + dh)),
                                             slot_cur.eq(Mux(end_c, base_slot,
                                                             slot_add(slot_cur, dh)))]
                        carry = carry & end_c
                    with m.If(inner_last):
                        m.d.sync += [ox.eq(Mux(ox == OW - 1, 0, ox + 1)),
                                     ix_base.eq(next_ix_base)]
                    with m.If(row_last):
                        m.next = "RELEASE"
            # the rows to release must have arrived: with a row stride beyond the
            # kernel, the next output row starts past rows no window reads
            with m.State("RELEASE"), m.If(avail >= rel_need):
                m.d.comb += release.eq(n_rel)
                with m.If(last_row):
                    nxt = slot_add(s0, H - pt)
                    m.d.comb += next_image.eq(1)
                    m.d.sync += [oy.eq(0), iy_base.eq(-pt), iy_cur.eq(-pt),
                                 need.eq(-pt + ekh), s0.eq(slot_add(s0, H)),
                                 base_slot.eq(nxt), slot_cur.eq(nxt)]
                with m.Else():
                    nxt = slot_add(base_slot, sh)
                    m.d.sync += [oy.eq(oy + 1), iy_base.eq(iy_base + sh),
                                 iy_cur.eq(iy_base + sh), need.eq(need + sh),
                                 base_slot.eq(nxt), slot_cur.eq(nxt)]
                m.next = "WAIT"
        # avail = head + filled: a row written adds one; releasing rows moves the head
        # by as many (no change), except past the image's last row, where the next
        # image's rows count from 0
        m.d.sync += avail.eq(avail + row_done - Mux(next_image, H, 0))

        # one-cycle memory read, then padding
        issued = Signal()
        inside_d = Signal()
        m.d.sync += [issued.eq(issue), inside_d.eq(inside)]
        pad = Const(self.pad_value & 0xFF, 8)
        m.d.comb += [
            q.issue.eq(issue),
            q.w_valid.eq(issued),
            q.w_data.eq(Mux(inside_d, rp.data, Cat(*[pad] * self.lanes))),
        ]
        wiring.connect(m, q.o, wiring.flipped(self.o))
        return m
