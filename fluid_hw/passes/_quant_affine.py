"""The quantisation rule for per-channel affine ops (docs/fixed_point.md).

A test-mode ``batch_norm`` that folds into no layer (after a pool, a residual add, on
the input), and ``elementwise_mul`` / ``_add`` / ``_sub`` / ``_div`` of a value by a
constant along its channel axis (``Y`` of ``[C]`` at axis 1, or one value), are each
``y = a[c] * x + b[c]`` in float64 (batch norm: ``a = gamma / sqrt(var + epsilon)``,
``b = beta - mean * a``).  A chain of them (a multiply then an add, a batch norm then a
multiply, ...), each the only reader of the one before, composes into one such pair,
and a relu right after folds into the clamp.  The chain becomes ``quantized_affine`` +
``requantize``; for input scale ``s_in`` and output scale ``s_out``:

    s_w[c]  = max(|a[c]| / 127, s_out / s_in * 2^-30, |b[c]| / (s_in * B / 2))
    w[c]    = round_half_even(a[c] / s_w[c])          (int8: +-127 unless a floor won)
    bias[c] = round_half_even(b[c] / (s_in * s_w[c])) (int32)
    m * 2^-n ~ s_in * s_w[c] / s_out                  (requantize, per channel)

so the per-channel scale lives in the requantiser's 15-bit multiplier, not in an int8
weight; the weight carries only the sign (and 7 bits of headroom that make the bias 127
times finer than one input step).  The floors keep the requantiser's multiplier at full
precision (``M >= 2^-30``) and the bias within ``B = 2^31 - 1 - 127 * 2^(bits-1)``
(the accumulator beside the largest product); either wins only for a channel whose
``a`` moves the output by far less than one step (``gamma = 0``), where ``w`` shrinks
instead.  (A non-finite ``a`` or ``b`` -- a zero variance with epsilon 0, a division by
zero -- makes the float program non-finite too, which calibration refuses first.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.program import Operator, VarType
from ._graph import OpSpec, add_param
from .base import get_value
from .conv_bn_fuse import _written_back
from .quantize import QuantizationError, requant_params, round_half_even

__all__ = ["AffineChain", "plan_affine", "emit_affine", "integer_affine", "AFFINE_OPS"]

#: ops of one value and a per-channel constant: (a, b) of ``a * x + b`` from the constant
_BINARY = {
    "elementwise_mul": lambda v: (v, np.zeros_like(v)),
    "elementwise_add": lambda v: (np.ones_like(v), v),
    "elementwise_sub": lambda v: (np.ones_like(v), -v),
    "elementwise_div": lambda v: (1.0 / v, np.zeros_like(v)),
}
AFFINE_OPS = ("batch_norm", *_BINARY)


@dataclass
class AffineChain:
    """Ops that quantise as one ``quantized_affine`` + ``requantize``."""

    ops: list[int]    # op indices: the affine ops, then a folded relu
    x: str            # the float input
    out: str          # the float output (after a folded relu)
    a: np.ndarray     # float64 [C] or [1]
    b: np.ndarray
    relu: bool
    param: str        # the first op's constant: the new parameters are named after it


def _out_slot(op: Operator) -> str:
    return "Y" if op.type == "batch_norm" else "Out"


def _const(qz: Any, i: int, name: str) -> np.ndarray | None:
    """A float parameter op ``i`` may read as a constant (one a test-mode batch norm
    writes back unchanged counts)."""
    v = qz.graph.var(name)
    op = qz.block.ops[i]
    if v is None or v.dtype != VarType.FP32:
        return None
    written_back = _written_back(op, name) and qz.graph.producers.get(name) == [i] and \
        get_value(qz.scope, name) is not None
    if not (qz.graph.is_constant_param(name, qz.scope) or written_back):
        return None
    return np.asarray(get_value(qz.scope, name), np.float64).reshape(-1)


def _per_channel(xs: list[int], ys: list[int], axis: int) -> bool:
    """Y broadcast into X from ``axis`` varies along X's axis 1 only."""
    start = axis if axis >= 0 else len(xs) - len(ys)
    return start >= 0 and start + len(ys) <= len(xs) and all(
        d == 1 or (start + j == 1 and d == xs[1]) for j, d in enumerate(ys))


