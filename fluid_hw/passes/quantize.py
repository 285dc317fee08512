"""Post-training quantisation: a float inference program -> a fixed-point program.

    qprog = quantize(program, calibration_batches, QuantConfig(),
                     scope=scope, executor=fluid_hw.Executor(), fetch_names=["prob"])

The arithmetic is docs/fixed_point.md, implemented by the ops in
``fluid_hw/ir/ops/quant.py`` (the golden model).  Steps:

1. **Float clean-up**: prune to the fetch targets (test mode), remove identities,
   fold batch norms into convolutions, fuse fc and conv+bias+act
   (``QuantConfig.fuse``).  Nothing is changed in the input program.
2. **Calibration**: the float program runs on the calibration batches (through the
   duck-typed ``executor``: ``run(program, feed=, fetch_list=, scope=)``) and an
   observer records each float activation's range: ``max`` (largest |x|) or
   ``percentile`` (that percentile of |x|, clipping outliers).
3. **Rewrite**: every *layer* -- ``fc`` / ``mul`` (activation none or relu,
   in_num_col_dims 1), ``conv2d`` / ``depthwise_conv2d`` / ``conv2d_fusion``
   (identity or relu) with persistable weights -- becomes ``quantized_fc`` or
   ``quantized_conv2d`` (int32 accumulator) + ``requantize`` (int8/int16 out; a
   relu, of the layer or the op right after it, becomes the lower clamp rail).
   ``relu``, max/avg ``pool2d``, ``reshape2``, ``flatten2``, ``transpose2``,
   ``nearest_interp`` on a quantised value stay integer (``quantized_pool2d`` for
   pooling) and keep its scale.  A float value entering a layer goes through
   ``quantize``; a quantised value a float op (softmax...) or a fetch needs comes out
   through ``dequantize``, under its old name.

Scales (all float32 values, so the program's attributes reproduce every integer
exactly), where they live:

=========================  ====================================================
what                       where
=========================  ====================================================
activation scale ``s``     ``quantize.scale``, ``requantize.out_scale``,
                           ``dequantize.scale``; ``s = range / (2^(bits-1) - 1)``
input scale of a layer     ``quantized_*.in_scale``
weight scales ``s_w[c]``   ``quantized_*.weight_scale`` (one per output channel,
                           or one); ``s_w = max|W[c]| / (2^(wbits-1) - 1)``
accumulator scales         ``requantize.in_scale`` (``in_scale * s_w[c]``)
integer weights            persistable ``<W>.int8`` (int16 for 16-bit; int4 in int8)
integer bias               persistable ``<b>.int32``: ``round_half_even(b / (s_in s_w))``
multiplier / shift         persistable int32 ``<out>.multiplier`` / ``<out>.shift``
=========================  ====================================================

Precision (docs/fixed_point.md, "Precision"): every layer has a
:class:`~.precision.Precision` -- ``QuantConfig.precision`` (or ``weight_bits`` /
``activation_bits``), the first/last-layer rule, ``overrides`` by name or type -- and
the rewrite writes it onto the program: narrow weights in int8 with ``weight_bits``,
``weight_type`` and ``acc_bits`` on the layer, its output's ``bits`` / ``signed`` /
``bipolar`` on the ``requantize`` (or a ``multi_threshold`` with
``QuantConfig(thresholds=True)`` for 1-4-bit outputs).  The default config gives the
int8 program it always gave.

New persistable values are written into ``scope`` (nothing there is
overwritten); the returned program is an ordinary verifiable, serialisable
Program that ``io.save_inference_model`` saves from that scope.

An op with no fixed-point definition *inside* the region (it reads a quantised
value and a later layer depends on what it computes) raises
:class:`QuantizationError` naming it and the two ways out:
``QuantConfig(float_fallback=True)`` (float island: dequantize before it,
quantize after) or ``QuantConfig(exclude=[its type or output name])``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FluidError, QuantizationError
from ..ir import dtypes
from ..ir.ops.quant import BITS, MULTIPLIER_MAX, SHIFT_MAX, WEIGHT_DTYPE, quantized_dtype
from ..ir.program import Block, Operator, Program, VarType
from ..ir.registry import op_has_category
from ..ir.scope import Scope
from ..ir.verifier import verify_program
from ._graph import (
    BlockGraph,
    OpSpec,
    add_param,
    fetch_targets,
    fresh_name,
    op_access,
    rebuild_block,
    remove_unused_vars,
)
from .base import ParamStore, PassContext, Runner, get_pass, get_value
from .manager import PassManager, fixpoint
from .precision import Precision, acc_bits, int_range, max_abs, requant_thresholds

__all__ = ["Precision", "QuantConfig", "QuantizationError", "quantization_report", "quantize",
           "quantized_region", "requant_params"]

#: ops besides the layout category that keep a quantised value's scale
PASSTHROUGH_OPS = ("relu", "pool2d")


def _layer(t: str) -> bool:
    return op_has_category(t, "layer")
_CONV_ATTR_NAMES = ("strides", "paddings", "dilations", "groups", "padding_algorithm",
                    "data_format")
_POOL_ATTR_NAMES = ("pooling_type", "ksize", "global_pooling", "strides", "paddings",
                    "exclusive", "ceil_mode", "padding_algorithm", "data_format")
_SUPPORTED = ("fc / mul (activation none or relu, in_num_col_dims 1), conv2d / "
              "depthwise_conv2d / conv2d_fusion (activation identity or relu), relu, max or "
              "avg pool2d (not adaptive), reshape2, flatten2, transpose2, nearest_interp "
              "(without OutSize), elementwise_add of "
              "two values of one shape (a residual join), concat of quantised values along "
              "the channel axis (axis 1), test-mode batch_norm and elementwise_mul / add / "
              "sub / div by a per-channel constant (a per-channel affine), and every "
              "element-wise op (sigmoid, tanh, leaky_relu, clip, scale, ...) as a table")


@dataclass(frozen=True)
class QuantConfig:
    """How to quantise.

    * ``weight_bits``: 8 (default), 1 to 7 (stored in int8; 4-bit in [-7, 7], 2-bit
      ternary, 1-bit bipolar {-1, +1}) or 16;
    * ``activation_bits``: 8 (default), 1 to 7 or 16 -- the simple spelling of
      ``precision=Precision(w=weight_bits, a=activation_bits)``;
    * ``precision``: every layer's :class:`~.precision.Precision` (weights, output
      activations); give it or the two above, not both;
    * ``overrides``: per-layer precision, ``{"fc_0": Precision(w=8, a=8)}``; a key is a
      layer's name (its weight's or output's prefix before the first dot, ``fc_0``,
      ``conv2d_1``), an output name, or an op type (``"conv2d"``); a name wins over a
      type.  A key naming a program input (``"x"``) sets that input's precision (its
      ``a`` and ``a_type``);
    * ``first_last_8bit``: as in FINN, the program's input and the first layers' weights
      (the layers reading it) and the last layers' weights and outputs stay at 8 bits
      when the precision is narrower (default True; an override still wins);
    * ``thresholds``: a layer whose output has 1 to 4 bits gets a ``multi_threshold``
      (compare against per-channel thresholds) instead of a ``requantize``; same integers;
    * ``per_channel``: one weight scale per output channel (default) or one per tensor
      (with ``precision=``, its own ``per_channel`` says);
    * ``observer``: ``"max"`` or ``"percentile"`` (of |x|, ``percentile``) for activations;
    * ``exclude``: op types or output variable names to keep in float;
    * ``float_fallback``: unsupported ops inside the region become float islands
      instead of raising :class:`QuantizationError`;
    * ``fuse``: run the float fusion passes first (conv+bn, fc, conv+bias+act).

    Narrow activations (``a < 8``) after a ReLU are unsigned (``[0, 2^a - 1]``: the
    negative half would be unused) unless the precision says ``a_type="bipolar"``; a
    bipolar layer output is the sign of the layer's value (its ReLU, if any, dropped).
    """

    weight_bits: int = 8
    activation_bits: int = 8
    per_channel: bool = True
    observer: str = "max"
    percentile: float = 99.99
    exclude: tuple[str, ...] = ()
    float_fallback: bool = False
    fuse: bool = True
    precision: Precision | None = None
    overrides: Mapping[str, Precision] = field(default_factory=dict)
    first_last_8bit: bool = True
    thresholds: bool = False

    def __post_init__(self) -> None:
        if self.weight_bits not in BITS:
            raise QuantizationError(f"weight_bits={self.weight_bits}: use 1 to 8 or 16")
        if self.activation_bits not in BITS:
            raise QuantizationError(f"activation_bits={self.activation_bits}: use 1 to 8 "
                                    "or 16")
        if self.precision is not None and (self.weight_bits, self.activation_bits) != (8, 8):
            raise QuantizationError("give either precision=Precision(...) or weight_bits / "
                                    "activation_bits, not both")
        if self.observer not in ("max", "percentile"):
            raise QuantizationError(f"observer={self.observer!r}: use 'max' or 'percentile'")
        if not 0 < self.percentile <= 100:
            raise QuantizationError(f"percentile={self.percentile} must be in (0, 100]")
        for k, v in dict(self.overrides).items():
            if not isinstance(v, Precision):
                raise QuantizationError(f"overrides[{k!r}] is {v!r}; give a Precision(w=, a=)")
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "overrides", dict(self.overrides))

    @property
    def default_precision(self) -> Precision:
        """Every layer's precision unless an override or the first/last rule says
        otherwise."""
        if self.precision is not None:
            return self.precision
        return Precision(self.weight_bits, self.activation_bits, per_channel=self.per_channel)

    @property
    def boundary_bits(self) -> int:
        """The width of values the quantised region takes in and of its 8-bit ops
        (joins, tables, pooling sums): 16 with 16-bit activations, else 8."""
        return 16 if self.default_precision.a == 16 else 8


# -- integer helpers (docs/fixed_point.md) ------------------------------------------------

def qmax(bits: int) -> int:
    """Largest magnitude used: 2^(bits-1) - 1 (weights never use -2^(bits-1))."""
    return 2 ** (bits - 1) - 1


def round_half_even(x: np.ndarray | float) -> np.ndarray:
    return np.rint(np.asarray(x, np.float64))


def requant_params(multiplier: float) -> tuple[int, int]:
    """``(m, n)`` with ``m * 2^-n`` ~ ``multiplier``: ``n = floor(log2((2^15 - 1) / M))``
    (computed exactly: the largest n with ``M * 2^n <= 2^15 - 1``), capped to [0, 47];
    ``m = round_half_even(M * 2^n)``."""
    big = float(multiplier)
    if not (math.isfinite(big) and big >= 0):
        raise QuantizationError(f"requantisation multiplier {big} is not a finite value >= 0")
    if big == 0:
        return 0, 0
    n = math.floor(math.log2(MULTIPLIER_MAX / big))
    while n < SHIFT_MAX and big * 2.0 ** (n + 1) <= MULTIPLIER_MAX:
        n += 1
    while n > 0 and big * 2.0**n > MULTIPLIER_MAX:
        n -= 1
    n = min(max(n, 0), SHIFT_MAX)
    m = int(round_half_even(big * 2.0**n))
    if m > MULTIPLIER_MAX:
        raise QuantizationError(
            f"requantisation multiplier {big:.6g} is too large for m < 2^15 even with no "
            "shift: the output scale is far smaller than input scale x weight scale")
    return m, n


def output_quantiser(block: Block, store: ParamStore, base: str, acc: str, outq: str,
                     fmt: tuple[int, str], relu: bool, m_arr: np.ndarray, n_arr: np.ndarray,
                     s_out: np.float32, thresholds: bool,
                     requant_attrs: dict[str, Any]) -> OpSpec:
    """The op turning accumulator ``acc`` into the output integers ``outq``: with
    ``thresholds`` and 1-4 bits, the ``multi_threshold`` giving the integers
    ``requantize`` would (:func:`.precision.requant_thresholds`), else ``requantize``
    with ``requant_attrs``; its parameters are named after ``base``."""
    bits, kind = fmt
    if thresholds and bits <= 4:
        bipolar = kind == "bipolar"
        lo, hi = int_range(bits, kind)
        lo = max(lo, 0) if relu else lo
        th = requant_thresholds(m_arr, n_arr, lo, hi, bipolar)
        t_name = add_param(block, store, f"{base}.thresholds", th)
        return OpSpec(
            "multi_threshold", {"X": [acc], "Thresholds": [t_name]}, {"Out": [outq]},
            {"bits": bits, "signed": kind != "unsigned", "bipolar": bipolar,
             "out_bias": 0 if bipolar else lo, "out_scale": float(s_out)})
    m_name = add_param(block, store, f"{base}.multiplier", m_arr)
    n_name = add_param(block, store, f"{base}.shift", n_arr)
    return OpSpec("requantize", {"X": [acc], "Multiplier": [m_name], "Shift": [n_name]},
                  {"Out": [outq]}, requant_attrs)


def _f32(x: Any) -> np.ndarray:
    return np.asarray(x, np.float32)


# -- observers -------------------------------------------------------------------------

class _MaxObserver:
    def __init__(self) -> None:
        self.amax = 0.0

    def update(self, a: np.ndarray) -> None:
        if a.size:
            self.amax = max(self.amax, float(np.max(np.abs(a))))

    def value(self) -> float:
        return self.amax


class _PercentileObserver:
    def __init__(self, pct: float) -> None:
        self.pct = pct
        self.parts: list[np.ndarray] = []

    def update(self, a: np.ndarray) -> None:
        self.parts.append(np.abs(a, dtype=np.float32).reshape(-1))

    def value(self) -> float:
        if not self.parts:
            return 0.0
        return float(np.percentile(np.concatenate(self.parts), self.pct))


def _calibrate(fp: Program, batches: Sequence[Mapping[str, np.ndarray]], cfg: QuantConfig,
               scope: ParamStore, executor: Runner) -> dict[str, float]:
    gb = fp.global_block()
    names: list[str] = []
    for n, v in gb.vars.items():
        if v.type == VarType.LOD_TENSOR and not v.persistable and dtypes.is_float(v.dtype):
            names.append(n)
    g = BlockGraph(fp, PassContext())
    names = [n for n in names if n in g.producers or n in g.consumers]
    feeds = [n for n in batches[0] if gb.has_var(n) and n in g.consumers]
    if isinstance(scope, Scope):
        run_scope = Scope(scope)
    else:
        run_scope = Scope()
        run_scope.vars.update(scope)
    def make() -> _MaxObserver | _PercentileObserver:
        return _MaxObserver() if cfg.observer == "max" else _PercentileObserver(cfg.percentile)

    obs = {n: make() for n in names}
    from .quantize_rnn import RecurrentObserver  # gate pre-activations of lstm / gru

    recurrent = RecurrentObserver(fp, make)
    for b in batches:
        vals = executor.run(fp, feed={k: b[k] for k in feeds}, fetch_list=names,
                            scope=run_scope)
        for n, v in zip(names, vals):
            arr = np.asarray(v)
            if not np.isfinite(arr).all():
                raise QuantizationError(f"calibration: variable {n!r} took a non-finite value; "
                                        "check the model and the calibration data")
            obs[n].update(arr)
        recurrent.update({n: np.asarray(v) for n, v in zip(names, vals)})
    return {**{n: o.value() for n, o in obs.items()}, **recurrent.ranges()}


# -- planning ------------------------------------------------------------------------------

@dataclass
class _Layer:
    op: Operator
    x: str  # float input
    w: str
    b: str | None
    out: str  # float output after a folded relu
    relu: bool
    consumed: list[int]  # op indices this layer replaces (itself, a folded relu)


class _Quantizer:
    def __init__(self, fp: Program, cfg: QuantConfig, scope: ParamStore,
                 ranges: dict[str, float], targets: list[str],
                 executor: Runner | None = None) -> None:
        self.fp = fp
        self.executor = executor
        self.cfg = cfg
        self.scope = scope
        self.ranges = ranges
        self.targets = targets
        self.block: Block = fp.global_block()
        self.graph = BlockGraph(fp, PassContext(fetch_names=targets))
        self.abits = cfg.boundary_bits
        self.adtype = quantized_dtype(self.abits)
        #: float name -> (bits, kind) of its integer version (default: abits, signed)
        self.fmt: dict[str, tuple[int, str]] = {}
        #: layer op index -> its precision (resolve_precisions)
        self.precisions: dict[int, Precision] = {}
        self.qvars: dict[str, tuple[str, np.float32]] = {}  # float name -> (int name, scale)
        self.has_float: set[str] = set()  # float names a float op or feed still provides
        self.items: list[Any] = []
        self.replaced: set[str] = set()

    # -- classification
    def excluded(self, op: Operator) -> bool:
        return op.type in self.cfg.exclude or any(n in self.cfg.exclude
                                                  for n in op.output_arg_names)

    def shape_of(self, name: str) -> tuple[int, ...]:
        """The declared shape of ``name``, which the program must declare."""
        v = self.graph.var(name)
        if v is None:
            raise QuantizationError(f"variable {name!r} is used but not declared in the "
                                    "program")
        return v.shape

    def _param(self, name: str | None) -> bool:
        return name is None or self.graph.is_constant_param(name, self.scope)

    def layer(self, i: int) -> _Layer | None:
        op = self.block.ops[i]
        if not _layer(op.type) or self.excluded(op):
            return None
        t = op.type
        if t in ("fc", "mul"):
            x = op.input("Input" if t == "fc" else "X")[0]
            w = op.input("W" if t == "fc" else "Y")[0]
            b = next(iter(op.input("Bias")), None) if t == "fc" else None
            k = op.attr("in_num_col_dims" if t == "fc" else "x_num_col_dims")
            act = op.attr("activation_type") if t == "fc" else ""
            out = op.output("Out")[0]
            wv = self.graph.var(w)
            if k != 1 or act not in ("", "relu") or wv is None or len(wv.shape) != 2 or \
                    (t == "mul" and op.attr("y_num_col_dims") != 1):
                return None
        else:
            x, w = op.input("Input")[0], op.input("Filter")[0]
            b = next(iter(op.input("Bias")), None)
            act = op.attr("activation") if t == "conv2d_fusion" else "identity"
            out = op.output("Output")[0]
            if act not in ("identity", "relu") or op.attr("data_format") not in ("NCHW",
                                                                                  "AnyLayout"):
                return None
        xv = self.graph.var(x)
        if xv is None or xv.dtype != VarType.FP32 or not (self._param(w) and self._param(b)):
            return None
        relu = act == "relu"
        consumed = [i]
        nxt = self.graph.only_consumer(out)
        if not relu and nxt is not None and self.graph.fusable_link(out, nxt):
            r = self.block.ops[nxt]
            if r.type == "relu" and not self.excluded(r):
                relu, out = True, r.output("Out")[0]
                consumed.append(nxt)
        return _Layer(op, x, w, b, out, relu, consumed)

    def passthrough(self, op: Operator) -> bool:
        if self.excluded(op):
            return False
        if self.tabulated(op):
            return True
        if op_has_category(op.type, "copy"):  # nearest_interp: its size from attributes only
            return all(not op.input(s) for s in op.input_names if s != "X")
        if op.type == "sequence_pool":  # a row of each sequence: docs/fixed_point.md
            return op.attr("pooltype").upper() in ("LAST", "FIRST", "MAX") and \
                op.attr("pad_value") == 0
        if op.type not in PASSTHROUGH_OPS and not op_has_category(op.type, "layout"):
            return False
        if op.type == "pool2d":
            return not op.attr("adaptive") and op.attr("data_format") in ("NCHW", "AnyLayout")
        return True

    def _follows_quantised(self, op: Operator, qnames: set[str]) -> bool:
        """Whether ``op`` stays integer: a passthrough of a quantised value, or a join of
        two."""
        if self.passthrough(op):
            return op.input("X")[0] in qnames
        if self.concatenable(op):
            return all(x in qnames for x in op.input("X"))
        return self.joinable(op) and op.input("X")[0] in qnames and op.input("Y")[0] in qnames

    def joinable(self, op: Operator) -> bool:
        """An ``elementwise_add`` of two values of one shape (a residual join): quantised
        as ``quantized_add`` when both inputs are int8."""
        if op.type != "elementwise_add" or self.excluded(op) or self.abits != 8:
            return False
        x, y = (self.graph.var(op.input(s)[0]) for s in ("X", "Y"))
        out = self.graph.var(op.output("Out")[0])
        return x is not None and y is not None and out is not None and \
            out.dtype == VarType.FP32 and list(x.shape) == list(y.shape)

    def concatenable(self, op: Operator) -> bool:
        """A ``concat`` of two or more values along the channel axis (1): quantised as
        ``quantized_concat`` when every input is int8."""
        if op.type != "concat" or self.excluded(op) or self.abits != 8 or \
                len(op.input("X")) < 2:
            return False
        out = self.graph.var(op.output("Out")[0])
        if out is None or out.dtype != VarType.FP32 or len(out.shape) < 2:
            return False
        return int(op.attr("axis")) % len(out.shape) == 1

    def tabulated(self, op: Operator) -> bool:
        """An element-wise op (other than relu, which stays integer) of one value with a
        float output: quantised as a 256-entry table when its input is int8."""
        if op.type == "relu" or not op_has_category(op.type, "elementwise") or \
                self.abits != 8 or self.executor is None:
            return False
        out = self.graph.var(op.output("Out")[0])
        return out is not None and out.dtype == VarType.FP32

    # -- the region check
    def _feeds_layer(self, layers: dict[int, _Layer]) -> dict[str, tuple[int, str]]:
        """Float names a quantised layer depends on (transitively): name -> (layer op index,
        its output)."""
        need: dict[str, tuple[int, str]] = {}
        ops = self.block.ops
        for i in range(len(ops) - 1, -1, -1):
            reads, writes = op_access(self.fp, ops[i])
            hit = (i, ops[i].output_arg_names[0]) if i in layers else \
                next((need[n] for n in writes if n in need), None)
            if hit is not None:
                for n in reads:
                    need.setdefault(n, hit)
        return need

    def check_region(self, layers: dict[int, _Layer], quantised_ops: set[int]) -> None:
        need = self._feeds_layer(layers)
        produced: set[str] = set()
        for i, op in enumerate(self.block.ops):
            reads, writes = op_access(self.fp, op)
            if i not in quantised_ops and reads & produced and writes & set(need) and \
                    not self.excluded(op) and not self.cfg.float_fallback:
                j, jout = need[next(iter(writes & set(need)))]
                what = op.type
                if _layer(op.type):
                    act = op.all_attrs().get("activation_type", op.all_attrs().get("activation"))
                    what = f"{op.type} with activation {act!r}" if act else op.type
                raise QuantizationError(
                    f"op {what} (-> {', '.join(op.output_arg_names)}) has no fixed-point "
                    f"definition, and it sits inside the quantised region: it reads a "
                    f"quantised value and the layer {self.block.ops[j].type} (-> {jout}) "
                    "depends on it. Either leave it in float at the region boundary: "
                    "QuantConfig(float_fallback=True) puts a dequantize before it and a "
                    "quantize after it; or exclude it: QuantConfig(exclude="
                    f"[{op.type!r}]) (or its output name {op.output_arg_names[0]!r}). "
                    f"Ops with a fixed-point definition: {_SUPPORTED}")
            if i in quantised_ops:
                produced |= writes

    # -- emission helpers
    def new_var(self, base: str, like: str, dtype: int, shape: Sequence[int] | None = None
                ) -> str:
        name = fresh_name(self.block, base, self.scope)
        v = self.graph.var(like)
        self.block.create_var(name=name, shape=list(shape if shape is not None
                                                    else self.shape_of(like)),
                              dtype=dtype, lod_level=v.lod_level if v is not None else 0)
        return name

    def fmt_of(self, name: str) -> tuple[int, str]:
        """``(bits, kind)`` of the integer version of float ``name``."""
        return self.fmt.get(name, (self.abits, "signed"))

    def dtype_of(self, fmt: tuple[int, str]) -> int:
        return quantized_dtype(fmt[0], fmt[1] != "unsigned")

    def scale_of(self, name: str, fmt: tuple[int, str] | None = None) -> np.float32:
        """The scale of float ``name`` held as ``fmt`` (default: ``abits`` signed): its
        calibrated range over the largest positive integer (1 for bipolar values)."""
        bits, kind = fmt if fmt is not None else (self.abits, "signed")
        amax = self.ranges.get(name, 0.0)
        q = 1 if kind == "bipolar" else int_range(bits, kind)[1]
        return np.float32(amax / q) if amax > 0 else np.float32(1.0 / q)

    def input_fmt(self, name: str) -> tuple[int, str]:
        """How a float value entering the region is quantised: an override naming it, or
        ``abits`` signed (the first/last rule) or the default precision's activations."""
        p = self.cfg.overrides.get(name)
        if p is None and not self.cfg.first_last_8bit:
            p = self.cfg.default_precision
        return (p.a, p.a_type) if p is not None else (self.abits, "signed")

    def int_of(self, name: str) -> tuple[str, np.float32]:
        """The quantised version of float ``name`` (a quantize op when it has none yet)."""
        if name not in self.qvars:
            fmt = self.input_fmt(name)
            s = self.scale_of(name, fmt)
            q = self.new_var(f"{name}.int{fmt[0]}", name, self.dtype_of(fmt))
            attrs: dict[str, Any] = {"scale": float(s), "bits": fmt[0],
                                     "signed": fmt[1] != "unsigned"}
            if fmt[1] == "bipolar":
                attrs["bipolar"] = True
            self.items.append(OpSpec("quantize", {"X": [name]}, {"Out": [q]}, attrs))
            self.qvars[name] = (q, s)
            self.fmt[name] = fmt
        return self.qvars[name]

    # -- precision
    def resolve_precisions(self, layers: dict[int, _Layer], qnames: set[str]) -> None:
        """Each layer's :class:`Precision`: the default, with the first/last rule (the
        layers reading a value from outside the region, and those no layer depends on,
        keep 8-bit weights; the last ones 8-bit outputs too), then an override by name
        or by op type (docs/fixed_point.md)."""
        cfg = self.cfg
        need = self._feeds_layer(layers)
        for i, ly in layers.items():
            p = cfg.default_precision
            if cfg.first_last_8bit:
                first, last = ly.x not in qnames, ly.out not in need
                if (first or last) and p.w < 8:
                    p = p.with_weights(8)
                if last and p.a < 8:
                    p = p.with_activations(8)
            keys = [ly.out, ly.out.split(".")[0], ly.w.split(".")[0], ly.op.type]
            p = next((cfg.overrides[k] for k in keys if k in cfg.overrides), p)
            self.precisions[i] = p

    def float_of(self, name: str) -> None:
        """Make float ``name`` available (a dequantize when only its integer version is)."""
        if name in self.qvars and name not in self.has_float:
            q, s = self.qvars[name]
            self.items.append(OpSpec("dequantize", {"X": [q]}, {"Out": [name]},
                                     {"scale": float(s)}))
            self.has_float.add(name)

    # -- layers
    def emit_layer(self, ly: _Layer, p: Precision) -> None:
        op = ly.op
        conv = op.type not in ("fc", "mul")
        xq, s_in = self.int_of(ly.x)
        in_fmt = self.fmt_of(ly.x)
        in_lo, in_hi = int_range(*in_fmt)
        w = get_value(self.scope, ly.w)
        assert w is not None
        w64 = np.asarray(w, np.float64)
        axis = 0 if conv else 1  # the output-channel axis of the weights
        w_lo, wmax_q = p.weight_range
        red = tuple(a for a in range(w64.ndim) if a != axis)
        channels = w.shape[axis]
        shape = [1] * w64.ndim
        shape[axis] = channels
        if p.w_type == "bipolar":  # the sign; scale: the mean |w| (least squares)
            amax = np.mean(np.abs(w64), axis=red) if p.per_channel else \
                np.array([np.mean(np.abs(w64))])
            amax = np.where(amax > 0, amax, 1.0)
            s_w = _f32(amax)
            wq = np.where(w64 >= 0, 1, -1)
        else:
            amax = np.max(np.abs(w64), axis=red) if p.per_channel else \
                np.array([np.max(np.abs(w64))])
            whole = float(np.max(amax)) if amax.size else 0.0
            amax = np.where(amax > 0, amax, whole if whole > 0 else float(wmax_q))
            s_w = _f32(amax / wmax_q)
            s_w_b = np.broadcast_to(s_w.astype(np.float64), (channels,))
            wq = np.clip(round_half_even(w64 / s_w_b.reshape(shape)), w_lo, wmax_q)
        s_w_full = np.broadcast_to(s_w.astype(np.float64), (channels,))
        wq = wq.astype(dtypes.to_numpy(WEIGHT_DTYPE[p.w]))
        k = int(np.prod(w.shape[1:])) if conv else w.shape[0]
        x_max = max_abs(in_lo, in_hi)
        products = k * wmax_q * x_max
        if products >= 2**31:
            raise QuantizationError(
                f"{op.type} (-> {ly.out}): {k} products of {p.w}-bit weights and "
                f"{in_fmt[0]}-bit activations can reach {products}, beyond the int32 "
                "accumulator (2^31); use 8-bit activations or weights for this layer, or "
                f"exclude it: QuantConfig(exclude=[{ly.out!r}])")
        acc_scale = np.float64(s_in) * s_w_full
        bq = None
        bq_max = 0
        if ly.b is not None:
            b = get_value(self.scope, ly.b)
            assert b is not None
            bq = round_half_even(np.asarray(b, np.float64).reshape(-1) / acc_scale)
            bq_max = int(np.max(np.abs(bq))) if bq.size else 0
            if products + bq_max >= 2**31:
                raise QuantizationError(
                    f"{op.type} (-> {ly.out}): the quantised bias reaches {bq_max}; with "
                    f"{k} products of up to {wmax_q * x_max} the int32 "
                    "accumulator could overflow. The input or weight scale is too small for "
                    "this bias: use per-channel weights or a wider calibration range, or "
                    f"exclude the layer: QuantConfig(exclude=[{ly.out!r}])")
        # the output: narrow after a relu is unsigned; bipolar drops the relu
        relu, out_fmt = ly.relu, (p.a, p.a_type)
        if p.a_type == "bipolar":
            relu = False
        elif relu and p.a_type == "signed" and p.a < 8:
            out_fmt = (p.a, "unsigned")
        s_out = self.scale_of(ly.out, out_fmt)
        mult = acc_scale / np.float64(s_out)
        mn = [requant_params(float(v)) for v in (mult if p.per_channel else mult[:1])]
        if p.a_type == "bipolar":  # the accumulator's own sign: no rounding toward 0
            mn = [(1, 0)]
        m_arr = np.array([v[0] for v in mn], np.int32)
        n_arr = np.array([v[1] for v in mn], np.int32)
        # every check passed: only now add values to the scope
        wq_name = add_param(self.block, self.scope, f"{ly.w}.int{p.w}", wq)
        bias_name = None
        if bq is not None and ly.b is not None:
            bias_name = add_param(self.block, self.scope, f"{ly.b}.int32", bq.astype(np.int32))
        scale_attrs = {"in_scale": float(s_in), "weight_scale": [float(v) for v in s_w],
                       "weight_bits": p.w, "weight_type": p.w_type,
                       "acc_bits": acc_bits((in_lo, in_hi), (w_lo, wmax_q), k, bq_max)}
        acc = self.new_var(f"{ly.out}.acc", ly.out, VarType.INT32,
                           None if conv else [self.shape_of(ly.x)[0], w.shape[1]])
        ins: dict[str, list[str]]
        if conv:
            ins = {"Input": [xq], "Filter": [wq_name]}
            attrs = {a: op.attr(a) for a in _CONV_ATTR_NAMES}
            kind, out_slot = "quantized_conv2d", "Output"
        else:
            xrank = len(self.shape_of(ly.x))
            if xrank != 2:
                flat = self.new_var(f"{xq}.flat", ly.x, self.dtype_of(in_fmt),
                                    [-1, w.shape[0]])
                self.items.append(OpSpec("flatten2", {"X": [xq]}, {"Out": [flat]}, {"axis": 1}))
                xq = flat
            ins = {"X": [xq], "W": [wq_name]}
            attrs = {}
            kind, out_slot = "quantized_fc", "Out"
        if bias_name is not None:
            ins["Bias"] = [bias_name]
        self.items.append(OpSpec(kind, ins, {out_slot: [acc]}, {**attrs, **scale_attrs}))
        outq = self.new_var(f"{ly.out}.int{out_fmt[0]}", ly.out, self.dtype_of(out_fmt))
        self.emit_activation(ly.out, acc, outq, out_fmt, relu, m_arr, n_arr, s_out, acc_scale)
        self.qvars[ly.out] = (outq, s_out)
        self.fmt[ly.out] = out_fmt
        self.replaced |= {ly.w, *(n for i in ly.consumed
                                  for n in self.block.ops[i].output_arg_names)}
        if ly.b is not None:
            self.replaced.add(ly.b)

    def emit_activation(self, out: str, acc: str, outq: str, fmt: tuple[int, str], relu: bool,
                        m_arr: np.ndarray, n_arr: np.ndarray, s_out: np.float32,
                        acc_scale: np.ndarray) -> None:
        """A layer's output quantiser: ``requantize`` with the output's rails, or (with
        ``QuantConfig(thresholds=True)`` and 1-4 bits) the ``multi_threshold`` giving the
        same integers (:func:`.precision.requant_thresholds`)."""
        bits, kind = fmt
        attrs: dict[str, Any] = {"relu": relu, "bits": bits, "out_scale": float(s_out),
                                 "in_scale": [float(v) for v in acc_scale]}
        if kind == "unsigned":
            attrs["signed"] = False
        if kind == "bipolar":
            attrs["bipolar"] = True
        self.items.append(output_quantiser(self.block, self.scope, out, acc, outq, fmt, relu,
                                           m_arr, n_arr, s_out, self.cfg.thresholds, attrs))

    def emit_passthrough(self, op: Operator) -> None:
        x = op.input("X")[0]
        xq, s = self.qvars[x]
        out = op.output("Out")[0]
        if self.tabulated(op) or self.joinable(op) or self.concatenable(op):
            self.check_int8_inputs(op)
        if self.tabulated(op):
            self.emit_table(op, xq, s)
            return
        if self.joinable(op):
            self.emit_add(op, xq, s)
            return
        if self.concatenable(op):
            self.emit_concat(op)
            return
        if op.type == "pool2d" and _uniform_average(op):
            self.emit_sum_pool(op, xq, s)
            return
        fmt = self.fmt_of(x)
        if fmt[1] == "bipolar" and op.type == "pool2d" and op.attr("pooling_type") == "avg":
            fmt = (2, "signed")  # the average of -1 and +1 values rounds to -1, 0 or 1
        outq = self.new_var(f"{out}.int{fmt[0]}", out, self.dtype_of(fmt))
        self.fmt[out] = fmt
        if op.type == "pool2d":
            spec = OpSpec("quantized_pool2d", {"X": [xq]}, {"Out": [outq]},
                          {a: op.attr(a) for a in _POOL_ATTR_NAMES})
        else:
            attrs = {k: v for k, v in op.all_attrs().items() if not k.startswith("op_")}
            spec = OpSpec(op.type, {"X": [xq]}, {"Out": [outq]}, attrs)
        self.items.append(spec)
        self.qvars[out] = (outq, s)
        self.replaced |= set(op.output_arg_names)

    def check_int8_inputs(self, op: Operator) -> None:
        """A table, residual add or concat takes int8 values (narrow ones too), not the
        uint8 of unsigned 8-bit activations."""
        for x in op.input_arg_names:
            if x in self.qvars and self.fmt_of(x) == (8, "unsigned"):
                raise QuantizationError(
                    f"{op.type} (-> {op.output_arg_names[0]}) reads {x!r}, unsigned 8-bit "
                    "values (uint8), but its fixed-point form takes int8: give the layer "
                    f"computing {x!r} a_type='signed' or at most 7 bits (QuantConfig("
                    "overrides=...))")

    def emit_sum_pool(self, op: Operator, xq: str, s_in: np.float32) -> None:
        """An average pool whose window size ``d`` is the same everywhere: the int32
        window sum, then a requantize by ``s_in / (d * s_out)`` to its own calibrated
        scale (docs/fixed_point.md)."""
        out = op.output("Out")[0]
        xs = self.shape_of(op.input("X")[0])
        d = int(xs[2]) * int(xs[3]) if op.attr("global_pooling") else \
            int(np.prod(op.attr("ksize")))
        attrs = {a: op.attr(a) for a in _POOL_ATTR_NAMES}
        attrs["pooling_type"] = "sum"
        acc = self.new_var(f"{out}.sum", out, VarType.INT32)
        self.items.append(OpSpec("quantized_pool2d", {"X": [xq]}, {"Out": [acc]}, attrs))
        s_out = self.scale_of(out)
        m, n = requant_params(float(np.float64(s_in) / d / np.float64(s_out)))
        m_name = add_param(self.block, self.scope, f"{out}.multiplier", np.array([m], np.int32))
        n_name = add_param(self.block, self.scope, f"{out}.shift", np.array([n], np.int32))
        outq = self.new_var(f"{out}.int{self.abits}", out, self.adtype)
        self.items.append(OpSpec(
            "requantize", {"X": [acc], "Multiplier": [m_name], "Shift": [n_name]},
            {"Out": [outq]}, {"relu": False, "bits": self.abits, "out_scale": float(s_out),
                              "in_scale": [float(s_in) / d]}))
        self.qvars[out] = (outq, s_out)
        self.replaced |= set(op.output_arg_names)

    def emit_add(self, op: Operator, xq: str, s_x: np.float32) -> None:
        """A residual add of two int8 values: each rescaled to the output's calibrated
        scale by its own multiplier and shift (docs/fixed_point.md, quantized_add)."""
        out = op.output("Out")[0]
        yq, s_y = self.qvars[op.input("Y")[0]]
        s_out = np.float64(self.scale_of(out))
        mx, nx = requant_params(float(np.float64(s_x) / s_out))
        my, ny = requant_params(float(np.float64(s_y) / s_out))
        outq = self.new_var(f"{out}.int{self.abits}", out, self.adtype)
        self.items.append(OpSpec("quantized_add", {"X": [xq], "Y": [yq]}, {"Out": [outq]},
                                 {"x_multiplier": mx, "x_shift": nx, "y_multiplier": my,
                                  "y_shift": ny, "relu": False, "out_scale": float(s_out)}))
        self.qvars[out] = (outq, np.float32(s_out))
        self.replaced |= set(op.output_arg_names)

    def emit_concat(self, op: Operator) -> None:
        """A channel concat of int8 values: each rescaled to the output's scale, the
        largest input scale -- that input passes unchanged (``m = 1, n = 0``) and no input
        saturates (docs/fixed_point.md, quantized_concat)."""
        out = op.output("Out")[0]
        ins = [self.qvars[x] for x in op.input("X")]
        s_out = max(s for _, s in ins)
        mn = [(1, 0) if s == s_out else requant_params(float(np.float64(s) / np.float64(s_out)))
              for _, s in ins]
        outq = self.new_var(f"{out}.int{self.abits}", out, self.adtype)
        self.items.append(OpSpec("quantized_concat", {"X": [q for q, _ in ins]},
                                 {"Out": [outq]},
                                 {"axis": 1, "multipliers": [m for m, _ in mn],
                                  "shifts": [n for _, n in mn], "relu": False,
                                  "out_scale": float(s_out)}))
        self.qvars[out] = (outq, np.float32(s_out))
        self.replaced |= set(op.output_arg_names)

    def emit_table(self, op: Operator, xq: str, s_in: np.float32) -> None:
        """An element-wise op of one int8 value as ``quantized_table``: its float
        output for each of the 256 inputs, quantised to the output's calibrated scale."""
        out = op.output("Out")[0]
        s_out = self.scale_of(out)
        f = self._tabulate(op, s_in)
        with np.errstate(invalid="ignore"):
            q = round_half_even(np.nan_to_num(f / np.float64(s_out), nan=0.0,
                                              posinf=127.0, neginf=-128.0))
        table = np.clip(q, -128, 127).astype(np.int8)
        t_name = add_param(self.block, self.scope, f"{out}.table", table)
        outq = self.new_var(f"{out}.int{self.abits}", out, self.adtype)
        self.items.append(OpSpec("quantized_table", {"X": [xq], "Table": [t_name]},
                                 {"Out": [outq]},
                                 {"function": op.type, "in_scale": float(s_in),
                                  "out_scale": float(s_out)}))
        self.qvars[out] = (outq, s_out)
        self.replaced |= set(op.output_arg_names)

    def _tabulate(self, op: Operator, s_in: np.float32) -> np.ndarray:
        """The float op on the 256 values ``q * s_in`` (run by the executor: the same
        float semantics as the program's)."""
        mini = Program()
        mb = mini.global_block()
        x, out = op.input("X")[0], op.output("Out")[0]
        dims = [1 if d < 0 else int(d) for d in self.shape_of(x)[1:]]
        mb.create_var(name=x, shape=[256, *dims], dtype=VarType.FP32)
        mb.create_var(name=out, shape=[256, *dims], dtype=VarType.FP32)
        attrs = {k: v for k, v in op.all_attrs().items() if not k.startswith("op_")}
        mb.append_op(type=op.type, inputs={"X": [x]}, outputs={"Out": [out]}, attrs=attrs)
        vals = (np.arange(-128, 128, dtype=np.float64) * np.float64(s_in)).astype(np.float32)
        feed = np.ascontiguousarray(np.broadcast_to(vals.reshape(256, *([1] * len(dims))),
                                                    (256, *dims)))
        assert self.executor is not None
        with np.errstate(all="ignore"):  # e.g. sqrt of a negative input: its entry is 0
            res = self.executor.run(mini, feed={x: feed}, fetch_list=[out], scope=Scope())
        return np.asarray(res[0], np.float64).reshape(256, -1)[:, 0]

    def run(self) -> Program:
        ops = list(self.block.ops)
        layers: dict[int, _Layer] = {}
        skip: set[int] = set()
        quantised: set[int] = set()
        # lstm / gru with the fc projecting their input: quantize_rnn
        from .quantize_rnn import emit_recurrence, plan_recurrence

        recurrences = {p.index: p for i in range(len(ops))
                       if (p := plan_recurrence(self, i)) is not None}
        for p in recurrences.values():
            skip.add(p.fc_index)
            quantised |= {p.fc_index, p.index}
        for i in range(len(ops)):
            if i in skip:
                continue
            ly = self.layer(i)
            if ly is not None:
                layers[i] = ly
                skip |= set(ly.consumed)
                quantised |= set(ly.consumed)
        # passthrough ops are quantised when their input is; so are per-channel affine
        # chains (batch norm, multiply / add by a per-channel constant: _quant_affine)
        from ._quant_affine import emit_affine, plan_affine

        qnames: set[str] = set()
        affines = {}
        for i, op in enumerate(ops):
            if i in layers:
                qnames.add(layers[i].out)
            elif i in recurrences:
                qnames |= set(op.output("Hidden")) | set(op.output("Cell"))
            elif i in quantised:
                continue
            elif (chain := plan_affine(self, i, qnames)) is not None:
                affines[i] = chain
                quantised |= set(chain.ops)
                skip |= set(chain.ops[1:])
                qnames.add(chain.out)
            elif self._follows_quantised(op, qnames):
                quantised.add(i)
                qnames.add(op.output("Out")[0])
        region_layers: dict[int, Any] = {**layers, **recurrences}
        self.check_region(region_layers, quantised)
        feeds_and_params = {n for n, v in self.block.vars.items()
                            if v.persistable or n not in self.graph.producers}
        self.has_float = set(feeds_and_params)
        self.resolve_precisions(layers, qnames)
        for i, op in enumerate(ops):
            if i in layers:
                self.emit_layer(layers[i], self.precisions[i])
            elif i in recurrences:
                emit_recurrence(self, recurrences[i])
            elif i in affines:
                emit_affine(self, affines[i])
            elif i in quantised and i not in skip:
                self.emit_passthrough(op)
            elif i not in skip:
                for n in sorted(op_access(self.fp, op)[0]):
                    self.float_of(n)
                self.items.append(op.desc)
                self.has_float |= set(op.output_arg_names)
        for t in self.targets:
            self.float_of(t)
        rebuild_block(self.block, self.items)
        remove_unused_vars(self.fp, PassContext(fetch_names=self.targets), self.replaced)
        return self.fp


