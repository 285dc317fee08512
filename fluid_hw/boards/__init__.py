"""Boards, devices and the open-source bitstream flow.

- Data: :func:`get_board` / :func:`get_device` (``ulx3s-25f``, ``ulx3s-45f``,
  ``ulx3s-85f``, ``icebreaker``; or by device, ``LFE5U-85F``, ``up5k``), each
  with resources, pins, and the toolchain's argument templates.
- PLLs: :func:`ecp5_pll_params` (as ``ecppll``), :func:`ice40_pll_params` (as
  ``icepll``) and the components :class:`ECP5PLL`, :class:`ICE40PLL`.
- :class:`BoardTop`: a core on a board (PLL, reset synchroniser, serial pins,
  optional UART bridge); :class:`VerilogCore` wraps a Verilog top;
  :class:`AcceleratorBoardTop`: an accelerator with flat AXI ports behind the UART
  bridge, nothing tied off.
- :func:`build_bitstream` (a BoardTop) and :func:`run_flow` (any top whose ports
  are board pins): Yosys -> nextpnr -> ecppack/icepack, with the result as
  :class:`BitstreamResult`.  Tools default to the YoWASP builds from PyPI and
  are overridden by ``FLUID_HW_YOSYS``, ``FLUID_HW_NEXTPNR_ECP5``,
  ``FLUID_HW_ECPPACK``, ``FLUID_HW_NEXTPNR_ICE40``, ``FLUID_HW_ICEPACK``.

See docs/bitstreams.md.
"""

from ..errors import PLLError, ResourceBudgetError, ToolFailedError, ToolNotFoundError
from .accel import AXI_PORTS, AcceleratorBoardTop, missing_axi_ports
from .constraints import constraints_text
from .devices import (
    RESOURCE_KEYS,
    Board,
    Device,
    Family,
    Pin,
    all_boards,
    all_devices,
    get_board,
    get_device,
    get_family,
)
from .pll import (
    ECP5PLL,
    ICE40PLL,
    ECP5PLLParams,
    ICE40PLLParams,
    ecp5_pll_params,
    ice40_pll_params,
    make_pll,
    pll_params,
)
from .toolchain import (
    TOOLS,
    BitstreamResult,
    PnRResult,
    Tool,
    build_bitstream,
    check_budget,
    find_tool,
    parse_nextpnr_log,
    parse_nextpnr_report,
    parse_yosys_stat,
    run_flow,
)
from .top import BoardTop, VerilogCore, verilog_ports

__all__ = [
    "AXI_PORTS",
    "AcceleratorBoardTop",
    "RESOURCE_KEYS",
    "TOOLS",
    "BitstreamResult",
    "Board",
    "BoardTop",
    "Device",
    "ECP5PLL",
    "ECP5PLLParams",
    "Family",
    "ICE40PLL",
    "ICE40PLLParams",
    "PLLError",
    "Pin",
    "PnRResult",
    "ResourceBudgetError",
    "Tool",
    "ToolFailedError",
    "ToolNotFoundError",
    "VerilogCore",
    "all_boards",
    "all_devices",
    "build_bitstream",
    "check_budget",
    "constraints_text",
    "ecp5_pll_params",
    "find_tool",
    "get_board",
    "get_device",
    "get_family",
    "ice40_pll_params",
    "make_pll",
    "missing_axi_ports",
    "pll_params",
    "parse_nextpnr_log",
    "parse_nextpnr_report",
    "parse_yosys_stat",
    "run_flow",
    "verilog_ports",
]
