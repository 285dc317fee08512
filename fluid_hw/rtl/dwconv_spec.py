"""Stage spec of kind ``dwconv``: a depthwise convolution (one ``kh x kw`` filter per
channel, FINN's VVAU) + requantisation on an HWC-streamed image.

``weights`` int8 ``[C, 1, kh, kw]`` as ``quantized_conv2d`` with ``groups = C`` holds
them; ``pe`` channels in parallel (``pe`` divides C; no SIMD: ``simd`` is 1).  As a
matrix it is ``[mh = C, mw = kh * kw]`` (row = channel), so its runtime weight and
parameter memories have the MVAU's layout with SIMD 1: PE ``p`` holds channel ``g *
pe + p`` at words ``g * kh * kw + k``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._util import HardwareConfigError
from .spec import _PerChannel, _window_bound, _WindowMixin, matrix_kwargs, window_kwargs

__all__ = ["DepthwiseSpec"]


@dataclass(eq=False)
class DepthwiseSpec(_WindowMixin, _PerChannel):
    """A depthwise convolution of ``in_shape = (C, H, W)`` (see the module docstring)."""

    name: str
    in_shape: tuple[int, int, int]
    kernel: int | tuple[int, int] = 3
    stride: int | tuple[int, int] = 1
    padding: int | tuple[int, ...] = 0
    dilation: int | tuple[int, int] = 1

    kind = "dwconv"
    op = "quantized_conv2d"

    def __post_init__(self) -> None:
        self._normalise_window()
        self.validate()

    @property
    def mw(self) -> int:  # type: ignore[override]
        kh, kw = self.kernel  # type: ignore[misc]
        return kh * kw

    @property
    def mh(self) -> int:  # type: ignore[override]
        return self.in_shape[0]

    @property
    def fold_dims(self) -> tuple[int, int]:
        """PE over the channels only (no SIMD)."""
        return 1, self.in_shape[0]

    def validate(self) -> None:
        self._check_window()
        self._check_no_simd("a depthwise convolution")
        if self.weights is not None:
            kh, kw = self.kernel  # type: ignore[misc]
            shape = (self.in_shape[0], 1, kh, kw)
            if tuple(np.shape(self.weights)) != shape:
                raise HardwareConfigError(f"stage {self.name!r}: filter has shape "
                                          f"{tuple(np.shape(self.weights))}, expected {shape} "
                                          "[C, 1, kh, kw]")
        self._check_matrix()

    def matrix(self) -> np.ndarray | None:
        if self.weights is None:
            return None
        return np.asarray(self.weights).reshape(self.in_shape[0], -1)

    def structure(self) -> dict[str, Any]:
        return {**self._window_structure(),
                "dilation": list(self.dilation),  # type: ignore[arg-type]
                "pe": self.pe, **self._matrix_structure()}

    @classmethod
    def from_structure(cls, st: dict[str, Any]) -> DepthwiseSpec:
        c = int(st["in_shape"][0])
        kh, kw = (int(v) for v in st["kernel"])
        return cls(st["name"], tuple(st["in_shape"]),
                   pe=int(st["pe"]), **window_kwargs(st),
                   **matrix_kwargs(st, c, (c, 1, kh, kw)))

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        from .dwconv import DepthwiseConv

        kw = self._unit_kwargs(ff_style)
        if "weights" in kw:
            kw["weights"] = self.weights
        return DepthwiseConv(self.name, self.geometry, self.pe, **kw)

    def model(self, x: np.ndarray) -> np.ndarray:
        from .dwconv import depthwise_model

        c, h, w = self.in_shape
        return np.stack([depthwise_model(v.reshape(h, w, c), self._model_weights(self.weights),
                                         self.geometry,
                                         self.bias,
                                         self.multiplier if self.requantize else None,
                                         self.shift, self.relu, self.clamp,
                                         self.thresholds).reshape(-1)
                         for v in np.asarray(x)]).astype(np.int64)

    def cycle_bound(self) -> int:
        return _window_bound(self.in_shape, self.geometry, 0) + 64

    def macs(self) -> int:
        oh, ow = self.geometry.out_hw
        return self.mw * self.mh * oh * ow
