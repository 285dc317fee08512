"""Residual networks (a dataflow graph: forks, joins, skip FIFOs) and CPU fallback
anywhere (several accelerator regions with host segments between them), compiled from
float programs with calibration data, simulated in Verilator bit for bit against the
golden model -- the residual block also under random output backpressure -- and run
through the driver."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.backends.fpga.steps import BuildError
from fluid_hw.drivers import Accelerator
from fluid_hw.frontend import io as fio
from fluid_hw.hls.folding import FoldingBudget
from fluid_hw.hls.partition import segment
from fluid_hw.passes import QuantConfig, quantize

L = fluid.layers
N = 32
BUDGET = FoldingBudget(macs=8)


def _scope(startup: fluid.Program) -> fluid.Scope:
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return scope


def _residual() -> tuple[fluid.Program, fluid.Scope, str]:
    """conv -> relu -> [conv -> relu -> conv] + skip -> relu -> [conv s2] + [1x1 s2 skip]
    -> relu -> global average pool -> fc: both kinds of ResNet block, small."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[3, 8, 8], dtype="float32")
        h = L.conv2d(x, 4, 3, padding=1, act="relu")
        b = L.conv2d(L.conv2d(h, 4, 3, padding=1, act="relu"), 4, 3, padding=1)
        h = L.relu(L.elementwise_add(b, h))
        b = L.conv2d(L.conv2d(h, 6, 3, stride=2, padding=1, act="relu"), 6, 3, padding=1)
        s = L.conv2d(h, 6, 1, stride=2)
        h = L.relu(L.elementwise_add(b, s))
        out = L.fc(L.pool2d(h, pool_type="avg", global_pooling=True), 5)
    return main.clone(for_test=True), _scope(startup), out.name


def _golden(build, x):
    scope = fluid.Scope()
    prog, feeds, fetches = fio.load_inference_model(build / "model", fluid.Executor(),
                                                    scope=scope)
    return fluid.Executor().run(prog, feed={feeds[0]: x}, fetch_list=fetches, scope=scope)


def test_residual_blocks_quantise_to_joins_and_lower_to_a_graph():
    prog, scope, fetch = _residual()
    x = np.random.default_rng(0).standard_normal((N, 3, 8, 8)).astype(np.float32)
    q = quantize(prog, [{"x": x}], scope=scope, executor=fluid.Executor(),
                 fetch_names=[fetch], feed_names=["x"])
    types = [op.type for op in q.global_block().ops]
    assert types.count("quantized_add") == 2 and "elementwise_add" not in types
    from fluid_hw.hls.lower import lower
    from fluid_hw.rtl import pipeline_model

    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch], budget=BUDGET)
    kinds = [s.kind for s in low.stages]
    assert kinds.count("add") == 2
    joins = [k for k, s in enumerate(low.stages) if s.kind == "add"]
    # the first join reads the block's last conv and, through a fork, the block input
    assert all(len(low.graph.inputs[k]) == 2 for k in joins)
    producers = low.graph.inputs[joins[0]]
    assert low.stages[producers[1]].kind == "conv" and producers[1] < producers[0]
    # the skip path waits for the long branch: its FIFO is sized beyond the default
    skip = dict(low.graph.edge_fifo)
    assert (joins[0], 1) in skip and skip[(joins[0], 1)] > low.fifo_depth
    # the stage models over the graph equal the golden model bit for bit
    xin, gold = fluid.Executor().run(
        q, feed={"x": x}, fetch_list=[low.partition.hw_input, low.partition.hw_output],
        scope=scope)
    got = pipeline_model(low.specs, low.to_stream(xin), low.graph.inputs)
    assert np.array_equal(low.from_stream(got), gold)


@pytest.mark.slow
def test_residual_network_is_bit_exact_under_backpressure(tmp_path):
    prog, scope, fetch = _residual()
    x = np.random.default_rng(1).standard_normal((N, 3, 8, 8)).astype(np.float32)
    out = tmp_path / "res"
    compile_program(prog, scope, out, feeds=["x"], fetches=[fetch], calibration={"x": x},
                    budget=BUDGET)
    design = json.loads((out / "design.json").read_text())
    assert sum(len(s["inputs"]) == 2 for s in design["stages"]) == 2 and design["edge_fifo"]
    for ready in (1.0, 0.4):
        keys = simulate_build(out, {"x": x}, ready_prob=ready)
        assert keys["bit_exact"] and keys["mismatches"] == 0 and keys["inputs"] == N
        if ready == 1.0:  # no stall in steady state: the estimated rate
            est = read_report(out)["estimate"]["initiation_interval"]
            assert keys["measured"]["initiation_interval"] == pytest.approx(est, rel=0.1)


