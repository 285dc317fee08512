"""Stage spec of kind ``add``: a residual join, the element-wise sum of two int8 streams
of one shape, each rescaled to the output's format (``quantized_add``, the contract of
:mod:`.join`).  Two inputs (ports ``a`` and ``b``); both streams carry the value in the
same order (HWC for an image) and in beats of ``lanes`` elements.
``weights_mode="runtime"``: the multipliers and shifts are loaded through the register
map (one segment of one entry, :func:`~.join.join_entry`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .join import ADD_JOIN_LATENCY, ADD_JOIN_RUNTIME_LATENCY, JOIN_ENTRY_BITS, join_entry
from .spec import _FollowLanes, _ModeMixin, _ShapeMixin, structure_lanes

__all__ = ["JoinSpec"]


@dataclass(eq=False)
class JoinSpec(_ShapeMixin, _FollowLanes, _ModeMixin):
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
    weights_mode: str = "const"

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
        self._check_mode()

    @property
    def latency(self) -> int:
        """Cycles from a beat taken to its result in the output queue."""
        return ADD_JOIN_RUNTIME_LATENCY if self.runtime else ADD_JOIN_LATENCY

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "shape": list(self.shape),
                "relu": self.relu, "lanes": self.lanes, **self._mode_structure()}

    def params(self) -> dict[str, Any]:
        return {"ma": self.ma, "na": self.na, "mb": self.mb, "nb": self.nb}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> JoinSpec:
        return cls(st["name"], tuple(st["shape"]), relu=bool(st.get("relu")),
                   lanes=structure_lanes(st), weights_mode=st.get("mode", "const"))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .join import AddJoin

        if self.runtime:
            return AddJoin(self.name, lanes[0], relu=self.relu, runtime=True,
                           ff_style=ff_style)
        return AddJoin(self.name, lanes[0], ma=self.ma, na=self.na, mb=self.mb, nb=self.nb,
                       relu=self.relu, ff_style=ff_style)

    def param_memories(self) -> list[tuple[str, int, int, int]]:
        """One entry: both multipliers and shifts."""
        return [("join", 0, 1, JOIN_ENTRY_BITS)] if self.runtime else []

    def param_entries(self) -> list[list[int]]:
        return [[join_entry(f"stage {self.name!r}", self.ma, self.na, self.mb, self.nb)]]

    def model(self, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        from .join import add_join_model

        if y is None:
            raise HardwareConfigError(f"stage {self.name!r}: a join takes two inputs")
        return np.asarray(add_join_model(np.asarray(x), np.asarray(y), self.ma, self.na,
                                         self.mb, self.nb, self.relu), np.int64)

    def cycle_bound(self) -> int:
        return self.in_len + 64
