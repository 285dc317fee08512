"""Stage spec of kind ``table``: an element-wise function of one int8 value as a
256-entry table (sigmoid, tanh, hard-swish, ...: any op the golden model tabulates).

``table`` holds the output for every input byte, indexed by the input's unsigned byte
(``table[x & 0xFF]``, so ``table[0]`` is the output for 0 and ``table[128]`` the one
for -128).  ``shape``: the per-example shape streamed (an image streams HWC; the
function is the same for every element, so any lanes dividing the length do).
``weights_mode="runtime"``: the table is loaded through the register map (one segment
of 256 entries, one int8 a word, written into every lane's copy; ``table``, if given,
is what the host loads by default)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import as_int_array
from .spec import _digest, _FollowLanes, _ModeMixin, _ShapeMixin, structure_lanes

__all__ = ["TableSpec"]


@dataclass(eq=False)
class TableSpec(_ShapeMixin, _FollowLanes, _ModeMixin):
    """A table activation over ``shape`` (see the module docstring)."""

    name: str
    shape: tuple[int, ...]
    table: np.ndarray | None = None
    lanes: int | None = None
    weights_mode: str = "const"

    kind = "table"
    op = "quantized_table"

    def __post_init__(self) -> None:
        self.shape = tuple(int(v) for v in self.shape)
        if self.table is None:
            self.table = np.zeros(256, np.int64)
        self.validate()

    def validate(self) -> None:
        n = self.name
        self._check_shape()
        self.table = as_int_array(f"stage {n!r}", "table", self.table, (256,), -128, 127)
        self._check_lanes("elements")
        self._check_mode()

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "shape": list(self.shape),
                "lanes": self.lanes, **self._mode_structure()}

    def params(self) -> dict[str, Any]:
        return {"table": _digest(self.table)}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> TableSpec:
        return cls(st["name"], tuple(st["shape"]), lanes=structure_lanes(st),
                   weights_mode=st.get("mode", "const"))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .table import TableActivation

        if self.runtime:
            return TableActivation(self.name, lanes[0], runtime=True)
        return TableActivation(self.name, lanes[0], self.table)

    def param_memories(self) -> list[tuple[str, int, int, int]]:
        """One table, written into every lane's copy."""
        return [("table", 0, 256, 8)] if self.runtime else []

    def param_entries(self) -> list[list[int]]:
        return [[int(v) & 0xFF for v in np.asarray(self.table)]]

    def model(self, x: np.ndarray) -> np.ndarray:
        t = np.asarray(self.table, np.int64)
        return t[np.asarray(x, np.int64) & 0xFF]

    def cycle_bound(self) -> int:
        return self.in_len + 64
