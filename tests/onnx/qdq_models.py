"""Quantised ONNX test models and two numpy models of what they compute.

``float_mlp`` / ``float_cnn`` are float networks written with ``onnx.helper``;
:func:`qdq` quantises one with ``onnxruntime.quantization.quantize_static`` (QDQ
format).  :func:`run_spec` interprets the QDQ graph in numpy layer by layer, as the
ONNX specification defines the quantised layer (QLinearConv / QLinearMatMul):
``acc = sum (q_x - z_x)(q_w - z_w) + b_q`` exactly, ``q_y = sat(rne(acc * M) + z_y)``
with ``M = float32(s_x * s_w / s_y)``.  :func:`run_fixed` is the same walk with
fluid-hw's fixed-point rules (docs/fixed_point.md): the input divided in float64,
``M`` as ``m * 2^-n`` from ``requant_params``, rounded half up: what ``qdq_fold``'s
program must equal bit for bit.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = np.float32


def _init(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(a, name)


def float_mlp(rng: np.random.Generator, sizes: tuple[int, ...] = (16, 32, 24, 10)
              ) -> onnx.ModelProto:
    """Gemm (transB) + Relu layers, the last without Relu."""
    nodes, inits, x = [], [], "x"
    for i, (k, c) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((c, k)) / np.sqrt(k)).astype(F32)
        b = (rng.standard_normal(c) * 0.1).astype(F32)
        inits += [_init(f"w{i}", w), _init(f"b{i}", b)]
        last = i == len(sizes) - 2
        y = "y" if last else f"g{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [y], transB=1))
        if not last:
            nodes.append(helper.make_node("Relu", [y], [f"r{i}"]))
            x = f"r{i}"
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, sizes[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [None, sizes[-1]])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def float_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv(pad 1) + Relu, MaxPool 2x2, Conv + Relu, Flatten, Gemm: 1x8x8 -> 10."""
    w0 = (rng.standard_normal((4, 1, 3, 3)) / 3).astype(F32)
    w1 = (rng.standard_normal((6, 4, 3, 3)) / 6).astype(F32)
    w2 = (rng.standard_normal((10, 24)) / 5).astype(F32)
    inits = [_init("w0", w0), _init("b0", (rng.standard_normal(4) * 0.1).astype(F32)),
             _init("w1", w1), _init("b1", (rng.standard_normal(6) * 0.1).astype(F32)),
             _init("w2", w2), _init("b2", (rng.standard_normal(10) * 0.1).astype(F32))]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Flatten", ["r1"], ["f"]),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1),
    ]
    g = helper.make_graph(nodes, "cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def qdq(model: onnx.ModelProto, calib: list[np.ndarray], per_channel: bool,
        activation: str = "int8", symmetric: bool = True, operators: bool = False,
        pre_process: bool = False) -> onnx.ModelProto:
    """``quantize_static`` in QDQ format (``operators``: QOperator, the QLinear ops and
    com.microsoft's QGemm) with int8 weights; activations int8 or uint8;
    ``pre_process``: onnxruntime's ``quant_pre_process`` first."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    name = model.graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter([{name: x} for x in calib])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    act = QuantType.QInt8 if activation == "int8" else QuantType.QUInt8
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "f.onnx", Path(d) / "q.onnx"
        onnx.save(model, str(src))
        if pre_process:  # onnxruntime's recommended step: MatMul + Add -> Gemm, BN folded
            from onnxruntime.quantization.shape_inference import quant_pre_process

            quant_pre_process(str(src), str(src), skip_symbolic_shape=True)
        fmt = QuantFormat.QOperator if operators else QuantFormat.QDQ
        quantize_static(str(src), str(dst), Reader(), quant_format=fmt,
                        per_channel=per_channel, activation_type=act,
                        weight_type=QuantType.QInt8,
                        extra_options={"ActivationSymmetric": symmetric})
        return onnx.load(str(dst))


# -- the numpy models ------------------------------------------------------------------

def _conv_int(x: np.ndarray, w: np.ndarray, pads: list[int], strides: list[int]) -> np.ndarray:
    """conv2d of int64 NCHW x by [M, C, kh, kw] w (no groups, no dilation), exact."""
    t, left, b, r = pads
    x = np.pad(x, ((0, 0), (0, 0), (t, b), (left, r)))
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    win = win[:, :, ::strides[0], ::strides[1]]  # [N, C, OH, OW, kh, kw]
    return np.einsum("nchwij,mcij->nmhw", win, w, dtype=np.int64)


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


Requant = Callable[[np.ndarray, np.float32, np.ndarray, np.float32], np.ndarray]


def _walk(model: onnx.ModelProto, x: np.ndarray, quantize: Callable[[np.ndarray, np.float32],
          np.ndarray], requant: Requant) -> np.ndarray:
    """The QDQ graph's output for input ``x``, each tensor held as ``t = q - z`` (int64)
    with its scale; layers (DQ'd input and weights -> Conv/Gemm [-> Relu] -> Q) computed
    on integers with ``requant``, MaxPool/Flatten between equal Q parameters on ``t``."""
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    ints: dict[str, tuple[np.ndarray, np.float32, int, np.dtype]] = {}  # q -> t, s, z, dt
    floats: dict[str, np.ndarray] = {"x": x}

    def qparams(n: onnx.NodeProto) -> tuple[np.float32, int, np.dtype]:
        s = F32(consts[n.input[1]].reshape(()))
        z = consts[n.input[2]]
        return s, int(z.reshape(())), z.dtype

    def src_of_dq(name: str) -> str:
        n = producer[name]
        assert n.op_type == "DequantizeLinear", n.op_type
        return n.input[0]

    def clamp(t: np.ndarray, z: int, dt: np.dtype, relu: bool) -> np.ndarray:
        info = np.iinfo(dt)
        return np.clip(t, max(info.min - z, 0) if relu else info.min - z, info.max - z)

    for node in g.node:
        if node.op_type != "QuantizeLinear":
            continue
        s, z, dt = qparams(node)
        out = node.output[0]
        src = producer.get(node.input[0])
        relu = src is not None and src.op_type == "Relu"
        if relu:
            src = producer[src.input[0]]
            if src.op_type == "DequantizeLinear":  # a Relu of its own, between Qs
                src, relu = producer[node.input[0]], True
        if src is None:  # the graph input
            ints[out] = (clamp(quantize(floats[node.input[0]], s), z, dt, False), s, z, dt)
        elif src.op_type in ("Conv", "Gemm"):
            q_x = src_of_dq(src.input[0])
            t_x, s_x, _, _ = ints[q_x]
            wn = producer[src.input[1]]
            w = consts[wn.input[0]].astype(np.int64)
            s_w = consts[wn.input[1]].astype(F32).reshape(-1)
            assert not np.any(consts[wn.input[2]]), "symmetric weights"
            acc_scale = (s_x * s_w).astype(F32)
            a = _attrs(src)
            if src.op_type == "Conv":
                acc = _conv_int(t_x, w, list(a.get("pads", [0] * 4)),
                                list(a.get("strides", [1, 1])))
                shape = (1, -1, 1, 1)
            else:
                assert a.get("transB") == 1
                acc = t_x @ w.T
                shape = (1, -1)
            if len(src.input) > 2:
                bn = producer[src.input[2]]
                b = consts[bn.input[0]].astype(np.int64)
                s_b = np.broadcast_to(consts[bn.input[1]].astype(F32).reshape(-1), b.shape)
                if not np.array_equal(s_b, np.broadcast_to(acc_scale, b.shape)):
                    b = np.rint(b * s_b.astype(np.float64) /
                                np.broadcast_to(acc_scale, b.shape)).astype(np.int64)
                acc = acc + b.reshape(shape)
            scale = np.broadcast_to(acc_scale, (acc.shape[1],)).reshape(shape)
            ints[out] = (clamp(requant(acc, s_x, scale, s), z, dt, relu), s, z, dt)
        elif src.op_type in ("MaxPool", "Flatten") or relu:
            if relu:
                src = producer[node.input[0]]
            t_x, s_x, z_x, _ = ints[src_of_dq(src.input[0])]
            assert (s_x, z_x) == (s, z)
            if src.op_type == "Relu":
                ints[out] = (np.maximum(t_x, 0), s, z, dt)
            elif src.op_type == "Flatten":
                ints[out] = (t_x.reshape(t_x.shape[0], -1), s, z, dt)
            else:
                k = _attrs(src)["kernel_shape"]
                n_, c, h, w_ = t_x.shape
                v = t_x[:, :, :h // k[0] * k[0], :w_ // k[1] * k[1]]
                ints[out] = (v.reshape(n_, c, h // k[0], k[0], w_ // k[1], k[1])
                             .max(axis=(3, 5)), s, z, dt)
        else:
            raise AssertionError(f"unexpected {src.op_type} before {out}")
    y = g.output[0].name
    t, s, _, _ = ints[src_of_dq(y)]
    return (t.astype(np.float64) * np.float64(s)).astype(F32)


def run_spec(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """ONNX's quantised-layer arithmetic (QuantizeLinear in float32, QLinear requant)."""
    def quantize(v: np.ndarray, s: np.float32) -> np.ndarray:
        return np.rint(v / s).astype(np.int64)

    def requant(acc: np.ndarray, s_x: np.float32, acc_s: np.ndarray, s_y: np.float32
                ) -> np.ndarray:
        m = (acc_s / s_y).astype(F32)
        return np.rint(acc.astype(np.float64) * m.astype(np.float64)).astype(np.int64)

    return _walk(model, x, quantize, requant)


def run_fixed(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """fluid-hw's fixed-point arithmetic on the same scales."""
    from fluid_hw.passes.quantize import requant_params

    def quantize(v: np.ndarray, s: np.float32) -> np.ndarray:
        return np.rint(v.astype(np.float64) / np.float64(s)).astype(np.int64)

    def requant(acc: np.ndarray, s_x: np.float32, acc_s: np.ndarray, s_y: np.float32
                ) -> np.ndarray:
        flat = acc_s.reshape(-1)
        mn = [requant_params(float(np.float64(a) / np.float64(s_y))) for a in flat]
        m = np.array([v[0] for v in mn], np.int64).reshape(acc_s.shape)
        n = np.array([v[1] for v in mn], np.int64).reshape(acc_s.shape)
        half = np.where(n > 0, np.left_shift(1, np.maximum(n - 1, 0)), 0)
        return np.floor_divide(acc * m + half, np.left_shift(1, n))

    return _walk(model, x, quantize, requant)
