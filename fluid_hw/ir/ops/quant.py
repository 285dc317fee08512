"""Fixed-point ops: the golden model that FPGA hardware must match bit for bit.

``fluid_hw.passes.quantize`` rewrites a float inference program into these ops
(docs/fixed_point.md is the contract).  The CPU executor runs everything between
the first ``quantize`` and the last ``dequantize`` with integer arithmetic only.
This page is the complete specification; an RTL author needs nothing else.

Notation: ``clamp(v, lo, hi) = min(max(v, lo), hi)``; all integer arithmetic is
exact (Python-int semantics) unless a width is stated; ``>>`` is an arithmetic
(sign-propagating) right shift, i.e. floor division by a power of two.

=====================  ================================================================
op                     exact arithmetic
=====================  ================================================================
``quantize``           float32 X -> Out (int8 for 1-8 bits, uint8 for unsigned 8, int16)
                       ``q = clamp(round_half_even(float64(x) / float64(scale)), lo, hi)``
                       with ``[lo, hi] = [-2^(bits-1), 2^(bits-1) - 1]`` (signed) or
                       ``[0, 2^bits - 1]`` (unsigned); ``bits`` 1 to 8 or 16 (signed).
                       ``bipolar`` (bits 1): ``q = +1 if x >= 0 else -1`` (real value
                       ``q * scale``).  Host side (float in).
``dequantize``         integer X -> float32 Out: ``float32(float64(x) * float64(s))``,
                       ``s`` = the ``scale`` attribute, or ``Scale[c]`` (float32 tensor,
                       channel ``c`` = index along ``axis``) when the Scale input is given.
``quantized_fc``       X int8/int16 [N, K], W int8/int16 [K, C], Bias int32 [C]
                       (optional) -> Out int32 [N, C]:
                       ``out[n, c] = wrap32(sum_k x[n, k] * w[k, c] + bias[c])``.
                       ``weight_bits`` (1-8 in int8, 16 in int16), ``weight_type``
                       (``signed``: W in ``[-(2^(b-1) - 1), 2^(b-1) - 1]``, 2 bits =
                       ternary; ``bipolar``: W in {-1, +1}, bits 1) and ``acc_bits`` (the
                       signed width the sums need) describe the operands; the arithmetic
                       is the same exact integer sum whatever they say.  With bipolar X and
                       W it is the XNOR / popcount form: encode -1 as bit 0 and +1 as bit
                       1, then ``sum_k x * w = 2 * popcount(xnor(x, w)) - K``.
``quantized_conv2d``   Input int8/int16 [N, Cin, H, W], Filter int8/int16
                       [M, Cin/g, kh, kw], Bias int32 [M] (optional) -> Output int32
                       [N, M, OH, OW]: conv2d's geometry (strides, paddings, dilations,
                       groups, padding_algorithm; see conv2d) with padding cells equal to
                       integer 0, ``out[n, m, i, j] = wrap32(sum over the window and the
                       group's input channels of x * w + bias[m])``.
``requantize``         X int32 (channel axis 1), Multiplier int32 [C] or [1], Shift
                       int32 [C] or [1] -> Out int8 (bits 1-8; uint8 for unsigned 8) or
                       int16 (bits 16), per element with ``m = Multiplier[c]``,
                       ``n = Shift[c]``:
                       ``p = x * m`` (fits 47 bits signed: |x| < 2^31, 0 <= m < 2^15);
                       ``r = (p + 2^(n-1)) >> n`` if ``n > 0`` else ``p`` (round half
                       up, toward +inf: -2.5 -> -2, 2.5 -> 3);
                       ``out = clamp(r, lo, hi)`` with the rails ``[-2^(bits-1),
                       2^(bits-1) - 1]`` (signed; ``lo = 0`` with relu) or ``[0, 2^bits -
                       1]`` (``signed`` False); ``bipolar`` (bits 1): ``out = +1 if r >= 0
                       else -1``.  Requires ``0 <= m <= 2^15 - 1`` and ``0 <= n <= 47``.
``multi_threshold``    X int32 (channel axis 1), Thresholds int32 [C, T] or [1, T]
                       (every row non-decreasing, 1 <= T <= 2^bits - 1) -> Out int8
                       (uint8 for unsigned 8 bits): ``out = out_bias + #{t : x >=
                       Thresholds[c, t]}``; ``bipolar`` (bits 1, T 1): ``out = +1 if x >=
                       Thresholds[c, 0] else -1``.  ``[out_bias, out_bias + T]`` must lie in
                       the signed / unsigned ``bits``-wide range.  It stands where a
                       ``requantize`` of a 1-4-bit activation would: the quantisation
                       pass (``QuantConfig(thresholds=True)``) computes thresholds that give
                       exactly requantize's output over the accumulator's reachable range
                       (docs/fixed_point.md); hardware compares instead of multiplying.
``quantized_pool2d``   X int8/int16 [N, C, H, W] -> Out, same dtype; pool2d's window
                       geometry.  max: the largest real cell (padding never wins; a
                       window with no real cell, possible with ceil_mode, gives the
                       dtype's lowest value).  avg: ``s`` = sum of the real cells,
                       ``d`` = their count (``exclusive``) or kh * kw, ``out =
                       floor((2 * s + d) / (2 * d))`` (round half up); global_pooling
                       pools all H x W cells (d = H * W).  sum: ``s`` as int32 (padding
                       cells are 0); the quantisation pass puts a ``requantize`` after it
                       whose multiplier divides by the window size and rescales (the
                       form the FPGA lowers: no divider in hardware).
``quantized_add``      X int8, Y int8 (same shape) -> Out int8: with attributes
                       ``mx, nx, my, ny`` (each input's scale over Out's as ``m * 2^-n``,
                       ``m`` in [0, 2^15 - 1], ``n`` in [0, 47]) and ``n = max(nx, ny)``:
                       ``r = (x * mx * 2^(n - nx) + y * my * 2^(n - ny) + 2^(n-1)) >> n``
                       (no rounding term when n = 0: round half up, exact sum);
                       ``out = clamp(r, 0 if relu else -128, 127)``.  A residual join.
``quantized_affine``   X int8/int16 [N, C, ...], Weight int8 [C], Bias int32 [C]
                       (optional) -> Out int32, X's shape: ``out[n, c, ...] =
                       wrap32(x * Weight[c] + Bias[c])``, a per-channel affine (a
                       batch norm or a per-channel multiply / add that folds into no
                       layer); the quantisation pass puts a ``requantize`` after it.
``quantized_table``    X int8, Table int8 [256] -> Out int8: ``out = Table[x + 128]``
                       (an element-wise function tabulated by the quantisation pass:
                       ``Table[q + 128] = clamp(round_half_even(f(q * s_in) / s_out),
                       -128, 127)``).
``quantized_concat``   X int8 (two or more, concat's shapes) -> Out int8: the X joined
                       along ``axis`` (concat's geometry), each X[i] first rescaled to
                       Out's scale with ``m = multipliers[i]``, ``n = shifts[i]`` as
                       requantize does: ``r = (x * m + 2^(n-1)) >> n`` (``x * m`` when
                       n = 0), ``out = clamp(r, 0 if relu else -128, 127)``.  ``m = 1,
                       n = 0`` passes an input already at Out's scale unchanged.
``relu`` on integers   ``max(x, 0)`` (the ordinary relu op; its kernel is exact on ints)
``reshape2``,          data movement only (the ordinary ops, on integer tensors)
``flatten2``,
``transpose2``,
``nearest_interp``     (copies: ``ir/ops/interp.py``'s exact index rule)
=====================  ================================================================

``wrap32(v)``: ``v`` reduced to two's-complement int32 (``((v + 2^31) mod 2^32) -
2^31``), what a 32-bit accumulator computes.  The quantisation pass checks
``K * max|w| * max|x| + max|bias| < 2^31`` for every layer, so it never wraps in
the programs it makes.

Real values: an integer tensor ``q`` with scale ``s`` stands for ``q * s``.  The
accumulator of a quantised layer has scale ``in_scale * weight_scale[c]``; the
requantize Multiplier/Shift approximate ``in_scale * weight_scale[c] / out_scale`` by
``m * 2^-n``.  Those scales are recorded as (informational) attributes: nothing in
the arithmetic above reads them.
"""

