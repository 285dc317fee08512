"""Hardware stages of the FPGA back end and their analytic estimates.

A stage is one fused layer in hardware.  The stage classes are the RTL
specifications (:mod:`fluid_hw.rtl.spec`) that :class:`fluid_hw.rtl.AcceleratorTop`
consumes, plus estimates:

* :class:`MVAUStage` -- ``quantized_fc`` + ``requantize``: ``weights`` int8 [mh, mw]
  (row = output channel; :meth:`MVAUStage.from_fc` takes ``W [K, C]``), ``bias`` int32
  [mh] or None, ``multiplier``/``shift`` int32 [mh], ``relu``, folding ``pe``/``simd``,
  ``weights_mode`` ``"const"`` | ``"runtime"``, ``requantize=False`` for int32 outputs
  (last stage only).
* :class:`ConvStage` -- ``quantized_conv2d`` + ``requantize``: ``in_shape (C, H, W)``,
  ``weights`` int8 [M, C, kh, kw], ``kernel``, ``stride``, ``padding`` (int, pair or
  (top, left, bottom, right)), ``dilation``, ``pe`` | M, ``simd`` | kh*kw*C; groups = 1.
* :class:`MaxPoolStage` -- max ``pool2d``: ``in_shape``, ``kernel``, ``stride``,
  ``padding``, ``lanes``.

Images stream in HWC order; an FC stage after an image stage takes its input in that
order (permute its columns with :func:`hwc_order`).

Estimates (:func:`estimate_stage`, :func:`estimate_pipeline`):

* **cycles / II**: a stage's cycles per inference at full input rate, and the
  pipeline's initiation interval, the slowest of all stages, lane converters and the
  AXI-Stream ports.
* **latency**: cycles from the first input beat to the last output beat of one
  inference in an empty pipeline, from a timing model of the same hardware (each
  element's arrival time is carried through every block with the RTL's own pipeline
  depths; sliding windows and the MVAU's double buffer are followed per beat).
* **resources** (ECP5): one ``MULT18X18D`` per int8 product and two per requantiser
  lane; ``DP16KD`` block RAMs for weight memories above 2 kbit (constant ones below
  4 kbit become LUT ROM), line buffers and input buffers; LUT/FF from the adder
  trees, registers and requantisers.  Rough, for sizing before synthesis (the 1x8x8
  conv + pool test design: estimated 1.4 k LUT, 2.5 k FF, 10 DSP; Yosys synth_ecp5:
  1.1 k LUT4, 2.0 k TRELLIS_FF, 10 MULT18X18D).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from math import gcd
from typing import Any

import numpy as np

from fluid_hw.errors import HardwareConfigError
from fluid_hw.rtl import BLOCK_ROM_BITS, ceil_log2, stage_lanes
from fluid_hw.rtl.multipliers import product_bits, weight_lane_bits
from fluid_hw.rtl.mvau import mvau_latency
from fluid_hw.rtl.spec import ConvSpec, MaxPoolSpec, MVAUSpec, StageSpec, hwc_order
from fluid_hw.rtl.stream import CreditQueue, fifo_latency
from fluid_hw.rtl.swg import (
    QUEUE_DEPTH,
    ROW_OVERHEAD,
    ROW_READY_DELAY,
    WindowGeometry,
    line_depth,
)
from fluid_hw.rtl.top import StageGraph

from .lane_costs import (
    lut_product_cells,
    product_multipliers,
    requant_lanes,
    requant_param_depth,
)

__all__ = ["MVAUStage", "ConvStage", "MaxPoolStage", "Stage", "Resources", "StageEstimate",
           "PipelineEstimate", "estimate_stage", "stage_cost", "estimate_pipeline",
           "pipeline_resources",
           "hwc_order", "mvau_resources", "product_resources", "adder_tree_bits",
           "REQUANT_LANE",
           "swg_resources", "memory_resources", "mvau_times",
           "window_times", "window_cycles", "MVAUConsumer", "ReduceConsumer",
           "queue_latency", "GraphTimes", "graph_times"]

_QUEUE = CreditQueue.latency  # output queue: write to readable


class MVAUStage(MVAUSpec):
    """A fully-connected stage (see the module docstring)."""

    op = "quantized_fc"

    def estimate(self) -> StageEstimate:
        return estimate_stage(self)


class ConvStage(ConvSpec):
    """A convolution stage (see the module docstring)."""

    op = "quantized_conv2d"

    def estimate(self) -> StageEstimate:
        return estimate_stage(self)


class MaxPoolStage(MaxPoolSpec):
    """A max-pooling stage (see the module docstring)."""

    op = "pool2d"

    def estimate(self) -> StageEstimate:
        return estimate_stage(self)


Stage = MVAUStage | ConvStage | MaxPoolStage


@dataclass(frozen=True)
class Resources:
    lut: int = 0
    ff: int = 0
    dsp: int = 0
    bram: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.lut + other.lut, self.ff + other.ff, self.dsp + other.dsp,
                         self.bram + other.bram)


@dataclass(frozen=True)
class StageEstimate:
    """``cycles``: cycles per inference of the stage alone; ``ii``: the same including
    its input lane converter; ``latency``: its share of the pipeline latency (first
    input element in to last output element out, inside the pipeline)."""

    name: str
    op: str
    shape: dict[str, Any]
    folding: dict[str, int]
    cycles: int
    ii: int
    latency: int
    resources: Resources

    def as_report(self) -> dict[str, Any]:
        """The ``stages[]`` entry of ``report.json``."""
        return {"name": self.name, "op": self.op, "shape": self.shape,
                "folding": self.folding,
                "estimate": {"cycles": self.cycles, "ii": self.ii, "latency": self.latency,
                             **asdict(self.resources)}}


@dataclass(frozen=True)
class PipelineEstimate:
    initiation_interval: int
    latency_cycles: int
    cycles_per_inference: int
    resources: Resources
    stages: list[StageEstimate]
    bottleneck: str

    def as_report(self) -> dict[str, Any]:
        """The ``estimate`` entry of ``report.json``."""
        return {"initiation_interval": self.initiation_interval,
                "latency_cycles": self.latency_cycles,
                "cycles_per_inference": self.cycles_per_inference,
                "resources": asdict(self.resources), "bottleneck": self.bottleneck}


# ---- resources ------------------------------------------------------------------------

_BRAM_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))


def _bram(depth: int, width: int) -> int:
    """DP16KD blocks for a depth x width memory."""
    return min(-(-width // w) * -(-depth // d) for d, w in _BRAM_SHAPES)


def memory_resources(depth: int, width: int, *, const: bool) -> Resources:
    bits = depth * width
    if (const and bits < BLOCK_ROM_BITS) or (not const and bits <= 2048):
        return Resources(lut=max(1, bits // 16))  # LUT ROM / distributed RAM
    return Resources(bram=_bram(depth, width))


#: the requantiser lane (two multipliers: int32 x int16, shift, round, saturate)
REQUANT_LANE = Resources(lut=180, ff=550, dsp=2)
#: a PE's bias-only end (no requantisation: int32 out)
BIAS_ONLY_LANE = Resources(lut=32, ff=130)


def product_resources(pe: int, simd: int, lut_mults: int = 0, weight_bits: int = 8,
                      act_bits: int = 8) -> Resources:
    """The multipliers of ``pe x simd`` products (``weight_bits`` weights, ``act_bits``
    activation operands), ``lut_mults`` of them in LUTs (:mod:`.lane_costs`): DSPs, and
    the LUT products' LUTs and flip-flops."""
    dsp, lut = product_multipliers(pe, simd, lut_mults, weight_bits, act_bits)
    if not lut:
        return Resources(dsp=dsp)
    cells = lut_product_cells(weight_bits, act_bits)
    if cells is None:
        raise HardwareConfigError(f"{lut} LUT multipliers asked for, but this RTL has no "
                                  "measured LUT multiplier (fluid_hw.rtl._lutmul)")
    return Resources(lut=lut * cells[0], ff=lut * cells[1], dsp=dsp)


