"""Depthwise convolution (FINN's vector-vector-activation unit): one ``kh x kw``
filter per channel, zero padding, strides, dilation, then requantisation.

Streams:

* ``i``: an int8 image in HWC order, beats of ``pe`` channels (``pe`` divides ``C``).
* ``o``: the ``C x OH x OW`` result in HWC order, beats of ``pe`` channels, int8 after
  requantisation, int32 (``acc + bias``) without.

Structure: :class:`~.swg.SlidingWindow` in ``"ckk"`` order (for every output pixel and
channel group ``g``, the ``K = kh * kw`` window beats of channels ``g*pe .. g*pe+pe-1``
back to back, kernel column fastest) -> ``pe`` lanes of multiply-accumulate, each over
``K`` beats -> :class:`~.requant.RequantPipe` (its channel-group index cycles
``0 .. C/pe - 1``, which is the order of HWC beats) -> a
:class:`~.stream.CreditQueue`.  Per lane: the weight memory read, a fabric register
after it and one on the activation (the multiplier's inputs), the product registered
twice (``ff_style="trellis"``: the ``MULT18X18D``'s own input and output registers,
:func:`~._dsp.dsp_product`), an int32 accumulator.  The datapath never stalls: the
last beat of a group is taken only when the output queue has a credit.

Weight memories (also the runtime load format, :func:`dw_weight_entries`): memory
``p`` (lane ``p``) holds ``CF * K`` int8 words, ``CF = C / pe``; word ``g * K + ky *
kw + kx`` = ``filters[g * pe + p, 0, ky, kx]``.  This is exactly the layout of an MVAU
with ``MH = C``, ``PE = pe``, ``SIMD = 1``, ``SF = K``, ``NF = CF`` (word ``nf * SF +
sf``), so :func:`~.spec.param_layout` packs a depthwise stage as such an MVAU: per
lane a weight segment (``CF * K`` entries of 8 bits, one 32-bit word each), then per
lane a requantisation segment (``CF`` entries of
:data:`~.requant.PARAM_ENTRY_BITS`, two words each, lane ``p`` holding channels
``g * pe + p``).  Runtime port ``wr`` (:func:`~._mem.ParamWriteSignature`):
``en`` bit ``p`` = weights of lane ``p``, bit ``pe + p`` = requantisation
parameters of lane ``p`` (:func:`~.requant.requant_entries`, ``[p::pe]``).
"""

from __future__ import annotations

import numpy as np
from amaranth import Module, Mux, Signal, Value, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ._lane import Clamp, check_channel_lanes, requant_lanes, weight_product
from ._mem import ParamWriteSignature, param_memory
from ._util import Component, HardwareConfigError, as_int_array, ceil_log2
from .requant import (
    PARAM_ENTRY_BITS,
    RequantPipe,
    requant_latency,
    requant_units,
    requantize_model,
)
from .stream import CreditQueue, credit_depth
from .swg import SlidingWindow, WindowGeometry, swg_model

__all__ = ["DepthwiseConv", "depthwise_model", "dw_weight_entries", "dwconv_latency",
           "MAC_LATENCY"]

#: cycles from issuing a group's last beat to its int32 sum: memory read, fabric
#: registers, two product registers, accumulator
MAC_LATENCY = 5


def depthwise_model(image_hwc: np.ndarray, filters: np.ndarray, geom: WindowGeometry,
                    bias: np.ndarray | None = None, multiplier: np.ndarray | None = None,
                    shift: np.ndarray | None = None, relu: bool = False,
                    clamp: Clamp | None = None, thresholds: np.ndarray | None = None
                    ) -> np.ndarray:
    """Behavioural model: [H, W, C] int8, filters [C, 1, kh, kw] -> [OH, OW, C]
    (int8 after requantisation, int32 ``acc + bias`` without a multiplier)."""
    c = geom.channels
    kh, kw = geom.kernel
    win = swg_model(image_hwc, geom, 1, "kkc", 0).reshape(-1, kh * kw, c)
    f = np.asarray(filters, np.int64).reshape(c, kh * kw)   # [C, K]
    acc = (win * f.T[None]).sum(axis=1)                      # [OH*OW, C]
    oh, ow = geom.out_hw
    return requantize_model(acc, bias, multiplier, shift, relu, clamp,
                            thresholds).reshape(oh, ow, c)


def dwconv_latency(requantize: bool = True, *, pe: int = 1, k: int = 1,
                   thresholds: bool = False) -> int:
    """Cycles from issuing a channel group's last window beat to its output entering the
    output queue (as :func:`~.mvau.mvau_latency`: the ``pe`` lanes share
    :func:`~.requant.requant_units` ``(pe, k)`` requantiser lanes, ``k = kh * kw``, unless
    ``thresholds`` replace it); the queue adds :attr:`~.stream.CreditQueue.latency` more
    to ``o.valid``."""
    units = requant_units(pe, k, requantize and not thresholds)
    return MAC_LATENCY + requant_latency(pe, units, requantize)