from __future__ import annotations

from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim
from .nn import (
    _CONV_ATTRS,
    PADDING_ALGORITHMS,
    attr_fail,
    conv_output_shape,
    pool_output_shape,
    verify_pool_ksize,
)

VarType = dtypes.VarType

#: integer dtypes an activation may have inside the quantised region
ACTIVATION_DTYPES = frozenset({VarType.INT8, VarType.UINT8, VarType.INT16})
#: the widths a quantised value may have: 1 to 8 bits (held in int8, or uint8 for
#: unsigned 8-bit values) and 16 (int16)
BITS = (1, 2, 3, 4, 5, 6, 7, 8, 16)
#: weight bits -> storage dtype (narrow weights are stored in int8: 4-bit in [-7, 7])
WEIGHT_DTYPE = {**{b: VarType.INT8 for b in BITS if b <= 8}, 16: VarType.INT16}
#: how a weight tensor's integers are read: symmetric signed, or bipolar {-1, +1}
WEIGHT_TYPES = ("signed", "bipolar")

#: requantize: the multiplier's largest value and the shift's range (docs/fixed_point.md)
MULTIPLIER_MAX = 2**15 - 1
SHIFT_MAX = 47
#: int32's rails (multi_threshold's thresholds, accumulators)
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def int_range(bits: int, signed: bool = True, bipolar: bool = False) -> tuple[int, int]:
    """``[lo, hi]`` of a ``bits``-wide integer: ``[-2^(bits-1), 2^(bits-1) - 1]``
    (signed), ``[0, 2^bits - 1]`` (unsigned), ``[-1, 1]`` (bipolar, bits 1: the values
    -1 and +1 only)."""
    if bipolar:
        return (-1, 1)
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)


