"""``qdq_fold``: an imported QDQ model (QuantizeLinear / DequantizeLinear around float
ops, as ``onnxruntime.quantization.quantize_static`` writes it) -> fluid-hw's
fixed-point program (docs/fixed_point.md), with the model's own scales: no
recalibration.

Before (what the ONNX importer makes of a QDQ layer)::

    q_x = quantize_linear(x, s_x, z_x)            # or any producer of q_x below
    x_d = dequantize_linear(q_x, s_x, z_x)
    w_d = dequantize_linear(W_q, s_w, 0)          # W_q a constant int8, per channel
    b_d = dequantize_linear(B_q, s_b, 0)          # B_q a constant int32 (optional)
    y   = matmul / mul / conv2d(x_d, w_d) [+ b_d] [-> relu]
    q_y = quantize_linear(y, s_y, z_y)

After::

    acc = quantized_fc / quantized_conv2d(t_x, W_q, Bias)     # int32, exact
    t_y = requantize(acc, m, n, relu)                         # m * 2^-n ~ s_x s_w / s_y

A quantised tensor ``q`` with zero point ``z`` is held as ``t = q - z``, whose real
value is ``t * s``; that is exact when ``t``'s range is a whole 8-bit type: int8
``z = 0`` and uint8 ``z = 128`` give int8 ``t`` ([-128, 127]); uint8 ``z = 0`` and
int8 ``z = -128`` (a relu's output) give uint8 ``t`` ([0, 255], ``requantize(signed=
False)``).  Integer 0 is then real 0, so a convolution's zero padding stays exact.
Other zero points are refused, naming the tensor (quantise with
``extra_options={"ActivationSymmetric": True}``).

Between layers: a max ``pool2d`` and ``relu`` / ``reshape2`` / ``flatten2`` /
``transpose2`` / ``squeeze2`` / ``unsqueeze2`` whose input is dequantised and whose
output is quantised again with the same scale and zero point run on ``t``
(``quantized_pool2d`` max, the others as they are); every other float op keeps its
float input (a ``dequantize`` before it) and its output enters the integer program
through a ``quantize``.

Differences from the ONNX model: the requantiser rounds ``acc * m * 2^-n`` half up
where ONNX rounds ``acc * s_x s_w / s_y`` half to even (``m`` has 15 bits), and
``quantize`` divides in float64 where QuantizeLinear divides in float32: results
differ by one step in rare cases (tests/onnx/test_import_quant.py counts them).  A
bias whose scale is not ``s_x * s_w[c]`` (in float32) is rescaled to it, rounding
half to even.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import QuantizationError
from ..ir import dtypes
from ..ir.ops.onnx_quant import int_bounds
from ..ir.ops.quant import weight_range
from ..ir.program import Operator, Program, Variable
from ._graph import (
    BlockGraph,
    OpSpec,
    add_param,
    fresh_name,
    rebuild_block,
    remove_unused_vars,
)
from .base import Pass, PassContext, get_value, register_pass
from .quantize import _CONV_ATTR_NAMES, requant_params

VarType = dtypes.VarType

#: ops that move integers unchanged (same scale and zero point on both sides)
#: QONNX layers whose output has at most this many bits get a multi_threshold
THRESHOLD_BITS = 4


def bits_out(folder: Any, ly: Any) -> int:
    """The bits of the tensor a QONNX layer's closing IntQuant makes."""
    return int(folder.ops[max(ly.ops)].attr("bits"))


_MOVES = ("relu", "reshape2", "flatten2", "transpose2", "squeeze2", "unsqueeze2")


@dataclass
class _QTensor:
    """A quantised tensor of the ONNX model: scale, zero point, its ``t`` variable."""

    scale: np.float32
    zero: int
    signed: bool  # t's type: int8 (True) or uint8
    t: str = ""
    bits: int = 8  # QONNX IntQuant tensors: 1-8 bits


@dataclass
class _Layer:
    ops: list[int]  # the matched ops (layer, bias add, relu, the closing Q)
    kind: str  # "fc" or "conv"
    op: Operator
    x_q: str  # the quantised input (quantize_linear output name)
    w_dq: int  # the weight's dequantize_linear
    b_dq: int | None
    relu: bool
    transpose_w: bool = False
    #: an integer-op layer (conv_integer / matmul_integer + requantize_linear): its int8
    #: weights (fluid layout), weight scales, int32 bias or None, input scale, a name
    pre: dict[str, Any] = field(default_factory=dict)


def _rails(dt: np.dtype, zero: int, where: str) -> bool:
    """Whether ``t = q - zero`` is int8 (True) or uint8 (False); refuses the rest."""
    if (dt, zero) in ((np.dtype(np.int8), 0), (np.dtype(np.uint8), 128)):
        return True
    if (dt, zero) in ((np.dtype(np.uint8), 0), (np.dtype(np.int8), -128)):
        return False
    raise QuantizationError(
        f"{where}: {dt} with zero point {zero} holds values q - {zero} in "
        f"[{np.iinfo(dt).min - zero}, {np.iinfo(dt).max - zero}], which no 8-bit type of "
        "fluid-hw's fixed-point program holds exactly (int8 zero point 0 or -128, uint8 "
        "zero point 0 or 128 do). Quantise the model with symmetric activations "
        "(onnxruntime: quantize_static(..., extra_options={'ActivationSymmetric': True})) "
        "or keep this model on the CPU executor without qdq_fold")


