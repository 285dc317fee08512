"""The rule every registry keeps (ops, passes, CPU kernels, device kernels): a name is
registered once.  A leaf like :mod:`fluid_hw.errors`: every unit may import it.

Lookups that fail use :func:`fluid_hw.errors.unknown_name`.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TypeVar

__all__ = ["register_once"]

T = TypeVar("T")


def register_once(table: MutableMapping[str, T], name: str, value: T, kind: str) -> T:
    """``table[name] = value``, returning ``value``; registering ``name`` twice is a
    programming error: ``ValueError("<kind> '<name>' registered twice")``, where
    ``kind`` reads like "op", "pass" or "CPU kernel for"."""
    if name in table:
        raise ValueError(f"{kind} {name!r} registered twice")
    table[name] = value
    return value