def weight_range(bits: int, weight_type: str = "signed") -> tuple[int, int]:
    """``[lo, hi]`` of a weight: symmetric ``[-(2^(bits-1) - 1), 2^(bits-1) - 1]``
    (2 bits: ternary {-1, 0, 1}), or ``[-1, 1]`` for bipolar weights ({-1, +1})."""
    if weight_type == "bipolar":
        return (-1, 1)
    q = 2 ** (bits - 1) - 1
    return (-q, q)


def quantized_dtype(bits: int, signed: bool = True) -> int:
    """The VarType holding ``bits``-wide values: int8 for 1-8 bits (uint8 for unsigned
    8-bit values), int16 for 16."""
    if bits not in BITS:
        raise ValueError(f"{bits}-bit integers are not supported; use 1 to 8 or 16 bits")
    if bits == 16:
        if signed:
            return VarType.INT16
        raise ValueError("unsigned 16-bit integers have no tensor dtype; use signed=True "
                         "or at most 8 bits")
    return VarType.UINT8 if bits == 8 and not signed else VarType.INT8


def _check_kind(ctx: InferContext) -> None:
    """``bits`` / ``signed`` / ``bipolar`` of a quantize or requantize: a dtype exists and
    bipolar values are 1-bit."""
    if ctx.attr("bipolar") and ctx.attr("bits") != 1:
        attr_fail(ctx, f"bipolar values are 1-bit; got bits={ctx.attr('bits')} (use bits=1 "
                  "with bipolar=True, or bipolar=False)")
    try:
        quantized_dtype(ctx.attr("bits"), ctx.attr("signed"))
    except ValueError as e:
        attr_fail(ctx, str(e))


def _check_dtype(ctx: InferContext, slot: str, allowed: frozenset[int], what: str) -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype in allowed, f"input {slot} must be {what}, got {v.dtype_name}")


def _check_weight(ctx: InferContext, slot: str) -> None:
    bits = ctx.attr("weight_bits")
    want = WEIGHT_DTYPE[bits]
    v = ctx.input_var(slot)
    ctx.check(v.dtype == want, f"{slot} holds {bits}-bit weights, so it must be "
              f"{dtypes.name(want)}; got {v.dtype_name}")
    if "weight_type" in ctx.opdef._attr_map:
        wt = ctx.attr("weight_type")
        if wt == "bipolar" and bits != 1:
            attr_fail(ctx, f"bipolar weights are 1-bit; got weight_bits={bits} (use "
                      "weight_bits=1 with weight_type='bipolar')")
        if bits == 1 and wt != "bipolar":
            attr_fail(ctx, "1-bit weights are bipolar {-1, +1}: set weight_type='bipolar'")


