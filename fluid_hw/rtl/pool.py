"""Max and average pooling: a sliding-window generator in channel-group order feeding
a reducer.

The input is an int8 image in HWC order (beats of ``lanes`` channels); the output
is the pooled image in HWC order, same beats.  Max pooling: padding positions hold
-128, so padding never wins (``docs/fixed_point.md``); a ceil-mode pool is a
floor-mode pool with extra bottom/right padding.  Average pooling: padding positions
hold 0; the window sum (:class:`SumReduce`, int32) is requantised with one
multiplier/shift for every channel (:class:`~.requant.Requantiser`), which is how the
golden op divides by the window count, so there is no divider.  Global average
pooling is an average pool whose kernel is the whole ``H x W`` image.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._ff import check_ff_style
from ._mem import ParamWriteSignature
from ._util import Component, HardwareConfigError
from .requant import PARAM_ENTRY_BITS, REQUANT_LATENCY, Requantiser, requantize_model
from .stream import CreditQueue, SkidBuffer
from .swg import SlidingWindow, WindowGeometry, swg_model

__all__ = ["MaxReduce", "MaxPool", "maxpool_model", "maxreduce_model", "SumReduce",
           "sumreduce_model", "AvgPool", "avgpool_model", "AVGPOOL_LATENCY"]

#: Cycles from the average pool's reducer taking a window's last beat to the pooled beat
#: on ``o.valid``: the reducer's skid buffer, the requantiser, its output queue.
AVGPOOL_LATENCY = 1 + REQUANT_LATENCY + CreditQueue.latency


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


class _Reduce(Component):
    """Lane-wise reduction over each group of ``group`` consecutive int8 beats into
    ``acc_bits``-bit lanes: :meth:`_combine` (first beat of a group, accumulator lane,
    input lane) -> the new accumulator lane; the result leaves through a skid buffer
    on the group's last beat, one beat a cycle."""

    acc_bits = 8

    def __init__(self, lanes: int, group: int) -> None:
        if lanes < 1 or group < 1:
            raise HardwareConfigError(f"{type(self).__name__}: lanes and group must be >= 1, "
                                      f"got {lanes} and {group}")
        self.lanes, self.group = lanes, group
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(self.acc_bits * lanes))})

    def _combine(self, m: Module, lane: int, first: Any, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def elaborate(self, platform: object) -> Module:
        m = Module()
        w = self.acc_bits
        m.submodules.skid = skid = SkidBuffer(w * self.lanes)
        acc = Signal(w * self.lanes)
        cnt = Signal(range(max(2, self.group)))
        last = cnt == self.group - 1
        first = cnt == 0
        result = Cat(*(self._combine(m, lane, first, acc.word_select(lane, w).as_signed(),
                                     self.i.payload.word_select(lane, 8).as_signed())
                       for lane in range(self.lanes)))
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


class MaxReduce(_Reduce):
    """Lane-wise maximum over each group of ``group`` consecutive int8 beats."""

    def _combine(self, m: Module, lane: int, first: Any, a: Any, b: Any) -> Any:
        return Mux(first | (b > a), b, a)


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


def avgpool_model(image_hwc: np.ndarray, geom: WindowGeometry, multiplier: int, shift: int,
                  relu: bool = False) -> np.ndarray:
    """Behavioural model: [H, W, C] int8 -> [OH, OW, C] int8, the requantised window sum
    (zero padding counted in the window)."""
    c = geom.channels
    kh, kw = geom.kernel
    sums = swg_model(image_hwc, geom, 1, "kkc", 0).reshape(-1, kh * kw, c).sum(axis=1)
    oh, ow = geom.out_hw
    return requantize_model(sums, None, np.full(c, multiplier), np.full(c, shift),
                            relu).reshape(oh, ow, c)


def sumreduce_model(beats: np.ndarray, group: int) -> np.ndarray:
    """Behavioural model: int8 beats [N * group, lanes] -> lane-wise int32 sums [N, lanes]."""
    b = np.asarray(beats, np.int64)
    return b.reshape(-1, group, b.shape[-1]).sum(axis=1)


class SumReduce(_Reduce):
    """Lane-wise int32 sum over each group of ``group`` consecutive int8 beats; ``o``
    carries ``lanes`` int32 values, one beat per group, through a skid buffer."""

    acc_bits = 32

    def __init__(self, lanes: int, group: int) -> None:
        if group * 128 >= 2**31:
            raise HardwareConfigError(f"SumReduce: a group of {group} can overflow int32")
        super().__init__(lanes, group)

    def _combine(self, m: Module, lane: int, first: Any, a: Any, b: Any) -> Any:
        s = Signal(32, name=f"sum{lane}")
        m.d.comb += s.eq(Mux(first, 0, a) + b)
        return s


class AvgPool(Component):
    """Average pooling over ``geom`` with ``lanes`` channels per beat: window sums
    (zero padding) requantised with ``multiplier`` and ``shift`` (the contract of
    :func:`~.requant.requantize_model`, no bias).  ``latency``:
    :data:`AVGPOOL_LATENCY`.

    ``runtime=True``: the multiplier and shift are loaded at run time instead, through
    ``wr`` (:func:`~._mem.ParamWriteSignature` with one memory of one entry, the
    requantiser's 54-bit entry with bias 0); every lane's requantiser holds a copy (a
    one-entry memory: registers) and takes every write."""

    def __init__(self, name: str, geom: WindowGeometry, lanes: int, *,
                 multiplier: int | None = None, shift: int | None = None,
                 relu: bool = False, runtime: bool = False, ff_style: str = "plain") -> None:
        c = geom.channels
        if lanes < 1 or c % lanes:
            raise HardwareConfigError(
                f"average pool {name!r}: lanes={lanes} must divide the {c} channels")
        check_ff_style(f"average pool {name!r}", ff_style)
        geom.check(f"average pool {name!r}")
        self.name, self.geom, self.lanes = name, geom, lanes
        self.relu, self.runtime = relu, runtime
        self.latency = AVGPOOL_LATENCY
        members = {"i": In(stream.Signature(8 * lanes)), "o": Out(stream.Signature(8 * lanes))}
        if runtime:
            self.multiplier = self.shift = None
            # one parameter entry per lane (the same for every channel)
            self.requant = Requantiser(name, lanes, lanes, relu=relu, runtime=True,
                                       ff_style=ff_style)
            members["wr"] = In(ParamWriteSignature(1, 1, PARAM_ENTRY_BITS))
        else:
            if multiplier is None or shift is None:
                raise HardwareConfigError(f"average pool {name!r}: give the multiplier and "
                                          "shift, or runtime=True to load them through wr")
            self.multiplier, self.shift = int(multiplier), int(shift)
            # the requantiser first: it checks the multiplier and shift
            self.requant = Requantiser(name, lanes, c, multiplier=[self.multiplier] * c,
                                       shift=[self.shift] * c, relu=relu, ff_style=ff_style)
        self.swg = SlidingWindow(name, geom, lanes, order="ckk", pad_value=0)
        self.reduce = SumReduce(lanes, geom.kernel[0] * geom.kernel[1])
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.swg = self.swg
        m.submodules.reduce = self.reduce
        m.submodules.requant = self.requant
        wiring.connect(m, wiring.flipped(self.i), self.swg.i)
        wiring.connect(m, self.swg.o, self.reduce.i)
        wiring.connect(m, self.reduce.o, self.requant.i)
        wiring.connect(m, self.requant.o, wiring.flipped(self.o))
        if self.runtime:
            wr = self.requant.pipe.wr
            m.d.comb += [wr.en.eq(self.wr.en[0].replicate(self.lanes)), wr.addr.eq(0),
                         wr.data.eq(self.wr.data)]
        return m
