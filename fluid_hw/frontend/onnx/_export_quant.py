"""Export of quantised programs: the export table's entries for the ONNX quantisation
ops (``ir/ops/onnx_quant.py``: an imported quantised model exports back as it came)
and for fluid-hw's fixed-point ops (``ir/ops/quant.py``), written as QDQ ONNX.

The fixed-point program becomes the form ``onnxruntime.quantization`` writes: a
``quantize`` is a QuantizeLinear (zero point 0), each ``quantized_fc`` /
``quantized_conv2d`` a MatMul / Conv of DequantizeLinear'd input, weights (per output
channel, scales from the op's ``in_scale`` / ``weight_scale``) and int32 bias (scale
``in_scale * weight_scale``), its ``requantize`` a [Relu ->] QuantizeLinear at the
requantiser's ``out_scale``, a ``dequantize`` a DequantizeLinear.  The layer's
output there is the real-valued accumulator; onnxruntime fuses each such group into
its QLinear kernels.  ONNX requantises with the float ratio of the scales and rounds
half to even where fluid-hw uses ``m * 2^-n`` rounding half up, so results agree
within one output step (tests/onnx/test_export_quant.py measures how often they
differ).  ``_export_ops`` adds :data:`QUANT_EXPORTS` to its table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...ir import dtypes
from ._context import ExportCtx
from ._export_ops import OpExport, _onnx_pads, _out, _x

if TYPE_CHECKING:
    from ...ir.program import Operator

#: fluid ops exported as real-valued (float) accumulators
_REAL_ACC = ("quantized_fc", "quantized_conv2d")


def _opt(op: Operator, slot: str) -> str:
    names = op.input(slot) if slot in op.input_names else []
    return names[0] if names else ""


def _conv_attrs(ctx: ExportCtx, op: Operator, w: str) -> dict[str, Any]:
    """ONNX Conv attributes of a fluid conv-like op (as ``_export_ops._conv``)."""
    attrs: dict[str, Any] = {"strides": list(op.attr("strides")),
                             "group": int(op.attr("groups")),
                             "kernel_shape": list(ctx.shape(w)[2:])}
    if op.attr("padding_algorithm") == "SAME":
        attrs["auto_pad"], attrs["dilations"] = "SAME_UPPER", [1, 1]
    else:
        attrs["dilations"] = list(op.attr("dilations"))
        attrs["pads"] = [0, 0, 0, 0] if op.attr("padding_algorithm") == "VALID" \
            else _onnx_pads(op.attr("paddings"))
    return attrs


# -- the ONNX quantisation ops, back as they were imported -----------------------------

def _q_linear(ctx: ExportCtx, op: Operator, onnx_op: str) -> None:
    ins = [_x(op), _x(op, "Scale"), _opt(op, "ZeroPoint")]
    attrs: dict[str, Any] = {"axis": int(op.attr("axis"))}
    if op.attr("block_size"):
        ctx.needs(21, f"{onnx_op} with block_size")
        attrs["block_size"] = int(op.attr("block_size"))
    if onnx_op == "QuantizeLinear" and not ins[2]:
        dt = dtypes.to_numpy(op.attr("out_dtype"))
        if dt != np.uint8:  # the zero point carries the output type
            shape = ctx.shape(ins[1])
            ins[2] = ctx.const(np.zeros(shape, dt), f"{_out(op)}.zero_point")
    if np.dtype(ctx.np_dtype(_x(op))) == np.int16 or (
            ins[2] and ctx.np_dtype(ins[2]) == np.int16):
        ctx.needs(21, f"{onnx_op} of int16")
    ctx.node(onnx_op, [n for n in ins if n] if not ins[2] else ins, [_out(op)], **attrs)


def _quantize_linear(ctx: ExportCtx, op: Operator) -> None:
    _q_linear(ctx, op, "QuantizeLinear")


def _dequantize_linear(ctx: ExportCtx, op: Operator) -> None:
    _q_linear(ctx, op, "DequantizeLinear")


def _matmul_integer(ctx: ExportCtx, op: Operator) -> None:
    ins = [_x(op, "A"), _x(op, "B"), _opt(op, "AZeroPoint"), _opt(op, "BZeroPoint")]
    ctx.node("MatMulInteger", ins, [_out(op)])


def _conv_integer(ctx: ExportCtx, op: Operator) -> None:
    w = _x(op, "Filter")
    ins = [_x(op, "Input"), w, _opt(op, "InputZeroPoint"), _opt(op, "FilterZeroPoint")]
    ctx.node("ConvInteger", ins, [_out(op, "Output")], **_conv_attrs(ctx, op, w))


def _requantize_linear(ctx: ExportCtx, op: Operator) -> None:
    """QuantizeLinear(float32(X) * (a_s * b_s / y_s), 1, y_zp): the QLinear ops' end
    (the product in float32, as onnxruntime's QLinear kernels compute it)."""
    x, out = _x(op), _out(op)
    m = ctx.node("Div", [ctx.node("Mul", [_x(op, "AScale"), _x(op, "BScale")]),
                         _x(op, "YScale")])
    rank, axis = len(ctx.shape(x)), int(op.attr("axis")) % max(len(ctx.shape(x)), 1)
    b_shape = ctx.shape(_x(op, "BScale"))
    if b_shape and int(np.prod(b_shape)) > 1 and axis != rank - 1:
        m = ctx.node("Reshape", [m, ctx.ints([-1] + [1] * (rank - 1 - axis), f"{out}.m")])
    xf = ctx.node("Cast", [x], to=1)
    v = ctx.node("Mul", [xf, m])
    if op.attr("relu"):
        v = ctx.node("Relu", [v])
    ins = [v, ctx.const(np.array(1.0, np.float32), f"{out}.one")]
    if _opt(op, "YZeroPoint"):
        ins.append(_x(op, "YZeroPoint"))
    else:
        ins.append(ctx.const(np.zeros((), dtypes.to_numpy(op.attr("out_dtype"))),
                             f"{out}.zero_point"))
    ctx.node("QuantizeLinear", ins, [out])


# -- fluid-hw's fixed-point ops, as QDQ ------------------------------------------------

def _zero(ctx: ExportCtx, like: str, n: int, hint: str) -> str:
    dt = ctx.np_dtype(like)
    return ctx.const(np.zeros(() if n == 1 else (n,), dt), hint)


def _scales(values: Any, what: str, ctx: ExportCtx, op: Operator) -> np.ndarray:
    s = np.asarray(values, np.float32).reshape(-1)
    if s.size == 0 or not (s > 0).all():
        ctx.fail(f"its {what} attribute is {s.tolist()}: the scales are not recorded (the "
                 "op was not written by fluid_hw.passes.quantize), so its real values are "
                 "unknown")
    return s


def _dq(ctx: ExportCtx, x: str, scale: np.ndarray, axis: int, hint: str,
        out: str | None = None) -> str:
    n = scale.size
    s = ctx.const(scale if n > 1 else scale.reshape(()), f"{hint}.scale")
    return ctx.node("DequantizeLinear", [x, s, _zero(ctx, x, n, f"{hint}.zero_point")],
                    [out] if out else None, axis=axis)


def _fixed_quantize(ctx: ExportCtx, op: Operator) -> None:
    bits = int(op.attr("bits"))
    if bits != 8 or op.all_attrs().get("bipolar"):
        ctx.fail(f"a {bits}-bit{' bipolar' if op.all_attrs().get('bipolar') else ''} "
                 "quantize has no ONNX QuantizeLinear form (8-bit only)")
    dt = np.int8 if op.attr("signed") else np.uint8
    ctx.node("QuantizeLinear", [_x(op), ctx.const(np.array(op.attr("scale"), np.float32),
                                                  f"{_out(op)}.scale"),
                                ctx.const(np.zeros((), dt), f"{_out(op)}.zero_point")],
             [_out(op)])


def _producer(ctx: ExportCtx, name: str) -> Operator | None:
    return next((o for o in ctx.block.ops if name in o.output_arg_names), None)


def _fixed_dequantize(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    src = _producer(ctx, x)
    if src is not None and src.type in _REAL_ACC:  # already real-valued
        ctx.fail("a dequantize of a layer's int32 accumulator is not exported (put a "
                 "requantize between them)")
    if _opt(op, "Scale"):
        scale = ctx.value(_x(op, "Scale"))
        if scale is None:
            ctx.fail("its Scale input is computed at run time; export needs it constant")
        _dq(ctx, x, np.asarray(scale, np.float32), int(op.attr("axis")), out, out)
        return
    s = np.array([op.attr("scale")], np.float32)
    ctx.node("DequantizeLinear", [x, ctx.const(s.reshape(()), f"{out}.scale"),
                                  _zero(ctx, x, 1, f"{out}.zero_point")], [out])


def _layer_inputs(ctx: ExportCtx, op: Operator, x: str, w: str, w_axis: int
                  ) -> tuple[str, str, str | None]:
    """The DequantizeLinear'd input, weights and bias of a quantised layer."""
    if int(op.all_attrs().get("weight_bits", 8)) != 8 or \
            op.all_attrs().get("weight_type", "signed") != "signed":
        ctx.fail("only 8-bit signed weights have a QDQ form here")
    s_in = _scales([op.attr("in_scale")], "in_scale", ctx, op)
    s_w = _scales(op.attr("weight_scale"), "weight_scale", ctx, op)
    xf = _dq(ctx, x, s_in, 1, f"{x}.dq")
    wf = _dq(ctx, w, s_w, w_axis, f"{w}.dq")
    bias = _opt(op, "Bias")
    bf = None
    if bias:
        bs = (s_in[0].astype(np.float64) * s_w.astype(np.float64)).astype(np.float32)
        bf = _dq(ctx, bias, bs, 0, f"{bias}.dq")
    return xf, wf, bf


def _quantized_fc(ctx: ExportCtx, op: Operator) -> None:
    xf, wf, bf = _layer_inputs(ctx, op, _x(op), _x(op, "W"), 1)
    y = ctx.node("MatMul", [xf, wf], None if bf else [_out(op)])
    if bf:
        ctx.node("Add", [y, bf], [_out(op)])


def _quantized_conv2d(ctx: ExportCtx, op: Operator) -> None:
    w = _x(op, "Filter")
    xf, wf, bf = _layer_inputs(ctx, op, _x(op, "Input"), w, 0)
    ctx.node("Conv", [xf, wf, *([bf] if bf else [])], [_out(op, "Output")],
             **_conv_attrs(ctx, op, w))


def _requantize(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    a = op.all_attrs()
    if int(a.get("bits", 8)) != 8 or not a.get("signed", True) or a.get("bipolar"):
        ctx.fail("only 8-bit signed requantize has a QuantizeLinear form")
    src = _producer(ctx, x)
    if src is None or src.type not in _REAL_ACC:
        ctx.fail(f"a requantize after {src.type if src else 'a parameter'} is not exported "
                 "(only after quantized_fc / quantized_conv2d)")
    s_out = _scales([a.get("out_scale", 0.0)], "out_scale", ctx, op)
    real = ctx.node("Relu", [x]) if a.get("relu") else x
    ctx.node("QuantizeLinear", [real, ctx.const(s_out.reshape(()), f"{out}.scale"),
                                ctx.const(np.zeros((), np.int8), f"{out}.zero_point")], [out])


def _quantized_pool2d(ctx: ExportCtx, op: Operator) -> None:
    """Max pooling: MaxPool on the integers (its padding never wins, as fluid-hw's)."""
    if op.attr("pooling_type") != "max":
        ctx.fail(f"{op.attr('pooling_type')} pooling of integers is not exported (max is)")
    if op.attr("global_pooling"):
        ctx.node("GlobalMaxPool", [_x(op)], [_out(op)])
        return
    if op.attr("ceil_mode"):
        ctx.fail("ceil_mode max pooling of integers is not exported")
    attrs: dict[str, Any] = {"kernel_shape": list(op.attr("ksize")),
                             "strides": list(op.attr("strides"))}
    if op.attr("padding_algorithm") == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [0, 0, 0, 0] if op.attr("padding_algorithm") == "VALID" \
            else _onnx_pads(op.attr("paddings"))
    ctx.node("MaxPool", [_x(op)], [_out(op)], **attrs)


QUANT_EXPORTS: dict[str, OpExport] = {
    "quantize_linear": OpExport(_quantize_linear, "QuantizeLinear"),
    "dequantize_linear": OpExport(_dequantize_linear, "DequantizeLinear"),
    "matmul_integer": OpExport(_matmul_integer, "MatMulInteger"),
    "conv_integer": OpExport(_conv_integer, "ConvInteger"),
    "requantize_linear": OpExport(_requantize_linear, "Mul, Div, Cast, QuantizeLinear"),
    "quantize": OpExport(_fixed_quantize, "QuantizeLinear"),
    "dequantize": OpExport(_fixed_dequantize, "DequantizeLinear"),
    "quantized_fc": OpExport(_quantized_fc, "DequantizeLinear, MatMul, Add"),
    "quantized_conv2d": OpExport(_quantized_conv2d, "DequantizeLinear, Conv"),
    "requantize": OpExport(_requantize, "Relu, QuantizeLinear"),
    "quantized_pool2d": OpExport(_quantized_pool2d, "MaxPool"),
}