def _check_bias(ctx: InferContext, channels: int) -> None:
    if not ctx.has_input("Bias"):
        return
    bs = ctx.input_shape("Bias")
    ctx.check(ctx.input_dtype("Bias") == VarType.INT32,
              f"Bias must be int32, got {ctx.input_var('Bias').dtype_name}")
    ctx.check(len(bs) == 1 and merge_dim(bs[0], channels) is not None,
              f"Bias must have shape [{channels}], got {bs}")


_SCALE_ATTRS = (
    Attr("in_scale", "float", 0.0, doc="informational: the input's scale (0: unknown)"),
    Attr("weight_scale", "floats", [],
         doc="informational: per-output-channel (or one) weight scales"),
    Attr("weight_bits", "int", 8, allowed=BITS,
         doc="weights' width: 1 to 8 are stored in int8, 16 in int16"),
)
#: quantized_fc / quantized_conv2d: how their weights are read, and the accumulator's need
_LAYER_ATTRS = (
    *_SCALE_ATTRS,
    Attr("weight_type", "string", "signed", allowed=WEIGHT_TYPES,
         doc="informational: 'signed' (symmetric, [-(2^(b-1) - 1), 2^(b-1) - 1]) or "
         "'bipolar' ({-1, +1}, weight_bits 1)"),
    Attr("acc_bits", "int", 32, min=2, max=32,
         doc="informational: the signed accumulator width the layer needs (from the input "
         "bits, the weight bits and the fan-in); the arithmetic is int32 whatever it says"),
)


# -- quantize / dequantize ---------------------------------------------------------

