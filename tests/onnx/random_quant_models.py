"""Random one-node models of the quantised ONNX ops fluid-hw imports, compared with
onnxruntime (``random_models.GENERATORS`` takes these in).

Scales of the QLinear ops are powers of two here, so that onnxruntime's float32
requantisation and the specification's float64 one give the same integers and the
comparison can be exact; tests/onnx/test_import_quant.py measures general scales.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tests.onnx.harness import C, Case, F, node_case

R = np.random.Generator
F32 = np.float32
I8, U8 = np.int8, np.uint8


def _q(r: R, shape: list[int], dt: type) -> np.ndarray:
    info = np.iinfo(dt)
    return r.integers(info.min, int(info.max) + 1, size=shape).astype(dt)


def _pow2(r: R, lo: int = -6, hi: int = -1, size: int | None = None) -> np.ndarray:
    e = r.integers(lo, hi + 1, size=size)
    return np.asarray(2.0 ** e, F32)


def gen_quantize_linear(r: R) -> list[Case]:
    out = []
    for i, dt in enumerate((U8, I8, U8, I8, np.int16)):
        s = [int(d) for d in r.integers(1, 5, size=int(r.integers(1, 4)))]
        x = (r.standard_normal(s) * 4).astype(F32)
        per_axis = i in (2, 3) and len(s) >= 2
        n = s[1] if per_axis else 1
        scale = (r.random(n) * 0.1 + 0.01).astype(F32)
        zp = r.integers(0, 20, size=n).astype(dt) if i != 4 else np.zeros(n, dt)
        ins = [F(x), C(scale if per_axis else scale.reshape(())),
               C(zp if per_axis else zp.reshape(()))]
        out.append(node_case("QuantizeLinear", ins, {"axis": 1} if per_axis else {},
                             opset=21 if dt is np.int16 else 13, id=f"QuantizeLinear-{i}"))
    x = (r.standard_normal([3, 4]) * 2).astype(F32)
    out.append(node_case("QuantizeLinear", [F(x), C(np.array(0.05, F32))], opset=13,
                         id="QuantizeLinear-no-zp"))
    return out


def gen_dequantize_linear(r: R) -> list[Case]:
    out = []
    for i, dt in enumerate((U8, I8, I8, np.int32)):
        s = [int(d) for d in r.integers(1, 5, size=int(r.integers(2, 4)))]
        per_axis = i == 2
        n = s[1] if per_axis else 1
        x = _q(r, s, dt) if dt is not np.int32 else r.integers(-5000, 5000, s).astype(dt)
        scale = (r.random(n) * 0.1 + 0.01).astype(F32)
        zp = (r.integers(-5, 5, size=n) if dt is not U8 else r.integers(0, 9, size=n)).astype(dt)
        if dt is np.int32:
            zp[:] = 0
        ins = [F(x), C(scale if per_axis else scale.reshape(())),
               C(zp if per_axis else zp.reshape(()))]
        out.append(node_case("DequantizeLinear", ins, {"axis": 1} if per_axis else {},
                             opset=13, id=f"DequantizeLinear-{i}"))
    return out


def gen_matmul_integer(r: R) -> list[Case]:
    out = []
    for i, (ta, tb) in enumerate(((U8, U8), (U8, I8), (I8, I8), (U8, U8))):
        m, k, n = (int(v) for v in r.integers(1, 6, size=3))
        a = _q(r, [2, m, k] if i == 3 else [m, k], ta)
        b = _q(r, [k, n], tb)
        ins = [F(a), C(b), C(np.array(int(r.integers(0, 9)), ta)),
               C(np.array(0 if tb is I8 else int(r.integers(0, 9)), tb))]
        out.append(node_case("MatMulInteger", ins, opset=13, id=f"MatMulInteger-{i}"))
    return out


def gen_conv_integer(r: R) -> list[Case]:
    out = []
    for i in range(3):
        c, m = int(r.integers(1, 4)), int(r.integers(1, 4))
        x = _q(r, [1, c, 5, 6], U8)
        w = _q(r, [m, c, 3, 3], U8)
        attrs = {"pads": [1, 1, 1, 1]} if i == 1 else {"strides": [2, 2]} if i == 2 else {}
        ins = [F(x), C(w), C(np.array(int(r.integers(0, 9)), U8)),
               C(np.array(int(r.integers(0, 9)), U8))]
        out.append(node_case("ConvInteger", ins, attrs, opset=13, id=f"ConvInteger-{i}"))
    return out


def gen_qlinear_matmul(r: R) -> list[Case]:
    out = []
    for i, (ta, tb) in enumerate(((U8, U8), (I8, I8), (U8, I8))):
        m, k, n = (int(v) for v in r.integers(1, 6, size=3))
        a, b = _q(r, [m, k], ta), _q(r, [k, n], tb)
        zpa = np.array(int(r.integers(0, 9)) if ta is U8 else 0, ta)
        zpb = np.array(int(r.integers(0, 9)) if tb is U8 else 0, tb)
        ins = [F(a), C(_pow2(r)), C(zpa), C(b), C(_pow2(r)), C(zpb), C(_pow2(r, -2, 3)),
               C(np.array(int(r.integers(0, 9)) if ta is U8 else 0, ta))]
        out.append(node_case("QLinearMatMul", ins, opset=13, id=f"QLinearMatMul-{i}"))
    return out


def gen_qlinear_conv(r: R) -> list[Case]:
    out = []
    for i, dt in enumerate((U8, I8, U8)):
        c, m = int(r.integers(1, 4)), int(r.integers(1, 4))
        x, w = _q(r, [1, c, 5, 5], dt), _q(r, [m, c, 3, 3], I8 if dt is I8 else U8)
        w_s = _pow2(r, size=m) if i == 1 else _pow2(r)
        ins = [F(x), C(_pow2(r)), C(np.array(3 if dt is U8 else 0, dt)), C(w), C(w_s),
               C(np.array(2 if dt is U8 else 0, w.dtype)), C(_pow2(r, -1, 4)),
               C(np.array(5 if dt is U8 else 0, dt))]
        if i == 2:
            ins.append(C(r.integers(-100, 100, size=m).astype(np.int32)))
        attrs = {"pads": [1, 1, 1, 1]} if i else {}
        out.append(node_case("QLinearConv", ins, attrs, opset=13, id=f"QLinearConv-{i}"))
    return out


QUANT_GENERATORS: dict[str, Callable[[R], list[Case]]] = {
    "QuantizeLinear": gen_quantize_linear, "DequantizeLinear": gen_dequantize_linear,
    "MatMulInteger": gen_matmul_integer, "ConvInteger": gen_conv_integer,
    "QLinearMatMul": gen_qlinear_matmul, "QLinearConv": gen_qlinear_conv,
}
