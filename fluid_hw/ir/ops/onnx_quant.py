"""Quantisation ops as ONNX and QONNX define them, for imported quantised models.

fluid-hw's own fixed-point ops (``ir/ops/quant.py``, docs/fixed_point.md) are
symmetric, round their requantisation half up and rescale by ``m * 2^-n``: the
arithmetic an FPGA runs.  ONNX's quantised operators have zero points, round half to
even in floating point and take the scales as tensors; the ops below compute exactly
what the ONNX operator specification (and its reference implementation) computes,
so an imported model runs as written.  ``passes/qdq_fold.py`` turns the patterns it
recognises into fluid-hw's fixed-point ops for the FPGA.

Notation: ``rne`` = round half to even, ``sat_T`` = clamp to the range of the integer
type ``T``; a Scale or ZeroPoint with one value applies to every element, one with
``C`` values (1-D) along ``axis``.

=====================  ================================================================
op                     arithmetic
=====================  ================================================================
``quantize_linear``    X float -> Out int8/uint8/int16/int32 (``out_dtype``):
                       ``sat(rne(x / scale) + zp)``; ``x / scale`` in X's float type
                       (ONNX QuantizeLinear).
``dequantize_linear``  X int -> float32 ``(float32(x) - float32(zp)) * scale`` in float32
                       (ONNX DequantizeLinear; an int32 X beyond 2^24 rounds to float32
                       first, as the specification's reference does).
``matmul_integer``     A, B int8/uint8 -> int32: ``(A - a_zp) @ (B - b_zp)`` exact and
                       wrapped to int32; ``a_zp`` one value or one per row of A, ``b_zp``
                       one value or one per column of B (ONNX MatMulInteger).
``conv_integer``       X, W int8/uint8 -> int32: conv2d of ``X - x_zp`` by ``W - w_zp``
                       (``w_zp`` one value or one per output channel), padding cells 0
                       after the subtraction, conv2d's geometry (ONNX ConvInteger).
``requantize_linear``  X int32, AScale, BScale, YScale float32, YZeroPoint ->
                       int8/uint8: ``M = float32(float32(a_s * b_s) / y_s)``,
                       ``sat(rne(float64(x) * M) + y_zp)`` (the integer ends of ONNX
                       QLinearMatMul / QLinearConv; ``b_s`` may be per channel along
                       ``axis``); ``relu``: the lower rail is ``y_zp`` (a Relu
                       before the output's QuantizeLinear).
``int_quant``          QONNX IntQuant (``Quant``): float X -> float:
                       ``q = round_mode(clamp(x / scale + zeropt, lo, hi))``,
                       ``out = (q - zeropt) * scale`` with ``[lo, hi]`` from ``bits``,
                       ``signed``, ``narrow``.
``bipolar_quant``      QONNX BipolarQuant: ``(x >= 0 ? 1 : -1) * scale``.
``trunc_quant``        QONNX Trunc (versions 1 and 2): ``q = rne(x / scale + zeropt)``;
                       ``t = 2^(in_bits - out_bits)`` (v1) or ``2^rne(log2(out_scale /
                       scale))`` (v2); ``y = round_mode(q / t)`` (v2 clamps ``q / t``
                       to the output range first); ``out = (y - zeropt) * scale`` (v1) or
                       ``(y - zeropt / t) * out_scale`` (v2).
=====================  ================================================================
"""

from __future__ import annotations

from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim
from .nn import _CONV_ATTRS, attr_fail, conv_output_shape

VarType = dtypes.VarType

