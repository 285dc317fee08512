"""Small helpers shared by the RTL components: errors, bit arithmetic, lane packing."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from amaranth.lib import wiring

from fluid_hw.errors import HardwareConfigError

__all__ = ["HardwareConfigError", "Component", "ceil_log2", "pack_lanes", "unpack_lanes",
           "to_signed", "as_int_array"]


class Component(wiring.Component):
    """:class:`amaranth.lib.wiring.Component` whose constructor, when it rejects its
    parameters, does not also leave an "elaboratable created but never used" warning."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def checked_init(self: Any, *args: Any, **kw: Any) -> None:
            try:
                init(self, *args, **kw)
            except Exception:
                self._MustUse__used = True
                raise

        cls.__init__ = checked_init  # type: ignore[method-assign]


def ceil_log2(n: int) -> int:
    """Number of bits needed to index ``n`` items (0 for ``n <= 1``)."""
    return max(0, int(n - 1).bit_length())


def to_signed(value: int, bits: int) -> int:
    """Interpret the low ``bits`` of ``value`` as a two's-complement number."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def pack_lanes(values: Iterable[int], width: int) -> int:
    """Pack integers into one word, lane 0 in the least significant bits."""
    word = 0
    mask = (1 << width) - 1
    for i, v in enumerate(values):
        word |= (int(v) & mask) << (i * width)
    return word


def unpack_lanes(word: int, lanes: int, width: int, signed: bool = True) -> list[int]:
    """Inverse of :func:`pack_lanes`."""
    mask = (1 << width) - 1
    out = [(word >> (i * width)) & mask for i in range(lanes)]
    return [to_signed(v, width) for v in out] if signed else out


def as_int_array(name: str, what: str, value: object, shape: Sequence[int] | None,
                 lo: int, hi: int) -> np.ndarray:
    """Check that ``value`` is an integer array of ``shape`` within ``[lo, hi]``."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iub":
        raise HardwareConfigError(f"{name}: {what} must be an integer array, got dtype {arr.dtype}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise HardwareConfigError(
            f"{name}: {what} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise HardwareConfigError(
            f"{name}: {what} values must lie in [{lo}, {hi}], got [{arr.min()}, {arr.max()}]")
    return arr
