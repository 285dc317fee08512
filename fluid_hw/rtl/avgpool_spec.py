"""Stage spec of kind ``avgpool``: average (and global average) pooling as a window sum
then one requantisation, ``out = clamp((sum * m + 2^(n-1)) >> n, lo, 127)`` with the
multiplier ``m`` and shift ``n`` of the program's ``requantize`` (which carries the
division by the window size and the change of scale; no divider in hardware).  The
image streams HWC; lanes follow the producer (``lanes=None``).
``weights_mode="runtime"``: the multiplier and shift are loaded through the register
map (one segment of one requantisation entry, bias 0, written into every lane's
copy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .requant import PARAM_ENTRY_BITS, requant_entries
from .spec import _FollowLanes, _ModeMixin, _window_bound, _WindowMixin, structure_lanes

__all__ = ["AvgPoolSpec"]


@dataclass(eq=False)
class AvgPoolSpec(_WindowMixin, _FollowLanes, _ModeMixin):
    """Window sum + requantisation on an int8 image of ``in_shape = (C, H, W)``."""

    name: str
    in_shape: tuple[int, int, int]
    kernel: int | tuple[int, int] = 2
    stride: int | tuple[int, int] | None = None
    padding: int | tuple[int, ...] = 0
    multiplier: int = 1
    shift: int = 0
    relu: bool = False
    lanes: int | None = None
    weights_mode: str = "const"

    kind = "avgpool"
    op = "pool2d"

    def __post_init__(self) -> None:
        self._normalise_window()
        self.multiplier, self.shift = int(self.multiplier), int(self.shift)
        self.validate()

    def _lane_unit(self) -> int:
        return self.in_shape[0]

    def validate(self) -> None:
        n = self.name
        self._check_window()
        self._check_lanes("channels")
        self._check_mode()
        if not 0 <= self.multiplier <= 2**15 - 1 or not 0 <= self.shift <= 47:
            raise HardwareConfigError(f"stage {n!r}: multiplier {self.multiplier} must be in "
                                      f"[0, 2^15 - 1] and shift {self.shift} in [0, 47]")
        kh, kw = self.kernel  # type: ignore[misc]
        if kh * kw * 128 >= 2**31:
            raise HardwareConfigError(f"stage {n!r}: a {kh}x{kw} window sum can overflow int32")

    def structure(self) -> dict[str, Any]:
        return {**self._window_structure(), "relu": self.relu, "lanes": self.lanes,
                **self._mode_structure()}

    def params(self) -> dict[str, Any]:
        return {"multiplier": self.multiplier, "shift": self.shift}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> AvgPoolSpec:
        return cls(st["name"], tuple(st["in_shape"]), kernel=tuple(st["kernel"]),
                   stride=tuple(st["stride"]), padding=tuple(st["padding"]),
                   relu=bool(st.get("relu")), lanes=structure_lanes(st),
                   weights_mode=st.get("mode", "const"))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .pool import AvgPool

        if self.runtime:
            return AvgPool(self.name, self.geometry, lanes[0], relu=self.relu, runtime=True,
                           ff_style=ff_style)
        return AvgPool(self.name, self.geometry, lanes[0], multiplier=self.multiplier,
                       shift=self.shift, relu=self.relu, ff_style=ff_style)

    def param_memories(self) -> list[tuple[str, int, int, int]]:
        """One requantisation entry, written into every lane's copy."""
        return [("requant", 0, 1, PARAM_ENTRY_BITS)] if self.runtime else []

    def param_entries(self) -> list[list[int]]:
        return [requant_entries(f"stage {self.name!r}", 1, None, np.array([self.multiplier]),
                                np.array([self.shift]))]

    def model(self, x: np.ndarray) -> np.ndarray:
        from .pool import avgpool_model

        c, h, w = self.in_shape
        return np.stack([avgpool_model(v.reshape(h, w, c), self.geometry, self.multiplier,
                                       self.shift, self.relu).reshape(-1)
                         for v in np.asarray(x)]).astype(np.int64)

    def cycle_bound(self) -> int:
        return _window_bound(self.in_shape, self.geometry, 0) + 64
