"""Convolution unit: sliding-window generator -> lane converter -> MVAU.

Input: an int8 image in HWC order, beats of ``gcd(C, simd)`` channels.  The window
generator is :class:`~.swg.SlidingWindow` (``gcd(C, simd)`` elements a cycle, widened
to ``simd`` lanes) or, for a thin input where that is slower (fewer channels than
``simd``: :func:`~.swg_wide.use_wide_window`), :class:`~.swg_wide.WideWindow`, which
gives ``simd`` elements a cycle itself.  Output: the ``M x OH x OW`` result in HWC
order, beats of ``pe`` channels (int8 after requantisation, int32 without).  The MVAU
matrix is the filter ``[M, C, kh, kw]`` rearranged to ``[M, (ky * kw + kx) * C + c]``,
matching the window order ``"kkc"``.
"""

from __future__ import annotations

from math import gcd
from typing import Any

import numpy as np
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._lane import Clamp
from ._util import Component
from .mvau import MVAU
from .requant import requantize_model
from .stream import WidthConverter
from .swg import SlidingWindow, WindowGeometry, swg_model
from .swg_wide import WideWindow, use_wide_window

__all__ = ["ConvUnit", "conv2d_model"]


def conv2d_model(image_hwc: np.ndarray, filters: np.ndarray, geom: WindowGeometry,
                 bias: np.ndarray | None = None, multiplier: np.ndarray | None = None,
                 shift: np.ndarray | None = None, relu: bool = False,
                 clamp: Clamp | None = None, thresholds: np.ndarray | None = None
                 ) -> np.ndarray:
    """Behavioural model: [H, W, C] int8, filters [M, C, kh, kw] -> [OH, OW, M]."""
    win = swg_model(image_hwc, geom, 1, "kkc", 0)            # [OH*OW, kh*kw*C]
    mat = np.asarray(filters, np.int64).transpose(0, 2, 3, 1).reshape(len(filters), -1)
    acc = win @ mat.T
    oh, ow = geom.out_hw
    return requantize_model(acc, bias, multiplier, shift, relu, clamp,
                            thresholds).reshape(oh, ow, -1)


class ConvUnit(Component):
    """Convolution + requantisation.  ``mvau`` takes the matrix, bias and
    requantisation keyword arguments of :class:`~.mvau.MVAU`."""

    def __init__(self, name: str, geom: WindowGeometry, out_channels: int, pe: int,
                 simd: int, **mvau_kwargs: Any) -> None:
        self.name, self.geom = name, geom
        self.lanes = gcd(geom.channels, simd)
        self.wide = use_wide_window(geom, simd)
        self.swg: SlidingWindow | WideWindow
        self.mvau = MVAU(name, geom.window_size, out_channels, pe, simd,
                         **mvau_kwargs)
        if self.wide:
            # the MVAU takes a window every nf * sf cycles
            self.swg = WideWindow(name, geom, self.lanes, simd, pad_value=0,
                                  period=self.mvau.nf * self.mvau.sf)
        else:
            self.swg = SlidingWindow(name, geom, self.lanes, order="kkc", pad_value=0)
        self.conv = WidthConverter(8, simd if self.wide else self.lanes, simd)
        members: dict[str, object] = {
            "i": In(stream.Signature(8 * self.lanes)),
            "o": Out(stream.Signature(self.mvau.out_bits * pe)),
        }
        if self.mvau.runtime:
            members["wr"] = self.mvau.signature.members["wr"]
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.swg = self.swg
        m.submodules.conv = self.conv
        m.submodules.mvau = self.mvau
        wiring.connect(m, wiring.flipped(self.i), self.swg.i)
        wiring.connect(m, self.swg.o, self.conv.i)
        wiring.connect(m, self.conv.o, self.mvau.i)
        wiring.connect(m, self.mvau.o, wiring.flipped(self.o))
        if self.mvau.runtime:
            wiring.connect(m, wiring.flipped(self.wr), self.mvau.wr)
        return m
