"""AXI4-Lite slave that decodes a :mod:`.regmap` register list.

The block stores nothing of the registers themselves: for each register it has

* ``r_<name>`` (in, readable registers): the value a read returns;
* ``w_<name>`` / ``we_<name>`` (out, writable registers): the data of a write (merged
  with the current value under ``wstrb`` for ``rw`` registers) and a one-cycle strobe;
* ``re_<name>`` (out): a one-cycle strobe when the register is read (e.g. to latch the
  high word of a 64-bit counter);
* ``wok_<name>`` (in, only for the writable registers named in ``checked``): the
  design's verdict on the pending write (combinational, from ``w_<name>`` and its own
  state); 0 answers SLVERR and gives no ``we_<name>`` strobe, so nothing is written.

Write address and data are each accepted into a holding register as soon as they
come (``awready = ~aw_held``, ``wready = ~w_held``), so they may arrive in either
order or together; the write happens once both are held and no response is pending.
Every access is answered, so the bus never hangs.  :class:`AXILiteModel` is the
behavioural model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError
from .regmap import OKAY, SLVERR, Register

__all__ = ["AXILiteSignature", "AXILiteRegisters", "AXILiteModel"]


def AXILiteSignature(addr_width: int) -> wiring.Signature:
    """AXI4-Lite, 32-bit data, from the master's side."""
    return wiring.Signature({
        "awaddr": Out(addr_width), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_width), "arvalid": Out(1), "arready": In(1),
        "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


def _strb_mask(strb: int) -> int:
    return sum(0xFF << (8 * i) for i in range(4) if strb >> i & 1)


class AXILiteModel:
    """Behavioural model: responses and effects of accesses, given read values."""

    def __init__(self, regs: Sequence[Register], addr_width: int = 12,
                 read_value: Callable[[str], int] | None = None,
                 write_ok: Callable[[str, int], bool] | None = None) -> None:
        self.by_word = {r.offset >> 2: r for r in regs}
        self.addr_width = addr_width
        self.read_value = read_value or (lambda name: 0)
        self.write_ok = write_ok or (lambda name, data: True)
        self.writes: list[tuple[str, int]] = []

    def _reg(self, addr: int) -> Register | None:
        return self.by_word.get((addr & ((1 << self.addr_width) - 1)) >> 2)

    def read(self, addr: int) -> tuple[int, int]:
        r = self._reg(addr)
        if r is None:
            return 0, SLVERR
        return (self.read_value(r.name) if r.readable else 0), OKAY

    def write(self, addr: int, data: int, strb: int = 0xF) -> int:
        r = self._reg(addr)
        if r is None or not r.writable or (r.access == "wo" and strb != 0xF):
            return SLVERR
        mask = _strb_mask(strb)
        if r.access == "rw":
            data = (self.read_value(r.name) & ~mask) | (data & mask)
        if not self.write_ok(r.name, data & 0xFFFFFFFF):
            return SLVERR
        self.writes.append((r.name, data & 0xFFFFFFFF))
        return OKAY


class AXILiteRegisters(Component):
    """AXI4-Lite slave for ``regs``; ``bus`` is the slave side of
    :func:`AXILiteSignature`; ``checked``: names of writable registers whose writes the
    design validates through ``wok_<name>``."""

    def __init__(self, regs: Sequence[Register], addr_width: int = 12,
                 checked: Sequence[str] = ()) -> None:
        self.regs = tuple(regs)
        self.addr_width = addr_width
        writable = {r.name for r in self.regs if r.writable}
        bad = sorted(set(checked) - writable)
        if bad:
            raise HardwareConfigError(f"AXI4-Lite registers: {bad} in checked are not "
                                      f"writable registers; writable: {sorted(writable)}")
        self.checked = frozenset(checked)
        members: dict[str, object] = {"bus": In(AXILiteSignature(addr_width))}
        for r in self.regs:
            n = r.name.lower()
            if r.readable:
                members[f"r_{n}"] = In(32)
            if r.writable:
                members[f"w_{n}"] = Out(32)
                members[f"we_{n}"] = Out(1)
                if r.name in self.checked:
                    members[f"wok_{n}"] = In(1)
            members[f"re_{n}"] = Out(1)
        super().__init__(members)

    def _word(self, addr: Value) -> Value:
        return addr[2:self.addr_width]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus = self.bus

        # ---- write channel --------------------------------------------------------
        aw_held, w_held = Signal(), Signal()
        aw_addr = Signal(self.addr_width)
        w_data, w_strb = Signal(32), Signal(4)
        m.d.comb += [bus.awready.eq(~aw_held), bus.wready.eq(~w_held)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_held.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_held.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        do_write = aw_held & w_held & ~bus.bvalid
        mask = Cat(*[w_strb[i].replicate(8) for i in range(4)])
        resp = Signal(2, init=SLVERR)
        word = self._word(aw_addr)
        for r in self.regs:
            n = r.name.lower()
            hit = word == (r.offset >> 2)
            accept = getattr(self, f"wok_{n}") if r.name in self.checked else 1
            with m.If(hit):
                if r.access == "rw":
                    m.d.comb += resp.eq(Mux(accept, OKAY, SLVERR))
                elif r.access == "wo":
                    m.d.comb += resp.eq(Mux((w_strb == 0xF) & accept, OKAY, SLVERR))
            if r.writable:
                ok = hit & ((w_strb == 0xF) if r.access == "wo" else 1) & accept
                m.d.comb += getattr(self, f"we_{n}").eq(do_write & ok)
                if r.access == "rw":
                    cur = getattr(self, f"r_{n}")
                    m.d.comb += getattr(self, f"w_{n}").eq((cur & ~mask) | (w_data & mask))
                else:
                    m.d.comb += getattr(self, f"w_{n}").eq(w_data)
        with m.If(do_write):
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(resp), aw_held.eq(0), w_held.eq(0)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        # ---- read channel ---------------------------------------------------------
        m.d.comb += bus.arready.eq(~bus.rvalid)
        ar = bus.arvalid & bus.arready
        rword = self._word(bus.araddr)
        rdata = Signal(32)
        rresp = Signal(2, init=SLVERR)
        for r in self.regs:
            n = r.name.lower()
            hit = rword == (r.offset >> 2)
            with m.If(hit):
                m.d.comb += rresp.eq(OKAY)
                if r.readable:
                    m.d.comb += rdata.eq(getattr(self, f"r_{n}"))
            m.d.comb += getattr(self, f"re_{n}").eq(ar & hit)
        with m.If(ar):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(rdata), bus.rresp.eq(rresp)]
        with m.Elif(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m
