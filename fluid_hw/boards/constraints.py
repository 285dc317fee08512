"""Pin and clock constraints written from the board data: LPF (ECP5), PCF (iCE40)."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import unknown_name
from .devices import Board, Pin

__all__ = ["constraints_text", "lpf_text", "pcf_text"]


def lpf_text(board: Board, pins: Mapping[str, Pin], clocks: Mapping[str, float]) -> str:
    """ECP5 LPF: one ``LOCATE``/``IOBUF`` per port, ``FREQUENCY`` per clock port (MHz)."""
    lines = [f"# {board.name} ({board.device.name}): written by fluid_hw.boards",
             "BLOCK RESETPATHS;", "BLOCK ASYNCPATHS;"]
    for port, pin in pins.items():
        lines.append(f'LOCATE COMP "{port}" SITE "{pin.site}";')
        if pin.attrs:
            attrs = " ".join(f"{k}={v}" for k, v in pin.attrs.items())
            lines.append(f'IOBUF PORT "{port}" {attrs};')
    for port, mhz in clocks.items():
        lines.append(f'FREQUENCY PORT "{port}" {mhz:.6f} MHZ;')
    return "\n".join(lines) + "\n"


def pcf_text(board: Board, pins: Mapping[str, Pin], clocks: Mapping[str, float]) -> str:
    """iCE40 PCF: ``set_io`` per port (``-pullup yes`` from the pin's attrs),
    ``set_frequency`` per clock port (MHz)."""
    lines = [f"# {board.name} ({board.device.name}): written by fluid_hw.boards"]
    for port, pin in pins.items():
        flags = "".join(f" -{k} {v}" for k, v in pin.attrs.items())
        lines.append(f"set_io -nowarn{flags} {port} {pin.site}")
    for port, mhz in clocks.items():
        lines.append(f"set_frequency {port} {mhz:.6f}")
    return "\n".join(lines) + "\n"


_WRITERS = {".lpf": lpf_text, ".pcf": pcf_text}


def constraints_text(board: Board, pins: Mapping[str, Pin], clocks: Mapping[str, float]) -> str:
    """The constraints file for ``board``'s family (LPF or PCF)."""
    suffix = board.family.constraints_suffix
    try:
        writer = _WRITERS[suffix]
    except KeyError:
        raise unknown_name("constraints file suffix", suffix, _WRITERS) from None
    return writer(board, pins, clocks)
