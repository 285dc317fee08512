"""The board top of an accelerator: PLL, reset synchroniser, the UART bridge on the
board's USB-serial pins and the accelerator core, with nothing tied off.

:class:`AcceleratorBoardTop` is a :class:`~.top.BoardTop` whose core has the flat AXI
ports of ``fluid_hw.rtl.AcceleratorTop`` (``s_axil_*``, ``s_axis_*``, ``m_axis_*``;
the Amaranth component itself, or its Verilog through :class:`~.top.VerilogCore`) and
whose bridge drives every one of them (the bridge's ``connect(m, core)``).  So every
multiplier and memory of the core is observable from the serial pins and synthesis
keeps them all: Yosys' DSP and block-RAM counts are the accelerator's own.

``pll=False`` runs the design from the oscillator directly (what a simulation of the
board top wants: no PLL model, and the bridge's baud divisor chosen freely).  The
boards package imports no other part of fluid-hw, so the bridge comes in as an
object or a factory (``fluid_hw.rtl.UartBridge``), as for ``BoardTop``.
"""

from __future__ import annotations

from typing import Any

from amaranth.hdl import Elaboratable

from ..errors import FluidError
from .devices import Board
from .top import BoardTop, BridgeArg

__all__ = ["AXI_PORTS", "AcceleratorBoardTop", "missing_axi_ports"]

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


class AcceleratorBoardTop(BoardTop):
    """An accelerator on a board, reached over the USB-serial link.

    ``core``: an accelerator with flat AXI ports (an ``AcceleratorTop``, or a
    :class:`~.top.VerilogCore` of its ``accelerator.v``).  ``bridge``: the UART bridge,
    or a factory taking the design clock in Hz; it must have ``rx``, ``tx`` and
    ``connect(m, core)``.  ``clock_mhz``: the design clock made by the PLL (``None``:
    the oscillator's).  ``pll=False``: no PLL, the oscillator clocks the design (for
    simulation of the whole board top).
    """

    def __init__(self, core: Elaboratable, board: str | Board, *, bridge: BridgeArg,
                 clock_mhz: float | None = None, pll: bool = True) -> None:
        missing = missing_axi_ports(core)
        if missing:
            raise FluidError(f"AcceleratorBoardTop: the core {type(core).__name__} lacks the "
                             f"AXI ports {missing[:4]}{'...' if len(missing) > 4 else ''}; it "
                             "must be an accelerator with flat AXI ports (fluid_hw.rtl."
                             "AcceleratorTop, or VerilogCore('accelerator.v'))")
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