def adder_tree_bits(simd: int, product: int = 16) -> int:
    """Register bits of a PE's adder tree over ``simd`` products of ``product`` bits."""
    return sum(product + 1 + lvl for lvl in range(ceil_log2(simd)) for _ in range(simd >> lvl))


def mvau_resources(mw: int, mh: int, pe: int, simd: int, requantize: bool, const: bool,
                   lut_mults: int = 0, weight_bits: int = 8, thresholds: bool = False,
                   stream_input: bool = False, act_bits: int = 8) -> Resources:
    """An MVAU's resources (ECP5): its products (:func:`product_resources`), per PE its
    adder tree and weight memory, and the requantiser lanes (:func:`.lane_costs.
    requant_lanes`: shared across PE lanes where the RTL shares them), two multipliers
    each (a threshold lane: none) and a parameter memory each; ``stream_input`` (latency
    mode): one requantiser lane a PE."""
    sf, nf = mw // simd, mh // pe
    wbits = weight_bits * simd
    # stage-2 operand registers, two product registers, the tree, the accumulator
    pbits = product_bits(weight_bits, act_bits)
    tree = adder_tree_bits(simd, pbits)
    operands = weight_lane_bits(weight_bits) + act_bits
    per_pe = Resources(lut=tree + 32, ff=operands * simd + 2 * pbits * simd + tree + 32)
    total = Resources(lut=120, ff=60 + 6 * mvau_latency(simd, requantize, pe=pe, sf=sf,
                                                        thresholds=thresholds,
                                                        stream_input=stream_input))
    for _ in range(pe):
        total = total + per_pe + memory_resources(nf * sf, wbits, const=const)
        if not requantize:
            total = total + BIAS_ONLY_LANE
    lanes = pe if stream_input else \
        requant_lanes(pe, sf, multipliers=requantize and not thresholds)
    depth = requant_param_depth(pe, lanes, nf)
    lane = REQUANT_LANE if requantize and not thresholds else \
        Resources(lut=REQUANT_LANE.lut, ff=REQUANT_LANE.ff) if requantize else Resources()
    for _ in range(lanes):
        total = total + lane + memory_resources(depth, 54, const=const)
    return total + product_resources(pe, simd, lut_mults, weight_bits, act_bits) + \
        memory_resources(2 << ceil_log2(sf), 8 * simd, const=False)