def dw_weight_entries(weights: np.ndarray, pe: int) -> list[list[int]]:
    """Weight memory contents (also the runtime load format): one list of ``C / pe *
    kh * kw`` int8 words (as unsigned bytes) per lane; see the module docstring."""
    w = np.asarray(weights, np.int64)
    c = w.shape[0]
    k = w[0].size
    w = w.reshape(c // pe, pe, k) & 0xFF  # [group, lane, kernel position]
    return [[int(v) for v in w[:, p, :].reshape(-1)] for p in range(pe)]


class DepthwiseConv(Component):
    """Depthwise convolution + requantisation; see the module docstring.

    ``weights`` int8 [C, 1, kh, kw] (``None`` with ``runtime=True``: loaded through
    ``wr``).  ``multiplier``/``shift`` ``None`` with ``requantize=False`` gives int32
    outputs.  ``latency``: :func:`dwconv_latency`.
    """

    def __init__(self, name: str, geom: WindowGeometry, pe: int, *,
                 weights: np.ndarray | None = None, bias: np.ndarray | None = None,
                 multiplier: np.ndarray | None = None, shift: np.ndarray | None = None,
                 relu: bool = False, requantize: bool = True, runtime: bool = False,
                 ff_style: str = "plain", clamp: Clamp | None = None,
                 thresholds: np.ndarray | None = None) -> None:
        c = geom.channels
        geom.check(f"depthwise conv {name!r}")
        check_channel_lanes(f"depthwise conv {name!r}", pe, c, ff_style)
        self.name, self.geom, self.pe, self.lanes = name, geom, pe, pe
        self.runtime, self.ff_style = runtime, ff_style
        self.k = geom.kernel[0] * geom.kernel[1]
        self.cf = c // pe
        if self.k * 127 * 128 >= 2**31:
            raise HardwareConfigError(f"depthwise conv {name!r}: a {geom.kernel} kernel can "
                                      "overflow the int32 accumulator")
        if runtime:
            self.weight_words = None
        else:
            if weights is None:
                raise HardwareConfigError(
                    f"depthwise conv {name!r}: const weights need the filters [C, 1, kh, kw]")
            w = as_int_array(f"depthwise conv {name!r}", "filters", weights,
                             (c, 1, *geom.kernel), -128, 127)
            self.weight_words = dw_weight_entries(w, pe)
        self.requant = RequantPipe(name, pe, c, bias=bias, multiplier=multiplier,
                                   shift=shift, relu=relu, requantize=requantize,
                                   runtime=runtime, ff_style=ff_style, clamp=clamp,
                                   thresholds=thresholds,
                                   # a channel group every K window beats at most
                                   units=requant_units(pe, self.k, thresholds is None))
        self.swg = SlidingWindow(name, geom, pe, order="ckk", pad_value=0)
        self.out_bits = self.requant.out_bits
        self.latency = MAC_LATENCY + self.requant.latency
        assert self.latency == dwconv_latency(requantize, pe=pe, k=self.k,
                                              thresholds=thresholds is not None)
        self.queue_depth = credit_depth(self.latency, self.k)
        members: dict[str, object] = {"i": In(stream.Signature(8 * pe)),
                                      "o": Out(stream.Signature(self.out_bits * pe))}
        if runtime:
            self.wr_addr_width = max(ceil_log2(self.cf * self.k), ceil_log2(self.cf))
            self.wr_data_width = max(8, PARAM_ENTRY_BITS)
            members["wr"] = In(ParamWriteSignature(2 * pe, self.wr_addr_width,
                                                   self.wr_data_width))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        pe, k, cf = self.pe, self.k, self.cf
        m.submodules.swg = swg = self.swg
        m.submodules.requant = rq = self.requant
        m.submodules.queue = q = CreditQueue(self.out_bits * pe, self.queue_depth)
        wiring.connect(m, wiring.flipped(self.i), swg.i)
        src = swg.o

        # ---- issue: one window beat per cycle; a group's last beat needs a credit ----
        kpos = Signal(range(max(2, k)))
        group = Signal(range(max(2, cf)))
        waddr = Signal(range(max(2, cf * k)))
        last_k = kpos == k - 1
        issue = Signal()
        m.d.comb += [
            src.ready.eq(~last_k | q.can_issue),
            issue.eq(src.valid & src.ready),
            q.issue.eq(issue & last_k),
        ]
        with m.If(issue):
            m.d.sync += [waddr.eq(Mux(waddr == cf * k - 1, 0, waddr + 1)),
                         kpos.eq(Mux(last_k, 0, kpos + 1))]
            with m.If(last_k):
                m.d.sync += group.eq(Mux(group == cf - 1, 0, group + 1))

        def delay(sig: Value, n: int, tag: str) -> list[Value]:
            chain = [sig]
            for i in range(n):
                r = Signal(len(chain[-1]), name=f"{tag}_d{i + 1}")
                m.d.sync += r.eq(chain[-1])
                chain.append(r)
            return chain

        lat = MAC_LATENCY
        v = delay(issue, lat, "valid")
        first = delay(kpos == 0, lat, "first")
        last = delay(last_k, lat, "last")
        grp = delay(group, lat, "group")

        # stage 1: the activations beside the weight memories' read data
        x1 = Signal(8 * pe)
        with m.If(issue):
            m.d.sync += x1.eq(src.payload)

        accs = []
        for p in range(pe):
            init = None if self.weight_words is None else self.weight_words[p]
            wrp = param_memory(m, f"weights{p}", depth=cf * k, width=8, init=init,
                               write=getattr(self, "wr", None), write_index=p)
            m.d.comb += wrp.addr.eq(waddr)
            # stage 2: fabric registers after the memory read and on the activation;
            # stages 3 and 4: the product, twice
            p4 = weight_product(m, v, wrp.data, x1.word_select(p, 8), p, self.ff_style)
            acc = Signal(signed(32), name=f"l{p}_acc")
            with m.If(v[4]):
                m.d.sync += acc.eq(Mux(first[4], 0, acc) + p4)
            accs.append(acc)

        requant_lanes(m, self, rq, q, v[lat] & last[lat], accs, grp[lat])
        return m
