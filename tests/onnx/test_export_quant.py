"""Quantised programs out: fluid-hw's fixed-point programs (``passes.quantize``, and
``qdq_fold`` of an imported QDQ model) exported as QDQ ONNX, run by onnxruntime, equal
to the CPU executor within one output step per layer (how many outputs differ is
recorded)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import fluid_hw as fluid
from fluid_hw import onnx as fonnx
from fluid_hw.errors import UnknownOpError
from fluid_hw.frontend import models
from fluid_hw.ir.prune import prune
from fluid_hw.passes import quantize
from fluid_hw.passes.qdq_fold import fold_qdq
from tests.onnx.harness import check_exported, run_ort
from tests.onnx.qdq_models import float_cnn, qdq

F32 = np.float32


def _quantised(build):
    """A digits model, initialised, quantised by fluid-hw (calibrated on random data)."""
    m = build()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    with fluid.scope_guard(scope):
        exe.run(m.startup)
    inference = prune(m.test_program, [m.image.name], [m.prediction.name])
    rng = np.random.default_rng(5)
    shape = tuple(m.image.shape[1:])
    calib = [{m.image.name: rng.random((16, *shape)).astype(F32)} for _ in range(4)]
    logits = inference.global_block().ops[-1].input_arg_names[0]  # softmax's input
    q = quantize(inference, calib, scope=scope, executor=exe, fetch_names=[logits],
                 feed_names=[m.image.name])
    return q, scope, m.image.name, logits, rng.random((64, *shape)).astype(F32)


def _step_of(program: fluid.Program, fetch: str) -> float:
    """The quantisation step of ``fetch``: the scale of the dequantize writing it."""
    op = next(o for o in program.global_block().ops if fetch in o.output_arg_names)
    assert op.type == "dequantize"
    return float(op.attr("scale"))


def _compare(program, scope, feed: str, fetch: str, x: np.ndarray, record_property):
    want = fluid.Executor(fluid.CPUPlace()).run(program, feed={feed: x}, fetch_list=[fetch],
                                                scope=scope)[0]
    model = fonnx.export(program, feed_names=[feed], fetch_names=[fetch], scope=scope)
    check_exported(model)
    kinds = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= kinds
    got = run_ort(model, {feed: x})[0]
    steps = np.abs(got.astype(np.float64) - want) / _step_of(program, fetch)
    record_property("differs_from_cpu_executor",
                    f"{int((steps > 1e-3).sum())} of {steps.size}, max {steps.max():.0f} steps")
    return steps, model


@pytest.mark.parametrize("build", [models.digits_mlp, models.digits_cnn],
                         ids=lambda b: b.__name__)
def test_fluid_quantised_program_exports_as_qdq_that_onnxruntime_runs(build, record_property):
    q, scope, feed, fetch, x = _quantised(build)
    steps, model = _compare(q, scope, feed, fetch, x, record_property)
    # one step per layer at most: a difference in one layer can add to the next one's
    assert steps.max() <= 2 + 1e-3
    assert (steps > 1e-3).mean() < 0.05
    # the weights travel as int8 initializers, the layers as float ops between QDQ pairs
    inits = {t.name: t.data_type for t in model.graph.initializer}
    assert onnx.TensorProto.INT8 in inits.values()
    assert {"MatMul"} <= {n.op_type for n in model.graph.node}


def test_folded_qdq_model_exports_back_to_qdq(record_property):
    rng = np.random.default_rng(3)
    calib = [rng.standard_normal((8, 1, 8, 8)).astype(F32) for _ in range(4)]
    model = qdq(float_cnn(rng), calib, per_channel=True)
    m = fonnx.load(model)
    prog = fold_qdq(m.program, m.scope)
    x = rng.standard_normal((64, 1, 8, 8)).astype(F32)
    steps, exported = _compare(prog, m.scope, m.feed_names[0], m.fetch_names[0], x,
                               record_property)
    assert steps.max() <= 2 + 1e-3
    assert {"Conv", "MaxPool", "QuantizeLinear"} <= {n.op_type for n in exported.graph.node}


def test_a_requantize_after_an_unexported_op_is_refused_by_name():
    q, scope, feed, fetch, _ = _quantised(models.digits_mlp)
    block = q.global_block()
    fc = next(o for o in block.ops if o.type == "quantized_fc")
    fc._set_attr("weight_scale", [])  # as if not written by the quantisation pass
    with pytest.raises(UnknownOpError, match=r"quantized_fc.*weight_scale.*not recorded"):
        fonnx.export(q, feed_names=[feed], fetch_names=[fetch], scope=scope)
