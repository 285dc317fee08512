"""Stage spec of kind ``upsample``: nearest-neighbour upsampling of an HWC-streamed int8
image of ``in_shape = (C, H, W)`` by integer ``factor = (fy, fx)`` (a ``nearest_interp``
whose every row and column repeats ``fy`` / ``fx`` times, :mod:`.upsample`): the output
is ``(C, H * fy, W * fx)``, same numbers, same scale.  Lanes follow the producer
(``lanes=None``: the producer's lanes where they divide C)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .spec import _FollowLanes, structure_lanes

__all__ = ["UpsampleSpec"]


@dataclass(eq=False)
class UpsampleSpec(_FollowLanes):
    """Upsampling of ``in_shape`` by ``factor`` (see the module docstring)."""

    name: str
    in_shape: tuple[int, int, int]
    factor: tuple[int, int] = (2, 2)
    lanes: int | None = None

    kind = "upsample"
    op = "nearest_interp"

    def __post_init__(self) -> None:
        self.in_shape = tuple(int(v) for v in self.in_shape)  # type: ignore[assignment]
        self.factor = tuple(int(v) for v in self.factor)  # type: ignore[assignment]
        self.validate()

    def validate(self) -> None:
        n = self.name
        if len(self.in_shape) != 3 or min(self.in_shape) < 1:
            raise HardwareConfigError(f"stage {n!r}: in_shape {list(self.in_shape)} must be "
                                      "(C, H, W), each >= 1")
        if len(self.factor) != 2 or min(self.factor) < 1:
            raise HardwareConfigError(f"stage {n!r}: factor {list(self.factor)} must be "
                                      "(fy, fx), integers >= 1")
        self._check_lanes("channels")

    def _lane_unit(self) -> int:
        return self.in_shape[0]

    @property
    def out_shape(self) -> tuple[int, int, int]:
        c, h, w = self.in_shape
        return (c, h * self.factor[0], w * self.factor[1])

    @property
    def in_len(self) -> int:
        return int(np.prod(self.in_shape))

    @property
    def out_len(self) -> int:
        return int(np.prod(self.out_shape))

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "in_shape": list(self.in_shape),
                "factor": list(self.factor), "lanes": self.lanes}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> UpsampleSpec:
        return cls(st["name"], tuple(st["in_shape"]), tuple(st["factor"]),
                   lanes=structure_lanes(st))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .upsample import Upsample

        c, _h, w = self.in_shape
        return Upsample(self.name, c, w, self.factor, lanes[0])

    def model(self, x: np.ndarray) -> np.ndarray:
        from .upsample import upsample_model

        c, h, w = self.in_shape
        x = np.asarray(x, np.int64)
        return np.stack([upsample_model(v.reshape(h, w, c), self.factor).reshape(-1)
                         for v in x]).reshape(len(x), self.out_len)

    def cycle_bound(self) -> int:
        return self.out_len + self.in_len + 64