def _affine_of(qz: Any, i: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, b)`` (float64, [C] or [1]) of op ``i``, an affine op of a float value, or
    None."""
    op = qz.block.ops[i]
    if op.type not in AFFINE_OPS or qz.excluded(op):
        return None
    x, out = (qz.graph.var(n) for n in (op.input("X")[0], op.output(_out_slot(op))[0]))
    if x is None or out is None or x.dtype != VarType.FP32 or out.dtype != VarType.FP32 or \
            len(x.shape) < 2:
        return None
    if op.type == "batch_norm":
        if not (op.attr("is_test") or op.attr("use_global_stats")) or \
                op.attr("data_layout") not in ("NCHW", "AnyLayout"):
            return None
        vals = [_const(qz, i, op.input(s)[0]) for s in ("Scale", "Bias", "Mean", "Variance")]
        if any(v is None for v in vals):
            return None
        gamma, beta, mean, var = vals
        a = gamma / np.sqrt(var + op.attr("epsilon"))
        return a, beta - mean * a
    y = qz.graph.var(op.input("Y")[0])
    v = _const(qz, i, op.input("Y")[0])
    if y is None or v is None or not _per_channel(list(x.shape), list(y.shape),
                                                  int(op.attr("axis"))):
        return None
    return _BINARY[op.type](v)


def plan_affine(qz: Any, i: int, qnames: set[str]) -> AffineChain | None:
    """The affine chain beginning at op ``i``, when its input is quantised (or is the
    program's input, which it then quantises), else None."""
    op = qz.block.ops[i]
    first = _affine_of(qz, i)
    if first is None:
        return None
    x = op.input("X")[0]
    feed = x not in qz.graph.producers and not qz.graph.var(x).persistable
    if x not in qnames and not feed:
        return None
    a, b = first
    ops, out, relu = [i], op.output(_out_slot(op))[0], False
    param = op.input("Scale" if op.type == "batch_norm" else "Y")[0]
    while (j := qz.graph.only_consumer(out)) is not None and qz.graph.fusable_link(out, j):
        nxt = qz.block.ops[j]
        if nxt.type == "relu" and not qz.excluded(nxt):
            ops.append(j)
            out, relu = nxt.output("Out")[0], True
            break
        f = _affine_of(qz, j) if nxt.input("X") == [out] else None
        if f is None:
            break
        a, b = f[0] * a, f[0] * b + f[1]
        ops.append(j)
        out = nxt.output(_out_slot(nxt))[0]
    return AffineChain(ops, x, out, a, b, relu, param)


def integer_affine(a: np.ndarray, b: np.ndarray, s_in: float, s_out: float, bias_max: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(w, bias, s_w)``: int8 weights, int32 biases and weight scales per channel (see
    the module docstring)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    s_w = np.maximum.reduce([np.abs(a64) / 127, np.full_like(a64, s_out / s_in * 2.0**-30),
                             np.abs(b64) / (s_in * (bias_max / 2))])
    w = np.clip(round_half_even(a64 / s_w), -127, 127)
    bias = round_half_even(b64 / (s_in * s_w))
    return w.astype(np.int8), bias.astype(np.int32), s_w


def emit_affine(qz: Any, ch: AffineChain) -> None:
    """``quantized_affine`` + ``requantize`` for the chain (see the module docstring)."""
    xq, s_in = qz.int_of(ch.x)
    s_out = qz.scale_of(ch.out)
    declared = int(qz.graph.var(ch.x).shape[1])
    channels = declared if declared > 0 else max(ch.a.size, ch.b.size)
    a, b = (np.broadcast_to(v, (channels,)) for v in (ch.a, ch.b))
    bias_max = 2**31 - 1 - 127 * 2 ** (qz.abits - 1)
    w, bias, s_w = integer_affine(a, b, float(s_in), float(s_out), bias_max)
    first = qz.block.ops[ch.ops[0]]
    mult = np.float64(s_in) * s_w / np.float64(s_out)
    try:
        mn = [requant_params(float(v)) for v in mult]
    except QuantizationError as e:
        raise QuantizationError(f"{first.type} (-> {ch.out}): {e}; exclude it: "
                                f"QuantConfig(exclude=[{ch.out!r}])") from None
    w_name = add_param(qz.block, qz.scope, f"{ch.param}.int8", w)
    b_name = add_param(qz.block, qz.scope, f"{ch.param}.bias.int32", bias)
    m_name = add_param(qz.block, qz.scope, f"{ch.out}.multiplier",
                       np.array([m for m, _ in mn], np.int32))
    n_name = add_param(qz.block, qz.scope, f"{ch.out}.shift",
                       np.array([n for _, n in mn], np.int32))
    acc = qz.new_var(f"{ch.out}.acc", ch.x, VarType.INT32)
    qz.items.append(OpSpec("quantized_affine", {"X": [xq], "Weight": [w_name],
                                                "Bias": [b_name]}, {"Out": [acc]},
                           {"in_scale": float(s_in), "weight_scale": [float(v) for v in s_w],
                            "weight_bits": 8}))
    outq = qz.new_var(f"{ch.out}.int{qz.abits}", ch.out, qz.adtype)
    qz.items.append(OpSpec(
        "requantize", {"X": [acc], "Multiplier": [m_name], "Shift": [n_name]},
        {"Out": [outq]}, {"relu": ch.relu, "bits": qz.abits, "out_scale": float(s_out),
                          "in_scale": [float(v) for v in np.float64(s_in) * s_w]}))
    qz.qvars[ch.out] = (outq, s_out)
    for k in ch.ops:
        op = qz.block.ops[k]
        qz.replaced |= set(op.output_arg_names) | \
            {n for n in op.input_arg_names if n != op.input("X")[0]}