def _uniform_average(op: Operator) -> bool:
    """An average pool whose every window divides by the same count (global, or no
    padding and no ceil-mode overhang, or inclusive of padding): it quantises as a sum
    and a requantize, the form the FPGA lowers."""
    if op.attr("pooling_type") != "avg" or op.attr("adaptive"):
        return False
    if op.attr("global_pooling"):
        return True
    if op.attr("ceil_mode") or op.attr("padding_algorithm") == "SAME":
        return False
    return not op.attr("exclusive") or op.attr("padding_algorithm") == "VALID" or \
        not any(op.attr("paddings"))


def quantize(program: Program, calibration_data: Iterable[Mapping[str, np.ndarray]],
             config: QuantConfig | None = None, *, scope: ParamStore, executor: Runner,
             fetch_names: Sequence[str] | None = None,
             feed_names: Sequence[str] | None = None) -> Program:
    """A fixed-point copy of the float inference ``program`` (see the module docstring).

    ``calibration_data``: feed dicts (name -> array), e.g. a few hundred training
    examples in batches; feeds the pruned program does not read are ignored.
    ``scope``: the parameters (a Scope or a dict of arrays); the quantised
    parameters are added to it.  ``executor``: runs the float program for
    calibration (``fluid_hw.Executor()``).  ``fetch_names``: the outputs (default:
    the program's fetch ops).  The input program is not modified.
    """
    cfg = config if config is not None else QuantConfig()
    batches = [dict(b) for b in calibration_data]
    if not batches:
        raise QuantizationError("quantize needs calibration data: give at least one feed dict")
    targets = list(fetch_names) if fetch_names is not None else \
        fetch_targets(program, PassContext())
    if not targets:
        raise QuantizationError("quantize needs the program's outputs: fetch_names=[...] "
                                "(or a program with fetch ops)")
    feeds = list(feed_names) if feed_names is not None else list(batches[0])
    ctx = PassContext(scope=scope, executor=executor, feed_names=feeds, fetch_names=targets)
    from .quantize_rnn_loop import LoopToSequence  # DynamicRNN cells: whole-sequence ops

    steps: list[Any] = ["prune", LoopToSequence(exclude=cfg.exclude),
                        fixpoint("remove_identity", "reshape_transpose_cancel",
                                 "dead_code_elimination")]
    if cfg.fuse:
        # relu only: another activation is quantised on its own (a table), from its
        # input's calibrated range
        steps += ["conv_bn_fuse", "fc_bn_fuse", get_pass("fc_fuse", activations=("relu",)),
                  get_pass("conv_elementwise_add_act_fuse", activations=("relu",)),
                  "dead_code_elimination"]
    fp = PassManager(steps).run(program, ctx)
    ranges = _calibrate(fp, batches, cfg, scope, executor)
    out = _Quantizer(fp.clone(), cfg, scope, ranges, targets, executor).run()
    try:
        verify_program(out)
    except FluidError as e:  # a bug here, not in the caller's program
        raise QuantizationError(f"the quantised program does not verify: {e}") from e
    return out


