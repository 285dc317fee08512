"""UART-to-AXI bridge: a host on a serial line drives an accelerator's AXI4-Lite
registers and AXI4-Stream ports.

The byte protocol is ``docs/uart_protocol.md`` (8N1, little-endian fields):

=======================  ===========================================  =====================
host -> bridge           payload                                      bridge -> host
=======================  ===========================================  =====================
``0x00`` NOP             --                                           --
``0x01`` INFO            --                                           ``0x81`` + 8 bytes
``0x02`` READ            addr (2)                                     ``0x82`` resp data (4)
``0x03`` WRITE           addr (2), data (4)                           ``0x83`` resp
``0x04`` WRITE_BURST     addr (2), count (2), count x data (4)        ``0x84`` resp
``0x05`` STREAM_IN       count (2), flags (1), count x beat           --
``0x06`` REGION          region (1); bridges of several regions only  ``0x86`` resp region n
(any time)               m_axis beat                                  ``0x90``/``0x91`` beat
=======================  ===========================================  =====================

* INFO answers ``"FH"``, the protocol version, the error flags (cleared by the read),
  the input and output beat sizes in bytes and the baud divisor (2 bytes).
* WRITE_BURST writes ``count`` words to the *same* address (the accelerator's
  PARAM_DATA window advances by itself) and answers the first non-OKAY response.
* STREAM_IN sends ``count`` beats of ``in_bytes`` bytes (element 0 first) on
  ``s_axis``, ``tlast`` on the last one when flag bit 0 is set.  No answer.
* Every ``m_axis`` beat goes to the host as soon as it comes, as a packet ``0x90``
  (``0x91`` with ``tlast``) + ``out_bytes`` bytes, between other packets.
* Responses: 0 OKAY, 2 SLVERR, 3 DECERR (AXI), 4 the slave did not answer in
  ``axi_timeout`` cycles (the access was abandoned).
* Error flags (sticky until INFO): bit 0 a received byte was lost (receive FIFO full),
  1 a stop bit was 0 (framing), 2 an unknown command byte (skipped), 3 a command was
  abandoned half-received (no byte for ``idle_timeout`` cycles), 4 an AXI timeout.

**Several regions** (``regions=[(in_bytes, out_bytes), ...]``, 2 to 8; one bitstream
holding the accelerators of a multi-region build): each region has its own AXI4-Lite
and stream ports (:attr:`UartBridge.region_ports`).  REGION selects the region that
READ, WRITE, WRITE_BURST, STREAM_IN and INFO's beat sizes address (sticky; 0 after
reset) and answers ``0x86``, resp (0 OKAY, 2 no such region: the selection is
unchanged), the selected region, the number of regions.  Region ``k``'s output beats
are tagged ``0x90 + 2k`` (``0x91 + 2k`` with ``tlast``); when several regions have a
beat ready the lowest region goes first.  INFO answers protocol version 2.  With one
region the hardware is exactly the single-region bridge (version 1, no REGION
command: ``0x06`` is an unknown command there).

Flow control is the host's: the bridge never holds ``m_axis`` back for long (its
beats leave at line rate), and a host that sends the next input vector only when the
previous one's output has arrived never overflows the receive FIFO (see the
protocol document for the window rule).

Structure: :class:`UartRx` (2-FF synchroniser, mid-bit sampling, framing check) ->
a register FIFO (``rx_fifo_depth`` bytes; registers, so no block RAM is used) ->
the command parser with its AXI4-Lite master and stream source; ``m_axis`` and the
parser's responses meet in a packet arbiter -> :class:`UartTx`.  Nothing here uses a
multiplier or a memory, so a board top's DSP and block-RAM counts are the
accelerator's own.  :class:`UartBridgeModel` is the behavioural model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError, ceil_log2
from .axil import AXILiteSignature

__all__ = [
    "UartRx", "UartTx", "UartBridge", "UartBridgeModel", "baud_divisor",
    "CMD_NOP", "CMD_INFO", "CMD_READ", "CMD_WRITE", "CMD_WRITE_BURST", "CMD_STREAM_IN",
    "RSP_INFO", "RSP_READ", "RSP_WRITE", "RSP_WRITE_BURST", "PKT_BEAT", "PKT_BEAT_LAST",
    "RESP_TIMEOUT", "ERR_RX_OVERFLOW", "ERR_FRAMING", "ERR_BAD_COMMAND", "ERR_CMD_TIMEOUT",
    "ERR_AXI_TIMEOUT", "PROTOCOL_VERSION", "INFO_MAGIC", "CMD_REGION", "RSP_REGION",
    "REGIONS_PROTOCOL_VERSION", "MAX_REGIONS", "RegionPorts", "beat_tag",
]

PROTOCOL_VERSION = 1
#: INFO's version field of a bridge with several regions (the REGION command)
REGIONS_PROTOCOL_VERSION = 2
INFO_MAGIC = b"FH"

CMD_NOP, CMD_INFO, CMD_READ, CMD_WRITE, CMD_WRITE_BURST, CMD_STREAM_IN, CMD_REGION = range(7)
RSP_INFO, RSP_READ, RSP_WRITE, RSP_WRITE_BURST, RSP_REGION = 0x81, 0x82, 0x83, 0x84, 0x86
PKT_BEAT, PKT_BEAT_LAST = 0x90, 0x91
#: header bytes after the command byte (CMD_REGION only in a bridge of several regions)
HEADER_BYTES = {CMD_NOP: 0, CMD_INFO: 0, CMD_READ: 2, CMD_WRITE: 6, CMD_WRITE_BURST: 4,
                CMD_STREAM_IN: 3}
REGION_HEADER_BYTES = {**HEADER_BYTES, CMD_REGION: 1}
#: region k's beats are tagged PKT_BEAT + 2k (+1 with tlast), up to 0x9F
MAX_REGIONS = 8
RESP_TIMEOUT = 4
RESP_SLVERR = 2
ERR_RX_OVERFLOW, ERR_FRAMING, ERR_BAD_COMMAND, ERR_CMD_TIMEOUT, ERR_AXI_TIMEOUT = (
    1, 2, 4, 8, 16)

#: the largest baud-rate error accepted (sender and receiver together may be ~4 % off)
MAX_BAUD_ERROR = 0.02


def baud_divisor(clk_hz: float, baud: float) -> int:
    """Clock cycles per bit for ``baud`` at ``clk_hz``; raises when the rate cannot be
    made within 2 % or with fewer than 4 cycles a bit."""
    if clk_hz <= 0 or baud <= 0:
        raise HardwareConfigError(f"UART: clock {clk_hz} Hz and baud {baud} must be positive")
    div = round(clk_hz / baud)
    if div < 4:
        raise HardwareConfigError(
            f"UART: {baud:g} baud needs at least 4 clock cycles a bit, but the clock is "
            f"{clk_hz / 1e6:g} MHz ({clk_hz / baud:.2f} cycles); lower the baud rate to at "
            f"most {clk_hz / 4:g}")
    err = abs(clk_hz / div - baud) / baud
    if err > MAX_BAUD_ERROR:
        raise HardwareConfigError(
            f"UART: {baud:g} baud from a {clk_hz / 1e6:g} MHz clock is {err:.1%} off "
            f"(divisor {div}); choose a baud rate near {clk_hz / div:.0f}")
    return div


def beat_tag(region: int, last: bool) -> int:
    """The packet tag of an output beat of ``region`` (0 in a single-region bridge)."""
    return PKT_BEAT + 2 * region + int(last)


class RegionPorts(NamedTuple):
    """One region's ports on a bridge of several regions."""

    axil: Any
    s_axis: Any
    m_axis: Any
    in_bytes: int
    out_bytes: int


