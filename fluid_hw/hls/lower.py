# amaranth: UnusedElaboratable=no
"""Lowering of a quantised inference program to a dataflow of hardware stages.

    low = lower(program, values, folding={"fc_0": (4, 8)}, weights="const")
    low.stages          # LoweredStage per hardware stage: the program ops it covers,
                        # shapes, fixed-point formats, layout, its hls.stages spec
    low.specs           # MVAUStage / ConvStage / MaxPoolStage, for rtl.AcceleratorTop
    low.top()           # the AcceleratorTop
    low.estimate()      # hls.stages.estimate_pipeline: cycles, II, latency, resources
    low.specs_with(v)   # the same stages with other parameter values (runtime weights)

Stages: each op that begins a stage is matched by one row of the stage-kind registry
(:mod:`.kinds`: ``mvau``, ``conv``, ``dwconv``, ``maxpool``, ``avgpool``, ``table``),
which makes the stage from it and the ops behind it (a ``requantize``); an integer
``relu`` becomes the lower clamp of the stage before it (through max pooling and
layout, which commute with it).  Discovery (program -> stages) happens once; a
folding only turns the stages into specs (:func:`build`).

``reshape2`` / ``flatten2`` / ``transpose2`` between stages move no data in hardware:
the lowering follows, for every value, which logical element each stream position
carries (``stream_perm``), so

* an image stage streams HWC (channel fastest): a convolution or pool needs its input
  in that order -- for the first stage the host permutes the input (``in_perm``);
* a fully-connected stage reads whatever order arrives: its weight columns are
  permuted to match (``W[K, C]`` transposed to ``[C, K]``, then columns ``perm``;
  after an image stage that is :func:`~fluid_hw.rtl.hwc_order`);
* the host puts the output back into the program's order (``out_perm``).

The host programs around the accelerator come from :mod:`.partition`.  Layer names
(the keys of a folding) are the program's parameter prefixes: ``fc_0``,
``conv2d_1``; a pooling stage is named after its output (``pool2d_0``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from fluid_hw.rtl import (
    AcceleratorTop,
    HardwareConfigError,
    StageGraph,
    design_hash,
    hwc_order,
    stage_lanes,
)
from fluid_hw.rtl.spec import StageSpec

from ..ir import dtypes
from ..ir.program import Operator, Program
from .folding import DEFAULT_BUDGET, FoldingBudget, FoldUnit, balance, check_folding
from .kinds import get_kind, kind_for_op, kind_of
from .partition import (
    LoweringError,
    Partition,
    is_layout,
    main_input,
    main_output,
    partition,
    stream_inputs,
)
from .stage_info import (
    INT8,
    INT32,
    Cursor,
    FixedPoint,
    LoweredStage,
    Values,
    layer_name,
)
from .stages import PipelineEstimate, estimate_pipeline, graph_times

__all__ = ["FixedPoint", "LoweredStage", "Lowered", "Discovery", "discover", "build", "lower",
           "fifo_depths", "layer_name", "lowering_hash", "mac_count", "INT8", "INT32"]


class _Builder:
    """Walks the hardware chain of a partition into LoweredStages (no folding yet); the
    stage kinds call back into it for shapes, names and checks."""

    def __init__(self, part: Partition) -> None:
        self.part = part
        self.program: Program = part.program
        self.gb = self.program.global_block()
        self.ops = list(self.gb.ops)
        self.stages: list[LoweredStage] = []
        self.names: set[str] = set()
        self.in_perm = np.zeros(0, np.int64)

    # -- helpers for the kinds
    def shape(self, name: str, op: Operator) -> tuple[int, ...]:
        s = tuple(int(d) for d in self.gb.var(name).shape)
        if len(s) < 2 or any(d < 1 for d in s[1:]):
            raise LoweringError(f"{op.type} (-> {main_output(op)}): the value {name!r} has "
                                f"shape {list(s)}; the accelerator needs every dimension but "
                                "the batch known. Give the model's input a fixed shape")
        return s[1:]

    def check_int8(self, name: str, op: Operator) -> None:
        """The accelerator's input travels in int8 lanes: int8 values (narrow ones of
        1-8 bits too), not uint8 or int16."""
        v = self.gb.var(name)
        if v.dtype != dtypes.VarType.INT8:
            raise LoweringError(
                f"{op.type} (-> {main_output(op)}): {name!r} is {v.dtype_name}; the "
                "accelerator streams int8 activations (values of 1 to 8 bits, unsigned ones "
                "of at most 7). Quantise with activation_bits=8 (or narrower)")

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def in_format(self) -> FixedPoint:
        """The input's format, from the quantize op making it: 1-8 bits, signed,
        unsigned (at most 7 bits: int8 lanes) or bipolar."""
        for op in self.ops:
            if op.type == "quantize" and op.output("Out")[0] == self.part.hw_input:
                kind = "bipolar" if op.attr("bipolar") else \
                    "signed" if op.attr("signed") else "unsigned"
                fmt = FixedPoint.of(op.attr("bits"), kind, scale=float(op.attr("scale")))
                if op.attr("bits") > 8 or not fmt.in_int8_lanes:
                    raise LoweringError(
                        f"quantize (-> {self.part.hw_input}) makes {kind} "
                        f"{op.attr('bits')}-bit values; the accelerator takes values that "
                        "fit int8 lanes (signed 1-8 bits, unsigned 1-7, bipolar). Quantise "
                        "with activation_bits=8 (signed)")
                return fmt
        return INT8

    def cursor(self, var: str, op: Operator) -> Cursor:
        """The stream carrying ``var`` (read by ``op``)."""
        if var not in self.cursors:
            raise LoweringError(f"{op.type} (-> {main_output(op)}) reads {var!r}, which no "
                                "hardware stage computes")
        return self.cursors[var]

    # -- the walk
    def run(self) -> None:
        chain = self.part.hw
        first_op = self.ops[chain[0]]
        var = self.part.hw_input
        self.check_int8(var, first_op)
        shape = self.shape(var, first_op)
        # the host chooses the first stage's input order: HWC for an image stage
        first_kind = kind_for_op(self.program, first_op)
        image = len(shape) == 3 and first_kind is not None and first_kind.name != "mvau"
        perm = hwc_order(*shape) if image else np.arange(int(np.prod(shape)))
        self.in_perm = perm
        self.cursors = {var: Cursor(var, shape, perm, self.in_format())}
        self.producer = {var: -1}
        # how many region ops read each value (through layout ops, which only rename)
        self.readers: dict[str, int] = {}
        for i in chain:
            for v in stream_inputs(self.ops[i]):
                self.readers[v] = self.readers.get(v, 0) + 1
        k = 0
        while k < len(chain):
            i = chain[k]
            op = self.ops[i]
            cur = self.cursor(main_input(op), op)
            if is_layout(op.type):
                self.layout(i, op, cur)
                k += 1
            elif op.type == "relu":
                self.relu(i, op, cur)
                k += 1
            else:
                kind = kind_for_op(self.program, op)
                if kind is None:  # pragma: no cover - partition() lets lowerable ops only
                    raise LoweringError(f"{op.type} (-> {main_output(op)}) has no hardware "
                                        "lowering")
                st, used = kind.lower(self, chain, k, cur)
                st.inputs = [self.producer[v] for v in st.in_vars]
                self.stages.append(st)
                self.cursors[st.out_var] = Cursor(st.out_var, st.out_shape, st.stream_perm,
                                                  st.out_format)
                self.producer[st.out_var] = len(self.stages) - 1
                k += used

    def layout(self, i: int, op: Operator, cur: Cursor) -> None:
        out = main_output(op)
        new_shape = self.shape(out, op)
        perm = cur.perm
        if op.type == "transpose2":
            axis = [int(a) for a in op.attr("axis")]
            if axis[0] != 0:
                raise LoweringError(f"transpose2 (-> {out}) moves the batch axis "
                                    f"(axis={axis}); only per-example transposes lower to the "
                                    "accelerator")
            t_idx = np.arange(perm.size).reshape(cur.shape).transpose(
                [a - 1 for a in axis[1:]]).reshape(-1)
            inv = np.empty_like(t_idx)
            inv[t_idx] = np.arange(t_idx.size)
            perm = inv[perm]
        src = self.producer[cur.var]
        if src >= 0:
            self.stages[src].ops.append(i)
        self.cursors[out] = Cursor(out, new_shape, perm, cur.fmt)
        self.producer[out] = src
        self.readers[out] = self.readers.get(out, 0) + self.readers.get(cur.var, 1) - 1

    def relu(self, i: int, op: Operator, cur: Cursor) -> None:
        """Fold an integer relu into the clamp of the stage computing its input (through
        stages that commute with it: max pooling), when nothing else reads the values
        in between."""
        out = main_output(op)
        k0 = self.producer[cur.var]
        path = [cur.var]
        while k0 >= 0 and get_kind(self.stages[k0].kind).relu_commutes:
            path.append(self.stages[k0].in_var)
            k0 = self.stages[k0].inputs[0]
        st = self.stages[k0] if k0 >= 0 else None
        if st is not None and st.params.get("thresholds"):
            raise LoweringError(f"relu (-> {out}) follows the multi_threshold of stage "
                                f"{st.name!r}: fold it into the thresholds (out_bias >= 0, "
                                "the lower thresholds at int32's minimum) or keep it on the "
                                "CPU")
        if st is None or not st.requantize:
            raise LoweringError(f"relu (-> {out}) does not follow a stage with a clamp (a "
                                "requantize, an average pool, a table or a join; through max "
                                "pooling or layout only), so it cannot become a clamp of a "
                                "hardware stage")
        shared = [v for v in path if self.readers.get(v, 0) > 1]
        if shared:
            raise LoweringError(f"relu (-> {out}) reads {shared[0]!r}, which another hardware "
                                "stage reads too (before the relu): the relu cannot become "
                                "the clamp of the stage computing it. Apply the relu before "
                                "the value branches, or keep it on the CPU")
        direct = self.producer[cur.var] == k0 and cur.var == st.out_var
        st.relu = True
        chain_from = [k0]
        k = self.producer[cur.var]
        while k != k0:
            chain_from.append(k)
            k = self.stages[k].inputs[0]
        for k in chain_from:
            s = self.stages[k]
            s.out_format = s.out_format.clamped_below(0)
            s.golden_relu = s.golden_relu or not direct
        if direct:  # the stage's value is now the relu's output
            st.out_var = out
        src = self.producer[cur.var]
        self.stages[src].ops.append(i)
        self.cursors[out] = Cursor(out, cur.shape, cur.perm, cur.fmt.clamped_below(0))
        self.producer[out] = src
        self.readers[out] = self.readers.get(out, 0)


@dataclass
class Discovery:
    """The stages of a program before any folding: what :func:`discover` finds once and
    :func:`build` turns into hardware for each folding tried."""

    partition: Partition
    stages: list[LoweredStage]
    in_perm: np.ndarray


def discover(program: Program, feed_names: Sequence[str] | None = None,
             fetch_names: Sequence[str] | None = None) -> Discovery:
    """Partition a quantised inference program and find its hardware stages."""
    part = partition(program, feed_names, fetch_names)
    b = _Builder(part)
    b.run()
    return Discovery(part, b.stages, np.asarray(b.in_perm))


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str,
               lut_mults: int = 0, stream_input: bool = False) -> StageSpec:
    """The spec of a lowered stage for a folding (arrays from ``values``; none: a trial
    spec for costing), ``lut_mults`` of its products in LUTs; ``stream_input``: latency
    mode, for the stages that have it (MVAUs)."""
    try:
        spec = get_kind(st.kind).make_spec(st, values, pe, simd, mode)
        if stream_input and hasattr(spec, "stream_input"):
            spec = replace(spec, stream_input=True)  # type: ignore[type-var]
        return replace(spec, lut_mults=lut_mults) if lut_mults else spec  # type: ignore[type-var]
    except HardwareConfigError as e:
        raise LoweringError(f"{st.op} {st.name!r} (ops {st.ops}): {e}") from None


def fifo_depths(specs: Sequence[StageSpec], ii: int, graph: StageGraph | None = None
                ) -> list[int]:
    """FIFO depth of each stage's input links (the largest of its ports), then of the
    link to the output port, in the consumer's beats, from the producer's burst against
    the consumer's rate: a producer emitting ``b`` elements back to back into a consumer
    that drains ``r`` of them per cycle on average (relative to the producer's peak)
    needs ``b (1 - r)`` elements of buffering beyond the consumer's own input buffer (an
    MVAU holds a whole vector, a sliding window a row).  At least 2: a skid buffer, full
    rate.  (A join's ports may need far more: :func:`join_fifo_depths`.)"""
    specs = list(specs)
    graph = graph if graph is not None else StageGraph.chain(len(specs))
    lanes = stage_lanes(specs, graph.inputs)
    rate: dict[int, tuple[int, float]] = {-1: (1, 1.0)}  # the input port: a beat a cycle
    depths = []
    for k, (s, (lin, lout)) in enumerate(zip(specs, lanes)):
        own = kind_of(s).buffer(s)
        # s.port_len(q) / ii: elements the consumer takes per cycle on average
        need = max(burst * max(0.0, 1 - s.port_len(q) / max(1, ii) / peak) - own
                   for q, (burst, peak) in enumerate(rate[p] for p in graph.inputs[k]))
        depths.append(max(2, int(np.ceil(need / lin))))
        sf = getattr(s, "sf", 0)
        if sf == 1:  # a matrix stage that emits its output beats back to back
            rate[k] = (getattr(s, "nf", 1) * lout, float(lout))
        else:
            rate[k] = (lout, float(lout) / max(1, sf))
    depths.append(2)  # the output port takes a beat every cycle
    return depths


#: beats a join's input FIFO holds beyond the modelled occupancy
JOIN_FIFO_MARGIN = 4
#: the modelled occupancy is scaled by this: the timing model follows each branch on its
#: own, but a fork couples the branches (it passes a beat only when every branch takes
#: it), so a branch can lag where the model has it early.  Measured in Verilator on a
#: residual block with a forked input: the FIFOs need 1.26x the larger modelled
#: occupancy on *both* inputs to keep the bottleneck stage from stalling
JOIN_FIFO_SAFETY = 1.5


def join_fifo_depths(specs: Sequence[StageSpec], graph: StageGraph, ii: int,
                     fifo_depth: int) -> dict[tuple[int, int], int]:
    """Depths of the input FIFOs of joins that need more than ``fifo_depth``: a join
    takes an element from both inputs at once, so the input whose branch is shorter (the
    skip path of a residual block) piles up what arrives before the other branch's
    element, and the other input piles up where its branch is the early one (a concat
    takes each element from one input: its kind's ``port_order``).  From the timing
    model with inferences every ``ii`` cycles: for each input, the most elements (of
    this and later inferences) that have arrived by the time the join takes element
    ``j``, less those of that input taken before; both inputs get the larger of the
    two, times :data:`JOIN_FIFO_SAFETY`, in beats, plus a margin.  With it neither input
    fills, so the fork feeding both branches never stalls on it (no deadlock) and the
    pipeline never stalls in steady state (checked in Verilator: the measured
    initiation interval equals the estimate)."""
    gt = graph_times(specs, graph, stage_lanes(specs, graph.inputs)[0][0], fifo_depth)
    out: dict[tuple[int, int], int] = {}
    for k, ins in enumerate(graph.inputs):
        if len(ins) < 2:
            continue
        take = gt.take[k]
        span = float(take.max() - min(gt.port[(k, p)].min() for p in range(len(ins))))
        later = int(np.ceil(span / max(1, ii))) + 1
        order = kind_of(specs[k]).port_order
        places = order(specs[k]) if order is not None else None
        occupancy = 0
        for p in range(len(ins)):
            arrive = np.sort(gt.port[(k, p)])
            held = np.zeros(len(take))
            for m in range(later + 1):  # this inference and the ones after it
                held += np.searchsorted(arrive, take - m * ii, side="right")
            before = np.arange(len(take)) if places is None else \
                np.searchsorted(np.sort(places[p]), np.arange(len(take)))
            occupancy = max(occupancy, int((held - before).max()))
        elements = int(np.ceil(occupancy * JOIN_FIFO_SAFETY))
        beats = -(-elements // gt.lanes[k][0]) + JOIN_FIFO_MARGIN
        for p in range(len(ins)):
            if beats > fifo_depth:
                out[(k, p)] = beats
    return out


@dataclass
class Lowered:
    """A quantised program lowered to hardware stages (see the module docstring)."""

    partition: Partition
    stages: list[LoweredStage]
    folding: dict[str, tuple[int, int]]
    weights_mode: str
    in_perm: np.ndarray
    fifo: list[int]
    budget: FoldingBudget | None = None
    #: the stage graph with the joins' FIFO depths
    graph: StageGraph | None = None
    #: of each layer's products, how many are LUT multipliers (layers with some)
    lut_mults: dict[str, int] = field(default_factory=dict)
    #: latency mode (``compile --optimize latency``): MVAUs start on partial input
    stream_input: bool = False

    @property
    def specs(self) -> list[StageSpec]:
        return [s.spec for s in self.stages]  # type: ignore[misc]

    @property
    def in_shape(self) -> tuple[int, ...]:
        return self.stages[0].in_shape

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.stages[-1].out_shape

    @property
    def out_perm(self) -> np.ndarray:
        return self.stages[-1].stream_perm

    @property
    def fifo_depth(self) -> int:
        """The one FIFO depth AcceleratorTop takes: the largest link's."""
        return max(self.fifo)

    def top(self, name: str = "fluid_accel", **options: Any) -> AcceleratorTop:
        """The accelerator (``options``: more of AcceleratorTop's keywords).  Often made
        only for its description or design hash, so an unelaborated one is no leak
        (hence this module's UnusedElaboratable linter setting)."""
        return AcceleratorTop(self.specs, name=name, fifo_depth=self.fifo_depth,
                              graph=self.graph, **options)

    @cached_property
    def _estimate(self) -> PipelineEstimate:
        return estimate_pipeline(self.specs, fifo_depth=self.fifo_depth, graph=self.graph)

    def estimate(self) -> PipelineEstimate:
        return self._estimate

    def specs_with(self, values: Values) -> list[StageSpec]:
        """The stages with the parameter values in ``values`` (same structure and
        folding): what a runtime-weights design is loaded with."""
        out = []
        for s in self.stages:
            pe, simd = self.folding.get(s.name, (1, 1))
            out.append(_make_spec(s, values, pe, simd, self.weights_mode,
                                  self.lut_mults.get(s.name, 0), self.stream_input))
        return out

    def to_stream(self, x: np.ndarray) -> np.ndarray:
        """Host side: int8 values of the accelerator's input ``[N, ...]`` (program order)
        -> input vectors ``[N, in_len]`` in stream order."""
        a = np.asarray(x)
        return a.reshape(len(a), -1)[:, self.in_perm]

    def from_stream(self, y: np.ndarray) -> np.ndarray:
        """Host side: output vectors in stream order -> ``[N, *out_shape]`` (program
        order)."""
        y = np.asarray(y)
        out = np.empty_like(y)
        out[:, self.out_perm] = y
        return out.reshape(len(y), *self.out_shape)

    def to_out_stream(self, y: np.ndarray) -> np.ndarray:
        """The accelerator's output values (program order, ``[N, ...]``) in stream
        order ``[N, out_len]``: what the hardware sends."""
        a = np.asarray(y)
        return a.reshape(len(a), -1)[:, self.out_perm]

    def stage_stream(self, k: int, golden: np.ndarray) -> np.ndarray:
        """Stage ``k``'s golden output value (program order, ``[N, ...]``) in the order
        that stage streams it (with a relu folded in later applied)."""
        s = self.stages[k]
        g = np.asarray(golden)
        g = g.reshape(len(g), -1)[:, s.stream_perm]
        return np.maximum(g, 0) if s.golden_relu else g

    def describe(self) -> dict[str, Any]:
        """JSON-able summary: partition, stages, folding, host-side permutations."""
        return {
            "partition": self.partition.describe(),
            "weights": self.weights_mode,
            "folding": {k: {"pe": pe, "simd": simd} for k, (pe, simd) in self.folding.items()},
            **({"lut_mults": dict(self.lut_mults)} if self.lut_mults else {}),
            "fifo_depths": self.fifo,
            "join_fifo_depths": [[k, p, d] for (k, p), d in
                                 (self.graph.edge_fifo if self.graph else ())],
            "in_shape": list(self.in_shape), "out_shape": list(self.out_shape),
            "in_perm": self.in_perm.tolist(), "out_perm": self.out_perm.tolist(),
            "stages": [s.describe() for s in self.stages],
        }


def _units(stages: list[LoweredStage]) -> list[FoldUnit]:
    units = []
    for k, s in enumerate(stages):
        if not s.folds:
            continue
        tail = []
        for t in stages[k + 1:]:
            if t.folds:
                break
            tail.append(t)

        def make(pe: int, simd: int, s: LoweredStage = s,
                 tail: list[LoweredStage] = tail) -> list[StageSpec]:
            return [_make_spec(s, None, pe, simd, "runtime"),
                    *(_make_spec(t, None, 1, 1, "runtime") for t in tail)]
        units.append(FoldUnit(s.name, s.mw, s.mh, make))
    return units


def build(found: Discovery, values: Values, *, folding: Mapping[str, tuple[int, int]]
          | None = None, budget: FoldingBudget | None = DEFAULT_BUDGET,
          ii_target: int | None = None, weights: str = "const",
          lut_mults: Mapping[str, int] | None = None, stream_input: bool = False
          ) -> Lowered:
    """The discovered stages as hardware: ``folding`` per layer ``(pe, simd)``, the other
    layers balanced within ``budget`` (:func:`.balance`); parameter arrays from
    ``values``; ``lut_mults``: of a layer's products, how many to build in LUTs (as
    :func:`.autofold.autofold` chooses them); ``stream_input``: latency mode.  The
    discovery is not changed (each build gets its own stage copies)."""
    if weights not in ("const", "runtime"):
        raise LoweringError(f"weights must be 'const' or 'runtime', not {weights!r}")
    stages = [replace(s, ops=list(s.ops), spec=None) for s in found.stages]
    units = _units(stages)
    given = dict(folding or {})
    check_folding(units, given)
    fold = balance(units, budget, fixed=given, ii_target=ii_target)
    fold = {u.name: fold[u.name] for u in units}
    lut = {k: int(n) for k, n in (lut_mults or {}).items() if n}
    specs: list[StageSpec] = []
    for s in stages:
        pe, simd = fold.get(s.name, (1, 1))
        s.spec = spec = _make_spec(s, values, pe, simd, weights, lut.get(s.name, 0),
                                   stream_input)
        specs.append(spec)
    graph = StageGraph.of([s.inputs for s in stages])
    ii = estimate_pipeline(specs, graph=graph).initiation_interval
    fifo = fifo_depths(specs, ii, graph)
    graph = StageGraph.of(graph.inputs, join_fifo_depths(specs, graph, ii, max(fifo)))
    return Lowered(found.partition, stages, fold, weights, found.in_perm, fifo, budget, graph,
                   lut, stream_input)


def lower(program: Program, values: Values, *, folding: Mapping[str, tuple[int, int]]
          | None = None, budget: FoldingBudget | None = DEFAULT_BUDGET,
          ii_target: int | None = None, weights: str = "const",
          feed_names: Sequence[str] | None = None,
          fetch_names: Sequence[str] | None = None,
          lut_mults: Mapping[str, int] | None = None, stream_input: bool = False
          ) -> Lowered:
    """Lower a quantised inference program (see the module docstring): :func:`discover`
    then :func:`build` (``lut_mults``: of a layer's products, how many in LUTs;
    ``stream_input``: latency mode).

    ``values``: the parameters (a Scope or a dict name -> array); ``folding``: per-layer
    ``(pe, simd)``, the other layers balanced within ``budget`` (:func:`.balance`);
    ``weights``: ``"const"`` (built into the design) or ``"runtime"`` (loaded through
    the register interface)."""
    if weights not in ("const", "runtime"):
        raise LoweringError(f"weights must be 'const' or 'runtime', not {weights!r}")
    return build(discover(program, feed_names, fetch_names), values, folding=folding,
                 budget=budget, ii_target=ii_target, weights=weights, lut_mults=lut_mults,
                 stream_input=stream_input)


def lowering_hash(low: Lowered) -> str:
    """Hash of the stages (structure, folding, and the parameters built in): equal for
    two lowerings that give the same hardware, whatever the top-level options."""
    opts: dict[str, Any] = {"fifo_depth": low.fifo_depth}
    if low.graph is not None and not low.graph.is_chain:
        opts["graph"] = [list(i) for i in low.graph.inputs]
        opts["edge_fifo"] = [[k, p, d] for (k, p), d in low.graph.edge_fifo]
    return design_hash(low.specs, opts)


def mac_count(spec: StageSpec) -> int:
    """Multiply-accumulates per inference of a stage (0 for stages without multipliers)."""
    return spec.macs()

