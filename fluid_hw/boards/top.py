"""The board top: PLL, reset synchroniser, serial pins and a core.

:class:`BoardTop` wraps any Amaranth elaboratable that runs in the ``sync``
domain (an accelerator, or a :class:`VerilogCore` around a Verilog top with
``clk``/``rst`` ports) and gives it a clock and a reset on a real board:

- the board oscillator feeds a PLL (:mod:`.pll`) that makes ``clock_mhz``, or
  drives ``sync`` directly when no other frequency is asked for;
- ``sync``'s reset is the PLL's "not locked" or the reset button, through a
  two-stage reset synchroniser (:class:`amaranth.lib.cdc.ResetSynchronizer`);
- the USB-serial pins go to an optional *bridge* (the UART-to-AXI bridge built
  in ``fluid_hw.rtl``): any elaboratable with 1-bit ``rx`` (input) and ``tx``
  (output) signals, or a callable that takes the clock frequency in Hz and
  returns one.  If the bridge has a ``connect(m, core)`` method it is called in
  the top's module so the bridge can wire itself to the core's interfaces;
- without a bridge, the serial pins are looped back (TX = RX) and, so that
  synthesis keeps the whole core, its input ports are driven from a shift
  register fed by RX and its output ports are XOR-folded (registered) into the
  LED: a resource- and timing-faithful out-of-context build of the core;
- the LED otherwise shows a heartbeat (about 1 Hz) once the clock runs.

The top's ports are the board's pins by their names (``clk25``, ``uart_tx``,
``uart_rx``, ``led``, ``button``...), which is what the constraint writers use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Elaboratable,
    Instance,
    Module,
    ResetSignal,
    Signal,
    Value,
)
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer
from amaranth.lib.wiring import In, Out

from ..errors import FluidError
from .devices import Board, Pin, get_board
from .pll import ECP5PLLParams, ICE40PLLParams, make_pll, pll_params

__all__ = ["BoardTop", "VerilogCore", "core_ports", "verilog_ports"]

BridgeArg: TypeAlias = Elaboratable | Callable[[float], Elaboratable] | None


def core_ports(core: Any) -> tuple[list[Value], list[Value]]:
    """The input and output port values of a :class:`wiring.Component` (empty
    lists for a plain elaboratable, whose ports cannot be known)."""
    ins: list[Value] = []
    outs: list[Value] = []
    if not isinstance(core, wiring.Component):
        return ins, outs
    for _path, member, value in core.signature.flatten(core):
        (ins if member.flow == wiring.In else outs).append(Value.cast(value))
    return ins, outs


class BoardTop(wiring.Component):
    """A core on a board: clock from the PLL, synchronised reset, serial pins.

    ``core``: the design (uses domain ``sync``).  ``board``: a board name or
    :class:`Board`.  ``clock_mhz``: the design clock; ``None`` runs from the
    oscillator without a PLL.  ``bridge``: see the module docstring.
    ``drive_ports``: drive the core's ports from the serial pins and LED (the
    default when there is no bridge).
    """

    def __init__(self, core: Elaboratable, board: str | Board, *,
                 clock_mhz: float | None = None, bridge: BridgeArg = None,
                 drive_ports: bool | None = None) -> None:
        self.board = get_board(board)
        self.core = core
        if drive_ports and bridge is not None:
            raise FluidError("BoardTop: drive_ports=True uses the serial pins, so it cannot "
                             "be combined with a bridge")
        self.drive_ports = bridge is None if drive_ports is None else drive_ports
        self.requested_clock_mhz = clock_mhz if clock_mhz is not None else self.board.clock_mhz
        #: PLL dividers, or None when the oscillator clocks the design directly.
        self.pll_params: ECP5PLLParams | ICE40PLLParams | None = None
        if clock_mhz is not None and abs(clock_mhz - self.board.clock_mhz) > 1e-9:
            self.pll_params = pll_params(self.board.family.name, self.board.clock_mhz,
                                         clock_mhz)
        #: The frequency the design actually runs at (the PLL's achieved output).
        self.clock_mhz = (self.pll_params.f_out_mhz if self.pll_params is not None
                          else self.board.clock_mhz)
        if callable(bridge) and not isinstance(bridge, Elaboratable):
            bridge = bridge(self.clock_mhz * 1e6)
        if bridge is not None and not (hasattr(bridge, "rx") and hasattr(bridge, "tx")):
            raise FluidError(f"bridge {type(bridge).__name__}: needs 1-bit 'rx' (input) and "
                             "'tx' (output) signals for the board's serial pins")
        self.bridge: Elaboratable | None = bridge
        super().__init__(wiring.Signature({
            pin.name: In(1) if pin.direction == "i" else Out(1)
            for pin in self.board.pins.values()
        }))

    # -- what the toolchain needs ------------------------------------------

    @property
    def pins(self) -> dict[str, Pin]:
        """Top-level port name -> board pin."""
        return {pin.name: pin for pin in self.board.pins.values()}

    @property
    def clock_port(self) -> str:
        return self.board.pin("clk").name

    @property
    def verilog_sources(self) -> tuple[Path, ...]:
        """Verilog files the core and bridge need (from their ``verilog_sources``)."""
        out: list[Path] = []
        for part in (self.core, self.bridge):
            out += [Path(p) for p in getattr(part, "verilog_sources", ())]
        return tuple(dict.fromkeys(out))

    # -- hardware ------------------------------------------------------------

    def _port(self, role: str) -> Value:
        pin = self.board.pin(role)
        value = getattr(self, pin.name)
        return ~value if pin.invert else value

    def _drive_pin(self, m: Module, role: str, value: Value) -> None:
        pin = self.board.pin(role)
        m.d.comb += getattr(self, pin.name).eq(~value if pin.invert else value)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.domains.sync = ClockDomain("sync")
        clk_in = getattr(self, self.board.pin("clk").name)
        if self.pll_params is not None:
            m.submodules.pll = pll = make_pll(self.board.family.name, self.board.clock_mhz,
                                              self.requested_clock_mhz, params=self.pll_params)
            m.d.comb += [pll.clk_in.eq(clk_in), ClockSignal("sync").eq(pll.clk_out)]
            locked: Value = pll.locked
        else:
            m.d.comb += ClockSignal("sync").eq(clk_in)
            locked = Value.cast(1)
        m.submodules.reset_sync = ResetSynchronizer(~locked | self._port("reset"),
                                                    domain="sync")
        m.submodules.core = self.core

        rx = getattr(self, self.board.pin("uart_rx").name)
        tx = getattr(self, self.board.pin("uart_tx").name)
        led: Value | None = None
        if self.bridge is not None:
            m.submodules.bridge = self.bridge
            m.d.comb += [self.bridge.rx.eq(rx), tx.eq(self.bridge.tx)]
            connect = getattr(self.bridge, "connect", None)
            if callable(connect):
                connect(m, self.core)
        else:
            m.d.comb += tx.eq(rx)  # loopback
            if self.drive_ports:
                led = self._drive_core_ports(m, rx)
        self._drive_pin(m, "led", led if led is not None else self._heartbeat(m))
        return m

    def _heartbeat(self, m: Module) -> Value:
        bits = max(2, math.ceil(math.log2(self.clock_mhz * 1e6)))
        counter = Signal(bits, name="heartbeat")
        m.d.sync += counter.eq(counter + 1)
        return counter[-1]

    def _drive_core_ports(self, m: Module, rx: Value) -> Value | None:
        ins, outs = core_ports(self.core)
        if ins:
            rx_sync = Signal(name="rx_sync")
            m.submodules.rx_sync = FFSynchronizer(rx, rx_sync)
            chain = Signal(sum(len(v) for v in ins), name="probe_chain")
            m.d.sync += chain.eq(Cat(rx_sync, chain[:-1]))
            offset = 0
            for v in ins:
                m.d.comb += v.eq(chain[offset:offset + len(v)])
                offset += len(v)
        if not outs:
            return None
        # registered XOR tree, four inputs a LUT and a register per level
        level: Value = Cat(*outs)
        depth = 0
        while len(level) > 1:
            groups = [level[k:k + 4] for k in range(0, len(level), 4)]
            nxt = Signal(len(groups), name=f"probe_fold{depth}")
            m.d.sync += nxt.eq(Cat(*(g.xor() for g in groups)))
            level, depth = nxt, depth + 1
        out = Signal(name="probe_out")
        m.d.sync += out.eq(level)
        return out


# ---------------------------------------------------------------------------
# Verilog cores

_TOKEN = re.compile(r"\[[^\]]*\]|[A-Za-z_][\w$]*|[(),;=#]|\S")
_DIRECTIONS = {"input": "i", "output": "o", "inout": "io"}
_SKIP_WORDS = {"wire", "reg", "logic", "signed", "unsigned", "var", "tri"}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\(\*.*?\*\)", " ", text, flags=re.S)  # attributes
    # functions and tasks declare inputs that are not ports
    return re.sub(r"\b(function|task)\b.*?\bend\1\b", " ", text, flags=re.S)


def _modules(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(
        r"\bmodule\s+([A-Za-z_][\w$]*)(.*?)\bendmodule\b", text, flags=re.S)}


def _width(rng: str | None, where: str) -> int:
    if rng is None:
        return 1
    m = re.fullmatch(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*\]", rng)
    if not m:
        raise FluidError(f"{where}: cannot read the width {rng}; pass the ports explicitly "
                         "(VerilogCore(..., ports={name: ('i'|'o', width)}))")
    return abs(int(m.group(1)) - int(m.group(2))) + 1


def _declarations(body: str, where: str) -> Iterator[tuple[str, str, int]]:
    direction: str | None = None
    rng: str | None = None
    skipping = False  # after '=' (initial value) until ',' ';' ')'
    for tok in _TOKEN.findall(body):
        if tok in _DIRECTIONS:
            direction, rng, skipping = _DIRECTIONS[tok], None, False
        elif direction is None:
            continue
        elif tok in (";", ")"):
            direction, skipping = None, False
        elif tok == ",":
            skipping = False
        elif tok == "=":
            skipping = True
        elif skipping or tok in _SKIP_WORDS:
            continue
        elif tok.startswith("["):
            rng = tok
        elif re.fullmatch(r"[A-Za-z_][\w$]*", tok):
            yield tok, direction, _width(rng, f"{where}: port {tok!r}")


def verilog_ports(text: str, top: str | None = None) -> tuple[str, dict[str, tuple[str, int]]]:
    """``(module name, {port: (direction, width)})`` of module ``top`` of a
    Verilog text (ANSI or Verilog-1995 port declarations with numeric ranges).
    Without ``top``: the module marked ``(* top *)``, else the only module."""
    attrs_top = re.findall(r"\(\*[^*]*\btop\b[^*]*\*\)\s*module\s+([A-Za-z_][\w$]*)", text)
    clean = _strip_comments(text)
    modules = _modules(clean)
    if not modules:
        raise FluidError("no Verilog module found")
    if top is None:
        if len(attrs_top) == 1:
            top = attrs_top[0]
        elif len(modules) == 1:
            top = next(iter(modules))
        else:
            raise FluidError(f"several Verilog modules ({', '.join(modules)}): "
                             "say which is the top")
    if top not in modules:
        raise FluidError(f"Verilog module {top!r} not found; modules: {', '.join(modules)}")
    ports: dict[str, tuple[str, int]] = {}
    for name, direction, width in _declarations(modules[top], f"module {top}"):
        ports.setdefault(name, (direction, width))
    return top, ports


class VerilogCore(wiring.Component):
    """A Verilog module as an Amaranth component, for :class:`BoardTop`.

    ``source``: the Verilog file.  ``top``: its module (default: the ``(* top *)``
    one, or the only one).  ``clock``/``reset``: the ports driven by the
    ``sync`` domain's clock and (active-high, synchronous) reset.  ``ports``:
    ``{name: (direction 'i'/'o', width)}`` when the file's declarations cannot
    be read (parameterised widths).
    """

    def __init__(self, source: str | Path, top: str | None = None, *, clock: str = "clk",
                 reset: str | None = "rst",
                 ports: Mapping[str, tuple[str, int]] | None = None) -> None:
        self.source = Path(source)
        if not self.source.is_file():
            raise FluidError(f"Verilog source {self.source} does not exist")
        found_top, found = verilog_ports(self.source.read_text(), top)
        self.module = found_top
        all_ports = dict(ports) if ports is not None else found
        for special in (clock, reset):
            if special is not None and special not in all_ports:
                raise FluidError(f"Verilog module {self.module!r} has no {special!r} port; "
                                 f"ports: {', '.join(all_ports)}")
        bad = [n for n, (d, _) in all_ports.items() if d not in ("i", "o")]
        if bad:
            raise FluidError(f"Verilog module {self.module!r}: inout ports {bad} cannot be "
                             "wrapped; connect them in a hand-written top")
        self.clock, self.reset = clock, reset
        self.port_dirs = {n: d for n, (d, _) in all_ports.items() if n not in (clock, reset)}
        super().__init__(wiring.Signature({
            n: (In(w) if d == "i" else Out(w))
            for n, (d, w) in all_ports.items() if n not in (clock, reset)
        }))

    @property
    def verilog_sources(self) -> tuple[Path, ...]:
        return (self.source,)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        conns: dict[str, Any] = {f"i_{self.clock}": ClockSignal("sync")}
        if self.reset is not None:
            conns[f"i_{self.reset}"] = ResetSignal("sync")
        for name, d in self.port_dirs.items():
            conns[f"{d}_{name}"] = getattr(self, name)
        m.submodules.core = Instance(self.module, **conns)
        return m
