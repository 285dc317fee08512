"""Converters of quantised ONNX: QuantizeLinear / DequantizeLinear (QDQ models, as
``onnxruntime.quantization.quantize_static`` writes them), the integer-op form
(QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger, com.microsoft QGemm and
QLinearAdd) and QONNX's IntQuant (Quant) / BipolarQuant / Trunc.

Each becomes the ops of ``ir/ops/onnx_quant.py``, which compute what the ONNX
specification computes.  ``_import_ops`` adds :data:`QUANT` to its import table; the
importer looks up ops of other domains in :data:`DOMAIN_IMPORTERS` by (domain, op
type).  DequantizeLinear is never folded at import time (:data:`KEEP_AS_OPS`): an
int8 weight and its scale stay visible, so ``passes/qdq_fold.py`` can turn the layer
into fluid-hw's integer layers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.ops.onnx_quant import ROUNDING_MODES
from ._context import NodeCtx
from ._dtypes import np_dtype_of, onnx_type_name
from ._import_ops import (
    OpImport,
    _explicit_pads,
    _finish_2d,
    _ints_attr,
    _pairs_2d,
    _to_2d,
)

#: the integer types fluid-hw holds for quantised tensors
_HELD: set[np.dtype] = {np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)}
#: ONNX ops evaluated at run time even when their inputs are constants
KEEP_AS_OPS = frozenset({"DequantizeLinear"})
#: QONNX's domains (Brevitas exports to onnx.brevitas, older FINN to finn.custom_op)
QONNX_DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas")


def _quant_dtype(ctx: NodeCtx, what: str, dt: np.dtype, allowed: set[np.dtype]) -> int:
    if dt not in allowed:
        ctx.fail(f"{what} is {dt}; fluid-hw holds {sorted(str(d) for d in allowed)} "
                 "quantised tensors")
    return dtypes.to_enum(dt)


def _block(ctx: NodeCtx) -> int:
    b = int(ctx.attr("block_size", 0) or 0)
    if b < 0:
        ctx.fail(f"block_size={b} is negative")
    return b


def _axis(ctx: NodeCtx, rank: int, scale: int = 1) -> int:
    """The per-axis axis (ignored, 0, when the scale is one value)."""
    axis = int(ctx.attr("axis", 1))
    if rank == 0 or (int(np.prod(ctx.shape(scale))) == 1 and not _block(ctx)):
        return 0
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _scale_var(ctx: NodeCtx, i: int) -> str:
    if ctx.dtype(i).kind != "f":
        ctx.fail(f"the scale (input #{i}) is {ctx.dtype(i)}; it must be a float tensor")
    return ctx.var(i)


def _quantize_linear(ctx: NodeCtx) -> None:
    if ctx.attr("precision"):
        ctx.fail("the precision attribute is not supported (the division is in X's type)")
    want = ctx.attr("output_dtype")
    if ctx.has(2):
        out = ctx.dtype(2)
    elif want:
        got = np_dtype_of(int(want))
        if got is None:
            ctx.fail(f"output_dtype {onnx_type_name(int(want))} is a type fluid-hw tensors "
                     "cannot hold (int8, uint8 and int16 quantised tensors are)")
        out = got
    else:
        out = np.dtype(np.uint8)
    if ctx.dtype(0).kind != "f":
        ctx.fail(f"X is {ctx.dtype(0)}; QuantizeLinear takes float input")
    if ctx.dtype(1) != ctx.dtype(0):
        ctx.fail(f"the scale is {ctx.dtype(1)} and X {ctx.dtype(0)}; fluid-hw divides in "
                 "X's type and needs both the same")
    ins = {"X": ctx.var(0), "Scale": _scale_var(ctx, 1)}
    if ctx.has(2):
        ins["ZeroPoint"] = ctx.var(2)
    ctx.emit("quantize_linear", ins,
             {"axis": _axis(ctx, ctx.rank(0)), "block_size": _block(ctx),
              "out_dtype": _quant_dtype(ctx, "the output type", out, _HELD)}, out=0)


def _dequantize_linear(ctx: NodeCtx) -> None:
    _quant_dtype(ctx, "X", ctx.dtype(0), _HELD | {np.dtype(np.int32)})
    scale_dt = ctx.dtype(1)
    if scale_dt != np.float32:
        ctx.fail(f"the scale is {scale_dt}; fluid-hw dequantises to float32 only")
    want = ctx.attr("output_dtype")
    if want and int(want) != 1:
        ctx.fail(f"output_dtype {onnx_type_name(int(want))}: fluid-hw dequantises to float32")
    ins = {"X": ctx.var(0), "Scale": ctx.var(1)}
    if ctx.has(2):
        ins["ZeroPoint"] = ctx.var(2)
    ctx.emit("dequantize_linear", ins,
             {"axis": _axis(ctx, ctx.rank(0)), "block_size": _block(ctx)}, out=0)


_LOW: set[np.dtype] = {np.dtype(np.int8), np.dtype(np.uint8)}


def _zp(ctx: NodeCtx, i: int, slot: str, ins: dict[str, Any]) -> None:
    if ctx.has(i):
        ins[slot] = ctx.var(i)


def _matmul_integer(ctx: NodeCtx, a: int = 0, b: int = 1, azp: int = 2, bzp: int = 3,
                    out: int | None = 0) -> str:
    for i in (a, b):
        _quant_dtype(ctx, f"input #{i}", ctx.dtype(i), _LOW)
    ins: dict[str, Any] = {"A": ctx.var(a), "B": ctx.var(b)}
    _zp(ctx, azp, "AZeroPoint", ins)
    _zp(ctx, bzp, "BZeroPoint", ins)
    if ctx.has(azp) and len(ctx.shape(azp)) > 1:
        ctx.fail(f"the zero point of A has shape {ctx.shape(azp)}; fluid-hw takes one value "
                 "or one per row (1-D)")
    return ctx.emit("matmul_integer", ins, out=out)


def _conv_integer(ctx: NodeCtx, x: int = 0, w: int = 1, xzp: int = 2, wzp: int = 3,
                  out: int | None = 0) -> str:
    """conv_integer of inputs ``x``/``w`` (their zero points ``xzp``/``wzp``), the
    geometry from the node's attributes as Conv's; 1-D convolutions as 2-D."""
    for i in (x, w):
        _quant_dtype(ctx, f"input #{i}", ctx.dtype(i), _LOW)
    rank = ctx.rank(x)
    if rank not in (3, 4):
        ctx.fail(f"convolution over {rank - 2} spatial dims; fluid-hw has 1-D (as 2-D) and "
                 "2-D convolutions only")
    n = rank - 2
    ws = ctx.shape(w)
    if len(ws) != n + 2:
        ctx.fail(f"weight of shape {ws} does not fit a {n}-D convolution")
    strides = _ints_attr(ctx, "strides", n, 1)
    dil = _ints_attr(ctx, "dilations", n, 1)
    pads, algo = _explicit_pads(ctx, ctx.shape(x)[2:], ws[2:], strides, dil, n)
    if ctx.has(xzp) and int(np.prod(ctx.shape(xzp))) != 1:
        ctx.fail("the input's zero point must be one value")
    wc = ctx.const(w)
    if n == 1:
        wv = (ctx.param(wc.reshape(*wc.shape[:2], 1, *wc.shape[2:]), "2d", source=w)
              if wc is not None else _to_2d(ctx, ctx.var(w), n))
    else:
        wv = ctx.var(w)
    ins: dict[str, Any] = {"Input": _to_2d(ctx, ctx.var(x), n), "Filter": wv}
    _zp(ctx, xzp, "InputZeroPoint", ins)
    _zp(ctx, wzp, "FilterZeroPoint", ins)
    attrs = {"strides": _pairs_2d(strides, n, 1), "dilations": _pairs_2d(dil, n, 1),
             "groups": int(ctx.attr("group", 1)), "padding_algorithm": algo,
             "paddings": [0, 0] if pads is None else _pairs_2d(pads, n, 0)}
    y = ctx.emit("conv_integer", ins, attrs, out=out if n == 2 else None, slot="Output")
    return _finish_2d(ctx, y, n, out) if n == 1 else y


def _matmul_integer_node(ctx: NodeCtx) -> None:
    _matmul_integer(ctx)


def _conv_integer_node(ctx: NodeCtx) -> None:
    _conv_integer(ctx)


def _requant(ctx: NodeCtx, acc: str, a_s: int, b_s: int, y_s: int, y_zp: int,
             x_in: int, axis: int) -> None:
    ins = {"X": acc, "AScale": _scale_var(ctx, a_s), "BScale": _scale_var(ctx, b_s),
           "YScale": _scale_var(ctx, y_s)}
    out_dt = ctx.dtype(y_zp) if ctx.has(y_zp) else ctx.dtype(x_in)
    if ctx.has(y_zp):
        ins["YZeroPoint"] = ctx.var(y_zp)
    ctx.emit("requantize_linear", ins,
             {"axis": axis, "out_dtype": _quant_dtype(ctx, "the output", out_dt, _LOW)},
             out=0)


def _qlinear_matmul(ctx: NodeCtx) -> None:
    acc = _matmul_integer(ctx, 0, 3, 2, 5, out=None)
    _requant(ctx, acc, 1, 4, 6, 7, 0, -1)


def _qlinear_conv(ctx: NodeCtx) -> None:
    acc = _conv_integer(ctx, 0, 3, 2, 5, out=None)
    if ctx.has(8):
        if ctx.dtype(8) != np.int32:
            ctx.fail(f"the bias (input #8) is {ctx.dtype(8)}; QLinearConv takes int32")
        acc = ctx.emit("elementwise_add", {"X": acc, "Y": ctx.var(8)}, {"axis": 1})
    _requant(ctx, acc, 1, 4, 6, 7, 0, 1)


def _qgemm(ctx: NodeCtx) -> None:
    """com.microsoft QGemm: ``alpha * (A' - a_z)(B' - b_z) + C`` (C an int32 bias at
    scale ``alpha * a_s * b_s``), requantised to ``y_s, y_z`` when given, else float."""
    alpha = float(ctx.attr("alpha", 1.0))
    for i in (0, 3):
        if ctx.rank(i) != 2:
            ctx.fail(f"input #{i} has shape {ctx.shape(i)}; QGemm multiplies 2-D matrices")
    a = ctx.var(0)
    if ctx.attr("transA", 0):
        a = ctx.emit("transpose2", {"X": a}, {"axis": [1, 0]})
    b = ctx.const(3)
    if ctx.attr("transB", 0):
        if b is None:
            ctx.fail("B (input #3) must be known at import time when transB=1")
        bv = ctx.param(np.ascontiguousarray(b.T), "T", source=3)
    else:
        bv = ctx.var(3)
    _quant_dtype(ctx, "A", ctx.dtype(0), _LOW)
    _quant_dtype(ctx, "B", ctx.dtype(3), _LOW)
    ins: dict[str, Any] = {"A": a, "B": bv, "AZeroPoint": ctx.var(2), "BZeroPoint": ctx.var(5)}
    acc = ctx.emit("matmul_integer", ins)
    if ctx.has(6):
        if ctx.dtype(6) != np.int32:
            ctx.fail(f"C (input #6) is {ctx.dtype(6)}; QGemm takes an int32 bias")
        acc = ctx.emit("elementwise_add", {"X": acc, "Y": ctx.var(6)}, {"axis": -1})
    b_s = _scale_var(ctx, 4)
    if alpha != 1.0:
        s = ctx.need_const(4, "b_scale with alpha != 1")
        b_s = ctx.param((s.astype(np.float32) * np.float32(alpha)).astype(np.float32),
                        "alpha", source=4)
    if not ctx.has(7):  # float output: acc * (a_s * b_s * alpha)
        a_s = ctx.need_const(1, "a_scale of a float-output QGemm").astype(np.float32)
        bs = ctx.const(4)
        if bs is None:
            ctx.fail("b_scale (input #4) must be known at import time for a float output")
        s = (a_s.reshape(()) * bs.astype(np.float32) * np.float32(alpha)).astype(np.float32)
        scale = ctx.param(s.reshape(-1), "out_scale", source=4)
        ctx.emit("dequantize_linear", {"X": acc, "Scale": scale},
                 {"axis": 1 if s.size > 1 else 0}, out=0)
        return
    ins = {"X": acc, "AScale": _scale_var(ctx, 1), "BScale": b_s,
           "YScale": _scale_var(ctx, 7)}
    out_dt = ctx.dtype(8) if ctx.has(8) else ctx.dtype(0)
    if ctx.has(8):
        ins["YZeroPoint"] = ctx.var(8)
    ctx.emit("requantize_linear", ins,
             {"axis": -1, "out_dtype": _quant_dtype(ctx, "the output", out_dt, _LOW)}, out=0)


def _qlinear_add(ctx: NodeCtx) -> None:
    """com.microsoft QLinearAdd: C = Q(DQ(A) + DQ(B)) with C's scale and zero point."""
    def dq(x: int, s: int, zp: int) -> str:
        ins = {"X": ctx.var(x), "Scale": _scale_var(ctx, s)}
        _zp(ctx, zp, "ZeroPoint", ins)
        return ctx.emit("dequantize_linear", ins, {"axis": 1})

    for i in (0, 3):
        _quant_dtype(ctx, f"input #{i}", ctx.dtype(i), _LOW)
    s = ctx.emit("elementwise_add", {"X": dq(0, 1, 2), "Y": dq(3, 4, 5)}, {"axis": -1})
    ins = {"X": s, "Scale": _scale_var(ctx, 6)}
    _zp(ctx, 7, "ZeroPoint", ins)
    out = ctx.dtype(7) if ctx.has(7) else ctx.dtype(0)
    ctx.emit("quantize_linear", ins,
             {"axis": 1, "out_dtype": _quant_dtype(ctx, "the output", out, _LOW)}, out=0)