class _Folder:
    def __init__(self, program: Program, ctx: PassContext, onnx_exact: bool = False) -> None:
        assert ctx.scope is not None
        self.onnx_exact = onnx_exact
        self.program = program
        self.scope = ctx.scope
        self.g = BlockGraph(program, ctx)
        self.block = program.global_block()
        self.ops = list(self.block.ops)

    # -- reading the model -----------------------------------------------------------
    def const(self, name: str) -> np.ndarray | None:
        return get_value(self.scope, name) if self.g.is_constant_param(name, self.scope) \
            else None

    def var(self, name: str) -> Variable:
        """A variable of the program (every name an op reads or writes has one)."""
        v = self.g.var(name)
        if v is None:
            raise QuantizationError(f"qdq_fold: {name!r} is not a variable of the program")
        return v

    def producer(self, name: str) -> tuple[int, Operator] | None:
        p = self.g.producers.get(name, [])
        return (p[0], self.ops[p[0]]) if len(p) == 1 else None

    def q_params(self, op: Operator, where: str) -> tuple[np.float32, int] | None:
        """A per-tensor (scale, zero point) of a quantize/dequantize_linear, constant."""
        s = self.const(op.input("Scale")[0])
        zn = op.input("ZeroPoint") if "ZeroPoint" in op.input_names else []
        z = self.const(zn[0]) if zn else np.zeros((), np.uint8)
        if s is None or z is None or s.size != 1 or z.size != 1 or op.attr("block_size"):
            return None
        return np.float32(s.reshape(-1)[0]), int(z.reshape(-1)[0])

    def act_dq(self, name: str) -> str | None:
        """The quantised tensor whose real values ``name`` holds: the one a
        dequantize_linear output reads, or a QONNX IntQuant output itself."""
        if name in self.tensors and self.qonnx(name):
            return name
        p = self.producer(name)
        if p is None or p[1].type != "dequantize_linear":
            return None
        q = p[1].input("X")[0]
        if q not in self.tensors:
            return None
        dq_params = self.q_params(p[1], q)
        t = self.tensors[q]
        if dq_params != (t.scale, t.zero):
            return None
        return q

    def const_dq(self, name: str, kinds: str) -> int | None:
        """The index of the dequantize_linear of a constant (dtype kind in ``kinds``)
        that writes ``name``."""
        p = self.producer(name)
        if p is None or p[1].type != "dequantize_linear":
            return None
        x = self.const(p[1].input("X")[0])
        s = self.const(p[1].input("Scale")[0])
        if x is None or s is None or x.dtype.kind not in kinds or p[1].attr("block_size"):
            return None
        return p[0]

    def link(self, name: str, consumer: int) -> bool:
        return self.g.fusable_link(name, consumer)

    # -- finding the patterns ----------------------------------------------------------
    def find_tensors(self) -> None:
        """The quantised tensors: outputs of quantize_linear, of requantize_linear (the
        integer-op form; not folded with ``onnx_exact``), and of the integer moves of
        one (max pool2d, reshape2, ...), each with a per-tensor constant scale and zero
        point."""
        self.tensors: dict[str, _QTensor] = {}
        self.int_moves: dict[int, str] = {}  # op index -> its input's quantised tensor
        for i, op in enumerate(self.ops):
            params: tuple[np.float32, int] | None = None
            if op.type == "quantize_linear":
                q = op.output("Out")[0]
                params = self.q_params(op, q)
            elif op.type == "requantize_linear" and not self.onnx_exact:
                q = op.output("Out")[0]
                params = self.y_params(op)
            elif op.type == "int_quant" and not self.onnx_exact:
                q = op.output("Out")[0]
                fmt = self.int_quant_fmt(op)
                if fmt is not None and not self.g.is_constant_param(op.input("X")[0],
                                                                    self.scope):
                    s_, bits, signed = fmt
                    if s_.size == 1:
                        self.tensors[q] = _QTensor(np.float32(s_.reshape(-1)[0]), 0, signed,
                                                   bits=bits)
                continue
            elif self.int_move(op) and not self.onnx_exact:
                q = op.output("Out")[0]
                src = self.tensors[op.input("X")[0]]
                params = (src.scale, src.zero)
                self.int_moves[i] = op.input("X")[0]
            if params is None:
                continue  # a per-axis or run-time activation quantiser: left as it is
            dt = dtypes.to_numpy(self.var(q).dtype)
            if dt not in (np.int8, np.uint8):
                continue
            signed = dt == np.int8 if self.onnx_exact else \
                _rails(dt, params[1], f"quantised tensor {q!r}")
            self.tensors[q] = _QTensor(params[0], params[1], signed, q if self.onnx_exact
                                       else "")

    def qonnx(self, name: str) -> bool:
        p = self.producer(name)
        return p is not None and p[1].type == "int_quant"

    def int_quant_fmt(self, op: Operator) -> tuple[np.ndarray, int, bool] | None:
        """(scale, bits, signed) of a QONNX IntQuant that fluid-hw's fixed point holds
        exactly: zero point 0, ROUND (half to even), at most 8 bits, not narrow for
        activations (a narrow weight is fine: its values are in range)."""
        s = self.const(op.input("Scale")[0])
        z = self.const(op.input("ZeroPt")[0])
        if s is None or z is None or np.any(z != 0) or op.attr("rounding_mode") != "ROUND" \
                or op.attr("bits") > 8 or not (s > 0).all():
            return None
        if op.attr("narrow") and not self.g.is_constant_param(op.input("X")[0], self.scope):
            return None
        return s.astype(np.float32), int(op.attr("bits")), bool(op.attr("signed"))

    def const_quant(self, name: str) -> int | None:
        """The index of the QONNX IntQuant of a constant (weights) writing ``name``."""
        p = self.producer(name)
        if p is None or p[1].type != "int_quant" or self.const(p[1].input("X")[0]) is None \
                or self.int_quant_fmt(p[1]) is None:
            return None
        return p[0]

    def y_params(self, op: Operator) -> tuple[np.float32, int] | None:
        """A requantize_linear's constant per-tensor output scale and zero point."""
        s = self.const(op.input("YScale")[0])
        zn = op.input("YZeroPoint") if "YZeroPoint" in op.input_names else []
        z = self.const(zn[0]) if zn else np.zeros((), np.uint8)
        if s is None or z is None or s.size != 1 or z.size != 1:
            return None
        return np.float32(s.reshape(-1)[0]), int(z.reshape(-1)[0])

    def int_move(self, op: Operator) -> bool:
        """An op that moves a quantised tensor's integers (max pool2d, reshape2, ...;
        not relu, which is not a move of integers with a zero point)."""
        if op.type not in (*_MOVES[1:], "pool2d") or "X" not in op.input_names or \
                op.input("X")[0] not in getattr(self, "tensors", {}):
            return False
        return op.type != "pool2d" or op.attr("pooling_type") == "max"

    def match_int(self, k: int) -> _Layer | None:
        """The integer-op layer (conv_integer / matmul_integer [+ int32 bias] +
        requantize_linear, as QLinearConv / QLinearMatMul / QGemm import) closing at
        op ``k``."""
        rq = self.ops[k]
        if rq.output("Out")[0] not in self.tensors:
            return None
        ops, acc, b = [k], rq.input("X")[0], None
        p = self.producer(acc)
        if p is not None and p[1].type == "elementwise_add" and self.link(acc, k):
            b = self.const(p[1].input("Y")[0])
            if b is None or b.dtype != np.int32 or b.ndim != 1:
                return None
            ops.append(p[0])
            acc, nxt = p[1].input("X")[0], p[0]
            p = self.producer(acc)
        else:
            nxt = k
        if p is None or not self.link(acc, nxt) or \
                p[1].type not in ("conv_integer", "matmul_integer"):
            return None
        i, op = p
        conv = op.type == "conv_integer"
        x, w, xz, wz = (("Input", "Filter", "InputZeroPoint", "FilterZeroPoint") if conv
                        else ("A", "B", "AZeroPoint", "BZeroPoint"))
        x_q = op.input(x)[0]
        wv = self.const(op.input(w)[0])
        xzv = self.const(op.input(xz)[0]) if op.input(xz) else np.zeros(1, np.int8)
        wzv = self.const(op.input(wz)[0]) if op.input(wz) else np.zeros(1, np.int8)
        scales = [self.const(rq.input(n)[0]) for n in ("AScale", "BScale")]
        if x_q not in self.tensors or wv is None or xzv is None or wzv is None or \
                any(v is None for v in scales) or xzv.size != 1 or \
                int(xzv.reshape(-1)[0]) != self.tensors[x_q].zero:
            return None
        if not conv and (wv.ndim != 2 or len(self.var(x_q).shape) != 2):
            return None
        where = f"{op.type} (-> {op.output_arg_names[0]})"
        shape = [-1, 1, 1, 1] if conv else [1, -1]
        wi = wv.astype(np.int64) - (wzv.astype(np.int64).reshape(shape) if wzv.size > 1
                                    else int(wzv.reshape(-1)[0]))
        if wi.min() < -128 or wi.max() > 127:
            raise QuantizationError(f"{where}: the weights minus their zero point span "
                                    f"[{wi.min()}, {wi.max()}], outside int8")
        channels = wi.shape[0] if conv else wi.shape[1]
        s_x, s_w = scales
        assert s_x is not None and s_w is not None
        if s_x.size != 1 or s_w.size not in (1, channels):
            return None
        ops.append(i)
        return _Layer(sorted(ops), "conv" if conv else "fc", op, x_q, -1, None,
                      bool(rq.attr("relu")),
                      pre={"w": wi.astype(np.int8), "s_w": np.broadcast_to(
                          s_w.astype(np.float32).reshape(-1), (channels,)).copy(),
                           "b": b, "s_x": np.float32(s_x.reshape(-1)[0]), "where": where,
                           "w_name": op.input(w)[0]})

    def match(self, k: int) -> _Layer | None:
        """The layer whose closing quantize_linear is op ``k``."""
        qop = self.ops[k]
        if qop.output("Out")[0] not in self.tensors:
            return None
        ops, y, relu, b_dq = [k], qop.input("X")[0], False, None
        p = self.producer(y)
        if p is not None and p[1].type == "relu" and self.link(y, k):
            ops.append(p[0])
            relu, y, nxt = True, p[1].input("X")[0], p[0]
            p = self.producer(y)
        else:
            nxt = k
        bias_f: tuple[int, np.ndarray] | None = None  # (add op, a float bias: QONNX)
        if p is not None and p[1].type == "elementwise_add" and self.link(y, nxt):
            b = self.const_dq(p[1].input("Y")[0], "i")
            bf = self.const(p[1].input("Y")[0])
            if b is not None:
                ops.append(p[0])
                b_dq, y, nxt = b, p[1].input("X")[0], p[0]
                p = self.producer(y)
            elif bf is not None and bf.dtype.kind == "f" and qop.type == "int_quant":
                bias_f = (p[0], bf)
                y, nxt = p[1].input("X")[0], p[0]
                p = self.producer(y)
        if p is None or not self.link(y, nxt):
            return None
        i, op = p
        if op.type == "conv2d":
            xs, ws, kind = op.input("Input")[0], op.input("Filter")[0], "conv"
        elif (op.type == "matmul" and not op.attr("transpose_X") and op.attr("alpha") == 1.0
              ) or (op.type == "mul" and op.attr("y_num_col_dims") == 1
                    and op.attr("x_num_col_dims") == 1):
            xs, ws, kind = op.input("X")[0], op.input("Y")[0], "fc"
        else:
            return None
        x_q = self.act_dq(xs)
        w_dq = self.const_dq(ws, "iu")
        w_qn = self.const_quant(ws) if w_dq is None else None
        if x_q is None or (w_dq is None and w_qn is None):
            return None
        if kind == "fc" and len(self.var(xs).shape) != 2:
            return None
        ops.append(i)
        ly = _Layer(sorted(ops), kind, op, x_q, w_dq if w_dq is not None else -1, b_dq, relu,
                    transpose_w=op.type == "matmul" and bool(op.attr("transpose_Y")))
        if w_qn is not None:
            if b_dq is None and bias_f is not None:
                ly.ops = sorted([*ly.ops, bias_f[0]])
            pre = self.qonnx_layer(ly, w_qn, None if bias_f is None else bias_f[1])
            if pre is None:
                return None
            ly.pre = pre
        elif bias_f is not None:
            return None  # a float bias beside DequantizeLinear'd weights: not a QDQ layer
        return ly

    def qonnx_layer(self, ly: _Layer, w_op: int, bias: np.ndarray | None
                    ) -> dict[str, Any] | None:
        """The integer weights (QONNX IntQuant of a constant), their per-output-channel
        scales and the float bias as int32 at the accumulator's scale."""
        qop = self.ops[w_op]
        w = self.const(qop.input("X")[0])
        fmt = self.int_quant_fmt(qop)
        assert w is not None and fmt is not None
        s, bits, signed = fmt
        out_axis = 0 if ly.kind == "conv" else (0 if ly.transpose_w else 1)
        channels = w.shape[out_axis]
        if s.size > 1 and (s.ndim != w.ndim or any(
                d != 1 for a, d in enumerate(s.shape) if a != out_axis)):
            return None  # scales along another axis than the output channels
        lo, hi = int_bounds(bits, signed, bool(qop.attr("narrow")))
        t = w.dtype.type
        wi = np.rint(np.clip(w / s.astype(w.dtype), t(lo), t(hi))).astype(np.int64)
        if wi.min() < -128 or wi.max() > 127:
            return None
        if ly.kind == "fc" and ly.transpose_w:
            wi = wi.T
        s_w = np.broadcast_to(s.reshape(-1), (channels,)).astype(np.float32).copy()
        s_x = np.float32(self.tensors[ly.x_q].scale)
        b = None
        if bias is not None:
            if bias.ndim != 1 or bias.size != channels:
                return None
            b = np.rint(bias.astype(np.float64) / (np.float64(s_x) * s_w.astype(np.float64)))
            if np.abs(b).max(initial=0) >= 2**31:
                return None
            b = b.astype(np.int32)
        qlo, qhi = weight_range(bits)
        if bits_out(self, ly) <= THRESHOLD_BITS:
            b = None  # thresholds take the float bias exactly
        return {"w": wi.astype(np.int8), "s_w": s_w, "b": b, "s_x": s_x, "w_op": w_op,
                "bias_f": bias,
                "where": f"{ly.op.type} (-> {ly.op.output_arg_names[0]})",
                "w_name": qop.input("X")[0],
                "w_bits": bits if qlo <= wi.min() and wi.max() <= qhi else 8}

    def match_move(self, k: int) -> tuple[int, str] | None:
        """(index of a data-moving op or max pool2d, its input's quantised tensor)
        when op ``k`` re-quantises its output with the input's own parameters."""
        qop = self.ops[k]
        q_out = qop.output("Out")[0]
        p = self.producer(qop.input("X")[0])
        if q_out not in self.tensors or p is None or not self.link(qop.input("X")[0], k):
            return None
        i, op = p
        if not (op.type in _MOVES or (op.type == "pool2d" and
                                      op.attr("pooling_type") == "max")):
            return None
        x_q = self.act_dq(op.input("X")[0])
        if x_q is None:
            return None
        a, b = self.tensors[x_q], self.tensors[q_out]
        if (a.scale, a.zero, a.signed) != (b.scale, b.zero, b.signed):
            return None
        return i, x_q

    # -- writing the program -----------------------------------------------------------
    def new_var(self, base: str, like: str, dtype: int, shape: list[int] | None = None) -> str:
        name = fresh_name(self.block, base, self.scope)
        v = self.g.var(like)
        if shape is None:
            shape = list(v.shape) if v is not None else []
        self.block.create_var(name=name, dtype=dtype, shape=list(shape))
        return name

    def t_of(self, q: str) -> str:
        t = self.tensors[q]
        if not t.t:
            t.t = self.new_var(f"{q}.fx", q, VarType.UINT8 if not t.signed and t.bits == 8
                               else VarType.INT8)
        return t.t

    def weights(self, ly: _Layer) -> tuple[np.ndarray, np.ndarray, str]:
        """The layer's int8 weights (fc: [K, C]), its per-output-channel scales."""
        dq = self.ops[ly.w_dq]
        where = f"weights {dq.input('X')[0]!r} of {ly.op.type} (-> {ly.op.output_arg_names[0]})"
        w = self.const(dq.input("X")[0])
        s = self.const(dq.input("Scale")[0])
        zn = dq.input("ZeroPoint") if "ZeroPoint" in dq.input_names else []
        assert w is not None and s is not None
        z = self.const(zn[0]) if zn else np.zeros(1, w.dtype)
        if z is None:
            raise QuantizationError(f"{where}: the zero point is computed at run time")
        wi = w.astype(np.int64) - z.astype(np.int64).reshape(
            [-1 if a == dq.attr("axis") % w.ndim and z.size > 1 else 1
             for a in range(w.ndim)])
        if wi.min() < -128 or wi.max() > 127:
            raise QuantizationError(
                f"{where}: with zero point(s) {np.unique(z).tolist()[:4]} the weights span "
                f"[{wi.min()}, {wi.max()}], outside int8: quantise the weights "
                "symmetrically (onnxruntime's default for QInt8 weights)")
        out_axis = {"conv": 0, "fc": 0 if ly.transpose_w else 1}[ly.kind]
        if s.size > 1 and dq.attr("axis") % w.ndim != out_axis:
            raise QuantizationError(f"{where}: per-axis scales along axis "
                                    f"{dq.attr('axis')}, not the output channels")
        if ly.kind == "fc" and ly.transpose_w:
            wi = wi.T
        channels = wi.shape[0] if ly.kind == "conv" else wi.shape[1]
        scales = np.broadcast_to(s.astype(np.float32).reshape(-1), (channels,)).copy()
        return np.ascontiguousarray(wi.astype(np.int8)), scales, where

    def bias(self, ly: _Layer, acc_scale: np.ndarray) -> np.ndarray | None:
        if ly.b_dq is None:
            return None
        dq = self.ops[ly.b_dq]
        b = self.const(dq.input("X")[0])
        s = self.const(dq.input("Scale")[0])
        zn = dq.input("ZeroPoint") if "ZeroPoint" in dq.input_names else []
        z = self.const(zn[0]) if zn else np.zeros(1, np.int32)
        assert b is not None and s is not None
        if z is None or np.any(z != 0) or b.ndim != 1 or b.size != acc_scale.size:
            raise QuantizationError(f"bias {dq.input('X')[0]!r}: expected an int32 [C] "
                                    "with zero point 0")
        sb = np.broadcast_to(s.astype(np.float32).reshape(-1), b.shape)
        if np.array_equal(sb, acc_scale):
            return b.astype(np.int32)
        real = b.astype(np.float64) * sb.astype(np.float64)
        return np.rint(real / acc_scale.astype(np.float64)).astype(np.int32)

    def emit_onnx_layer(self, ly: _Layer, q_y: str, items: list[Any]) -> None:
        """The layer as ONNX's integer ops (QLinearConv / QLinearMatMul arithmetic)."""
        dq = self.ops[ly.w_dq]
        w = self.const(dq.input("X")[0])
        assert w is not None
        xt, yt = self.tensors[ly.x_q], self.tensors[q_y]
        _, s_w, _ = self.weights(ly)
        wz = dq.input("ZeroPoint") if "ZeroPoint" in dq.input_names else []
        if ly.kind == "fc" and ly.transpose_w:
            w = np.ascontiguousarray(w.T)
        w_name = add_param(self.block, self.scope, f"{dq.input('X')[0]}.fx", w)

        def scalar(v: Any, dt: Any, hint: str) -> str:
            return add_param(self.block, self.scope, hint, np.array([v], dt))

        x_dt = dtypes.to_numpy(self.var(ly.x_q).dtype)
        zx = scalar(xt.zero, x_dt, f"{ly.x_q}.zero_point")
        ins: dict[str, list[str]]
        if ly.kind == "fc":
            ins = {"A": [ly.x_q], "B": [w_name], "AZeroPoint": [zx]}
            if wz:
                ins["BZeroPoint"] = wz
            kind, slot, attrs, axis = "matmul_integer", "Out", {}, -1
        else:
            ins = {"Input": [ly.x_q], "Filter": [w_name], "InputZeroPoint": [zx]}
            if wz:
                ins["FilterZeroPoint"] = wz
            kind, slot, axis = "conv_integer", "Output", 1
            attrs = {a: ly.op.attr(a) for a in _CONV_ATTR_NAMES}
        like = ly.op.output_arg_names[0]
        acc = self.new_var(f"{like}.acc", like, VarType.INT32)
        items.append(OpSpec(kind, ins, {slot: [acc]}, attrs))
        acc_scale = (np.float32(xt.scale) * s_w).astype(np.float32)
        b = self.bias(ly, acc_scale)
        if b is not None:
            assert ly.b_dq is not None
            bn = add_param(self.block, self.scope, f"{self.ops[ly.b_dq].input('X')[0]}.fx", b)
            acc2 = self.new_var(f"{like}.acc_b", like, VarType.INT32)
            items.append(OpSpec("elementwise_add", {"X": [acc], "Y": [bn]}, {"Out": [acc2]},
                                {"axis": 1}))
            acc = acc2
        y_dt = dtypes.to_numpy(self.var(q_y).dtype)
        items.append(OpSpec(
            "requantize_linear",
            {"X": [acc], "AScale": [scalar(xt.scale, np.float32, f"{ly.x_q}.scale")],
             "BScale": [add_param(self.block, self.scope, f"{w_name}.scale", s_w)],
             "YScale": [scalar(yt.scale, np.float32, f"{q_y}.scale")],
             "YZeroPoint": [scalar(yt.zero, y_dt, f"{q_y}.zero_point")]},
            {"Out": [q_y]},
            {"axis": axis, "out_dtype": dtypes.to_enum(y_dt), "relu": ly.relu}))

    def emit_layer(self, ly: _Layer, q_y: str, items: list[Any]) -> None:
        if self.onnx_exact:
            self.emit_onnx_layer(ly, q_y, items)
            return

        if ly.pre:  # an integer-op layer: the values its ops hold
            wq, s_w, where = ly.pre["w"], ly.pre["s_w"], ly.pre["where"]
            s_x, b, hint = ly.pre["s_x"], ly.pre["b"], ly.pre["w_name"]
            acc_scale = (s_x * s_w).astype(np.float32)
        else:
            s_x = np.float32(self.tensors[ly.x_q].scale)
            wq, s_w, where = self.weights(ly)
            acc_scale = (s_x * s_w).astype(np.float32)
            b = self.bias(ly, acc_scale)
            hint = self.ops[ly.w_dq].input("X")[0]
        w_name = add_param(self.block, self.scope, f"{hint}.fx", wq)
        ins: dict[str, list[str]] = {"X" if ly.kind == "fc" else "Input": [self.t_of(ly.x_q)],
                                     "W" if ly.kind == "fc" else "Filter": [w_name]}
        if b is not None:
            ins["Bias"] = [add_param(self.block, self.scope, f"{hint}.bias.fx",
                                     b.astype(np.int32))]
        attrs: dict[str, Any] = {"in_scale": float(s_x),
                                 "weight_scale": [float(v) for v in s_w],
                                 "weight_bits": int(ly.pre.get("w_bits", 8))}
        if ly.kind == "conv":
            attrs.update({a: ly.op.attr(a) for a in _CONV_ATTR_NAMES})
            kind, slot = "quantized_conv2d", "Output"
            acc_shape = None
        else:
            kind, slot = "quantized_fc", "Out"
            xv = self.block.var(self.t_of(ly.x_q))
            acc_shape = [xv.shape[0], wq.shape[1]]
        like = ly.op.output_arg_names[0]
        acc = self.new_var(f"{like}.acc", like, VarType.INT32, acc_shape)
        items.append(OpSpec(kind, ins, {slot: [acc]}, attrs))
        yt = self.tensors[q_y]
        if "w_op" in ly.pre and yt.bits <= THRESHOLD_BITS:
            self.emit_thresholds(ly, acc, acc_scale, q_y, items)
            return
        try:
            mn = [requant_params(float(np.float64(a) / np.float64(yt.scale)))
                  for a in acc_scale]
        except QuantizationError as e:
            raise QuantizationError(f"{where}: {e}") from None
        m = add_param(self.block, self.scope, f"{q_y}.multiplier",
                      np.array([v[0] for v in mn], np.int32))
        n = add_param(self.block, self.scope, f"{q_y}.shift",
                      np.array([v[1] for v in mn], np.int32))
        rq: dict[str, Any] = {"relu": ly.relu, "bits": yt.bits, "out_scale": float(yt.scale),
                              "in_scale": [float(v) for v in acc_scale]}
        if not yt.signed:
            rq["signed"] = False
        items.append(OpSpec("requantize", {"X": [acc], "Multiplier": [m], "Shift": [n]},
                            {"Out": [self.t_of(q_y)]}, rq))

    def emit_thresholds(self, ly: _Layer, acc: str, acc_scale: np.ndarray, q_y: str,
                        items: list[Any]) -> None:
        """A QONNX layer's output quantiser as ``multi_threshold`` (as FINN does for
        narrow outputs): level ``lo + k`` from the smallest accumulator whose real value
        ``acc * s_x * s_w[c] + bias[c]`` (through the relu) rounds half to even to it, so
        the float bias needs no rounding to the accumulator's scale."""
        yt = self.tensors[q_y]
        lo, hi = int_bounds(yt.bits, yt.signed, False)
        bias = ly.pre.get("bias_f")
        b = np.zeros(acc_scale.size) if bias is None else bias.astype(np.float64)
        s_acc, s_y = acc_scale.astype(np.float64), np.float64(yt.scale)
        th = np.empty((acc_scale.size, hi - lo), np.int64)
        for k in range(1, hi - lo + 1):
            level = lo + k  # reached when real / s_y >= level - 1/2 (ties: even level)
            edge = (level - 0.5) * s_y
            if ly.relu and edge <= 0:
                th[:, k - 1] = -(2**31)
                continue
            v = (edge - b) / s_acc
            t = np.ceil(v)
            th[:, k - 1] = np.where((t == v) & (level % 2 == 1), t + 1, t)
        th = np.clip(th, -(2**31), 2**31 - 1).astype(np.int32)
        t_name = add_param(self.block, self.scope, f"{q_y}.thresholds", th)
        items.append(OpSpec("multi_threshold", {"X": [acc], "Thresholds": [t_name]},
                            {"Out": [self.t_of(q_y)]},
                            {"bits": yt.bits, "signed": yt.signed, "out_bias": lo,
                             "out_scale": float(yt.scale)}))

    def run(self) -> bool:
        self.find_tensors()
        if not self.tensors:
            return False
        layers: dict[int, _Layer] = {}
        moves: dict[int, tuple[int, str]] = {}
        for k, op in enumerate(self.ops):
            if op.type == "requantize_linear" and not self.onnx_exact:
                ly = self.match_int(k)
                if ly is None:
                    raise QuantizationError(
                        f"requantize_linear (-> {op.output_arg_names[0]}): its layer has "
                        "run-time weights, scales or zero points, or a per-axis input "
                        "scale; qdq_fold needs them constant (per tensor for activations)")
                layers[k] = ly
            elif op.type == "quantize_linear" or (op.type == "int_quant" and
                                                  op.output("Out")[0] in self.tensors):
                ly = self.match(k)
                if ly is not None:
                    layers[k] = ly
                    continue
                mv = self.match_move(k)
                if mv is not None:
                    moves[k] = mv
        if not layers:
            return False
        used = {i for ly in layers.values() for i in ly.ops} | \
            {i for mv in moves.values() for i in (mv[0],)} | set(self.int_moves)
        self.check_readers(used)
        # weight / bias dequantisers read only by folded layers disappear with them
        for ly in layers.values():
            for i in (ly.w_dq, ly.b_dq, ly.pre.get("w_op")):
                if i is None or i < 0:
                    continue
                if i is not None and all(c in used for c in self.g.consumers.get(
                        self.ops[i].output("Out")[0], [])):
                    used.add(i)
        items: list[Any] = []
        for k, op in enumerate(self.ops):
            if k in layers:
                self.emit_layer(layers[k], op.output("Out")[0], items)
                self.float_back(op.output("Out")[0], used, items)
            elif k in self.int_moves:
                self.emit_move(op, self.int_moves[k], op.output("Out")[0], items)
            elif k in moves:
                i, x_q = moves[k]
                self.emit_move(self.ops[i], x_q, op.output("Out")[0], items)
                self.float_back(op.output("Out")[0], used, items)
            elif k in used:
                continue
            else:
                self.emit_other(k, op, used, items)
        rebuild_block(self.block, items)
        remove_unused_vars(self.program, PassContext(self.scope,
                                                      fetch_names=sorted(self.g.protected)))
        return True

    def check_readers(self, used: set[int]) -> None:
        """Every reader of a quantised tensor that requantize_linear or an integer move
        writes is folded (its integers are not kept in ONNX's form)."""
        for q in self.tensors:
            src = self.producer(q)
            if src is None or self.ops[src[0]].type == "quantize_linear":
                continue
            for c in self.g.consumers.get(q, []):
                op = self.ops[c]
                if c in used or (op.type == "dequantize_linear" and
                                 self.act_dq(op.output("Out")[0]) == q):
                    continue
                raise QuantizationError(
                    f"{op.type} (-> {', '.join(op.output_arg_names)}) reads the quantised "
                    f"tensor {q!r} as integers with zero point {self.tensors[q].zero}; "
                    "qdq_fold has no fixed-point form for it (fold with "
                    "arithmetic='onnx', or run the model as imported)")

    def emit_move(self, mop: Operator, x_q: str, q_out: str, items: list[Any]) -> None:
        """A data-moving op (or max pool2d) on ``t``."""
        ins = {slot: list(mop.input(slot)) for slot in mop.input_names}
        ins["X"] = [self.t_of(x_q)]
        outs = {slot: list(mop.output(slot)) for slot in mop.output_names}
        outs["Out"] = [self.t_of(q_out)]
        for slot, names in outs.items():
            if slot != "Out":
                outs[slot] = [self.new_var(f"{n}.fx", n, self.var(n).dtype)
                              for n in names]
        attrs = {a: v for a, v in mop.all_attrs().items() if not a.startswith("op_")}
        if mop.type == "relu" and self.onnx_exact:  # relu in q-space: max(q, z)
            t = self.tensors[x_q]
            dt = dtypes.to_numpy(self.var(x_q).dtype)
            z = add_param(self.block, self.scope, f"{x_q}.zero_point", np.array([t.zero], dt))
            items.append(OpSpec("elementwise_max", {"X": ins["X"], "Y": [z]},
                                {"Out": outs["Out"]}, {"axis": -1}))
        elif mop.type == "pool2d":
            attrs = {a: mop.attr(a) for a in ("ksize", "strides", "paddings",
                                              "global_pooling", "ceil_mode",
                                              "padding_algorithm", "exclusive")}
            attrs["pooling_type"] = "max"
            items.append(OpSpec("quantized_pool2d", {"X": ins["X"]}, {"Out": outs["Out"]},
                                attrs))
        else:
            items.append(OpSpec(mop.type, ins, outs, attrs))

    def float_back(self, q: str, used: set[int], items: list[Any]) -> None:
        """A QONNX IntQuant output is also the float value: a dequantize writes it when
        an op left in float (or the program's output) reads it."""
        if not self.qonnx(q):
            return
        readers = self.g.consumers.get(q, [])
        if not readers or any(c not in used for c in readers) or q in self.g.protected:
            items.append(OpSpec("dequantize", {"X": [self.t_of(q)]}, {"Out": [q]},
                                {"scale": float(self.tensors[q].scale)}))

    def emit_other(self, k: int, op: Operator, used: set[int], items: list[Any]) -> None:
        """An op outside the folded layers: the region's entries (quantize) and exits
        (dequantize) in fixed point, everything else as it is."""
        if op.type == "int_quant" and op.output("Out")[0] in self.tensors:
            q = op.output("Out")[0]
            t = self.tensors[q]
            items.append(OpSpec("quantize", {"X": op.input("X")}, {"Out": [self.t_of(q)]},
                                {"scale": float(t.scale), "bits": t.bits,
                                 "signed": t.signed}))
            self.float_back(q, used, items)
        elif op.type == "quantize_linear" and not self.onnx_exact and \
                op.output("Out")[0] in self.tensors:
            q = op.output("Out")[0]
            t = self.tensors[q]
            items.append(OpSpec("quantize", {"X": op.input("X")}, {"Out": [self.t_of(q)]},
                                {"scale": float(t.scale), "bits": 8, "signed": t.signed}))
            if any(c not in used and not (self.ops[c].type == "dequantize_linear" and
                                          self.act_dq(self.ops[c].output("Out")[0]) == q)
                   for c in self.g.consumers.get(q, [])):
                items.append(op.desc)  # still read as ONNX integers somewhere
        elif op.type == "dequantize_linear" and self.act_dq(op.output("Out")[0]) is not None:
            q, out = op.input("X")[0], op.output("Out")[0]
            readers = self.g.consumers.get(out, [])
            if not readers or any(c not in used for c in readers) or out in self.g.protected:
                items.append(op.desc if self.onnx_exact else OpSpec(
                    "dequantize", {"X": [self.t_of(q)]}, {"Out": [out]},
                    {"scale": float(self.tensors[q].scale)}))
        else:
            items.append(op.desc)


