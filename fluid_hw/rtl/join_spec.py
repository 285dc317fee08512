"""Stage spec of kind ``add``: a residual join, the element-wise sum of two int8 streams
of one shape, each rescaled to the output's format (``quantized_add``, the contract of
:mod:`.join`).  Two inputs (ports ``a`` and ``b``); both streams carry the value in the
same order (HWC for an image) and in beats of ``lanes`` elements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .spec import _FollowLanes, _ShapeMixin, structure_lanes

__all__ = ["JoinSpec"]


@dataclass(eq=False)
class JoinSpec(_ShapeMixin, _FollowLanes):
    """``out = clamp(rescale(a) + rescale(b))`` over ``shape`` (see the module docstring);
    ``ma``/``na`` and ``mb``/``nb``: each input's multiplier and shift."""

    name: str
    shape: tuple[int, ...]
    ma: int = 1
    na: int = 0
    mb: int = 1
    nb: int = 0
    relu: bool = False
    lanes: int | None = None

    kind = "add"
    op = "quantized_add"
    n_inputs = 2
    input_ports = ("a", "b")

    def __post_init__(self) -> None:
        self.shape = tuple(int(v) for v in self.shape)
        self.ma, self.na, self.mb, self.nb = (int(v) for v in (self.ma, self.na, self.mb,
                                                               self.nb))
        self.validate()

    def validate(self) -> None:
        n = self.name
        self._check_shape()
        for what, v, hi in (("ma", self.ma, 2**15 - 1), ("na", self.na, 47),
                            ("mb", self.mb, 2**15 - 1), ("nb", self.nb, 47)):
            if not 0 <= v <= hi:
                raise HardwareConfigError(f"stage {n!r}: {what}={v} must be in [0, {hi}]")
        self._check_lanes("elements")

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "shape": list(self.shape),
                "relu": self.relu, "lanes": self.lanes}

    def params(self) -> dict[str, Any]:
        return {"ma": self.ma, "na": self.na, "mb": self.mb, "nb": self.nb}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> JoinSpec:
        return cls(st["name"], tuple(st["shape"]), relu=bool(st.get("relu")),
                   lanes=structure_lanes(st))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .join import AddJoin

        return AddJoin(self.name, lanes[0], ma=self.ma, na=self.na, mb=self.mb, nb=self.nb,
                       relu=self.relu, ff_style=ff_style)

    def model(self, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        from .join import add_join_model

        if y is None:
            raise HardwareConfigError(f"stage {self.name!r}: a join takes two inputs")
        return np.asarray(add_join_model(np.asarray(x), np.asarray(y), self.ma, self.na,
                                         self.mb, self.nb, self.relu), np.int64)

    def cycle_bound(self) -> int:
        return self.in_len + 64
