"""Per-channel affine unit: ``out = requantize(x * w[c] + bias[c])`` on a stream whose
channel index cycles with every beat (an image in HWC order, or a vector of channels):
a batch norm that folds into no convolution, or a multiply / add by a per-channel
constant (``quantized_affine`` + ``requantize``, docs/fixed_point.md).

Streams: ``i`` int8, beats of ``pe`` channels (``pe`` divides ``C``; beat ``k`` holds
channels ``(k mod C/pe) * pe ..`` ``+ pe - 1``); ``o`` the results in the same beats,
int8 after requantisation, int32 (``x * w + bias``) without.

Per lane, a fixed-latency pipeline that never stalls (a beat is taken only when the
output queue has a credit): the weight memory read (indexed by the channel group), a
fabric register after it and one on the activation (the multiplier's inputs), the
product registered twice (``ff_style="trellis"``: the ``MULT18X18D``'s own registers,
:func:`~._dsp.dsp_product`), then the :class:`~.requant.RequantPipe` and a
:class:`~.stream.CreditQueue`.  This is the depthwise unit's lane
(:mod:`.dwconv`) with a 1 x 1 window: no sliding-window generator, no line buffer, no
accumulator.

Memories (also the runtime load format): lane ``p`` holds ``C / pe`` int8 weights, word
``g`` = ``w[g * pe + p]`` -- an MVAU's layout with ``MW = 1``, ``SIMD = 1``
(:func:`~.mvau.mvau_weight_entries` of ``w`` as a ``[C, 1]`` matrix) -- and the
requantiser's ``C / pe`` parameter entries.  Runtime port ``wr``
(:func:`~._mem.ParamWriteSignature`): ``en`` bit ``p`` = weights of lane ``p``, bit
``pe + p`` = requantisation parameters of lane ``p``.
"""

from __future__ import annotations

import numpy as np
from amaranth import Module, Mux, Signal, signed
from amaranth.lib import stream
from amaranth.lib.wiring import In, Out

from ._lane import Clamp, check_channel_lanes, requant_lanes, weight_product
from ._mem import ParamWriteSignature, param_memory
from ._util import Component, HardwareConfigError, as_int_array, ceil_log2
from .mvau import mvau_weight_entries
from .requant import (
    BIAS_ONLY_LATENCY,
    PARAM_ENTRY_BITS,
    REQUANT_LATENCY,
    RequantPipe,
    requantize_model,
)
from .stream import CreditQueue, credit_depth

__all__ = ["AffineUnit", "affine_model", "affine_latency", "PRODUCT_LATENCY"]

#: cycles from a beat's transfer to its products: memory read, fabric registers, two
#: product registers
PRODUCT_LATENCY = 4


def affine_model(x: np.ndarray, weights: np.ndarray, bias: np.ndarray | None = None,
                 multiplier: np.ndarray | None = None, shift: np.ndarray | None = None,
                 relu: bool = False, clamp: Clamp | None = None,
                 thresholds: np.ndarray | None = None) -> np.ndarray:
    """Behavioural model: ``x`` int [..., C] (last axis = channel) -> int8 after
    requantisation, int32 ``x * w + bias`` without a multiplier."""
    acc = np.asarray(x, np.int64) * np.asarray(weights, np.int64).reshape(-1)
    return requantize_model(acc, bias, multiplier, shift, relu, clamp, thresholds)


def affine_latency(requantize: bool = True) -> int:
    """Cycles from a beat's transfer on ``i`` to its result entering the output queue;
    the queue adds :attr:`~.stream.CreditQueue.latency` more to ``o.valid``."""
    return PRODUCT_LATENCY + (REQUANT_LATENCY if requantize else BIAS_ONLY_LATENCY)


class AffineUnit(Component):
    """Per-channel multiply + requantisation; see the module docstring.

    ``weights`` int8 [C] (``None`` with ``runtime=True``: loaded through ``wr``);
    ``multiplier``/``shift`` ``None`` with ``requantize=False`` gives int32 outputs.
    ``latency``: :func:`affine_latency`.
    """

    def __init__(self, name: str, channels: int, pe: int, *,
                 weights: np.ndarray | None = None, bias: np.ndarray | None = None,
                 multiplier: np.ndarray | None = None, shift: np.ndarray | None = None,
                 relu: bool = False, requantize: bool = True, runtime: bool = False,
                 ff_style: str = "plain", clamp: Clamp | None = None,
                 thresholds: np.ndarray | None = None) -> None:
        check_channel_lanes(f"affine unit {name!r}", pe, channels, ff_style)
        self.name, self.channels, self.pe, self.lanes = name, channels, pe, pe
        self.runtime, self.ff_style = runtime, ff_style
        self.cf = channels // pe
        if runtime:
            self.weight_words = None
        else:
            if weights is None:
                raise HardwareConfigError(
                    f"affine unit {name!r}: const weights need the factors [C]")
            w = as_int_array(f"affine unit {name!r}", "weights",
                             np.asarray(weights).reshape(-1), (channels,), -128, 127)
            self.weight_words = mvau_weight_entries(w.reshape(-1, 1), pe, 1)
        self.requant = RequantPipe(name, pe, channels, bias=bias, multiplier=multiplier,
                                   shift=shift, relu=relu, requantize=requantize,
                                   runtime=runtime, ff_style=ff_style, clamp=clamp,
                                   thresholds=thresholds)
        self.out_bits = self.requant.out_bits
        self.latency = PRODUCT_LATENCY + self.requant.latency
        self.queue_depth = credit_depth(self.latency, 1)
        members: dict[str, object] = {"i": In(stream.Signature(8 * pe)),
                                      "o": Out(stream.Signature(self.out_bits * pe))}
        if runtime:
            members["wr"] = In(ParamWriteSignature(2 * pe, ceil_log2(self.cf),
                                                   PARAM_ENTRY_BITS))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        pe, cf = self.pe, self.cf
        m.submodules.requant = rq = self.requant
        m.submodules.queue = q = CreditQueue(self.out_bits * pe, self.queue_depth)
        issue = Signal()
        group = Signal(range(max(2, cf)))
        m.d.comb += [self.i.ready.eq(q.can_issue), issue.eq(self.i.valid & q.can_issue),
                     q.issue.eq(issue)]
        with m.If(issue):
            m.d.sync += group.eq(Mux(group == cf - 1, 0, group + 1))

        lat = PRODUCT_LATENCY
        v, grp = [issue], [group]
        for k in range(lat):
            v.append(Signal(name=f"valid_d{k + 1}"))
            grp.append(Signal.like(group, name=f"group_d{k + 1}"))
            m.d.sync += [v[-1].eq(v[-2]), grp[-1].eq(grp[-2])]
        # stage 1: the activations beside the weight memories' read data
        x1 = Signal(8 * pe)
        with m.If(issue):
            m.d.sync += x1.eq(self.i.payload)
        products = []
        for p in range(pe):
            init = None if self.weight_words is None else self.weight_words[p]
            rp = param_memory(m, f"weights{p}", depth=cf, width=8, init=init,
                              write=getattr(self, "wr", None), write_index=p)
            m.d.comb += rp.addr.eq(group)
            # stage 2: fabric registers after the memory read and on the activation;
            # stages 3 and 4: the product, twice
            p4 = weight_product(m, v, rp.data, x1.word_select(p, 8), p, self.ff_style)
            acc = Signal(signed(32), name=f"l{p}_acc")  # the product, sign-extended
            m.d.comb += acc.eq(p4)
            products.append(acc)
        requant_lanes(m, self, rq, q, v[lat], products, grp[lat])
        return m
