"""Errors of the board and bitstream flow.

All derive from :class:`fluid_hw.errors.FluidError`, so the CLI reports them as
one clean line.  (They live here, not in ``fluid_hw/errors.py``, only because
that file is shared; they can move there unchanged.)
"""

from __future__ import annotations

from ..errors import FluidError

__all__ = ["PLLError", "ResourceBudgetError", "ToolFailedError", "ToolNotFoundError"]


class ToolNotFoundError(FluidError):
    """An external tool (Yosys, nextpnr, ecppack, icepack, openFPGALoader) is
    not installed; the message says what to install or which variable to set."""


class ToolFailedError(FluidError):
    """An external tool exited with an error; the message gives its log path
    and the last lines of the log."""


class ResourceBudgetError(FluidError):
    """A synthesised design needs more of a resource (multipliers, block RAMs,
    LUTs...) than the device has; the message names the resource and how much
    it is over."""


class PLLError(FluidError):
    """No PLL configuration reaches the requested clock from the board oscillator."""