@define_op(
    "quantize", [Slot("X", doc="float32")], [Slot("Out", doc="int8, uint8 or int16")],
    [Attr("scale", "float", doc="real value of one integer step (> 0)"),
     Attr("bits", "int", 8, allowed=BITS, doc="1 to 8 (int8; uint8 for unsigned 8) or 16"),
     Attr("signed", "bool", True, doc="False: unsigned, [0, 2^bits - 1] (not 16 bits)"),
     Attr("bipolar", "bool", False, doc="bits 1: +1 where X >= 0, else -1")],
    doc="Out = clamp(round_half_even(float64(X) / scale), lo, hi), or the sign (+1 / -1) "
    "when bipolar: the entry of the quantised region (see the module docstring).  X must "
    "be finite.",
)
def _infer_quantize(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", dtypes.FLOAT_DTYPES, "float")
    if not ctx.attr("scale") > 0:
        attr_fail(ctx, f"scale must be > 0, got {ctx.attr('scale')}")
    _check_kind(ctx)
    x = ctx.input_var("X")
    ctx.set_output("Out", x.shape, quantized_dtype(ctx.attr("bits"), ctx.attr("signed")),
                   lod_level=x.lod_level)


@define_op(
    "dequantize",
    [Slot("X", doc="an integer tensor"),
     Slot("Scale", dispensable=True, doc="float32 [C]: per-channel scales along `axis`")],
    [Slot("Out", doc="float32")],
    [Attr("scale", "float", 1.0, doc="used when there is no Scale input"),
     Attr("axis", "int", 1, doc="the channel axis of the Scale input")],
    doc="Out = float32(float64(X) * scale) (or * Scale[c]): the exit of the quantised "
    "region.",
)
def _infer_dequantize(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", dtypes.INT_DTYPES, "an integer tensor")
    x = ctx.input_var("X")
    if ctx.has_input("Scale"):
        axis = ctx.attr("axis")
        ctx.check(0 <= axis < len(x.shape), f"axis {axis} out of range for X {list(x.shape)}")
        ss = ctx.input_shape("Scale")
        ctx.check(len(ss) == 1 and merge_dim(ss[0], x.shape[axis]) is not None,
                  f"Scale must have shape [{x.shape[axis]}] (X's axis {axis}), got {ss}")
        _check_dtype(ctx, "Scale", frozenset({VarType.FP32}), "float32")
    elif not ctx.attr("scale") > 0:
        attr_fail(ctx, f"scale must be > 0, got {ctx.attr('scale')}")
    ctx.set_output("Out", x.shape, VarType.FP32, lod_level=x.lod_level)


# -- quantized_fc / quantized_conv2d ------------------------------------------------

@define_op(
    "quantized_fc",
    [Slot("X", doc="int8/int16 [N, K]"), Slot("W", doc="int8/int16 [K, C]"),
     Slot("Bias", dispensable=True, doc="int32 [C]")],
    [Slot("Out", doc="int32 [N, C]")],
    _LAYER_ATTRS,
    doc="Out[n, c] = wrap32(sum_k X[n, k] * W[k, c] + Bias[c]) (see the module docstring).",
)
def _infer_quantized_fc(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", ACTIVATION_DTYPES, "int8, uint8 or int16")
    _check_weight(ctx, "W")
    xs, ws = ctx.input_shape("X"), ctx.input_shape("W")
    ctx.check(len(xs) == 2, f"X must be 2-D [N, K] (flatten2 it first), got shape {xs}")
    ctx.check(len(ws) == 2, f"W must be 2-D [K, C], got shape {ws}")
    ctx.check(merge_dim(xs[1], ws[0]) is not None,
              f"X has {xs[1]} columns, W {ws} has {ws[0]} rows")
    _check_bias(ctx, ws[1])
    ctx.set_output("Out", [xs[0], ws[1]], VarType.INT32,
                   lod_level=ctx.input_var("X").lod_level)


@define_op(
    "quantized_conv2d",
    [Slot("Input", doc="int8/int16 [N, C, H, W]"),
     Slot("Filter", doc="int8/int16 [M, C/groups, kh, kw]"),
     Slot("Bias", dispensable=True, doc="int32 [M]")],
    [Slot("Output", doc="int32 [N, M, OH, OW]")],
    [*_CONV_ATTRS, *_LAYER_ATTRS],
    doc="conv2d on integers with int32 accumulators, plus Bias[m] (see the module "
    "docstring); conv2d's attributes and output geometry.",
)
def _infer_quantized_conv2d(ctx: InferContext) -> None:
    _check_dtype(ctx, "Input", ACTIVATION_DTYPES, "int8, uint8 or int16")
    _check_weight(ctx, "Filter")
    xs, ws = ctx.input_shape("Input"), ctx.input_shape("Filter")
    ctx.check(len(xs) == 4, f"Input must be 4-D NCHW, got shape {xs}")
    ctx.check(len(ws) == 4, f"Filter must be 4-D [M, C/groups, kh, kw], got shape {ws}")
    out = conv_output_shape(ctx, xs, ws)
    _check_bias(ctx, ws[0])
    ctx.set_output("Output", out, VarType.INT32)


# -- requantize ------------------------------------------------------------------

@define_op(
    "requantize",
    [Slot("X", doc="int32, channel axis 1"),
     Slot("Multiplier", doc=f"int32 [C] or [1], each in [0, {MULTIPLIER_MAX}]"),
     Slot("Shift", doc=f"int32 [C] or [1], each in [0, {SHIFT_MAX}]")],
    [Slot("Out", doc="int8 (bits 1-8; uint8 for unsigned 8) or int16 (bits 16)")],
    [Attr("relu", "bool", False, doc="clamp at 0 from below (a folded ReLU)"),
     Attr("bits", "int", 8, allowed=BITS),
     Attr("signed", "bool", True, doc="False: unsigned rails [0, 2^bits - 1]"),
     Attr("bipolar", "bool", False, doc="bits 1: +1 where the rounded value is >= 0, "
          "else -1"),
     Attr("out_scale", "float", 0.0, doc="informational: Out's scale (0: unknown)"),
     Attr("in_scale", "floats", [],
          doc="informational: X's scale per channel (in_scale * weight_scale[c])")],
    doc="Out = clamp(((X * m) + 2^(n-1)) >> n, lo, hi) per channel, with the rails of "
    "bits / signed / relu, or its sign (+1 / -1) when bipolar (see the module "
    "docstring): round half up, saturating.",
)
def _infer_requantize(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", frozenset({VarType.INT32}), "int32")
    xs = ctx.input_shape("X")
    ctx.check(len(xs) >= 2, f"X must have rank >= 2 (channel axis 1), got shape {xs}")
    for slot in ("Multiplier", "Shift"):
        _check_dtype(ctx, slot, frozenset({VarType.INT32}), "int32")
        s = ctx.input_shape(slot)
        ctx.check(len(s) == 1 and (s[0] == 1 or merge_dim(s[0], xs[1]) is not None),
                  f"{slot} must have shape [1] or [{xs[1]}] (X's channels), got {s}")
    _check_kind(ctx)
    if ctx.attr("bipolar") and ctx.attr("relu"):
        attr_fail(ctx, "relu and bipolar exclude each other (a bipolar value is -1 or +1); "
                  "drop relu, or make the output unsigned (signed=False)")
    x = ctx.input_var("X")
    ctx.set_output("Out", xs, quantized_dtype(ctx.attr("bits"), ctx.attr("signed")),
                   lod_level=x.lod_level)


# -- multi_threshold -----------------------------------------------------------------

@define_op(
    "multi_threshold",
    [Slot("X", doc="int32 (or another integer dtype), channel axis 1"),
     Slot("Thresholds", doc="int32 [C, T] or [1, T] (shared), each row non-decreasing, "
          "1 <= T <= 2^bits - 1")],
    [Slot("Out", doc="int8 (uint8 for unsigned 8 bits), X's shape")],
    [Attr("bits", "int", 4, allowed=tuple(b for b in BITS if b <= 8)),
     Attr("signed", "bool", True, doc="the output's rails: signed or unsigned bits-wide"),
     Attr("bipolar", "bool", False, doc="bits 1, T 1: +1 where X >= the threshold, else -1 "
          "(out_bias unused)"),
     Attr("out_bias", "int", 0, doc="the output with no threshold crossed; the outputs "
          "[out_bias, out_bias + T] must lie within the bits / signed range"),
     Attr("out_scale", "float", 0.0, doc="informational: Out's scale (0: unknown)")],
    doc="Out[n, c, ...] = out_bias + #{t : X[n, c, ...] >= Thresholds[c, t]} (or +1 / -1 "
    "when bipolar): an activation quantiser that compares instead of multiplying (see "
    "the module docstring).",
)
def _infer_multi_threshold(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", dtypes.INT_DTYPES, "an integer tensor (int32 accumulators)")
    _check_dtype(ctx, "Thresholds", frozenset({VarType.INT32}), "int32")
    xs, ts = ctx.input_shape("X"), ctx.input_shape("Thresholds")
    ctx.check(len(xs) >= 2, f"X must have rank >= 2 (channel axis 1), got shape {xs}")
    ctx.check(len(ts) == 2 and (ts[0] == 1 or merge_dim(ts[0], xs[1]) is not None),
              f"Thresholds must have shape [{xs[1]}, T] (one row per channel of X) or "
              f"[1, T], got {ts}")
    bits, signed, bipolar = ctx.attr("bits"), ctx.attr("signed"), ctx.attr("bipolar")
    if bipolar and bits != 1:
        attr_fail(ctx, f"bipolar outputs are 1-bit; got bits={bits}")
    try:
        dt = quantized_dtype(bits, signed)
    except ValueError as e:
        attr_fail(ctx, str(e))
    t = ts[1] if len(ts) == 2 else -1
    if t >= 0:
        most = 1 if bipolar else 2**bits - 1
        ctx.check(1 <= t <= most, f"Thresholds has {t} columns; a {bits}-bit output takes "
                  f"1 to {most} thresholds per channel")
        if not bipolar:
            lo, hi = int_range(bits, signed)
            b = ctx.attr("out_bias")
            if not (lo <= b and b + t <= hi):
                attr_fail(ctx, f"outputs [out_bias, out_bias + T] = [{b}, {b + t}] leave "
                          f"the {'' if signed else 'un'}signed {bits}-bit range [{lo}, {hi}]; "
                          f"use out_bias in [{lo}, {hi - t}]")
    x = ctx.input_var("X")
    ctx.set_output("Out", xs, dt, lod_level=x.lod_level)


# -- quantized_pool2d ---------------------------------------------------------------

@define_op(
    "quantized_pool2d", [Slot("X", doc="int8/int16 [N, C, H, W]")],
    [Slot("Out", doc="X's dtype, [N, C, OH, OW]")],
    [
        Attr("pooling_type", "string", "max", allowed=("max", "avg", "sum")),
        Attr("ksize", "ints", doc="[kh, kw] (>= 1 unless global_pooling)"),
        Attr("global_pooling", "bool", False, doc="pool the whole H x W"),
        Attr("strides", "ints", [1, 1], min=1),
        Attr("paddings", "ints", [0, 0], doc="[pad_h, pad_w] or [top, bottom, left, right]",
             min=0),
        Attr("exclusive", "bool", True, doc="avg: divide by the real cells only"),
        Attr("ceil_mode", "bool", False),
        Attr("padding_algorithm", "string", "EXPLICIT", allowed=PADDING_ALGORITHMS),
        Attr("data_format", "string", "NCHW", allowed=("NCHW", "AnyLayout")),
    ],
    verify=verify_pool_ksize,
    doc="Integer max / average / sum pooling with pool2d's geometry; avg rounds half up, "
    "sum gives int32 (see the module docstring).  max and avg keep X's scale.",
)
def _infer_quantized_pool2d(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", ACTIVATION_DTYPES, "int8, uint8 or int16")
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 4, f"X must be 4-D NCHW, got shape {xs}")
    out = pool_output_shape(ctx, xs)
    dtype = VarType.INT32 if ctx.attr("pooling_type") == "sum" else ctx.input_dtype("X")
    ctx.set_output("Out", out, dtype)


# -- quantized_table ---------------------------------------------------------------

@define_op(
    "quantized_table",
    [Slot("X", doc="int8"), Slot("Table", doc="int8 [256], persistable: Table[x + 128]")],
    [Slot("Out", doc="int8, X's shape")],
    [Attr("function", "string", "", doc="informational: the op tabulated (sigmoid...)"),
     Attr("in_scale", "float", 0.0, doc="informational: X's scale"),
     Attr("out_scale", "float", 0.0, doc="informational: Out's scale (0: unknown)")],
    doc="Out = Table[X + 128] element-wise: an element-wise function of one int8 value, "
    "tabulated for all 256 inputs by the quantisation pass.",
)
def _infer_quantized_table(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", frozenset({VarType.INT8}), "int8")
    _check_dtype(ctx, "Table", frozenset({VarType.INT8}), "int8")
    t = ctx.input_shape("Table")
    ctx.check(len(t) == 1 and merge_dim(t[0], 256) is not None,
              f"Table must have shape [256], got {t}")
    x = ctx.input_var("X")
    ctx.set_output("Out", ctx.input_shape("X"), VarType.INT8, lod_level=x.lod_level)


# -- quantized_add -------------------------------------------------------------------

@define_op(
    "quantized_add",
    [Slot("X", doc="int8"), Slot("Y", doc="int8, X's shape")],
    [Slot("Out", doc="int8, X's shape")],
    [Attr("x_multiplier", "int", doc=f"X's rescale multiplier, in [0, {MULTIPLIER_MAX}]"),
     Attr("x_shift", "int", doc=f"X's rescale shift, in [0, {SHIFT_MAX}]"),
     Attr("y_multiplier", "int", doc=f"Y's rescale multiplier, in [0, {MULTIPLIER_MAX}]"),
     Attr("y_shift", "int", doc=f"Y's rescale shift, in [0, {SHIFT_MAX}]"),
     Attr("relu", "bool", False, doc="clamp at 0 from below (a folded ReLU)"),
     Attr("out_scale", "float", 0.0, doc="informational: Out's scale (0: unknown)")],
    doc="Out = clamp((X * mx * 2^(n - nx) + Y * my * 2^(n - ny) + 2^(n-1)) >> n, 0 or "
    "-128, 127) with n = max(nx, ny): both inputs rescaled to Out's scale, one rounding "
    "(half up), saturating (see the module docstring).",
)
def _infer_quantized_add(ctx: InferContext) -> None:
    for slot in ("X", "Y"):
        _check_dtype(ctx, slot, frozenset({VarType.INT8}), "int8")
    xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
    ctx.check(len(xs) == len(ys) and all(merge_dim(a, b) is not None for a, b in zip(xs, ys)),
              f"X {xs} and Y {ys} must have the same shape")
    for a, hi in (("x_multiplier", MULTIPLIER_MAX), ("x_shift", SHIFT_MAX),
                  ("y_multiplier", MULTIPLIER_MAX), ("y_shift", SHIFT_MAX)):
        ctx.check(0 <= ctx.attr(a) <= hi, f"{a} {ctx.attr(a)} must be in [0, {hi}]")
    x = ctx.input_var("X")
    ctx.set_output("Out", xs, VarType.INT8, lod_level=x.lod_level)


# -- quantized_concat ----------------------------------------------------------------

@define_op(
    "quantized_concat",
    [Slot("X", duplicable=True, doc="int8, two or more")],
    [Slot("Out", doc="int8, the X joined along axis")],
    [Attr("axis", "int", 1, doc="negative counts from the end (as concat)"),
     Attr("multipliers", "ints", doc=f"each X's rescale multiplier, in [0, {MULTIPLIER_MAX}]",
          min=0, max=MULTIPLIER_MAX),
     Attr("shifts", "ints", doc=f"each X's rescale shift, in [0, {SHIFT_MAX}]", min=0,
          max=SHIFT_MAX),
     Attr("relu", "bool", False, doc="clamp at 0 from below (a folded ReLU)"),
     Attr("out_scale", "float", 0.0, doc="informational: Out's scale (0: unknown)")],
    doc="Out = concat(clamp((X[i] * m[i] + 2^(n[i]-1)) >> n[i], 0 or -128, 127), axis): "
    "each input rescaled to Out's scale as requantize does, then joined (see the module "
    "docstring).",
)
def _infer_quantized_concat(ctx: InferContext) -> None:
    from .tensor import _concat

    xs = ctx.input_vars("X")
    ctx.check(len(xs) >= 2, f"needs two or more inputs in X, got {len(xs)}")
    for i, v in enumerate(xs):
        ctx.check(v.dtype == VarType.INT8, f"X[{i}] {v.name!r} must be int8, got "
                  f"{v.dtype_name}")
    for a in ("multipliers", "shifts"):
        ctx.check(len(ctx.attr(a)) == len(xs), f"{a} has {len(ctx.attr(a))} values for "
                  f"{len(xs)} inputs; give one per input")
    _concat(ctx)


# -- quantized_affine ----------------------------------------------------------------

@define_op(
    "quantized_affine",
    [Slot("X", doc="int8/int16 [N, C, ...], channel axis 1"),
     Slot("Weight", doc="int8 [C]: one factor per channel"),
     Slot("Bias", dispensable=True, doc="int32 [C]")],
    [Slot("Out", doc="int32, X's shape")],
    _SCALE_ATTRS,
    doc="Out[n, c, ...] = wrap32(X[n, c, ...] * Weight[c] + Bias[c]): a per-channel integer "
    "affine (a batch norm, or a multiply / add by a per-channel constant, that folds into no "
    "layer); a requantize follows (see the module docstring).",
)
def _infer_quantized_affine(ctx: InferContext) -> None:
    _check_dtype(ctx, "X", ACTIVATION_DTYPES, "int8, uint8 or int16")
    _check_weight(ctx, "Weight")
    xs, ws = ctx.input_shape("X"), ctx.input_shape("Weight")
    ctx.check(len(xs) >= 2, f"X must have rank >= 2 (channel axis 1), got shape {xs}")
    ctx.check(len(ws) == 1 and merge_dim(ws[0], xs[1]) is not None,
              f"Weight must have shape [{xs[1]}] (X's channels), got {ws}")
    _check_bias(ctx, xs[1])
    ctx.set_output("Out", xs, VarType.INT32, lod_level=ctx.input_var("X").lod_level)


def _declare_grads() -> None:
    from ..grad import no_grad

    no_grad("integer", "quantize", "dequantize", "quantized_fc", "quantized_conv2d",
            "requantize", "quantized_pool2d", "quantized_table", "quantized_add",
            "quantized_concat", "quantized_affine", "multi_threshold")


_declare_grads()


def _declare_categories() -> None:
    from ..registry import mark_category

    mark_category("quantised", "quantized_fc", "quantized_conv2d", "requantize",
                  "quantized_pool2d", "quantized_table", "quantized_add", "quantized_concat",
                  "quantized_affine", "multi_threshold")


_declare_categories()

__all__ = ["ACTIVATION_DTYPES", "BITS", "INT32_MAX", "INT32_MIN", "MULTIPLIER_MAX",
           "SHIFT_MAX", "WEIGHT_DTYPE", "WEIGHT_TYPES", "int_range", "quantized_dtype",
           "weight_range"]