# -- inspecting quantised programs -----------------------------------------------------------

def quantized_region(program: Program) -> set[str]:
    """Every variable between a ``quantize`` and a ``dequantize``: the outputs of quantize,
    the inputs and outputs of the quantised ops and of every op reading a region value,
    the inputs of dequantize.  All of them must hold integers."""
    region: set[str] = set()
    for op in program.global_block().ops:
        ins, outs = set(op.input_arg_names), set(op.output_arg_names)
        if op.type == "quantize":
            region |= outs
        elif op_has_category(op.type, "quantised"):
            region |= ins | outs
        elif op.type == "dequantize":
            region |= set(op.input("X"))
        elif ins & region and op.type not in ("fetch",):
            region |= ins | outs
    return region


def quantization_report(program: Program) -> list[dict[str, Any]]:
    """One row per quantised layer / boundary op: its type, output, scales, relu, and the
    precision (weight bits and type, accumulator bits, output bits and kind)."""
    rows: list[dict[str, Any]] = []
    for op in program.global_block().ops:
        if op.type in ("quantize", "dequantize"):
            rows.append({"op": op.type, "out": op.output("Out")[0], "scale": op.attr("scale")})
        elif op.type in ("quantized_fc", "quantized_conv2d", "quantized_affine"):
            ws = op.attr("weight_scale")
            row = {"op": op.type, "out": op.output_arg_names[0],
                   "in_scale": op.attr("in_scale"), "weight_bits": op.attr("weight_bits"),
                   "weight_scale_min": min(ws) if ws else None,
                   "weight_scale_max": max(ws) if ws else None}
            if op.type != "quantized_affine":
                row.update(weight_type=op.attr("weight_type"), acc_bits=op.attr("acc_bits"))
            rows.append(row)
        elif op.type in ("requantize", "multi_threshold"):
            kind = "bipolar" if op.attr("bipolar") else \
                "signed" if op.attr("signed") else "unsigned"
            rows.append({"op": op.type, "out": op.output("Out")[0],
                         "out_scale": op.attr("out_scale"),
                         "relu": op.attr("relu") if op.type == "requantize" else None,
                         "bits": op.attr("bits"), "kind": kind})
    return rows