class UartRx(Component):
    """8N1 receiver: ``data`` with a one-cycle ``valid`` strobe per byte, ``frame_error``
    strobes for a byte whose stop bit was 0 (dropped; the receiver then waits for the
    line to go high).  ``divisor`` clock cycles per bit (>= 4)."""

    def __init__(self, divisor: int) -> None:
        if divisor < 4:
            raise HardwareConfigError(f"UartRx: divisor must be >= 4, got {divisor}")
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(8), "valid": Out(1),
                          "frame_error": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        d = self.divisor
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        cnt = Signal(range(d))
        bit = Signal(range(8))
        shreg = Signal(8)
        m.d.sync += [self.valid.eq(0), self.frame_error.eq(0)]
        with m.FSM():
            with m.State("IDLE"), m.If(~rx):
                m.d.sync += cnt.eq(d // 2 - 1)
                m.next = "START"
            with m.State("START"):
                with m.If(cnt == 0):
                    with m.If(~rx):  # still low in the middle of the start bit
                        m.d.sync += [cnt.eq(d - 1), bit.eq(0)]
                        m.next = "DATA"
                    with m.Else():
                        m.next = "IDLE"  # a glitch
                with m.Else():
                    m.d.sync += cnt.eq(cnt - 1)
            with m.State("DATA"):
                with m.If(cnt == 0):
                    m.d.sync += [shreg.eq(Cat(shreg[1:], rx)), cnt.eq(d - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += cnt.eq(cnt - 1)
            with m.State("STOP"):
                with m.If(cnt == 0):
                    with m.If(rx):
                        m.d.sync += [self.data.eq(shreg), self.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += self.frame_error.eq(1)
                        m.next = "BREAK"
                with m.Else():
                    m.d.sync += cnt.eq(cnt - 1)
            with m.State("BREAK"), m.If(rx):
                m.next = "IDLE"
        return m


class UartTx(Component):
    """8N1 transmitter: a byte stream in, the serial line out (registered, idle
    high).  ``divisor`` clock cycles per bit."""

    def __init__(self, divisor: int) -> None:
        if divisor < 4:
            raise HardwareConfigError(f"UartTx: divisor must be >= 4, got {divisor}")
        self.divisor = divisor
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        d = self.divisor
        busy = Signal()
        shreg = Signal(10, init=0x3FF)
        cnt = Signal(range(d))
        bits = Signal(range(11))
        m.d.comb += self.i.ready.eq(~busy)
        m.d.sync += self.tx.eq(shreg[0])
        with m.If(self.i.valid & ~busy):
            m.d.sync += [shreg.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))),
                         cnt.eq(d - 1), bits.eq(10), busy.eq(1)]
        with m.Elif(busy):
            with m.If(cnt == 0):
                m.d.sync += cnt.eq(d - 1)
                with m.If(bits == 1):
                    m.d.sync += busy.eq(0)
                with m.Else():
                    m.d.sync += [shreg.eq(Cat(shreg[1:], Const(1, 1))), bits.eq(bits - 1)]
            with m.Else():
                m.d.sync += cnt.eq(cnt - 1)
        return m


class _ByteFIFO(Component):
    """A small FIFO of bytes in registers (never a block RAM) with a registered
    output (``depth + 1`` bytes in all); ``w_en`` while full drops the byte and
    strobes ``overflow``."""

    def __init__(self, depth: int) -> None:
        if depth < 2 or depth & (depth - 1):
            raise HardwareConfigError(f"UART receive FIFO depth must be a power of two >= 2, "
                                      f"got {depth}")
        self.depth = depth
        super().__init__({"w_data": In(8), "w_en": In(1), "overflow": Out(1),
                          "o": Out(stream.Signature(8))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = ceil_log2(self.depth)
        regs = Array(Signal(8, name=f"slot{k}") for k in range(self.depth))
        wp = Signal(n + 1)
        rp = Signal(n + 1)
        full = (wp[:n] == rp[:n]) & (wp[n] != rp[n])
        # a registered output (the read multiplexer stays off the parser's paths)
        out_valid = Signal()
        out_data = Signal(8)
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.eq(out_data)]
        m.d.sync += self.overflow.eq(self.w_en & full)
        with m.If(self.w_en & ~full):
            m.d.sync += [regs[wp[:n]].eq(self.w_data), wp.eq(wp + 1)]
        with m.If((wp != rp) & (~out_valid | self.o.ready)):
            m.d.sync += [out_data.eq(regs[rp[:n]]), out_valid.eq(1), rp.eq(rp + 1)]
        with m.Elif(self.o.ready):
            m.d.sync += out_valid.eq(0)
        return m


def _beat_signature(nbytes: int) -> stream.Signature:
    """A stream beat: ``nbytes`` bytes (byte 0 in the low bits) and ``last`` on top."""
    return stream.Signature(8 * nbytes + 1)


def _region_beats(in_bytes: int | None, out_bytes: int | None,
                  regions: Sequence[tuple[int, int]] | None) -> tuple[tuple[int, int], ...]:
    """The (in_bytes, out_bytes) of each region, checked."""
    beats: tuple[tuple[int, int], ...]
    if regions is None:
        if in_bytes is None or out_bytes is None:
            raise HardwareConfigError("UartBridge: give in_bytes= and out_bytes=, or regions=")
        beats = ((in_bytes, out_bytes),)
    else:
        if in_bytes is not None or out_bytes is not None:
            raise HardwareConfigError("UartBridge: give in_bytes=/out_bytes= or regions=, not "
                                      "both")
        beats = tuple((int(ib), int(ob)) for ib, ob in regions)
        if not 1 <= len(beats) <= MAX_REGIONS:
            raise HardwareConfigError(
                f"UartBridge: {len(beats)} regions; a bridge addresses 1 to {MAX_REGIONS} "
                "(output beats are tagged 0x90 + 2 x region); merge regions by lowering the "
                "ops between them, or build fewer regions into one bitstream")
    for k, (ib, ob) in enumerate(beats):
        if not (1 <= ib <= 255 and 1 <= ob <= 255):
            where = f" (region {k})" if len(beats) > 1 else ""
            raise HardwareConfigError(f"UartBridge: beat sizes must be 1..255 bytes, got "
                                      f"in {ib}, out {ob}{where}")
    return beats


class UartBridge(Component):
    """The bridge (see the module docstring).

    ``in_bytes`` / ``out_bytes``: bytes of an ``s_axis`` / ``m_axis`` beat (the
    accelerator's ``in_lanes`` and ``out_lanes * out_bits / 8``).  The baud rate is
    ``divisor`` clock cycles a bit, or comes from ``clk_hz`` and ``baud``
    (:func:`baud_divisor`).  ``idle_timeout``: cycles without a byte after which a
    half-received command is abandoned (``None``: never); ``axi_timeout``: cycles to
    wait for an AXI4-Lite answer.

    Ports: ``rx``/``tx`` (the serial pins), ``axil`` (AXI4-Lite master, 16-bit
    addresses), ``s_axis`` (beats out to the accelerator: data, then ``last`` in the
    top bit), ``m_axis`` (beats in from it, same layout), ``errors`` (the sticky error
    flags).  :meth:`connect` wires it to a core with flat AXI ports
    (``s_axil_*``, ``s_axis_*``, ``m_axis_*``, as :class:`~.top.AcceleratorTop` and a
    Verilog core of it have), which is how :class:`fluid_hw.boards.BoardTop` uses it.

    ``regions=[(in_bytes, out_bytes), ...]`` (2 to :data:`MAX_REGIONS`, instead of
    ``in_bytes``/``out_bytes``): one bridge for several accelerators, selected by the
    REGION command (module docstring).  Region ``k``'s ports are ``axil{k}``,
    ``s_axis{k}``, ``m_axis{k}`` (:attr:`region_ports`), each its own size; ``in_bytes``
    and ``out_bytes`` are then the largest.  :meth:`connect` takes the cores in region
    order.
    """

    ADDR_WIDTH = 16

    def __init__(self, *, in_bytes: int | None = None, out_bytes: int | None = None,
                 regions: Sequence[tuple[int, int]] | None = None, divisor: int | None = None,
                 clk_hz: float | None = None, baud: float | None = None,
                 rx_fifo_depth: int = 16, idle_timeout: int | None = None,
                 axi_timeout: int = 1024) -> None:
        if divisor is None:
            if clk_hz is None or baud is None:
                raise HardwareConfigError("UartBridge: give divisor=, or clk_hz= and baud=")
            divisor = baud_divisor(clk_hz, baud)
        if divisor < 4 or divisor >= 1 << 16:
            raise HardwareConfigError(f"UartBridge: divisor must be in [4, 65535], got "
                                      f"{divisor}")
        beats = _region_beats(in_bytes, out_bytes, regions)
        if idle_timeout is not None and idle_timeout < 20 * divisor:
            raise HardwareConfigError(f"UartBridge: idle_timeout {idle_timeout} is shorter "
                                      f"than two byte times ({20 * divisor} cycles)")
        self.divisor = divisor
        self.clk_hz = clk_hz
        self.baud = clk_hz / divisor if clk_hz else baud
        #: (in_bytes, out_bytes) per region; one entry for a single-region bridge
        self.regions = beats
        self.in_bytes = max(ib for ib, _ in beats)
        self.out_bytes = max(ob for _, ob in beats)
        self.rx_fifo_depth = rx_fifo_depth
        self.idle_timeout, self.axi_timeout = idle_timeout, axi_timeout
        members: dict[str, Any] = {"rx": In(1, init=1), "tx": Out(1, init=1)}
        if len(beats) == 1:
            members.update({"axil": Out(AXILiteSignature(self.ADDR_WIDTH)),
                            "s_axis": Out(_beat_signature(self.in_bytes)),
                            "m_axis": In(_beat_signature(self.out_bytes))})
        else:
            for k, (ib, ob) in enumerate(beats):
                members.update({f"axil{k}": Out(AXILiteSignature(self.ADDR_WIDTH)),
                                f"s_axis{k}": Out(_beat_signature(ib)),
                                f"m_axis{k}": In(_beat_signature(ob))})
        members["errors"] = Out(5)
        super().__init__(members)

    @property
    def region_ports(self) -> list[RegionPorts]:
        """Each region's ports (a single-region bridge: ``axil``, ``s_axis``, ``m_axis``)."""
        if len(self.regions) == 1:
            return [RegionPorts(self.axil, self.s_axis, self.m_axis, self.in_bytes,
                                self.out_bytes)]
        return [RegionPorts(getattr(self, f"axil{k}"), getattr(self, f"s_axis{k}"),
                            getattr(self, f"m_axis{k}"), ib, ob)
                for k, (ib, ob) in enumerate(self.regions)]

    def describe(self) -> dict[str, object]:
        """What a host needs to talk to it."""
        out: dict[str, object] = {
            "protocol_version": PROTOCOL_VERSION, "divisor": self.divisor, "baud": self.baud,
            "clk_hz": self.clk_hz, "in_bytes": self.in_bytes, "out_bytes": self.out_bytes,
            "rx_fifo_depth": self.rx_fifo_depth}
        if len(self.regions) > 1:
            out["protocol_version"] = REGIONS_PROTOCOL_VERSION
            out["regions"] = [{"address": k, "in_bytes": ib, "out_bytes": ob,
                               "beat_tags": [beat_tag(k, False), beat_tag(k, True)]}
                              for k, (ib, ob) in enumerate(self.regions)]
        return out

    # -- wiring to a core -------------------------------------------------------------
    def connect(self, m: Module, core: object) -> None:
        """Drive ``core``'s flat AXI ports from the bridge (``BoardTop`` calls this).  A
        bridge of several regions takes the cores in region order: a sequence, or an
        object whose ``cores`` is one."""
        ports = self.region_ports
        if len(ports) == 1:
            self._connect_one(m, core, ports[0], "")
            return
        cores = core if isinstance(core, Sequence) else getattr(core, "cores", None)
        if cores is None or len(cores) != len(ports):
            got = "no sequence of cores" if cores is None else f"{len(cores)} cores"
            raise HardwareConfigError(
                f"UartBridge.connect: the bridge has {len(ports)} regions but was given "
                f"{got}; pass one accelerator per region, in region order")
        for k, (c, p) in enumerate(zip(cores, ports)):
            self._connect_one(m, c, p, f" of region {k}")

    def _connect_one(self, m: Module, core: Any, ports: RegionPorts, where: str) -> None:
        need = ("s_axil_awaddr", "s_axil_rdata", "s_axis_tdata", "s_axis_tlast",
                "m_axis_tdata", "m_axis_tlast")
        missing = [p for p in need if not hasattr(core, p)]
        if missing:
            raise HardwareConfigError(
                f"UartBridge.connect: the core{where} {type(core).__name__} has no {missing} "
                "ports; it needs the flat AXI ports of fluid_hw.rtl.AcceleratorTop")
        ib, ob = 8 * ports.in_bytes, 8 * ports.out_bytes
        for port, want in (("s_axis_tdata", ib), ("m_axis_tdata", ob)):
            got = len(getattr(core, port))
            if got != want:
                raise HardwareConfigError(
                    f"UartBridge.connect: the core{where}'s {port} is {got} bits but the "
                    f"bridge was made for {want} (in_bytes={ports.in_bytes}, "
                    f"out_bytes={ports.out_bytes})")
        if len(core.s_axil_awaddr) > self.ADDR_WIDTH:
            raise HardwareConfigError(f"UartBridge.connect: the core{where}'s AXI4-Lite "
                                      f"address is wider than the protocol's "
                                      f"{self.ADDR_WIDTH} bits")
        bus = ports.axil
        for n in ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr",
                  "arvalid", "rready"):
            m.d.comb += getattr(core, f"s_axil_{n}").eq(getattr(bus, n))
        for n in ("awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp",
                  "rvalid"):
            m.d.comb += getattr(bus, n).eq(getattr(core, f"s_axil_{n}"))
        m.d.comb += [
            core.s_axis_tdata.eq(ports.s_axis.payload[:ib]),
            core.s_axis_tlast.eq(ports.s_axis.payload[ib]),
            core.s_axis_tvalid.eq(ports.s_axis.valid),
            ports.s_axis.ready.eq(core.s_axis_tready),
            ports.m_axis.payload.eq(Cat(core.m_axis_tdata[:ob],
                                        core.m_axis_tlast)),
            ports.m_axis.valid.eq(core.m_axis_tvalid),
            core.m_axis_tready.eq(ports.m_axis.ready),
        ]

    # -- hardware -----------------------------------------------------------------------
    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.uart_rx = urx = UartRx(self.divisor)
        m.submodules.uart_tx = utx = UartTx(self.divisor)
        m.submodules.rx_fifo = rxq = _ByteFIFO(self.rx_fifo_depth)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     rxq.w_data.eq(urx.data), rxq.w_en.eq(urx.valid)]
        byte = rxq.o.payload
        got = rxq.o.valid & rxq.o.ready

        errors = self.errors
        err_set = Signal(5)
        clear_errors = Signal()
        m.d.sync += errors.eq(Mux(clear_errors, 0, errors) | err_set)
        m.d.comb += [err_set[0].eq(rxq.overflow), err_set[1].eq(urx.frame_error)]
        # several regions: the selected one (REGION), their ports; one region: none of it
        multi = len(self.regions) > 1
        ports = self.region_ports
        sel = Signal(range(len(ports)), name="region")

        # ---- responses and output beats share the transmitter, a packet at a time ----
        max_pkt = 1 + max(8, self.out_bytes)
        pkt = Signal(8 * max_pkt)
        pkt_left = Signal(range(max_pkt + 1))
        resp_valid = Signal()
        resp_data = Signal(8 * 9)
        resp_len = Signal(range(10))
        resp_taken = Signal()
        ob = 8 * self.out_bytes
        m.d.comb += [utx.i.payload.eq(pkt[:8]), utx.i.valid.eq(pkt_left != 0)]
        with m.If(utx.i.valid & utx.i.ready):
            m.d.sync += [pkt.eq(pkt >> 8), pkt_left.eq(pkt_left - 1)]
        idle_tx = pkt_left == 0
        with m.If(idle_tx & resp_valid):
            m.d.sync += [pkt.eq(resp_data), pkt_left.eq(resp_len)]
            m.d.comb += resp_taken.eq(1)
        if not multi:
            with m.Elif(idle_tx & self.m_axis.valid):
                m.d.comb += self.m_axis.ready.eq(1)
                tag = Mux(self.m_axis.payload[ob], PKT_BEAT_LAST, PKT_BEAT)
                m.d.sync += [pkt.eq(Cat(tag, self.m_axis.payload[:ob])),
                             pkt_left.eq(1 + self.out_bytes)]
        else:  # the lowest region with a beat goes first; its tag names the region
            with m.Elif(idle_tx & Cat(p.m_axis.valid for p in ports).any()):
                for k, p in enumerate(ports):
                    with (m.If if k == 0 else m.Elif)(p.m_axis.valid):
                        pob = 8 * p.out_bytes
                        m.d.comb += p.m_axis.ready.eq(1)
                        tag = Mux(p.m_axis.payload[pob], beat_tag(k, True), beat_tag(k, False))
                        m.d.sync += [pkt.eq(Cat(Const(0, 8) | tag, p.m_axis.payload[:pob])),
                                     pkt_left.eq(1 + p.out_bytes)]

        # ---- command parser --------------------------------------------------------------
        cmd = Signal(8)
        hdr = Signal(8 * 6)
        hdr_idx = Signal(range(7))
        word = Signal(8 * max(4, self.in_bytes))
        word_idx = Signal(range(max(4, self.in_bytes) + 1))
        count = Signal(16)
        resp_acc = Signal(3)
        addr = hdr[:16]
        hdr_len = Signal(range(7))
        header_bytes = REGION_HEADER_BYTES if multi else HEADER_BYTES
        m.d.comb += hdr_len.eq(Array(Const(header_bytes.get(c, 0), 3) for c in range(8))[
            cmd[:3]])

        if multi:  # one master, routed to the selected region (changed only between commands)
            bus = AXILiteSignature(self.ADDR_WIDTH).create(path=("axil",))
            self._route_axil(m, bus, sel)
        else:
            bus = self.axil
        axi_cnt = Signal(range(self.axi_timeout + 1))
        aw_done, w_done = Signal(), Signal()
        m.d.comb += [bus.wstrb.eq(0xF), bus.awaddr.eq(addr), bus.araddr.eq(addr)]

        waiting_rx = Signal()  # the parser is waiting for a byte of a command
        if self.idle_timeout is not None:
            # counts down; `expired` is registered so the counter stays off the FSM's paths
            idle = Signal(range(self.idle_timeout + 1), init=self.idle_timeout)
            expired = Signal()
            timed_out = Signal()
            with m.If(~waiting_rx | got):
                m.d.sync += [idle.eq(self.idle_timeout), expired.eq(0)]
            with m.Elif(idle != 0):
                m.d.sync += [idle.eq(idle - 1), expired.eq(idle == 1)]
            m.d.comb += timed_out.eq(waiting_rx & expired)
        else:
            timed_out = Const(0, 1)

        def respond(tag: int, *payload: object) -> None:
            parts = [Const(tag, 8), *payload]
            m.d.sync += [resp_data.eq(Cat(*parts)), resp_len.eq(
                sum(len(p) for p in parts) // 8)]

        def axi_wait() -> None:
            """Count down the AXI timeout; on expiry abandon the access."""
            m.d.sync += axi_cnt.eq(axi_cnt + 1)

        ib = 8 * self.in_bytes
        # the stream beat: ``push`` is its valid, a register of its own (STREAM_PUSH), and
        # ``last`` its TLAST, registered with it (no compare of the 16-bit count on the
        # payload: the digits MLP's critical path ran from the parser into the input
        # skid buffer, 10.93 ns at 24ec506)
        push = Signal()
        last = Signal()
        if multi:
            for k, p in enumerate(ports):
                m.d.comb += [p.s_axis.valid.eq(push & (sel == k)),
                             p.s_axis.payload.eq(Cat(word[:8 * p.in_bytes], last))]
        else:
            m.d.comb += [self.s_axis.valid.eq(push),
                         self.s_axis.payload.eq(Cat(word[:ib], last))]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += rxq.o.ready.eq(1)
                with m.If(got):
                    m.d.sync += [cmd.eq(byte), hdr_idx.eq(0)]
                    with m.If(byte == CMD_NOP):
                        pass
                    with m.Elif(byte == CMD_INFO):
                        m.next = "INFO"
                    with m.Elif(byte <= (CMD_REGION if multi else CMD_STREAM_IN)):
                        m.next = "HEADER"
                    with m.Else():
                        m.d.comb += err_set[2].eq(1)
            with m.State("HEADER"):
                m.d.comb += [rxq.o.ready.eq(1), waiting_rx.eq(1)]
                with m.If(timed_out):
                    m.d.comb += err_set[3].eq(1)
                    m.next = "IDLE"
                with m.Elif(got):
                    m.d.sync += [hdr.word_select(hdr_idx, 8).eq(byte), hdr_idx.eq(hdr_idx + 1)]
                    with m.If(hdr_idx == hdr_len - 1):
                        m.next = "DISPATCH"
            with m.State("DISPATCH"):
                m.d.sync += [axi_cnt.eq(0), aw_done.eq(0), w_done.eq(0), word_idx.eq(0),
                             resp_acc.eq(0)]
                with m.If(cmd == CMD_READ):
                    m.next = "READ_AR"
                with m.Elif(cmd == CMD_WRITE):
                    m.d.sync += word.eq(hdr[16:48])
                    m.next = "WRITE_AW"
                with m.Elif(cmd == CMD_WRITE_BURST):
                    m.d.sync += count.eq(hdr[16:32])
                    m.next = "BURST_NEXT"
                if multi:
                    with m.Elif(cmd == CMD_REGION):
                        n = Const(len(ports), 8)
                        with m.If(hdr[:8] < len(ports)):
                            m.d.sync += sel.eq(hdr[:8])
                            respond(RSP_REGION, Const(0, 8), hdr[:8], n)
                        with m.Else():
                            respond(RSP_REGION, Const(RESP_SLVERR, 8), sel.as_unsigned()
                                    | Const(0, 8), n)
                        m.next = "RESPOND"
                with m.Else():  # STREAM_IN
                    m.d.sync += count.eq(hdr[:16])
                    m.next = "STREAM_NEXT"
            with m.State("INFO"):
                if multi:  # the selected region's beat sizes
                    version = Const(REGIONS_PROTOCOL_VERSION, 8)
                    in_b = Array(Const(p.in_bytes, 8) for p in ports)[sel]
                    out_b = Array(Const(p.out_bytes, 8) for p in ports)[sel]
                else:
                    version = Const(PROTOCOL_VERSION, 8)
                    in_b, out_b = Const(self.in_bytes, 8), Const(self.out_bytes, 8)
                respond(RSP_INFO, Const(INFO_MAGIC[0], 8), Const(INFO_MAGIC[1], 8), version,
                        Cat(errors, Const(0, 3)), in_b, out_b, Const(self.divisor, 16))
                m.d.comb += clear_errors.eq(1)
                m.next = "RESPOND"
            # -- single read --
            with m.State("READ_AR"):
                m.d.comb += bus.arvalid.eq(1)
                axi_wait()
                with m.If(bus.arready):
                    m.d.sync += axi_cnt.eq(0)
                    m.next = "READ_R"
                with m.Elif(axi_cnt == self.axi_timeout):
                    m.d.comb += err_set[4].eq(1)
                    respond(RSP_READ, Const(RESP_TIMEOUT, 8), Const(0, 32))
                    m.next = "RESPOND"
            with m.State("READ_R"):
                m.d.comb += bus.rready.eq(1)
                axi_wait()
                with m.If(bus.rvalid):
                    respond(RSP_READ, Cat(bus.rresp, Const(0, 6)), bus.rdata)
                    m.next = "RESPOND"
                with m.Elif(axi_cnt == self.axi_timeout):
                    m.d.comb += err_set[4].eq(1)
                    respond(RSP_READ, Const(RESP_TIMEOUT, 8), Const(0, 32))
                    m.next = "RESPOND"
            # -- writes (single, and each word of a burst) --
            with m.State("WRITE_AW"):
                m.d.comb += [bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done),
                             bus.wdata.eq(word[:32])]
                axi_wait()
                aw = aw_done | bus.awready
                w = w_done | bus.wready
                m.d.sync += [aw_done.eq(aw), w_done.eq(w)]
                with m.If(aw & w):
                    m.d.sync += axi_cnt.eq(0)
                    m.next = "WRITE_B"
                with m.Elif(axi_cnt == self.axi_timeout):
                    m.d.comb += err_set[4].eq(1)
                    m.d.sync += resp_acc.eq(Mux(resp_acc == 0, RESP_TIMEOUT, resp_acc))
                    m.next = "WRITE_DONE"
            with m.State("WRITE_B"):
                m.d.comb += bus.bready.eq(1)
                axi_wait()
                with m.If(bus.bvalid):
                    with m.If(resp_acc == 0):
                        m.d.sync += resp_acc.eq(bus.bresp)
                    m.next = "WRITE_DONE"
                with m.Elif(axi_cnt == self.axi_timeout):
                    m.d.comb += err_set[4].eq(1)
                    m.d.sync += resp_acc.eq(Mux(resp_acc == 0, RESP_TIMEOUT, resp_acc))
                    m.next = "WRITE_DONE"
            with m.State("WRITE_DONE"):
                m.d.sync += [axi_cnt.eq(0), aw_done.eq(0), w_done.eq(0), word_idx.eq(0)]
                with m.If(cmd == CMD_WRITE):
                    respond(RSP_WRITE, Cat(resp_acc, Const(0, 5)))
                    m.next = "RESPOND"
                with m.Else():
                    m.next = "BURST_NEXT"
            with m.State("BURST_NEXT"):
                with m.If(count == 0):
                    respond(RSP_WRITE_BURST, Cat(resp_acc, Const(0, 5)))
                    m.next = "RESPOND"
                with m.Else():
                    m.d.sync += count.eq(count - 1)
                    m.next = "BURST_DATA"
            with m.State("BURST_DATA"):
                m.d.comb += [rxq.o.ready.eq(1), waiting_rx.eq(1)]
                with m.If(timed_out):
                    m.d.comb += err_set[3].eq(1)
                    m.next = "IDLE"
                with m.Elif(got):
                    m.d.sync += [word.word_select(word_idx, 8).eq(byte),
                                 word_idx.eq(word_idx + 1)]
                    with m.If(word_idx == 3):
                        m.next = "WRITE_AW"
            # -- stream in --
            with m.State("STREAM_NEXT"):
                m.d.sync += word_idx.eq(0)
                with m.If(count == 0):
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += count.eq(count - 1)
                    m.next = "STREAM_DATA"
            with m.State("STREAM_DATA"):
                m.d.comb += [rxq.o.ready.eq(1), waiting_rx.eq(1)]
                with m.If(timed_out):
                    m.d.comb += err_set[3].eq(1)
                    m.next = "IDLE"
                with m.Elif(got):
                    m.d.sync += [word.word_select(word_idx, 8).eq(byte),
                                 word_idx.eq(word_idx + 1)]
                    in_last = Array(Const(p.in_bytes - 1, 8) for p in ports)[sel] if multi \
                        else self.in_bytes - 1
                    with m.If(word_idx == in_last):
                        m.d.sync += [push.eq(1), last.eq((count == 0) & hdr[16])]
                        m.next = "STREAM_PUSH"
            with m.State("STREAM_PUSH"):
                # valid from its own register (set entering, cleared leaving this
                # state): the accelerator's input skid buffer loads a whole beat on it
                # (512 flip-flops for 64 bytes), so no state decoding before that net
                # (the digits MLP's critical path on the ULX3S-85F, 12.68 ns)
                ready = (Array(p.s_axis.ready for p in ports)[sel] if multi
                         else self.s_axis.ready)
                with m.If(ready):
                    m.d.sync += push.eq(0)
                    m.next = "STREAM_NEXT"
            # -- hand the response to the transmitter --
            with m.State("RESPOND"):
                m.d.comb += resp_valid.eq(1)
                with m.If(resp_taken):
                    m.next = "IDLE"
        return m

    def _route_axil(self, m: Module, bus: Any, sel: Signal) -> None:
        """The parser's AXI4-Lite master to the selected region's port: requests go to
        that region only, its answers come back."""
        ports = self.region_ports
        for k, p in enumerate(ports):
            for n in ("awaddr", "wdata", "wstrb", "araddr"):
                m.d.comb += getattr(p.axil, n).eq(getattr(bus, n))
            for n in ("awvalid", "wvalid", "bready", "arvalid", "rready"):
                m.d.comb += getattr(p.axil, n).eq(getattr(bus, n) & (sel == k))
        for n in ("awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp",
                  "rvalid"):
            m.d.comb += getattr(bus, n).eq(Array(getattr(p.axil, n) for p in ports)[sel])


# ---- behavioural model -------------------------------------------------------------------

@dataclass
class UartBridgeModel:
    """What the bridge does with a host's bytes, at the byte level.

    ``read(addr) -> (data, resp)`` and ``write(addr, data) -> resp`` stand for the
    AXI4-Lite slave; ``s_axis`` collects the beats sent to the accelerator as
    ``(data, last)``; :meth:`output` turns ``m_axis`` beats into packets.  :meth:`feed`
    returns the bytes the bridge answers (responses only; output packets come from
    :meth:`output`, interleaved at packet boundaries by the hardware).

    Several regions (:meth:`of_regions`): ``regions`` holds each one's ``(in_bytes,
    out_bytes)``, ``read``/``write`` are one callable per region, ``region`` is the
    selection and ``s_axis_region`` the region of each beat in ``s_axis``."""

    in_bytes: int
    out_bytes: int
    read: Callable[[int], tuple[int, int]] | Sequence[Callable[[int], tuple[int, int]]]
    write: Callable[[int, int], int] | Sequence[Callable[[int, int], int]]
    divisor: int = 8
    s_axis: list[tuple[int, int]] = field(default_factory=list)
    errors: int = 0
    regions: Sequence[tuple[int, int]] = ()
    region: int = 0
    s_axis_region: list[int] = field(default_factory=list)
    _buf: bytearray = field(default_factory=bytearray)

    @classmethod
    def of_regions(cls, regions: Sequence[tuple[int, int]],
                   read: Sequence[Callable[[int], tuple[int, int]]],
                   write: Sequence[Callable[[int, int], int]], divisor: int = 8
                   ) -> UartBridgeModel:
        """The model of ``UartBridge(regions=regions)``."""
        return cls(max(ib for ib, _ in regions), max(ob for _, ob in regions), read, write,
                   divisor, regions=tuple(regions))

    def _sizes(self) -> tuple[int, int]:
        return self.regions[self.region] if self.regions else (self.in_bytes, self.out_bytes)

    def _slave(self, f: Any) -> Any:
        return f[self.region] if self.regions else f

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while self._buf:
            used, resp = self._one(bytes(self._buf))
            if used == 0:
                break  # an incomplete command: wait for more bytes
            del self._buf[:used]
            out += resp
        return bytes(out)

    def _one(self, b: bytes) -> tuple[int, bytes]:
        c = b[0]
        multi = len(self.regions) > 1
        if c > (CMD_REGION if multi else CMD_STREAM_IN):
            self.errors |= ERR_BAD_COMMAND
            return 1, b""
        n = 1 + REGION_HEADER_BYTES[c]
        if len(b) < n:
            return 0, b""
        h = b[1:n]
        in_bytes, out_bytes = self._sizes()
        read, write = self._slave(self.read), self._slave(self.write)
        if c == CMD_NOP:
            return 1, b""
        if c == CMD_INFO:
            version = REGIONS_PROTOCOL_VERSION if multi else PROTOCOL_VERSION
            r = bytes([RSP_INFO, *INFO_MAGIC, version, self.errors, in_bytes,
                       out_bytes]) + self.divisor.to_bytes(2, "little")
            self.errors = 0
            return 1, r
        if c == CMD_REGION:
            ok = h[0] < len(self.regions)
            if ok:
                self.region = h[0]
            return n, bytes([RSP_REGION, 0 if ok else RESP_SLVERR, self.region,
                             len(self.regions)])
        if c == CMD_READ:
            data, resp = read(int.from_bytes(h[:2], "little"))
            return n, bytes([RSP_READ, resp]) + (data & 0xFFFFFFFF).to_bytes(4, "little")
        if c == CMD_WRITE:
            resp = write(int.from_bytes(h[:2], "little"), int.from_bytes(h[2:6], "little"))
            return n, bytes([RSP_WRITE, resp])
        if c == CMD_WRITE_BURST:
            count = int.from_bytes(h[2:4], "little")
            if len(b) < n + 4 * count:
                return 0, b""
            first = 0
            for k in range(count):
                w = int.from_bytes(b[n + 4 * k:n + 4 * k + 4], "little")
                r = write(int.from_bytes(h[:2], "little"), w)
                first = first or r
            return n + 4 * count, bytes([RSP_WRITE_BURST, first])
        count = int.from_bytes(h[:2], "little")
        if len(b) < n + in_bytes * count:
            return 0, b""
        for k in range(count):
            beat = b[n + k * in_bytes:n + (k + 1) * in_bytes]
            self.s_axis.append((int.from_bytes(beat, "little"),
                                int(k == count - 1 and bool(h[2] & 1))))
            self.s_axis_region.append(self.region)
        return n + in_bytes * count, b""

    def output(self, beats: Sequence[tuple[int, int]], region: int = 0) -> bytes:
        """Packets of ``m_axis`` beats ``(data, last)`` of ``region``."""
        size = self.regions[region][1] if self.regions else self.out_bytes
        out = bytearray()
        for data, last in beats:
            out.append(beat_tag(region, bool(last)))
            out += int(data).to_bytes(size, "little")
        return bytes(out)
