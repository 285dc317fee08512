"""Stage spec of kind ``concat``: two or more int8 values joined along their first
(channel) axis, each rescaled to the output's format (``quantized_concat``, the
contract of :mod:`.concat`).  ``shapes``: each input's per-example shape ``(C_p,
*rest)``, ``rest`` common; input ``p`` arrives on port ``p`` (``a``, ``b``, ...).
``groups``: how the streams interleave -- each of ``groups`` output groups takes its
block of every input in turn (0, the default, is ``prod(rest)``: a pixel of each
HWC-streamed image, so the output streams HWC too; 1: each input's whole stream in
turn).  ``weights_mode="runtime"``: the multipliers and shifts are loaded through the
register map (one segment of an entry per input, :func:`~.concat.concat_entry`), and
every input has a rescaler."""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .concat import (
    CONCAT_ENTRY_BITS,
    CONCAT_PORTS,
    concat_entry,
    concat_latency,
    concat_model,
    concat_positions,
)
from .spec import _FollowLanes, _ModeMixin, structure_lanes

__all__ = ["ConcatSpec"]


@dataclass(eq=False)
class ConcatSpec(_FollowLanes, _ModeMixin):
    """``out = concat(rescale_p(x_p))`` along the channels (see the module docstring);
    ``multipliers``/``shifts``: each input's (default 1 and 0: unchanged)."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    groups: int = 0
    multipliers: tuple[int, ...] = ()
    shifts: tuple[int, ...] = ()
    relu: bool = False
    lanes: int | None = None
    weights_mode: str = "const"

    kind = "concat"
    op = "quantized_concat"

    def __post_init__(self) -> None:
        self.shapes = tuple(tuple(int(d) for d in s) for s in self.shapes)
        k = len(self.shapes)
        self.multipliers = tuple(int(v) for v in (self.multipliers or (1,) * k))
        self.shifts = tuple(int(v) for v in (self.shifts or (0,) * k))
        if not self.groups and self.shapes:
            self.groups = int(np.prod(self.shapes[0][1:], dtype=np.int64))
        self.validate()

    def validate(self) -> None:
        n = self.name
        if not 2 <= len(self.shapes) <= len(CONCAT_PORTS):
            raise HardwareConfigError(f"stage {n!r}: a concat takes 2 to {len(CONCAT_PORTS)} "
                                      f"inputs, got {len(self.shapes)}")
        rest = self.shapes[0][1:]
        for s in self.shapes:
            if not s or any(d < 1 for d in s) or s[1:] != rest:
                raise HardwareConfigError(
                    f"stage {n!r}: input shapes {[list(v) for v in self.shapes]} must be known, "
                    "positive and equal but in the first (channel) axis")
        lens = [self.port_len(p) for p in range(len(self.shapes))]
        if self.groups < 1 or any(v % self.groups for v in lens):
            raise HardwareConfigError(f"stage {n!r}: groups={self.groups} must divide every "
                                      f"input's length {lens}")
        for what, vals, hi in (("multipliers", self.multipliers, 2**15 - 1),
                               ("shifts", self.shifts, 47)):
            if len(vals) != len(self.shapes) or any(not 0 <= v <= hi for v in vals):
                raise HardwareConfigError(f"stage {n!r}: {what} {list(vals)} must be one per "
                                          f"input, each in [0, {hi}]")
        if self.lanes is not None and (self.lanes < 1 or self._lane_unit() % self.lanes):
            raise HardwareConfigError(f"stage {n!r}: lanes={self.lanes} must divide every "
                                      f"input's block of {self.blocks} elements (its "
                                      "channels, for an image)")
        self._check_mode()

    @property
    def n_inputs(self) -> int:  # type: ignore[override]
        return len(self.shapes)

    @property
    def input_ports(self) -> tuple[str, ...]:  # type: ignore[override]
        return CONCAT_PORTS[:len(self.shapes)]

    @property
    def blocks(self) -> list[int]:
        """Elements of each input per group."""
        return [self.port_len(p) // self.groups for p in range(len(self.shapes))]

    def _lane_unit(self) -> int:
        u = 0
        for b in self.blocks:
            u = gcd(u, b)
        return u

    def port_len(self, port: int) -> int:
        return int(np.prod(self.shapes[port], dtype=np.int64))

    def port_shape(self, port: int) -> tuple[int, ...]:
        return self.shapes[port]

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (sum(s[0] for s in self.shapes), *self.shapes[0][1:])

    @property
    def in_len(self) -> int:
        """Elements taken per inference, from all the inputs."""
        return sum(self.port_len(p) for p in range(len(self.shapes)))

    @property
    def out_len(self) -> int:
        return self.in_len

    @property
    def latency(self) -> int:
        return concat_latency(self.multipliers, self.shifts, self.runtime)

    def positions(self) -> list[np.ndarray]:
        """For each input, the output position of each of its elements."""
        return concat_positions(self.blocks, self.groups)

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name,
                "shapes": [list(s) for s in self.shapes], "groups": self.groups,
                "relu": self.relu, "lanes": self.lanes, **self._mode_structure()}

    def params(self) -> dict[str, Any]:
        return {"multipliers": list(self.multipliers), "shifts": list(self.shifts)}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> ConcatSpec:
        return cls(st["name"], tuple(tuple(s) for s in st["shapes"]), int(st["groups"]),
                   relu=bool(st.get("relu")), lanes=structure_lanes(st),
                   weights_mode=st.get("mode", "const"))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .concat import ConcatJoin

        if self.runtime:
            return ConcatJoin(self.name, lanes[0], self.blocks, relu=self.relu, runtime=True,
                              ff_style=ff_style)
        return ConcatJoin(self.name, lanes[0], self.blocks, multipliers=self.multipliers,
                          shifts=self.shifts, relu=self.relu, ff_style=ff_style)

    def param_memories(self) -> list[tuple[str, int, int, int]]:
        """One memory: an entry (multiplier and shift) per input."""
        return [("concat", 0, len(self.shapes), CONCAT_ENTRY_BITS)] if self.runtime else []

    def param_entries(self) -> list[list[int]]:
        return [[concat_entry(f"stage {self.name!r}: input {p}", m, n)
                 for p, (m, n) in enumerate(zip(self.multipliers, self.shifts))]]

    def model(self, *xs: np.ndarray) -> np.ndarray:
        if len(xs) != len(self.shapes):
            raise HardwareConfigError(f"stage {self.name!r}: a concat of {len(self.shapes)} "
                                      f"inputs given {len(xs)}")
        return concat_model(xs, self.blocks, self.groups, self.multipliers, self.shifts,
                            self.relu).astype(np.int64)

    def cycle_bound(self) -> int:
        return self.in_len + 64
