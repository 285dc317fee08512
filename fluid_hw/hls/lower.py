# amaranth: UnusedElaboratable=no
"""Lowering of a quantised inference program to a dataflow of hardware stages.

    low = lower(program, values, folding={"fc_0": (4, 8)}, weights="const")
    low.stages          # LoweredStage per hardware stage: the program ops it covers,
                        # shapes, fixed-point formats, layout, its hls.stages spec
    low.specs           # MVAUStage / ConvStage / MaxPoolStage, for rtl.AcceleratorTop
    low.top()           # the AcceleratorTop
    low.estimate()      # hls.stages.estimate_pipeline: cycles, II, latency, resources
    low.specs_with(v)   # the same stages with other parameter values (runtime weights)

Stages (docs/fixed_point.md): ``quantized_fc`` | ``quantized_conv2d`` + ``requantize``
(an integer ``relu`` after it, or after max pooling/layout behind it, becomes the
lower clamp) -> an MVAU or convolution stage; a max ``quantized_pool2d`` -> a pooling
stage.  ``reshape2`` / ``flatten2`` / ``transpose2`` between stages move no data in
hardware: the lowering follows, for every value, which logical element each stream
position carries (``stream_perm``), so

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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from fluid_hw.rtl import AcceleratorTop, HardwareConfigError, design_hash, hwc_order, stage_lanes
from fluid_hw.rtl.spec import StageSpec

from ..errors import FluidError
from ..ir import dtypes
from ..ir.lod import LoDTensor
from ..ir.ops.nn import window_geometry
from ..ir.program import Operator, Program
from .folding import DEFAULT_BUDGET, FoldingBudget, FoldUnit, balance, check_folding
from .partition import LAYOUT_OPS, LoweringError, Partition, main_output, partition
from .stages import ConvStage, MaxPoolStage, MVAUStage, PipelineEstimate, estimate_pipeline

__all__ = ["FixedPoint", "LoweredStage", "Lowered", "lower", "fifo_depths", "layer_name",
           "lowering_hash", "mac_count"]

Values = Mapping[str, Any]


@dataclass(frozen=True)
class FixedPoint:
    """An integer format: ``bits`` wide, values in ``[lo, hi]``, real value ``q * scale``
    (``scale`` None where the program does not record it)."""

    bits: int
    lo: int
    hi: int
    scale: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"bits": self.bits, "lo": self.lo, "hi": self.hi, "scale": self.scale}


INT8 = FixedPoint(8, -128, 127)
INT32 = FixedPoint(32, -2**31, 2**31 - 1)


@dataclass
class LoweredStage:
    """One hardware stage and where it came from.

    ``ops``: indices of the program ops it implements; ``in_var``/``out_var``: the
    program values at its input and output (``out_var``'s golden value, with ``relu``
    applied when ``golden_relu``, is what the stage streams, in ``stream_perm``
    order: stream position ``j`` carries element ``stream_perm[j]`` of one example's
    flattened ``out_var``); ``params``: slot -> program variable (weights, bias,
    multiplier, shift); ``layout``: how the weights were rearranged."""

    name: str
    op: str
    ops: list[int]
    in_var: str
    out_var: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    in_format: FixedPoint
    out_format: FixedPoint
    stream_perm: np.ndarray
    params: dict[str, str | None] = field(default_factory=dict)
    layout: dict[str, Any] = field(default_factory=dict)
    geometry: dict[str, Any] = field(default_factory=dict)
    relu: bool = False
    requantize: bool = True
    golden_relu: bool = False
    col_perm: np.ndarray | None = None
    spec: StageSpec | None = None

    @property
    def is_matrix(self) -> bool:
        return self.op in ("quantized_fc", "quantized_conv2d")

    @property
    def mw(self) -> int:
        if self.op == "quantized_fc":
            return int(np.prod(self.in_shape))
        _m, c, kh, kw = self.geometry["filter"]
        return c * kh * kw

    @property
    def mh(self) -> int:
        return int(self.out_shape[0])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "ops": self.ops, "in_var": self.in_var,
                "out_var": self.out_var, "in_shape": list(self.in_shape),
                "out_shape": list(self.out_shape), "in_format": self.in_format.as_dict(),
                "out_format": self.out_format.as_dict(), "params": self.params,
                "layout": self.layout, "relu": self.relu, "requantize": self.requantize,
                "golden_relu": self.golden_relu}


def layer_name(*candidates: str | None) -> str:
    """A stage name from the first program name given: its prefix before the first
    dot (``fc_0.w_0.int8`` -> ``fc_0``), as a Verilog-safe identifier."""
    for c in candidates:
        if c:
            base = re.sub(r"\W", "_", c.split(".")[0]) or "stage"
            return base if not base[0].isdigit() else f"s_{base}"
    return "stage"


def _value(values: Values, name: str) -> np.ndarray:
    find = getattr(values, "find_value", None)
    v = find(name) if find is not None else values.get(name)
    if v is None:
        raise LoweringError(f"parameter {name!r} has no value: load the model's parameters "
                            "(io.load_inference_model) into the scope given to lower()")
    return np.asarray(v.data if isinstance(v, LoDTensor) else v)


class _Builder:
    """Walks the hardware chain of a partition into LoweredStages (no folding yet)."""

    def __init__(self, part: Partition, values: Values) -> None:
        self.part = part
        self.values = values
        self.program: Program = part.program
        self.gb = self.program.global_block()
        self.ops = list(self.gb.ops)
        self.stages: list[LoweredStage] = []
        self.names: set[str] = set()
        self.in_perm = np.zeros(0, np.int64)

    # -- helpers
    def shape(self, name: str, op: Operator) -> tuple[int, ...]:
        s = tuple(int(d) for d in self.gb.var(name).shape)
        if len(s) < 2 or any(d < 1 for d in s[1:]):
            raise LoweringError(f"{op.type} (-> {main_output(op)}): the value {name!r} has "
                                f"shape {list(s)}; the accelerator needs every dimension but "
                                "the batch known. Give the model's input a fixed shape")
        return s[1:]

    def check_int8(self, name: str, op: Operator) -> None:
        v = self.gb.var(name)
        if v.dtype != dtypes.VarType.INT8:
            raise LoweringError(
                f"{op.type} (-> {main_output(op)}): {name!r} is {v.dtype_name}; the "
                "accelerator streams int8 activations. Quantise with activation_bits=8")

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def in_format(self) -> FixedPoint:
        for op in self.ops:
            if op.type == "quantize" and op.output("Out")[0] == self.part.hw_input:
                if not op.attr("signed") or op.attr("bits") != 8:
                    raise LoweringError(
                        f"quantize (-> {self.part.hw_input}) makes "
                        f"{'un' if not op.attr('signed') else ''}signed {op.attr('bits')}-bit "
                        "values; the accelerator takes signed int8. Quantise with "
                        "activation_bits=8 (signed)")
                return FixedPoint(8, -128, 127, float(op.attr("scale")))
        return INT8

    # -- the walk
    def run(self) -> None:
        chain = self.part.hw
        cur = self.part.hw_input
        first_op = self.ops[chain[0]]
        self.check_int8(cur, first_op)
        shape = self.shape(cur, first_op)
        # the host chooses the first stage's input order: HWC for an image stage
        perm = hwc_order(*shape) if first_op.type == "quantized_conv2d" and \
            len(shape) == 3 else np.arange(int(np.prod(shape)))
        self.in_perm = perm
        fmt = self.in_format()
        last_matrix: LoweredStage | None = None
        k = 0
        while k < len(chain):
            i = chain[k]
            op = self.ops[i]
            t = op.type
            if t in LAYOUT_OPS:
                out = main_output(op)
                new_shape = self.shape(out, op)
                if t == "transpose2":
                    axis = [int(a) for a in op.attr("axis")]
                    if axis[0] != 0:
                        raise LoweringError(f"transpose2 (-> {out}) moves the batch axis "
                                            f"(axis={axis}); only per-example transposes "
                                            "lower to the accelerator")
                    t_idx = np.arange(perm.size).reshape(shape).transpose(
                        [a - 1 for a in axis[1:]]).reshape(-1)
                    inv = np.empty_like(t_idx)
                    inv[t_idx] = np.arange(t_idx.size)
                    perm = inv[perm]
                shape, cur = new_shape, out
                self.stages[-1].ops.append(i)
                k += 1
            elif t in ("quantized_fc", "quantized_conv2d"):
                st, used = self.matrix(chain, k, cur, shape, perm, fmt)
                self.stages.append(st)
                last_matrix = st
                cur, shape, perm, fmt = st.out_var, st.out_shape, st.stream_perm, st.out_format
                k += used
            elif t == "quantized_pool2d":
                st = self.pool(i, op, cur, shape, perm, fmt)
                self.stages.append(st)
                cur, shape, perm = st.out_var, st.out_shape, st.stream_perm
                k += 1
            elif t == "relu":
                if last_matrix is None or not last_matrix.requantize:
                    raise LoweringError(f"relu (-> {main_output(op)}) does not follow a "
                                        "requantize (through max pooling or layout only), so "
                                        "it cannot become a clamp of a hardware stage")
                k0 = self.stages.index(last_matrix)
                direct = k0 == len(self.stages) - 1 and cur == last_matrix.out_var
                last_matrix.relu = True
                for s in self.stages[k0:]:
                    s.out_format = FixedPoint(8, 0, 127, s.out_format.scale)
                    s.golden_relu = s.golden_relu or not direct
                if direct:  # the stage's value is now the relu's output
                    last_matrix.out_var = main_output(op)
                fmt = FixedPoint(8, 0, 127, fmt.scale)
                self.stages[-1].ops.append(i)
                cur = main_output(op)
                k += 1
            else:  # pragma: no cover - partition() only lets lowerable ops through
                raise LoweringError(f"{t} (-> {main_output(op)}) has no hardware lowering")

    def matrix(self, chain: list[int], k: int, cur: str, shape: tuple[int, ...],
               perm: np.ndarray, fmt: FixedPoint) -> tuple[LoweredStage, int]:
        i = chain[k]
        op = self.ops[i]
        t = op.type
        conv = t == "quantized_conv2d"
        acc = main_output(op)
        wname = op.input("Filter" if conv else "W")[0]
        bname = (op.input("Bias") or [None])[0]
        name = self.unique(layer_name(wname, acc))
        wv = self.gb.var(wname)
        if wv.dtype != dtypes.VarType.INT8:
            raise LoweringError(f"{t} {name!r}: weights {wname!r} are {wv.dtype_name}; the "
                                "accelerator's multipliers take int8 (quantise with "
                                "weight_bits 8 or 4)")
        ops_used = [i]
        req = None
        if k + 1 < len(chain) and self.ops[chain[k + 1]].type == "requantize":
            req = self.ops[chain[k + 1]]
            ops_used.append(chain[k + 1])
        elif k + 1 < len(chain):
            nxt = self.ops[chain[k + 1]]
            raise LoweringError(f"{t} {name!r} (-> {acc}) is followed by {nxt.type}, not "
                                "requantize: only the last stage may stream int32 values")
        params: dict[str, str | None] = {"weights": wname, "bias": bname,
                                         "multiplier": None, "shift": None}
        if req is not None:
            if req.attr("bits") != 8:
                raise LoweringError(f"requantize (-> {main_output(req)}) of layer {name!r} "
                                    f"makes {req.attr('bits')}-bit values; the accelerator "
                                    "streams int8 (activation_bits=8)")
            params["multiplier"] = req.input("Multiplier")[0]
            params["shift"] = req.input("Shift")[0]
            out = main_output(req)
            relu = bool(req.attr("relu"))
            scale = float(req.attr("out_scale")) or None
            out_fmt = FixedPoint(8, 0 if relu else -128, 127, scale)
        else:
            out, relu, out_fmt = acc, False, INT32
        geometry: dict[str, Any] = {}
        layout: dict[str, Any] = {}
        col_perm = None
        if conv:
            if len(shape) != 3:
                raise LoweringError(f"quantized_conv2d {name!r} reads {cur!r} of shape "
                                    f"{list(shape)}; expected [C, H, W]")
            if not np.array_equal(perm, hwc_order(*shape)):
                raise LoweringError(
                    f"quantized_conv2d {name!r} reads {cur!r}, which arrives in an order "
                    "that is not HWC (a fully-connected output reshaped into an image, or a "
                    "transpose); the accelerator has no reordering stage. Reshape before "
                    "the fully-connected layer instead, or keep that part on the CPU")
            if op.attr("groups") != 1:
                raise LoweringError(f"quantized_conv2d {name!r}: groups={op.attr('groups')} "
                                    "(grouped/depthwise convolution) has no hardware lowering "
                                    "yet; only groups=1")
            filt = tuple(int(d) for d in wv.shape)
            c, h, w = shape
            if filt[1] != c:
                raise LoweringError(f"quantized_conv2d {name!r}: its filter {wname!r} "
                                    f"{list(filt)} expects {filt[1]} input channels, the input "
                                    f"{cur!r} has {c}")
            (oh, ow), pads, dil = self._window(op, name, (h, w), filt[2:],
                                               op.attr("strides"), op.attr("paddings"),
                                               op.attr("dilations"), False)
            geometry = {"filter": list(filt), "stride": [int(s) for s in op.attr("strides")],
                        "padding": pads, "dilation": dil}
            out_shape: tuple[int, ...] = (filt[0], oh, ow)
            stream_perm = hwc_order(*out_shape)
            layout = {"weights": "Filter [M, C, kh, kw] -> matrix [M, (ky*kw + kx)*C + c]",
                      "stream": "HWC"}
        else:
            kk, cc = (int(d) for d in wv.shape)
            n_in = int(np.prod(shape))
            if n_in != kk:
                raise LoweringError(f"quantized_fc {name!r} reads {n_in} values per example "
                                    f"but its weights {wname!r} are [{kk}, {cc}]")
            col_perm = np.asarray(perm)
            ident = np.array_equal(col_perm, np.arange(kk))
            img = self.stages[-1].out_shape if self.stages else ()
            hwc = len(img) == 3 and int(np.prod(img)) == kk and \
                np.array_equal(col_perm, hwc_order(*img))
            layout = {"weights": "W [K, C] transposed to [C, K]",
                      "columns": "identity" if ident else "hwc" if hwc else "permuted"}
            out_shape = (cc,)
            stream_perm = np.arange(cc)
        st = LoweredStage(name, t, ops_used, cur, out, shape, out_shape, fmt, out_fmt,
                          stream_perm, params, layout, geometry, relu, req is not None,
                          col_perm=col_perm)
        return st, len(ops_used)

    def _window(self, op: Operator, name: str, hw: tuple[int, int], k: Sequence[int],
                strides: Sequence[int], paddings: Sequence[int], dilations: Sequence[int],
                ceil_mode: bool) -> tuple[tuple[int, int], list[int], list[int]]:
        """Output size, pads (top, left, bottom, right) and dilation of a window op."""
        try:
            out, pads, dil = window_geometry(list(hw), list(k), list(strides),
                                             list(paddings), list(dilations),
                                             op.attr("padding_algorithm"), ceil_mode)
        except FluidError as e:
            raise LoweringError(f"{op.type} {name!r}: {e}") from None
        top, bottom, left, right = pads
        if ceil_mode:  # the last window may hang over: more bottom/right padding
            bottom = max(bottom, (out[0] - 1) * strides[0] + dil[0] * (k[0] - 1) + 1
                         - hw[0] - top)
            right = max(right, (out[1] - 1) * strides[1] + dil[1] * (k[1] - 1) + 1
                        - hw[1] - left)
        return (out[0], out[1]), [top, left, bottom, right], dil

    def pool(self, i: int, op: Operator, cur: str, shape: tuple[int, ...], perm: np.ndarray,
             fmt: FixedPoint) -> LoweredStage:
        out = main_output(op)
        name = self.unique(layer_name(out))
        if len(shape) != 3:
            raise LoweringError(f"quantized_pool2d {name!r} reads {cur!r} of shape "
                                f"{list(shape)}; expected [C, H, W]")
        if not np.array_equal(perm, hwc_order(*shape)):
            raise LoweringError(f"quantized_pool2d {name!r} reads {cur!r} in an order that is "
                                "not HWC; the accelerator has no reordering stage")
        c, h, w = shape
        if op.attr("global_pooling"):
            (oh, ow), pads, k, s = (1, 1), [0, 0, 0, 0], [h, w], [1, 1]
        else:
            k = [int(v) for v in op.attr("ksize")]
            s = [int(v) for v in op.attr("strides")]
            (oh, ow), pads, _ = self._window(op, name, (h, w), k, s, op.attr("paddings"),
                                             [1, 1], bool(op.attr("ceil_mode")))
        out_shape = (c, oh, ow)
        return LoweredStage(name, "quantized_pool2d", [i], cur, out, shape, out_shape, fmt,
                            fmt, hwc_order(*out_shape), {}, {"stream": "HWC"},
                            {"kernel": k, "stride": s, "padding": pads})


def _broadcast(arr: np.ndarray, n: int, what: str, stage: str) -> np.ndarray:
    a = np.asarray(arr).reshape(-1)
    if a.size == 1:
        return np.full(n, a[0], dtype=a.dtype)
    if a.size != n:
        raise LoweringError(f"stage {stage!r}: {what} has {a.size} values, expected 1 or {n}")
    return a


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> StageSpec:
    """The hls.stages object of a lowered stage (arrays from ``values``; none: a trial
    spec for costing)."""
    arrays: dict[str, Any] = {}
    if values is not None and st.is_matrix:
        w = _value(values, st.params["weights"])  # type: ignore[arg-type]
        if st.op == "quantized_fc":
            w = np.asarray(w).T[:, st.col_perm]
        arrays["weights"] = w
        if st.params.get("bias"):
            arrays["bias"] = _value(values, st.params["bias"]).reshape(-1)  # type: ignore
        if st.requantize:
            for slot in ("multiplier", "shift"):
                arrays[slot] = _broadcast(_value(values, st.params[slot]),  # type: ignore
                                          st.mh, slot, st.name)
    elif st.is_matrix and st.requantize and values is None:
        mode = "runtime"
    try:
        if st.op == "quantized_fc":
            return MVAUStage(st.name, st.mw, st.mh, pe=pe, simd=simd, relu=st.relu,
                             weights_mode=mode, requantize=st.requantize, **arrays)
        if st.op == "quantized_conv2d":
            g = st.geometry
            m, _c, kh, kw = g["filter"]
            top, left, bottom, right = g["padding"]
            return ConvStage(st.name, st.in_shape, m, kernel=(kh, kw),  # type: ignore[arg-type]
                             stride=tuple(g["stride"]), padding=(top, left, bottom, right),
                             dilation=tuple(g["dilation"]), pe=pe, simd=simd, relu=st.relu,
                             weights_mode=mode, requantize=st.requantize, **arrays)
        g = st.geometry
        return MaxPoolStage(st.name, st.in_shape, kernel=tuple(g["kernel"]),  # type: ignore
                            stride=tuple(g["stride"]), padding=tuple(g["padding"]))
    except HardwareConfigError as e:
        raise LoweringError(f"{st.op} {st.name!r} (ops {st.ops}): {e}") from None


def fifo_depths(specs: Sequence[StageSpec], ii: int) -> list[int]:
    """FIFO depth of each link (into every stage, then to the output port), in the
    consumer's beats, from the producer's burst against the consumer's rate: a producer
    emitting ``b`` elements back to back into a consumer that drains ``r`` of them per
    cycle on average (relative to the producer's peak) needs ``b (1 - r)`` elements of
    buffering beyond the consumer's own input buffer (an MVAU holds a whole vector, a
    sliding window a row).  At least 2: a skid buffer, full rate."""
    specs = list(specs)
    lanes = stage_lanes(specs)
    depths = []
    burst, peak = 1, 1.0  # the input port: one beat per cycle
    for s, (lin, lout) in zip(specs, lanes):
        avg = s.in_len / max(1, ii)  # elements the consumer takes per cycle on average
        if isinstance(s, MVAUStage):
            own = s.in_len
        else:
            c, _h, w = s.in_shape  # type: ignore[attr-defined]
            own = w * c
        need = burst * max(0.0, 1 - avg / peak) - own
        depths.append(max(2, int(np.ceil(need / lin))))
        sf = getattr(s, "sf", 0)
        if sf == 1:  # a matrix stage that emits its output beats back to back
            per = getattr(s, "nf", 1) * lout
            burst, peak = (s.out_len if isinstance(s, MVAUStage) else per), float(lout)
        else:
            burst, peak = lout, float(lout) / max(1, sf)
    depths.append(2)  # the output port takes a beat every cycle
    return depths


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
        return AcceleratorTop(self.specs, name=name, fifo_depth=self.fifo_depth, **options)

    @cached_property
    def _estimate(self) -> PipelineEstimate:
        return estimate_pipeline(self.specs, fifo_depth=self.fifo_depth)

    def estimate(self) -> PipelineEstimate:
        return self._estimate

    def specs_with(self, values: Values) -> list[StageSpec]:
        """The stages with the parameter values in ``values`` (same structure and
        folding): what a runtime-weights design is loaded with."""
        out = []
        for s in self.stages:
            pe, simd = self.folding.get(s.name, (1, 1))
            out.append(_make_spec(s, values, pe, simd, self.weights_mode))
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
            "fifo_depths": self.fifo,
            "in_shape": list(self.in_shape), "out_shape": list(self.out_shape),
            "in_perm": self.in_perm.tolist(), "out_perm": self.out_perm.tolist(),
            "stages": [s.describe() for s in self.stages],
        }


def _units(stages: list[LoweredStage]) -> list[FoldUnit]:
    units = []
    for k, s in enumerate(stages):
        if not s.is_matrix:
            continue
        tail = []
        for t in stages[k + 1:]:
            if t.is_matrix:
                break
            tail.append(t)

        def make(pe: int, simd: int, s: LoweredStage = s,
                 tail: list[LoweredStage] = tail) -> list[StageSpec]:
            return [_make_spec(s, None, pe, simd, "runtime"),
                    *(_make_spec(t, None, 1, 1, "runtime") for t in tail)]
        units.append(FoldUnit(s.name, s.mw, s.mh, make))
    return units


def lower(program: Program, values: Values, *, folding: Mapping[str, tuple[int, int]]
          | None = None, budget: FoldingBudget | None = DEFAULT_BUDGET,
          ii_target: int | None = None, weights: str = "const",
          feed_names: Sequence[str] | None = None,
          fetch_names: Sequence[str] | None = None) -> Lowered:
    """Lower a quantised inference program (see the module docstring).

    ``values``: the parameters (a Scope or a dict name -> array); ``folding``: per-layer
    ``(pe, simd)``, the other layers balanced within ``budget`` (:func:`.balance`);
    ``weights``: ``"const"`` (built into the design) or ``"runtime"`` (loaded through
    the register interface)."""
    if weights not in ("const", "runtime"):
        raise LoweringError(f"weights must be 'const' or 'runtime', not {weights!r}")
    part = partition(program, feed_names, fetch_names)
    b = _Builder(part, values)
    b.run()
    stages = b.stages
    units = _units(stages)
    given = dict(folding or {})
    check_folding(units, given)
    fold = balance(units, budget, fixed=given, ii_target=ii_target)
    fold = {u.name: fold[u.name] for u in units}
    for s in stages:
        pe, simd = fold.get(s.name, (1, 1))
        s.spec = _make_spec(s, values, pe, simd, weights)
    specs = [s.spec for s in stages]
    ii = estimate_pipeline(specs).initiation_interval  # type: ignore[arg-type]
    low = Lowered(part, stages, fold, weights, np.asarray(b.in_perm),
                  fifo_depths(specs, ii), budget)  # type: ignore[arg-type]
    return low


def lowering_hash(low: Lowered) -> str:
    """Hash of the stages (structure, folding, and the parameters built in): equal for
    two lowerings that give the same hardware, whatever the top-level options."""
    return design_hash(low.specs, {"fifo_depth": low.fifo_depth})


def mac_count(spec: StageSpec) -> int:
    """Multiply-accumulates per inference of a matrix stage (0 for others)."""
    if isinstance(spec, MVAUStage):
        return spec.mw * spec.mh
    if isinstance(spec, ConvStage):
        oh, ow = spec.geometry.out_hw
        return spec.mw * spec.mh * oh * ow
    return 0

