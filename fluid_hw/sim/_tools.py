"""The simulation flow's names for its tools, which live in :mod:`fluid_hw.tools`
(Verilator, Amaranth's Yosys, the build cache, the progress channel); the sim
modules import them from here."""

from __future__ import annotations

from fluid_hw.errors import SimBuildError, SimulationError, ToolNotFoundError
from fluid_hw.tools import (
    Verilator,
    cache_dir,
    ensure_yosys,
    say,
    verilator,
    verilator_env,
    verilator_version,
)

__all__ = ["ToolNotFoundError", "SimulationError", "SimBuildError", "BuildError", "Verilator",
           "verilator", "verilator_env", "verilator_version", "ensure_yosys", "cache_dir", "log"]

#: the name ``fluid_hw.sim`` gave :class:`~fluid_hw.errors.SimBuildError` before
BuildError = SimBuildError


def log(msg: str) -> None:
    """Progress of long steps (builds): :func:`fluid_hw.tools.say` from ``sim``."""
    say(msg, "sim")
