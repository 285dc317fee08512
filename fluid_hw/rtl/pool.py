"""Max pooling: a sliding-window generator in channel-group order feeding a reducer.

The input is an int8 image in HWC order (beats of ``lanes`` channels); the output
is the pooled image in HWC order, same beats.  Padding positions hold -128, so
padding never wins (``docs/fixed_point.md``); a ceil-mode pool is a floor-mode pool
with extra bottom/right padding.
"""

from __future__ import annotations

import numpy as np
from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._util import Component, HardwareConfigError
from .stream import SkidBuffer
from .swg import SlidingWindow, WindowGeometry

__all__ = ["MaxReduce", "MaxPool", "maxpool_model", "maxreduce_model"]


def maxpool_model(image_hwc: np.ndarray, geom: WindowGeometry) -> np.ndarray:
    """Behavioural model: [H, W, C] int8 -> [OH, OW, C] int8."""
    h, w, c = image_hwc.shape
    pt, pl, pb, pr = geom.pads
    padded = np.full((h + pt + pb, w + pl + pr, c), -128, dtype=np.int64)
    padded[pt:pt + h, pl:pl + w] = image_hwc
    oh, ow = geom.out_hw
    kh, kw = geom.kernel
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    out = np.empty((oh, ow, c), dtype=np.int8)
    for oy in range(oh):
        for ox in range(ow):
            win = padded[oy * sh:oy * sh + (kh - 1) * dh + 1:dh,
                         ox * sw:ox * sw + (kw - 1) * dw + 1:dw]
            out[oy, ox] = win.max(axis=(0, 1))
    return out


def maxreduce_model(beats: np.ndarray, group: int) -> np.ndarray:
    """Behavioural model: beats [N * group, lanes] -> lane-wise maxima [N, lanes]."""
    b = np.asarray(beats)
    return b.reshape(-1, group, b.shape[-1]).max(axis=1)


class MaxReduce(Component):
    """Lane-wise maximum over each group of ``group`` consecutive int8 beats."""

    def __init__(self, lanes: int, group: int) -> None:
        if group < 1:
            raise HardwareConfigError(f"MaxReduce: group must be >= 1, got {group}")
        self.lanes, self.group = lanes, group
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.skid = skid = SkidBuffer(8 * self.lanes)
        acc = Signal(8 * self.lanes)
        cnt = Signal(range(max(2, self.group)))
        last = cnt == self.group - 1
        first = cnt == 0
        lanes_max = []
        for lane in range(self.lanes):
            a = acc.word_select(lane, 8).as_signed()
            b = self.i.payload.word_select(lane, 8).as_signed()
            lanes_max.append(Mux(first | (b > a), b, a))
        result = Cat(*lanes_max)
        take = self.i.valid & self.i.ready
        m.d.comb += [
            self.i.ready.eq(~last | skid.i.ready),
            skid.i.valid.eq(self.i.valid & last),
            skid.i.payload.eq(result),
        ]
        with m.If(take):
            m.d.sync += [acc.eq(result), cnt.eq(Mux(last, 0, cnt + 1))]
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        return m


class MaxPool(Component):
    """Max pooling over ``geom`` with ``lanes`` channels per beat."""

    def __init__(self, name: str, geom: WindowGeometry, lanes: int) -> None:
        self.name, self.geom, self.lanes = name, geom, lanes
        self.swg = SlidingWindow(name, geom, lanes, order="ckk", pad_value=-128)
        self.reduce = MaxReduce(lanes, geom.kernel[0] * geom.kernel[1])
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.swg = self.swg
        m.submodules.reduce = self.reduce
        wiring.connect(m, wiring.flipped(self.i), self.swg.i)
        wiring.connect(m, self.swg.o, self.reduce.i)
        wiring.connect(m, self.reduce.o, wiring.flipped(self.o))
        return m