# -- QONNX ------------------------------------------------------------------------------

def _bits(ctx: NodeCtx, i: int, what: str) -> int:
    v = ctx.need_const(i, what).reshape(-1)
    if v.size != 1 or float(v[0]) != int(v[0]) or not 1 <= int(v[0]) <= 32:
        ctx.fail(f"{what} (input #{i}) is {v.tolist()}; it must be one integer in [1, 32]")
    return int(v[0])


def _rounding(ctx: NodeCtx, default: str) -> str:
    mode = str(ctx.attr("rounding_mode", default)).upper()
    if mode not in ROUNDING_MODES:
        ctx.fail(f"rounding_mode {mode!r} is not one of {list(ROUNDING_MODES)}")
    return mode


def _float_in(ctx: NodeCtx, count: int) -> dict[str, str]:
    if ctx.dtype(0).kind != "f":
        ctx.fail(f"X is {ctx.dtype(0)}; QONNX quantisers take float tensors")
    slots = ("X", "Scale", "ZeroPt")[:count]
    return {s: ctx.var(i) if i == 0 else _as(ctx, i) for i, s in enumerate(slots)}


def _as(ctx: NodeCtx, i: int) -> str:
    """A float parameter input (scale, zero point) in X's type."""
    c = ctx.const(i)
    if c is not None and c.dtype != ctx.dtype(0):
        return ctx.param(c.astype(ctx.dtype(0)), "cast", source=i)
    if ctx.dtype(i) != ctx.dtype(0):
        ctx.fail(f"input #{i} is {ctx.dtype(i)}, X {ctx.dtype(0)}: give them one type")
    return ctx.var(i)