def _fallback() -> tuple[fluid.Program, fluid.Scope, str]:
    """fc -> softmax (no lowering) -> fc -> sqrt (a table) -> fc -> softmax."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[16], dtype="float32")
        h = L.softmax(L.fc(x, size=12, act="relu"))
        h = L.sqrt(L.fc(h, size=8, act="relu"))
        prob = L.softmax(L.fc(h, size=4))
    return main.clone(for_test=True), _scope(startup), prob.name


def test_an_op_without_lowering_in_the_middle_cuts_the_accelerator_into_regions():
    prog, scope, fetch = _fallback()
    x = np.random.default_rng(2).standard_normal((N, 16)).astype(np.float32)
    q = quantize(prog, [{"x": x}], QuantConfig(float_fallback=True), scope=scope,
                 executor=fluid.Executor(), fetch_names=[fetch], feed_names=["x"])
    seg = segment(q, ["x"], [fetch])
    assert len(seg.regions) == 2
    where = [(d["where"], d["ops"]) for d in seg.describe()["segments"]]
    assert where[0] == ("host", ["quantize"])
    assert where[2][0] == "host" and "softmax" in where[2][1]
    assert where[3][0] == "fpga region 1" and "quantized_table" in where[3][1]
    assert where[4] == ("host", ["dequantize", "softmax"])
    # each region alone is an ordinary single-region program
    for k, r in enumerate(seg.regions):
        sub = seg.sub_program(k)
        assert {op.type for op in sub.global_block().ops} <= {
            "quantized_fc", "requantize", "quantized_table"}
        assert sub.global_block().has_var(r.hw_input)


@pytest.mark.slow
def test_a_model_with_host_segments_runs_bit_exactly_through_the_driver(tmp_path):
    prog, scope, fetch = _fallback()
    x = np.random.default_rng(3).standard_normal((N, 16)).astype(np.float32)
    out = tmp_path / "fb"
    compile_program(prog, scope, out, feeds=["x"], fetches=[fetch], calibration={"x": x},
                    budget=BUDGET)
    doc = json.loads((out / "segments.json").read_text())
    assert len(doc["regions"]) == 2 and len(doc["host"]) == 3
    assert (out / "regions" / "0" / "accelerator.v").exists()
    assert not (out / "accelerator.v").exists()
    report = read_report(out)
    assert [r["index"] for r in report["regions"]] == [0, 1]
    assert report["options"]["target"] == "sim" and report["options"]["folding"]["mode"] == "auto"
    keys = simulate_build(out, {"x": x})
    assert keys["bit_exact"] and keys["mismatches"] == 0
    assert all(r["simulate"]["bit_exact"] for r in keys["regions"])
    with Accelerator.open(out) as acc:
        (got,) = acc.run(x)
    (want,) = _golden(out, x)
    assert np.array_equal(got, want)
    exe = fluid.Executor(fluid.FPGAPlace(out))  # the whole model as a place
    try:
        (placed,) = exe.run(prog, feed={"x": x}, fetch_list=[fetch])
    finally:
        exe.close()
    assert np.array_equal(placed, want)
    from fluid_hw.backends.fpga import bitstream

    # one bitstream holds both regions (tests/backends/fpga/test_bitstream_regions.py);
    # built for the simulator, the build names no board to make it for
    with pytest.raises(BuildError, match=r"target 'sim' is not a board.*--board"):
        bitstream(out)


def _forked_input() -> tuple[fluid.Program, fluid.Scope, str]:
    """The input feeds a 3x3 conv -> depthwise conv branch and a 1x1 conv branch that
    join: a fork at the input, and the bottleneck (depthwise) stage on the long branch."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[4, 8, 8], dtype="float32")
        h = L.conv2d(L.conv2d(x, 8, 3, padding=1, act="relu"), 8, 3, padding=1, groups=8,
                     act="relu")
        h = L.sigmoid(L.elementwise_add(h, L.conv2d(x, 8, 1)))
        out = L.fc(L.pool2d(h, pool_type="avg", global_pooling=True), 5)
    return main.clone(for_test=True), _scope(startup), out.name


@pytest.mark.slow
def test_an_onnx_round_trip_compiles_to_the_same_graph_at_the_estimated_rate(tmp_path):
    """Exported to ONNX (per-channel biases as [1, C, 1, 1] constants) and imported back,
    the model lowers to the same stages as the Fluid program; in Verilator it is
    bit-exact and runs at the estimated initiation interval (the join's FIFOs keep the
    forked branches from stalling the depthwise stage)."""
    from fluid_hw.frontend import onnx as fonnx

    prog, scope, fetch = _forked_input()
    x = np.random.default_rng(4).standard_normal((N, 4, 8, 8)).astype(np.float32)
    fonnx.export(prog, tmp_path / "m.onnx", feed_names=["x"], fetch_names=[fetch], scope=scope)
    m = fonnx.load(tmp_path / "m.onnx")
    st = compile_program(m.program, m.scope, tmp_path / "b", feeds=m.feed_names,
                         fetches=m.fetch_names, calibration={m.feed_names[0]: x})
    assert [s.kind for s in st.lowered.stages] == ["conv", "dwconv", "conv", "add", "table",
                                                   "avgpool", "mvau"]
    keys = simulate_build(tmp_path / "b", {m.feed_names[0]: x})
    assert keys["bit_exact"] and keys["mismatches"] == 0
    est = read_report(tmp_path / "b")["estimate"]["initiation_interval"]
    assert keys["measured"]["initiation_interval"] == est