def swg_resources(geom: WindowGeometry, lanes: int) -> Resources:
    depth = line_depth(geom, lanes)
    # the output queue's 4 entries and the input skid buffer's 2 (rtl.swg)
    return Resources(lut=120 + 8 * lanes, ff=122 + (4 + 2) * 8 * lanes) + \
        memory_resources(depth, 8 * lanes, const=False)


# ---- timing model -----------------------------------------------------------------------

def _seq(ready: np.ndarray) -> np.ndarray:
    """One transfer per cycle: out[j] = max(ready[j], out[j-1] + 1)."""
    idx = np.arange(len(ready))
    return np.maximum.accumulate(ready - idx) + idx


def _regroup(t: np.ndarray, a: int, b: int) -> np.ndarray:
    """Per-element times through a lane converter a -> gcd -> b (Downsizer/Upsizer)."""
    g = gcd(a, b)
    if a != g:  # downsizer: sub-beat k of a beat leaves k + 1 cycles after it came
        beats = t[::g]
        k = np.arange(len(beats)) % (a // g)
        t = np.repeat(_seq(beats + 1 + k), g)
    if b != g:  # upsizer: a word leaves the cycle after its last piece
        last = t.reshape(-1, b)[:, -1]
        t = np.repeat(_seq(last + 1), b)
    return t


def _link(t: np.ndarray, a: int, b: int, fifo_depth: int) -> np.ndarray:
    if a != b:
        t = _regroup(t, a, b)
    return t + fifo_latency(fifo_depth)


def mvau_times(t_last: float, mh: int, pe: int, sf: int, lat: int, start: float = -1e18
                ) -> np.ndarray:
    """Output element times of one vector whose last input beat arrived at t_last."""
    c0 = max(t_last + 1, start)
    nf = np.arange(mh) // pe
    return c0 + (nf + 1) * sf - 1 + lat + _QUEUE


def window_times(t_in: np.ndarray, geom: WindowGeometry, lanes: int, consumer: Any) -> None:
    """Issue the window beats of one image (times of the input elements ``t_in`` in HWC
    order) through a sliding-window generator, beat by beat, handing each beat's
    queue-output time to ``consumer.take(pixel, beat_in_pixel, t) -> read time``."""
    c, h, w = geom.channels, geom.height, geom.width
    oh, ow = geom.out_hw
    kh, kw = geom.kernel
    ekh = geom.eff_kernel[0]
    pt = geom.pads[0]
    row_done = t_in.reshape(h, w * c).max(axis=1)
    n_w = kh * kw * (c // lanes)
    reads: list[float] = []
    issue = -1e18
    for oy in range(oh):
        hi = min(h - 1, oy * geom.stride[0] - pt + ekh - 1)
        row_start = max(row_done[max(hi, 0)] + ROW_READY_DELAY, issue + 1 + ROW_OVERHEAD)
        for ox in range(ow):
            p = oy * ow + ox
            for b in range(n_w):
                t = row_start if (ox == 0 and b == 0) else issue + 1
                if len(reads) >= QUEUE_DEPTH:
                    t = max(t, reads[-QUEUE_DEPTH] + 1)
                issue = t
                reads.append(consumer.take(p, b, issue + 1 + _QUEUE))


class MVAUConsumer:
    """The conv unit's upsizer and MVAU (double-buffered) behind a window generator."""

    def __init__(self, n_w: int, k: int, sf: int, nf: int) -> None:
        self.n_w, self.k, self.sf, self.nf = n_w, k, sf, nf
        self.last_take = -1e18        # upsizer piece
        self.word_out = -1e18         # last word taken by the MVAU
        self.compute: list[float] = []  # compute start of each pixel
        self.pending_word_ready = 0.0

    def bank_free(self, p: int) -> float:
        if p < 2:
            return -1e18
        return self.compute[p - 2] + self.nf * self.sf

    def take(self, p: int, b: int, avail: float) -> float:
        first_piece = b % self.k == 0
        t = max(avail, self.last_take + 1)
        if first_piece and self.k > 1:
            t = max(t, self.word_out)  # the upsizer holds one word until it is taken
        self.last_take = t
        if b % self.k == self.k - 1:  # word complete: the MVAU takes it
            ready = t + (1 if self.k > 1 else 0)
            m = max(ready, self.word_out + 1, self.bank_free(p))
            self.word_out = m
            if self.k == 1:
                t = m
            if b == self.n_w - 1:
                prev = self.compute[-1] + self.nf * self.sf if self.compute else -1e18
                self.compute.append(max(m + 1, prev))
        return t


class ReduceConsumer:
    """The max-pool reducer: takes one beat per cycle."""

    def __init__(self, group: int) -> None:
        self.group = group
        self.last = -1e18
        self.outputs: list[float] = []

    def take(self, p: int, b: int, avail: float) -> float:
        t = max(avail, self.last + 1)
        self.last = t
        if b % self.group == self.group - 1:
            self.outputs.append(t + 1)  # through its output skid buffer
        return t


# ---- cycles ---------------------------------------------------------------------------------

def window_cycles(g: WindowGeometry, lanes: int) -> int:
    """Cycles per image of a sliding-window generator's reader: its rows of beats and
    the gaps between rows.  No wait at an image boundary: the line buffer
    (:func:`~fluid_hw.rtl.swg.line_rows`) holds the image's last rows and the next
    image's first rows together."""
    oh, ow = g.out_hw
    n_w = g.kernel[0] * g.kernel[1] * g.channels // lanes
    return oh * (ow * n_w + ROW_OVERHEAD)


def queue_latency() -> int:
    """Cycles from a stage's output queue write to its output being readable."""
    return _QUEUE


def _kind(s: StageSpec) -> Any:
    from .kinds import kind_of

    return kind_of(s)


def _stage_times(s: StageSpec, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    """Per-element output times of stage ``s`` (input element times ``t_in``, already
    converted to the stage's input lanes)."""
    return _kind(s).times(s, lanes, t_in)


def _stage_cycles(s: StageSpec, lanes: tuple[int, int]) -> int:
    return int(_kind(s).cycles(s, lanes))


def _shape(s: StageSpec) -> dict[str, Any]:
    return _kind(s).shape(s)


def _resources(s: StageSpec, lanes: tuple[int, int]) -> Resources:
    return _kind(s).resources(s, lanes)


def _op(s: StageSpec) -> str:
    return getattr(s, "op", None) or _kind(s).report_op


def _folding(s: StageSpec, lanes: tuple[int, int]) -> dict[str, int]:
    return _kind(s).folding(s, lanes)


def stage_cost(stage: StageSpec, lanes: tuple[int, int] | None = None,
               in_lanes: int | None = None) -> tuple[int, Resources]:
    """``(ii, resources)`` of :func:`estimate_stage` without its timing model (cheap:
    for the folding search, which needs no latency)."""
    ln = lanes or stage_lanes([stage])[0]
    src = in_lanes or ln[0]
    ii = max(_stage_cycles(stage, ln), -(-stage.in_len // gcd(src, ln[0])))
    return ii, _resources(stage, ln)


def estimate_stage(stage: StageSpec, lanes: tuple[int, int] | None = None,
                   in_lanes: int | None = None) -> StageEstimate:
    """Estimate of one stage on its own (input at its native lanes, one beat per
    cycle, unless ``in_lanes`` says how wide the producer's beats are)."""
    ln = lanes or stage_lanes([stage])[0]
    src = in_lanes or ln[0]
    # (a producer's lanes need not divide a concat's whole input: the last beat is partial)
    t_in = np.repeat(np.arange(-(-stage.in_len // src), dtype=float), src)[:stage.in_len]
    t_in = _link(t_in, src, ln[0], 0)
    t_out = _stage_times(stage, ln, t_in)
    cycles = _stage_cycles(stage, ln)
    ii = max(cycles, -(-stage.in_len // gcd(src, ln[0])))
    return StageEstimate(stage.name, _op(stage), _shape(stage), _folding(stage, ln), cycles,
                         ii, int(t_out.max() - t_in.min()), _resources(stage, ln))


@dataclass
class GraphTimes:
    """Per-element times of one inference through a stage graph in an empty pipeline
    (first input beat at cycle 0): ``port[(k, p)]`` at stage ``k``'s input port ``p``
    (after lane converter and FIFO), ``take[k]`` when stage ``k`` takes each element
    (a join waits for both ports), ``out[k]`` its outputs."""

    lanes: list[tuple[int, int]]
    port: dict[tuple[int, int], np.ndarray]
    take: list[np.ndarray]
    out: list[np.ndarray]
    limits: dict[str, int]


def _take_times(s: StageSpec, lanes: int, ports: list[np.ndarray]) -> np.ndarray:
    """When stage ``s`` takes each element of its input sequence, from the arrival times
    at its ports: element ``j`` of every port together (the latest of them), or, for a
    kind with a ``port_order`` (a concat), each element from its one port, a beat a
    cycle."""
    order = _kind(s).port_order
    if order is None:
        return functools.reduce(np.maximum, ports)
    t = np.full(s.in_len, -np.inf)
    for pos, t_port in zip(order(s), ports):
        np.maximum.at(t, pos, t_port)
    return np.repeat(_seq(t.reshape(-1, lanes).max(axis=1)), lanes)


def graph_times(stages: Sequence[StageSpec], graph: StageGraph, in_lanes: int,
                fifo_depth: int) -> GraphTimes:
    """The timing model over a stage graph (see :class:`GraphTimes`)."""
    lanes = stage_lanes(stages, graph.inputs)
    in_len = stages[0].port_len(0)
    for k, ins in enumerate(graph.inputs):
        if -1 in ins:
            in_len = stages[k].port_len(list(ins).index(-1))
            break
    # first input beat accepted at cycle 0, then the input skid buffer
    t_input = np.repeat(np.arange(in_len // in_lanes, dtype=float), in_lanes) + 1
    limits = {"s_axis": in_len // in_lanes}
    port: dict[tuple[int, int], np.ndarray] = {}
    take: list[np.ndarray] = []
    out: list[np.ndarray] = []
    for k, (s, ln) in enumerate(zip(stages, lanes)):
        for p, src in enumerate(graph.inputs[k]):
            t_src, l_src = (t_input, in_lanes) if src < 0 else (out[src], lanes[src][1])
            t_port = _link(t_src, l_src, ln[0], graph.fifo(k, p, fifo_depth))
            port[(k, p)] = t_port
            if l_src != ln[0]:
                limits[f"{s.name} input converter" + (f" {p}" if p else "")] = \
                    -(-s.port_len(p) // gcd(l_src, ln[0]))
        t_in = _take_times(s, ln[0], [port[(k, p)] for p in range(len(graph.inputs[k]))])
        take.append(t_in)
        out.append(_stage_times(s, ln, t_in))
        limits[s.name] = _stage_cycles(s, ln)
    return GraphTimes(lanes, port, take, out, limits)


def pipeline_resources(stages: Sequence[StageSpec], *, in_lanes: int | None = None,
                       graph: StageGraph | None = None) -> Resources:
    """:func:`estimate_pipeline`'s resources without its timing model (the folding search
    tries many foldings)."""
    stages = list(stages)
    graph = graph if graph is not None else StageGraph.chain(len(stages))
    lanes = stage_lanes(stages, graph.inputs)
    inl = in_lanes or lanes[0][0]
    res = Resources(lut=300, ff=520)  # AXI4-Lite block, counters, framing, skid buffers
    for k, (s, ln) in enumerate(zip(stages, lanes)):
        res = res + _resources(s, ln)
        for src in graph.inputs[k]:
            prev = inl if src < 0 else lanes[src][1]
            res = res + Resources(lut=8 * max(prev, ln[0]), ff=10 * max(prev, ln[0]) * 2)
    return res


def estimate_pipeline(stages: Sequence[StageSpec], *, in_lanes: int | None = None,
                      out_lanes: int | None = None, fifo_depth: int = 2,
                      graph: StageGraph | None = None) -> PipelineEstimate:
    """Whole-accelerator estimate for ``AcceleratorTop(stages, in_lanes=..., out_lanes=...,
    fifo_depth=..., graph=...)`` (same defaults; ``graph`` None: a chain)."""
    stages = list(stages)
    if not stages:
        raise HardwareConfigError("estimate_pipeline: no stages")
    graph = graph if graph is not None else StageGraph.chain(len(stages))
    lanes = stage_lanes(stages, graph.inputs)
    inl = in_lanes or lanes[0][0]
    outl = out_lanes or lanes[-1][1]
    out_len = stages[-1].out_len
    gt = graph_times(stages, graph, inl, fifo_depth)
    limits = dict(gt.limits)
    ests = []
    res = Resources(lut=300, ff=520)  # AXI4-Lite block, counters, framing, skid buffers
    for k, (s, ln) in enumerate(zip(stages, lanes)):
        cycles = _stage_cycles(s, ln)
        conv = max([limits.get(f"{s.name} input converter" + (f" {p}" if p else ""), 0)
                    for p in range(len(graph.inputs[k]))])
        r = _resources(s, ln)
        res = res + r
        for src in graph.inputs[k]:
            prev = inl if src < 0 else lanes[src][1]
            res = res + Resources(lut=8 * max(prev, ln[0]), ff=10 * max(prev, ln[0]) * 2)
        ests.append(StageEstimate(s.name, _op(s), _shape(s), _folding(s, ln), cycles,
                                  max(cycles, conv), int(gt.out[k].max() - gt.take[k].min()),
                                  r))
    prev = lanes[-1][1]
    t = _link(gt.out[-1], prev, outl, fifo_depth)
    if prev != outl:
        limits["output converter"] = -(-out_len // gcd(prev, outl))
    limits["m_axis"] = out_len // outl
    latency = int(t.max()) + 1  # output skid buffer
    bottleneck = max(limits, key=lambda k: limits[k])
    ii = limits[bottleneck]
    return PipelineEstimate(ii, latency, ii, res, ests, bottleneck)