@register_pass
class QdqFold(Pass):
    """``arithmetic="fixed"``: fluid-hw's fixed-point layers (for the FPGA);
    ``"onnx"``: ONNX's integer ops (matmul_integer / conv_integer + requantize_linear),
    which compute exactly what the ONNX specification defines for the quantised layer
    (QLinearMatMul / QLinearConv), any zero points."""

    name = "qdq_fold"
    requires = ("scope",)

    def __init__(self, arithmetic: str = "fixed") -> None:
        if arithmetic not in ("fixed", "onnx"):
            raise ValueError(f"arithmetic {arithmetic!r}: use 'fixed' or 'onnx'")
        self.arithmetic = arithmetic

    def run(self, program: Program, ctx: PassContext) -> bool:
        return _Folder(program, ctx, self.arithmetic == "onnx").run()


def fold_qdq(program: Program, scope: Any, arithmetic: str = "fixed") -> Program:
    """The integer program of an imported QDQ model (``fluid_hw.onnx.load(...)``'s
    program and scope): fluid-hw's fixed-point ops (``arithmetic="fixed"``) or ONNX's
    exact integer ops (``"onnx"``); new parameters are written into ``scope``."""
    out, _ = QdqFold(arithmetic).apply(program, PassContext(scope=scope))
    return out