def _int_quant(ctx: NodeCtx) -> None:
    bits = _bits(ctx, 3, "bitwidth")
    signed, narrow = bool(ctx.attr("signed", 1)), bool(ctx.attr("narrow", 0))
    if bits == 1 and signed and narrow:
        ctx.fail("a narrow signed 1-bit range is empty; use BipolarQuant for {-1, +1}")
    ctx.emit("int_quant", _float_in(ctx, 3),
             {"bits": bits, "signed": signed, "narrow": narrow,
              "rounding_mode": _rounding(ctx, "ROUND")}, out=0)


def _bipolar_quant(ctx: NodeCtx) -> None:
    ctx.emit("bipolar_quant", _float_in(ctx, 2), out=0)


def _trunc(ctx: NodeCtx) -> None:
    v2 = ctx.count() >= 6
    ins = _float_in(ctx, 3)
    if v2:
        ins["OutScale"] = _as(ctx, 4)
    ctx.emit("trunc_quant", ins,
             {"in_bits": _bits(ctx, 3, "in_bitwidth"),
              "out_bits": _bits(ctx, 5 if v2 else 4, "out_bitwidth"),
              "version": 2 if v2 else 1, "signed": bool(ctx.attr("signed", 1)),
              "narrow": bool(ctx.attr("narrow", 0)),
              "rounding_mode": _rounding(ctx, "FLOOR")}, out=0)


