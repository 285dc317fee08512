"""``data``: declare a program input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.default_programs import default_main_program
from ...ir.program import Variable

__all__ = ["data"]


def data(name: str, shape: Sequence[int], dtype: Any = "float32", lod_level: int = 0,
         append_batch_size: bool = True, stop_gradient: bool = True) -> Variable:
    """An input variable.  With ``append_batch_size`` a leading -1 (batch) is added,
    unless ``shape`` already contains -1."""
    shape = list(shape)
    if append_batch_size and -1 not in shape:
        shape = [-1, *shape]
    for d in shape:
        if d < -1 or d == 0:
            from ...errors import ShapeError

            raise ShapeError(f"data {name!r}: invalid dimension {d} in shape {shape}")
    gb = default_main_program().global_block()
    return gb.create_var(name=name, shape=shape, dtype=dtype, lod_level=lod_level,
                         stop_gradient=stop_gradient)
