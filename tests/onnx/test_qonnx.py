"""QONNX's quantisers (domain qonnx.custom_op.general, as Brevitas exports them and FINN
and hls4ml read them): Quant / IntQuant, BipolarQuant and Trunc imported and run on
the CPU executor, equal to a numpy implementation of the QONNX specification
(docs/qonnx-custom-ops in fastmachinelearning/qonnx) bit for bit."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.errors import UnknownOpError

F32 = np.float32
QONNX = "qonnx.custom_op.general"


# -- the QONNX specification in numpy ------------------------------------------------

def int_range(bits: int, signed: bool, narrow: bool) -> tuple[int, int]:
    if signed:
        return -(2 ** (bits - 1)) + (1 if narrow else 0), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1 - (1 if narrow else 0)


def rounded(v: np.ndarray, mode: str) -> np.ndarray:
    """The seven rounding modes of the QONNX table (ROUND is half to even, UP / DOWN
    away from / toward zero, HALF_UP / HALF_DOWN ties away from / toward zero)."""
    a, sign = np.abs(v), np.sign(v)
    return {
        "ROUND": np.round(v), "CEIL": np.ceil(v), "FLOOR": np.floor(v),
        "UP": sign * np.ceil(a), "DOWN": sign * np.floor(a),
        "HALF_UP": sign * np.floor(a + 0.5), "HALF_DOWN": sign * np.ceil(a - 0.5),
    }[mode]


def spec_quant(x, scale, zeropt, bits, signed, narrow, mode):
    """IntQuant: scale, shift, clamp, round, then back to real values."""
    lo, hi = int_range(bits, signed, narrow)
    y = np.clip(x / scale + zeropt, lo, hi)
    return ((rounded(y, mode) - zeropt) * scale).astype(F32)


def spec_bipolar(x, scale):
    return (np.where(x >= 0, F32(1), F32(-1)) * scale).astype(F32)


def spec_trunc_v2(x, scale, zeropt, out_scale, out_bits, signed, narrow, mode):
    y = np.round(x / scale + zeropt)
    t = (2.0 ** np.round(np.log2(out_scale / scale))).astype(F32)
    lo, hi = int_range(out_bits, signed, narrow)
    y = rounded(np.clip(y / t, lo, hi), mode)
    return ((y - zeropt / t) * out_scale).astype(F32)


# -- models ------------------------------------------------------------------------------

def _model(nodes, inits, x_shape, y_shape=None) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "qonnx",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         y_shape or x_shape)],
                          [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid(QONNX, 1)])
    m.ir_version = min(m.ir_version, onnx.IR_VERSION)
    return m


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    m = fonnx.load(model)
    return fluid.Executor(fluid.CPUPlace()).run(
        m.program, feed={m.feed_names[0]: x}, fetch_list=m.fetch_names, scope=m.scope)[0]


RNG = np.random.default_rng(2)
#: values with exact ties (k + 0.5 steps) and values beyond the rails
X = np.concatenate([(RNG.standard_normal(300) * 3).astype(F32),
                    (np.arange(-40, 41) * F32(0.125)).astype(F32)]).reshape(1, -1)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("signed,narrow", [(True, False), (True, True), (False, False),
                                           (False, True)])
@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "CEIL", "HALF_UP", "HALF_DOWN", "UP",
                                  "DOWN"])
def test_quant_equals_the_spec(bits, signed, narrow, mode):
    scale, zeropt = F32(0.25), F32(0 if signed else 1)
    node = helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], domain=QONNX,
                            signed=int(signed), narrow=int(narrow), rounding_mode=mode)
    m = _model([node], [("s", scale), ("z", zeropt), ("b", F32(bits))], list(X.shape))
    got = _run(m, X)
    want = spec_quant(X, scale, zeropt, bits, signed, narrow, mode)
    np.testing.assert_array_equal(got, want)
    lo, hi = int_range(bits, signed, narrow)
    levels = np.unique(np.round(got / scale + zeropt))
    assert levels.min() >= lo and levels.max() <= hi and len(levels) <= hi - lo + 1


def test_a_network_of_quant_bipolar_and_trunc_nodes_equals_the_spec():
    """x -Quant(8)-> MatMul by Quant(4-bit, per-column scales) weights -> Quant(2, unsigned)
    of a Relu; the 8-bit input also through Trunc (8 -> 4 bits) and BipolarQuant."""
    w = RNG.standard_normal((X.shape[1], 6)).astype(F32)
    w_scale = (np.abs(w).max(axis=0, keepdims=True) / 7).astype(F32)
    nodes = [
        helper.make_node("Quant", ["x", "s8", "z0", "b8"], ["xq"], domain=QONNX, signed=1),
        helper.make_node("Quant", ["w", "sw", "z0", "b4"], ["wq"], domain=QONNX, signed=1,
                         narrow=1),
        helper.make_node("MatMul", ["xq", "wq"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Quant", ["r", "sa", "z0", "b2"], ["a"], domain=QONNX, signed=0),
        helper.make_node("Trunc", ["xq", "s8", "z0", "b8", "s4", "b4"], ["t"], domain=QONNX,
                         rounding_mode="FLOOR"),
        helper.make_node("BipolarQuant", ["t", "sb"], ["bq"], domain=QONNX),
        helper.make_node("ReduceSum", ["bq"], ["bs"], keepdims=1),
        helper.make_node("Add", ["a", "bs"], ["y"]),
    ]
    inits = [("w", w), ("s8", F32(0.05)), ("z0", F32(0)), ("b8", F32(8)), ("sw", w_scale),
             ("b4", F32(4)), ("sa", F32(3.0)), ("b2", F32(2)), ("s4", F32(0.8)),
             ("sb", F32(0.5))]
    m = _model(nodes, inits, list(X.shape), [1, 6])
    got = _run(m, X)
    xq = spec_quant(X, F32(0.05), F32(0), 8, True, False, "ROUND")
    wq = spec_quant(w, w_scale, F32(0), 4, True, True, "ROUND")
    a = spec_quant(np.maximum(xq @ wq, 0), F32(3.0), F32(0), 2, False, False, "ROUND")
    t = spec_trunc_v2(xq, F32(0.05), F32(0), F32(0.8), 4, True, False, "FLOOR")
    want = a + spec_bipolar(t, F32(0.5)).sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(got, want.astype(F32))
    assert len(np.unique(np.round(a / 3.0))) <= 4  # 2 bits unsigned


def test_trunc_version_1_and_bipolar_quant_equal_the_spec():
    node = helper.make_node("Trunc", ["x", "s", "z", "bi", "bo"], ["y"], domain=QONNX,
                            rounding_mode="ROUND")
    m = _model([node], [("s", F32(0.125)), ("z", F32(0)), ("bi", F32(8)), ("bo", F32(4))],
               list(X.shape))
    y = np.round(X / F32(0.125))
    want = ((np.round(y / F32(16))) * F32(0.125)).astype(F32)
    np.testing.assert_array_equal(_run(m, X), want)
    node = helper.make_node("BipolarQuant", ["x", "s"], ["y"], domain=QONNX)
    m = _model([node], [("s", F32(0.7))], list(X.shape))
    np.testing.assert_array_equal(_run(m, X), spec_bipolar(X, F32(0.7)))


def test_a_bitwidth_computed_at_run_time_is_refused_by_name():
    node = helper.make_node("Quant", ["x", "s", "z", "x"], ["y"], domain=QONNX)
    m = _model([node], [("s", F32(0.1)), ("z", F32(0))], [1, 4])
    with pytest.raises(UnknownOpError, match=r"bitwidth \(input #3\) must be known"):
        fonnx.load(m)


# -- QONNX networks into fluid-hw's fixed point ---------------------------------------------

def brevitas_mlp(rng: np.random.Generator, bits: int, out_bits: int = 8,
                 sizes: tuple[int, ...] = (16, 32, 24, 10)) -> onnx.ModelProto:
    """The shape of a Brevitas export: an 8-bit input Quant; per layer a narrow
    ``bits``-bit per-output-channel weight Quant, MatMul, a float bias Add, Relu and an
    unsigned ``bits``-bit activation Quant; the last layer's output ``out_bits`` signed."""
    inits = [("z", F32(0)), ("b8", F32(8)), ("bw", F32(bits)), ("bo", F32(out_bits)),
             ("sx", F32(0.05))]
    nodes = [helper.make_node("Quant", ["x", "sx", "z", "b8"], ["xq"], domain=QONNX,
                              signed=1)]
    x = "xq"
    for i, (k, c) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((k, c)) / np.sqrt(k)).astype(F32)
        sw = (np.abs(w).max(axis=0, keepdims=True) / (2 ** (bits - 1) - 1)).astype(F32)
        inits += [(f"w{i}", w), (f"sw{i}", sw), (f"b{i}", (rng.standard_normal(c) * 0.1)
                                                 .astype(F32)),
                  (f"sa{i}", F32(0.4 / (2**bits - 1) if i < len(sizes) - 2 else 0.1))]
        last = i == len(sizes) - 2
        nodes += [helper.make_node("Quant", [f"w{i}", f"sw{i}", "z", "bw"], [f"wq{i}"],
                                   domain=QONNX, signed=1, narrow=1),
                  helper.make_node("MatMul", [x, f"wq{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        y = f"a{i}"
        if not last:
            nodes.append(helper.make_node("Relu", [y], [f"r{i}"]))
            y = f"r{i}"
        nodes.append(helper.make_node("Quant", [y, f"sa{i}", "z", "bo" if last else "bw"],
                                      ["y" if last else f"q{i}"], domain=QONNX,
                                      signed=int(last)))
        x = f"q{i}"
    return _model(nodes, inits, [None, sizes[0]], [None, sizes[-1]])


def _run_program(program, m, x):
    return fluid.Executor(fluid.CPUPlace()).run(
        program, feed={m.feed_names[0]: x}, fetch_list=m.fetch_names, scope=m.scope)[0]


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_qonnx_network_folds_into_fixed_point(bits, record_property):
    """Narrow layers (<= 4-bit outputs) become quantized_fc + multi_threshold whose
    thresholds take the float bias exactly, as FINN does: equal to the QONNX model; the
    8-bit output layers a requantize (the float bias rounded to the accumulator's
    scale): within one step."""
    from fluid_hw.passes.qdq_fold import fold_qdq

    rng = np.random.default_rng(bits)
    model = brevitas_mlp(rng, bits, out_bits=min(bits, 4) if bits <= 4 else 8)
    m = fonnx.load(model)
    x = (rng.standard_normal((256, 16))).astype(F32)
    want = _run_program(m.program, m, x)
    prog = fold_qdq(m.program, m.scope)
    kinds = [op.type for op in prog.global_block().ops]
    assert kinds[0] == "quantize" and kinds[-1] == "dequantize"
    assert kinds.count("quantized_fc") == 3 and "int_quant" not in kinds
    got = _run_program(prog, m, x)
    if bits <= 4:
        assert kinds.count("multi_threshold") == 3
        np.testing.assert_array_equal(got, want)
    else:
        assert kinds.count("requantize") == 3
        d = np.abs(got.astype(np.float64) - want) / 0.1
        record_property("differs_from_qonnx", f"{int((d > 1e-3).sum())} of {d.size}")
        assert d.max() <= 2 + 1e-3 and (d > 1e-3).mean() < 0.02


@pytest.mark.slow
@pytest.mark.parametrize("bits", [2, 4])
def test_qonnx_network_compiles_and_simulates_bit_exactly(bits, tmp_path):
    from fluid_hw.backends.fpga import compile_program
    from fluid_hw.backends.fpga import simulate as simulate_build
    from fluid_hw.hls.folding import FoldingBudget

    rng = np.random.default_rng(bits)
    model = brevitas_mlp(rng, bits, out_bits=bits)
    m = fonnx.load(model)
    x = rng.standard_normal((32, 16)).astype(F32)
    st = compile_program(m.program, m.scope, tmp_path, feeds=m.feed_names,
                         fetches=m.fetch_names, target="sim", budget=FoldingBudget(macs=8))
    assert "multi_threshold" in [op.type for op in st.program.global_block().ops]
    keys = simulate_build(tmp_path, inputs={m.feed_names[0]: x})
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 32
    np.testing.assert_array_equal(_run_program(st.program, m, x), _run_program(m.program, m, x))
