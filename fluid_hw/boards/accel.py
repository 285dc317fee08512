"""The board top of an accelerator: PLL, reset synchroniser, the UART bridge on the
board's USB-serial pins and the accelerator core, with nothing tied off.

:class:`AcceleratorBoardTop` is a :class:`~.top.BoardTop` whose core has the flat AXI
ports of ``fluid_hw.rtl.AcceleratorTop`` (``s_axil_*``, ``s_axis_*``, ``m_axis_*``;
the Amaranth component itself, or its Verilog through :class:`~.top.VerilogCore`) and
whose bridge drives every one of them (the bridge's ``connect(m, core)``).  So every
multiplier and memory of the core is observable from the serial pins and synthesis
keeps them all: Yosys' DSP and block-RAM counts are the accelerator's own.

Several accelerators (the regions of a multi-region build, each its own AXI ports)
share one board top: pass them as a list; they become :class:`RegionCores`, and the
bridge (``UartBridge(regions=...)``) drives each through its own ports, selected by the
region address of its protocol.

``pll=False`` runs the design from the oscillator directly (what a simulation of the
board top wants: no PLL model, and the bridge's baud divisor chosen freely).  The
boards package imports no other part of fluid-hw, so the bridge comes in as an
object or a factory (``fluid_hw.rtl.UartBridge``), as for ``BoardTop``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from amaranth.hdl import Elaboratable, Module

from ..errors import FluidError
from .devices import Board
from .top import BoardTop, BridgeArg

__all__ = ["AXI_PORTS", "AcceleratorBoardTop", "RegionCores", "missing_axi_ports"]

#: The flat AXI ports an accelerator core has (AXI4-Lite slave, AXI4-Stream in and out).
AXI_PORTS = (
    "s_axil_awaddr", "s_axil_awvalid", "s_axil_awready", "s_axil_wdata", "s_axil_wstrb",
    "s_axil_wvalid", "s_axil_wready", "s_axil_bresp", "s_axil_bvalid", "s_axil_bready",
    "s_axil_araddr", "s_axil_arvalid", "s_axil_arready", "s_axil_rdata", "s_axil_rresp",
    "s_axil_rvalid", "s_axil_rready",
    "s_axis_tdata", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
    "m_axis_tdata", "m_axis_tvalid", "m_axis_tready", "m_axis_tlast",
)


def missing_axi_ports(core: object) -> list[str]:
    """The AXI ports of :data:`AXI_PORTS` that ``core`` lacks."""
    return [p for p in AXI_PORTS if not hasattr(core, p)]


class RegionCores(Elaboratable):
    """Several accelerator cores in one board top, region ``k`` = ``cores[k]`` (each a
    submodule ``region<k>``); the bridge's ``connect`` drives each one's ports."""

    def __init__(self, cores: Sequence[Elaboratable], *, src_loc_at: int = 0) -> None:
        # src_loc_at: whose file's linter options apply (Amaranth's MustUse)
        self.cores = list(cores)

    @property
    def verilog_sources(self) -> tuple[Path, ...]:
        out: list[Path] = []
        for c in self.cores:
            out += [Path(p) for p in getattr(c, "verilog_sources", ())]
        return tuple(dict.fromkeys(out))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for k, core in enumerate(self.cores):
            m.submodules[f"region{k}"] = core
        return m


class AcceleratorBoardTop(BoardTop):
    """An accelerator on a board, reached over the USB-serial link.

    ``core``: an accelerator with flat AXI ports (an ``AcceleratorTop``, or a
    :class:`~.top.VerilogCore` of its ``accelerator.v``), or a list of them (one per
    region, behind a bridge of as many regions).  ``bridge``: the UART bridge,
    or a factory taking the design clock in Hz; it must have ``rx``, ``tx`` and
    ``connect(m, core)``.  ``clock_mhz``: the design clock made by the PLL (``None``:
    the oscillator's).  ``pll=False``: no PLL, the oscillator clocks the design (for
    simulation of the whole board top).
    """

    def __init__(self, core: Elaboratable | Sequence[Elaboratable], board: str | Board, *,
                 bridge: BridgeArg, clock_mhz: float | None = None, pll: bool = True) -> None:
        cores = list(core) if isinstance(core, Sequence) else [core]
        if not cores:
            raise FluidError("AcceleratorBoardTop: no accelerator core given")
        for k, c in enumerate(cores):
            missing = missing_axi_ports(c)
            where = f" of region {k}" if len(cores) > 1 else ""
            if missing:
                raise FluidError(
                    f"AcceleratorBoardTop: the core{where} {type(c).__name__} lacks the AXI "
                    f"ports {missing[:4]}{'...' if len(missing) > 4 else ''}; it must be an "
                    "accelerator with flat AXI ports (fluid_hw.rtl.AcceleratorTop, or "
                    "VerilogCore('accelerator.v'))")
        if len(cores) > 1:
            core = RegionCores(cores, src_loc_at=1)  # unused only when the checks fail
        else:
            core = cores[0]
        if bridge is None:
            raise FluidError("AcceleratorBoardTop: a bridge is needed to reach the core's AXI "
                             "ports from the serial pins (fluid_hw.rtl.UartBridge); without "
                             "one use BoardTop, which probes the ports instead")
        self.pll_enabled = pll
        super().__init__(core, board, clock_mhz=clock_mhz if pll else None, bridge=bridge,
                         drive_ports=False)
        if not callable(getattr(self.bridge, "connect", None)):
            raise FluidError(f"AcceleratorBoardTop: the bridge {type(self.bridge).__name__} "
                             "has no connect(m, core) to drive the core's AXI ports")
        regions = len(getattr(self.bridge, "regions", ((0, 0),)))
        if regions != len(cores):
            raise FluidError(f"AcceleratorBoardTop: {len(cores)} accelerator cores but the "
                             f"bridge addresses {regions} regions; make the bridge with one "
                             "region per core (UartBridge(regions=[(in_bytes, out_bytes), "
                             "...]))")
        #: the accelerator cores, region k = cores[k] (one for a single-region top)
        self.cores = cores

    @property
    def reset_port(self) -> tuple[str, bool]:
        """The reset button's port and whether it is active high."""
        pin = self.board.pin("reset")
        return pin.name, not pin.invert

    def describe(self) -> dict[str, Any]:
        """The board-level facts a host and the build report need."""
        bridge = getattr(self.bridge, "describe", None)
        return {
            "board": self.board.name, "device": self.board.device.name,
            "clock_mhz": self.clock_mhz, "requested_clock_mhz": self.requested_clock_mhz,
            "oscillator_mhz": self.board.clock_mhz,
            "pll": self.pll_params.as_dict() if self.pll_params is not None else None,
            "pins": {role: {"port": p.name, "site": p.site}
                     for role, p in self.board.pins.items()},
            "uart": bridge() if callable(bridge) else None,
        }