#: the integer types a quantised ONNX tensor may have in fluid-hw
QUANT_DTYPES = (VarType.INT8, VarType.UINT8, VarType.INT16, VarType.INT32)
_LOW = frozenset({VarType.INT8, VarType.UINT8})
#: QONNX rounding modes (upper case)
ROUNDING_MODES = ("ROUND", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN")


def int_bounds(bits: int, signed: bool, narrow: bool) -> tuple[int, int]:
    """QONNX's integer range: signed ``[-2^(b-1) (+1 if narrow), 2^(b-1) - 1]``,
    unsigned ``[0, 2^b - 1 (-1 if narrow)]``."""
    if signed:
        return -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1 - int(narrow)


def _check_param(ctx: InferContext, slot: str, x_shape: list[int], axis: int,
                 what: str, block: int = 0) -> None:
    """A Scale/ZeroPoint input: one value, or 1-D with X's size along ``axis``, or
    (``block`` > 0) X's shape with ``ceil(dim / block)`` along ``axis``."""
    if not ctx.has_input(slot):
        return
    s = ctx.input_shape(slot)
    if block > 0:
        want = list(x_shape)
        want[axis] = -(-want[axis] // block) if want[axis] >= 0 else -1
        ctx.check(len(s) == len(want) and all(merge_dim(a, b) is not None
                                              for a, b in zip(s, want)),
                  f"{slot} ({what}, blocks of {block}) must have shape {want}, got {s}")
        return
    if len(s) == 0 or (len(s) == 1 and s[0] == 1):
        return
    ctx.check(len(s) == 1, f"{slot} ({what}) must be one value or 1-D, got shape {s}")
    ctx.check(-len(x_shape) <= axis < len(x_shape),
              f"axis {axis} is out of range for X of rank {len(x_shape)}")
    ctx.check(merge_dim(s[0], x_shape[axis]) is not None,
              f"{slot} has {s[0]} values, X has {x_shape[axis]} along axis {axis}")


def _check_zero_point(ctx: InferContext, slot: str, want: int | None) -> None:
    if ctx.has_input(slot) and want is not None:
        got = ctx.input_var(slot)
        ctx.check(got.dtype == want, f"{slot} must have the quantised tensor's type "
                  f"{dtypes.name(want)}, got {got.dtype_name}")


@define_op(
    "quantize_linear",
    [Slot("X", doc="float"), Slot("Scale", doc="float: one value or [C] along axis"),
     Slot("ZeroPoint", dispensable=True, doc="out_dtype: one value or [C]")],
    [Slot("Out")],
    [Attr("axis", "int", 1, doc="the axis of per-axis Scale/ZeroPoint"),
     Attr("block_size", "int", 0, min=0,
          doc="> 0: blocked quantisation, one Scale/ZeroPoint per block along axis"),
     Attr("out_dtype", "int", VarType.UINT8, allowed=QUANT_DTYPES,
          doc="the output type (ZeroPoint's type when given)")],
    doc="Out = sat(rne(X / Scale) + ZeroPoint): ONNX QuantizeLinear (see the module "
    "docstring).",
)
def _infer_quantize_linear(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype in dtypes.FLOAT_DTYPES, f"X must be float, got {x.dtype_name}")
    out = ctx.attr("out_dtype")
    b = ctx.attr("block_size")
    _check_param(ctx, "Scale", list(x.shape), ctx.attr("axis"), "the scale", b)
    _check_param(ctx, "ZeroPoint", list(x.shape), ctx.attr("axis"), "the zero point", b)
    _check_zero_point(ctx, "ZeroPoint", out)
    ctx.set_output("Out", x.shape, out, lod_level=x.lod_level)


@define_op(
    "dequantize_linear",
    [Slot("X", doc="int8/uint8/int16/int32"), Slot("Scale", doc="float32"),
     Slot("ZeroPoint", dispensable=True, doc="X's type")],
    [Slot("Out", doc="float32")],
    [Attr("axis", "int", 1, doc="the axis of per-axis Scale/ZeroPoint"),
     Attr("block_size", "int", 0, min=0,
          doc="> 0: blocked quantisation, one Scale/ZeroPoint per block along axis")],
    doc="Out = (float32(X) - ZeroPoint) * Scale: ONNX DequantizeLinear.",
)
def _infer_dequantize_linear(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype in QUANT_DTYPES, f"X must be int8, uint8, int16 or int32, got "
              f"{x.dtype_name}")
    b = ctx.attr("block_size")
    _check_param(ctx, "Scale", list(x.shape), ctx.attr("axis"), "the scale", b)
    _check_param(ctx, "ZeroPoint", list(x.shape), ctx.attr("axis"), "the zero point", b)
    _check_zero_point(ctx, "ZeroPoint", x.dtype)
    ctx.set_output("Out", x.shape, ctx.input_dtype("Scale"), lod_level=x.lod_level)


def _check_low(ctx: InferContext, slot: str) -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype in _LOW, f"{slot} must be int8 or uint8, got {v.dtype_name}")


@define_op(
    "matmul_integer",
    [Slot("A", doc="int8/uint8 [..., M, K]"), Slot("B", doc="int8/uint8 [..., K, N]"),
     Slot("AZeroPoint", dispensable=True, doc="A's type: one value or [M]"),
     Slot("BZeroPoint", dispensable=True, doc="B's type: one value or [N]")],
    [Slot("Out", doc="int32")],
    doc="Out = (A - a_zp) @ (B - b_zp) in exact integers, wrapped to int32, numpy's "
    "matmul rules: ONNX MatMulInteger.",
)
def _infer_matmul_integer(ctx: InferContext) -> None:
    for s in ("A", "B"):
        _check_low(ctx, s)
    a, b = ctx.input_shape("A"), ctx.input_shape("B")
    ctx.check(len(a) >= 1 and len(b) >= 1, f"A {a} and B {b} must not be scalars")
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    ctx.check(merge_dim(a2[-1], b2[-2]) is not None,
              f"A {a} has {a2[-1]} columns, B {b} has {b2[-2]} rows")
    _check_zero_point(ctx, "AZeroPoint", ctx.input_dtype("A"))
    _check_zero_point(ctx, "BZeroPoint", ctx.input_dtype("B"))
    from .onnx_extra import broadcast_shapes

    batch = broadcast_shapes(a2[:-2], b2[:-2])
    ctx.check(batch is not None, f"batch dims of A {a} and B {b} do not broadcast")
    assert batch is not None
    out = [*batch, a2[-2], b2[-1]]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    ctx.set_output("Out", out, VarType.INT32)


@define_op(
    "conv_integer",
    [Slot("Input", doc="int8/uint8 [N, C, H, W]"),
     Slot("Filter", doc="int8/uint8 [M, C/groups, kh, kw]"),
     Slot("InputZeroPoint", dispensable=True, doc="Input's type: one value"),
     Slot("FilterZeroPoint", dispensable=True, doc="Filter's type: one value or [M]")],
    [Slot("Output", doc="int32 [N, M, OH, OW]")],
    _CONV_ATTRS,
    doc="conv2d of (Input - x_zp) by (Filter - w_zp) in exact integers (padding cells 0 "
    "after the subtraction), wrapped to int32: ONNX ConvInteger.",
)
def _infer_conv_integer(ctx: InferContext) -> None:
    for s in ("Input", "Filter"):
        _check_low(ctx, s)
    xs, ws = ctx.input_shape("Input"), ctx.input_shape("Filter")
    ctx.check(len(xs) == 4, f"Input must be 4-D NCHW, got shape {xs}")
    ctx.check(len(ws) == 4, f"Filter must be 4-D [M, C/groups, kh, kw], got shape {ws}")
    _check_zero_point(ctx, "InputZeroPoint", ctx.input_dtype("Input"))
    _check_zero_point(ctx, "FilterZeroPoint", ctx.input_dtype("Filter"))
    _check_param(ctx, "FilterZeroPoint", ws, 0, "the filter's zero point")
    ctx.set_output("Output", conv_output_shape(ctx, xs, ws), VarType.INT32)


@define_op(
    "requantize_linear",
    [Slot("X", doc="int32 accumulator"), Slot("AScale", doc="float32, one value"),
     Slot("BScale", doc="float32: one value or [C] along axis"),
     Slot("YScale", doc="float32, one value"),
     Slot("YZeroPoint", dispensable=True, doc="int8/uint8, one value")],
    [Slot("Out")],
    [Attr("axis", "int", 1, doc="the channel axis of a per-channel BScale"),
     Attr("out_dtype", "int", VarType.UINT8, allowed=(VarType.INT8, VarType.UINT8)),
     Attr("relu", "bool", False, doc="a Relu before the output's quantiser: the lower "
          "rail is y_zp")],
    doc="Out = sat(rne(float64(X) * float32(a_s * b_s / y_s)) + y_zp): the output end "
    "of ONNX QLinearMatMul and QLinearConv.",
)
def _infer_requantize_linear(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype == VarType.INT32, f"X must be int32, got {x.dtype_name}")
    for s in ("AScale", "YScale", "YZeroPoint"):
        _check_param(ctx, s, [], 0, "a per-tensor value")
    _check_param(ctx, "BScale", list(x.shape), ctx.attr("axis"), "the weight scale")
    _check_zero_point(ctx, "YZeroPoint", ctx.attr("out_dtype"))
    ctx.set_output("Out", x.shape, ctx.attr("out_dtype"), lod_level=x.lod_level)


def _float_same(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype in dtypes.FLOAT_DTYPES, f"X must be float, got {x.dtype_name}")
    ctx.set_output("Out", x.shape, x.dtype, lod_level=x.lod_level)


@define_op(
    "int_quant",
    [Slot("X", doc="float"), Slot("Scale", doc="float, broadcast to X"),
     Slot("ZeroPt", doc="float, broadcast to X")],
    [Slot("Out", doc="X's type")],
    [Attr("bits", "int", min=1, max=32, doc="the bit width (QONNX's bitwidth input)"),
     Attr("signed", "bool", True), Attr("narrow", "bool", False),
     Attr("rounding_mode", "string", "ROUND", allowed=ROUNDING_MODES)],
    doc="QONNX IntQuant (Quant): fake quantisation to `bits`-wide integers (see the "
    "module docstring).",
)
def _infer_int_quant(ctx: InferContext) -> None:
    if ctx.attr("bits") < 2 and ctx.attr("signed") and ctx.attr("narrow"):
        attr_fail(ctx, "a narrow signed 1-bit range is empty; use BipolarQuant")
    _float_same(ctx)


@define_op(
    "bipolar_quant", [Slot("X", doc="float"), Slot("Scale", doc="float, broadcast to X")],
    [Slot("Out", doc="X's type")],
    doc="QONNX BipolarQuant: Out = (X >= 0 ? 1 : -1) * Scale.",
)
def _infer_bipolar_quant(ctx: InferContext) -> None:
    _float_same(ctx)


@define_op(
    "trunc_quant",
    [Slot("X", doc="float"), Slot("Scale", doc="float"), Slot("ZeroPt", doc="float"),
     Slot("OutScale", dispensable=True, doc="float (version 2)")],
    [Slot("Out", doc="X's type")],
    [Attr("in_bits", "int", min=1, max=32), Attr("out_bits", "int", min=1, max=32),
     Attr("version", "int", 2, allowed=(1, 2)),
     Attr("signed", "bool", True), Attr("narrow", "bool", False),
     Attr("rounding_mode", "string", "FLOOR", allowed=ROUNDING_MODES)],
    doc="QONNX Trunc: drops low bits of a quantised value (see the module docstring).",
)
def _infer_trunc_quant(ctx: InferContext) -> None:
    ctx.check((ctx.attr("version") == 2) == ctx.has_input("OutScale"),
              "Trunc version 2 takes OutScale, version 1 does not")
    _float_same(ctx)


def _declare_grads() -> None:
    from ..grad import no_grad

    # the QONNX quantisers are step functions (zero gradient almost everywhere); training
    # through them is the fake-quantise ops' job (straight-through estimators)
    no_grad("integer", "quantize_linear", "dequantize_linear", "matmul_integer",
            "conv_integer", "requantize_linear", "int_quant", "bipolar_quant", "trunc_quant")


_declare_grads()
