"""Stage spec of kind ``affine``: a per-channel integer affine + requantisation
(``quantized_affine`` + ``requantize``: a batch norm that folds into no convolution, a
multiply or add by a per-channel constant) on a value of ``shape = (C, ...)`` streamed
channel fastest (an image in HWC order, or a vector of channels).

``weights`` int8 ``[C]``, one factor per channel; ``pe`` channels in parallel (``pe``
divides C; no SIMD).  As a matrix it is ``[mh = C, mw = 1]``, so its runtime weight and
parameter memories have the MVAU's layout with SIMD 1 (PE ``p`` holds channel
``g * pe + p`` at word ``g``) and load through the same register window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .spec import _PerChannel, _ShapeMixin, matrix_kwargs

__all__ = ["AffineSpec"]


@dataclass(eq=False)
class AffineSpec(_ShapeMixin, _PerChannel):
    """A per-channel affine over ``shape = (C, ...)`` (see the module docstring)."""

    name: str
    shape: tuple[int, ...]

    kind = "affine"
    op = "quantized_affine"

    def __post_init__(self) -> None:
        self.shape = tuple(int(v) for v in self.shape)
        self.validate()

    @property
    def mw(self) -> int:  # type: ignore[override]
        return 1

    @property
    def mh(self) -> int:  # type: ignore[override]
        return self.shape[0]

    def validate(self) -> None:
        self._check_shape()
        self._check_no_simd("a per-channel affine")
        if self.weights is not None and np.size(self.weights) != self.mh:
            raise HardwareConfigError(f"stage {self.name!r}: weights have shape "
                                      f"{tuple(np.shape(self.weights))}, expected "
                                      f"({self.mh},): one factor per channel")
        self._check_matrix()

    def matrix(self) -> np.ndarray | None:
        if self.weights is None:
            return None
        return np.asarray(self.weights).reshape(self.mh, 1)

    def structure(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "shape": list(self.shape),
                "pe": self.pe, **self._matrix_structure()}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> AffineSpec:
        c = int(st["shape"][0])
        return cls(st["name"], tuple(st["shape"]), pe=int(st["pe"]),
                   **matrix_kwargs(st, c, (c,)))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .affine import AffineUnit

        return AffineUnit(self.name, self.mh, self.pe, **self._unit_kwargs(ff_style))

    def model(self, x: np.ndarray) -> np.ndarray:
        from .affine import affine_model

        x = np.asarray(x)
        y = affine_model(x.reshape(len(x), -1, self.mh), self._model_weights(self.weights),
                         self.bias,
                         self.multiplier if self.requantize else None, self.shift, self.relu,
                         self.clamp, self.thresholds)
        return y.reshape(len(x), -1).astype(np.int64)

    def cycle_bound(self) -> int:
        return self.in_len + 64

    def macs(self) -> int:
        return self.in_len