#: default-domain quantised ONNX ops
QUANT: dict[str, OpImport] = {
    "QuantizeLinear": OpImport(_quantize_linear, "quantize_linear"),
    "DequantizeLinear": OpImport(_dequantize_linear, "dequantize_linear"),
    "MatMulInteger": OpImport(_matmul_integer_node, "matmul_integer"),
    "ConvInteger": OpImport(_conv_integer_node, "conv_integer"),
    "QLinearMatMul": OpImport(_qlinear_matmul, "matmul_integer, requantize_linear"),
    "QLinearConv": OpImport(_qlinear_conv, "conv_integer, requantize_linear"),
}

_QONNX = {
    "Quant": OpImport(_int_quant, "int_quant"),
    "IntQuant": OpImport(_int_quant, "int_quant"),
    "BipolarQuant": OpImport(_bipolar_quant, "bipolar_quant"),
    "Trunc": OpImport(_trunc, "trunc_quant", (3, 4, 5)),
}

#: (domain, op type) -> converter, for ops outside the default ONNX domain
DOMAIN_IMPORTERS: dict[tuple[str, str], OpImport] = {
    ("com.microsoft", "QGemm"): OpImport(_qgemm, "matmul_integer, requantize_linear"),
    ("com.microsoft", "QLinearAdd"): OpImport(_qlinear_add,
                                             "dequantize_linear, elementwise_add, "
                                             "quantize_linear"),
    **{(d, op): entry for d in QONNX_DOMAINS for op, entry in _QONNX.items()},
}
