"""Channel concat in a dataflow graph: an inception-like block (a stem convolution forked
into a 3x3 branch, a 1x1 branch and a 3x3 max-pool branch, joined along the channels)
and a concat of two fully-connected outputs, compiled from a float program with
calibration data: quantised to ``quantized_concat``, lowered to ``concat`` stages with
every stage's model equal to the golden value, and in Verilator bit for bit against
the golden model under random output backpressure, at the estimated initiation
interval; the same model through ONNX (Concat) compiles to the same hardware."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.backends.fpga.simulate import compare_stages
from fluid_hw.hls.folding import FoldingBudget
from fluid_hw.hls.lower import lower, lowering_hash
from fluid_hw.passes import QuantConfig, QuantizationError, quantize

L = fluid.layers
N = 32
BUDGET = FoldingBudget(macs=8)
KINDS = ["conv", "conv", "conv", "maxpool", "concat", "avgpool", "mvau", "mvau", "concat",
         "mvau"]


def _scope(startup: fluid.Program) -> fluid.Scope:
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return scope


def _inception() -> tuple[fluid.Program, fluid.Scope, str]:
    """1x1 stem (4 ch) -> [3x3 (5 ch), the bottleneck] + [1x1 (3 ch)] + [3x3 max pool (4
    ch)] -> concat (12 ch) -> global average pool -> [fc 6, relu] + [fc 3] -> concat ->
    relu -> fc 5."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[3, 8, 8], dtype="float32")
        s = L.conv2d(x, 4, 1, act="relu")
        a = L.conv2d(s, 5, 3, padding=1, act="relu")
        b = L.conv2d(s, 3, 1, act="relu")
        p = L.pool2d(s, 3, pool_type="max", pool_stride=1, pool_padding=1)
        v = L.pool2d(L.concat([a, b, p], axis=1), pool_type="avg", global_pooling=True)
        v = L.relu(L.concat([L.fc(v, 6, act="relu"), L.fc(v, 3)], axis=1))
        out = L.fc(v, 5)
    return main.clone(for_test=True), _scope(startup), out.name


def _data(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((N, 3, 8, 8)).astype(np.float32)


def test_inception_quantises_to_concats_and_lowers_to_a_graph():
    prog, scope, fetch = _inception()
    x = _data(0)
    q = quantize(prog, [{"x": x}], scope=scope, executor=fluid.Executor(),
                 fetch_names=[fetch], feed_names=["x"])
    cats = [op for op in q.global_block().ops if op.type == "quantized_concat"]
    assert len(cats) == 2 and not any(op.type == "concat" for op in q.global_block().ops)
    for op in cats:  # the input of the largest scale passes unchanged, the others rescale
        pairs = list(zip(op.attr("multipliers"), op.attr("shifts")))
        assert (1, 0) in pairs and all(n > 0 for m, n in pairs if (m, n) != (1, 0))
    # the golden model is close to float
    (f,) = fluid.Executor().run(prog, feed={"x": x}, fetch_list=[fetch], scope=scope)
    (g,) = fluid.Executor().run(q, feed={"x": x}, fetch_list=[fetch], scope=scope)
    assert np.abs(f - g).max() < 0.1 * np.abs(f).max()

    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch], budget=BUDGET)
    assert [s.kind for s in low.stages] == KINDS
    img, vec = (k for k, s in enumerate(low.stages) if s.kind == "concat")
    # the image concat reads the 3x3 branch, the 1x1 branch and the pool, a pixel of each
    # in turn (HWC out); the vector concat the two fc stages, and the relu after it folds
    assert [low.stages[p].kind for p in low.graph.inputs[img]] == ["conv", "conv", "maxpool"]
    assert low.specs[img].groups == 64 and low.specs[img].blocks == [5, 3, 4]
    assert low.specs[vec].groups == 1 and low.specs[vec].blocks == [6, 3]
    assert low.stages[vec].relu and not low.stages[img].relu
    assert low.stages[vec].out_format.lo == 0
    # the short branches wait for the long one: their FIFOs are sized beyond the default
    skip = dict(low.graph.edge_fifo)
    assert skip[(img, 1)] > low.fifo_depth and skip[(img, 2)] > low.fifo_depth
    # every stage's model equals the golden value it stands for, the whole pipeline too
    names = sorted({low.partition.hw_input, *(v for s in low.stages for v in (s.out_var,
                                                                           *s.in_vars))})
    golden = dict(zip(names, fluid.Executor().run(q, feed={"x": x}, fetch_list=names,
                                                   scope=scope)))
    res = compare_stages(low, golden)
    assert res["first_divergence"] is None
    assert [r["mismatches"] for r in res["stages"]] == [0] * len(KINDS)


def test_a_concat_along_another_axis_stays_in_float():
    """Only a channel concat quantises: one along the height is no op of the quantised
    region (a float island with float_fallback, else a clear error naming it)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[3, 8, 8], dtype="float32")
        h = L.concat([L.conv2d(x, 4, 3, padding=1), L.conv2d(x, 4, 1)], axis=2)
        out = L.fc(h, 5)
    prog, scope = main.clone(for_test=True), _scope(startup)
    x = _data(1)
    with pytest.raises(QuantizationError, match=r"op concat \(-> concat_\d+\.tmp_0\) has no fixed-"
                                                r"point definition.*concat of quantised values "
                                                r"along the channel axis \(axis 1\)"):
        quantize(prog, [{"x": x}], scope=scope, executor=fluid.Executor(),
                 fetch_names=[out.name], feed_names=["x"])
    q = quantize(prog, [{"x": x}], QuantConfig(float_fallback=True), scope=scope,
                 executor=fluid.Executor(), fetch_names=[out.name], feed_names=["x"])
    types = [op.type for op in q.global_block().ops]
    assert "concat" in types and "quantized_concat" not in types


def _onnx(tmp_path, prog: fluid.Program, scope: fluid.Scope, fetch: str
          ) -> tuple[fluid.Program, fluid.Scope, list[str], list[str]]:
    """The model exported to ONNX and imported back."""
    from fluid_hw.frontend import onnx as fonnx

    fonnx.export(prog, tmp_path / "m.onnx", feed_names=["x"], fetch_names=[fetch], scope=scope)
    m = fonnx.load(tmp_path / "m.onnx")
    assert sum(op.type == "concat" for op in m.program.global_block().ops) == 2
    return m.program, m.scope, m.feed_names, m.fetch_names


def test_an_onnx_model_with_concat_lowers_to_the_same_hardware(tmp_path):
    """ONNX Concat imports as concat: the round trip quantises and lowers to the same
    stages, folding and parameters (the same lowering hash) as the Fluid program."""
    prog, scope, fetch = _inception()
    oprog, oscope, feeds, fetches = _onnx(tmp_path, prog, scope, fetch)
    x = _data(0)
    hashes = []
    for p, s, fd, ft in ((prog, scope, ["x"], [fetch]), (oprog, oscope, feeds, fetches)):
        q = quantize(p, [{fd[0]: x}], scope=s, executor=fluid.Executor(), fetch_names=ft,
                     feed_names=fd)
        low = lower(q, s, feed_names=fd, fetch_names=ft, budget=BUDGET)
        assert [st.kind for st in low.stages] == KINDS
        hashes.append(lowering_hash(low))
    assert hashes[0] == hashes[1]


@pytest.mark.slow
def test_inception_is_bit_exact_under_backpressure_at_the_estimated_rate(tmp_path):
    prog, scope, fetch = _inception()
    out = tmp_path / "inc"
    compile_program(prog, scope, out, feeds=["x"], fetches=[fetch],
                    calibration={"x": _data(0)}, budget=BUDGET)
    design = json.loads((out / "design.json").read_text())
    cats = [s for s in design["stages"] if s["kind"] == "concat"]
    assert [len(s["inputs"]) for s in cats] == [3, 2] and design["edge_fifo"]
    est = read_report(out)["estimate"]
    for ready in (1.0, 0.4):
        keys = simulate_build(out, {"x": _data(1)}, ready_prob=ready)
        assert keys["bit_exact"] and keys["mismatches"] == 0 and keys["inputs"] == N
        if ready == 1.0:  # no stall in steady state: the estimated rate and latency
            assert keys["measured"]["initiation_interval"] == est["initiation_interval"]
            assert keys["measured"]["latency_cycles"] == pytest.approx(
                est["latency_cycles"], rel=0.02)


def _branches() -> tuple[fluid.Program, dict[str, np.ndarray], str]:
    """conv 3x3 (4 ch, relu) -> [conv 1x1 (3 ch)] + [conv 1x1 (2 ch, relu)] -> concat
    (5 ch) -> fc 3 on [2, 6, 6]: a concat whose inputs have scales of their own."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[2, 6, 6], dtype="float32")
        h = L.conv2d(x, 4, 3, padding=1, act="relu")
        c = L.concat([L.conv2d(h, 3, 1), L.conv2d(h, 2, 1, act="relu")], axis=1)
        out = L.fc(c, 3)
    return main.clone(for_test=True), dict(_scope(startup).vars), out.name


def _calibration(seed: int, gain: tuple[float, float]) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((N, 2, 6, 6))
    return (x * np.array(gain)[None, :, None, None]).astype(np.float32)


@pytest.mark.slow
def test_a_runtime_concat_runs_a_recalibrated_model_without_a_rebuild(tmp_path):
    """Built once with runtime weights, the concat's multipliers and shifts are loaded
    like every other parameter: a model calibrated on other data (other scale ratios
    between the branches, so other concat multipliers and shifts) has the same design
    and runs bit-exact on the first build's simulated hardware, and the first model's
    parameters loaded back give its outputs again."""
    from fluid_hw.drivers import Accelerator, get_transport, load_param_image
    from fluid_hw.frontend import io as fio

    prog, params, fetch = _branches()
    builds = {}
    for tag, calib in (("a", _calibration(0, (1.0, 1.0))), ("b", _calibration(1, (4.0, 0.3)))):
        scope = fluid.Scope()
        scope.vars.update({k: np.array(v) for k, v in params.items()})
        builds[tag] = (tmp_path / tag, compile_program(
            prog, scope, tmp_path / tag, feeds=["x"], fetches=[fetch], target="sim",
            weights="runtime", calibration={"x": calib}, budget=BUDGET))
    (a, st_a), (b, st_b) = builds["a"], builds["b"]
    assert [s.kind for s in st_a.lowered.stages] == ["conv", "conv", "conv", "concat", "mvau"]
    cat_a, cat_b = (next(s for s in st.lowered.specs if s.kind == "concat")
                    for st in (st_a, st_b))
    assert cat_a.runtime and cat_a.latency == cat_b.latency == 6
    assert (cat_a.multipliers, cat_a.shifts) != (cat_b.multipliers, cat_b.shifts)
    assert st_a.top.design_hash == st_b.top.design_hash
    assert (a / "accelerator.v").read_bytes() == (b / "accelerator.v").read_bytes()
    seg = next(s for s in st_a.top.segments if s.kind == "concat")
    assert (seg.depth, seg.words_per_entry) == (2, 1)
    assert "Concat entries" in (a / "registers.md").read_text()
    images = [dict(load_param_image(d / "weights.npz")) for d in (a, b)]
    assert not np.array_equal(images[0][seg.base], images[1][seg.base])

    def golden(build, x):
        scope = fluid.Scope()
        p, feeds, fetches = fio.load_inference_model(build / "model", fluid.Executor(),
                                                     scope=scope)
        return fluid.Executor().run(p, feed={feeds[0]: x}, fetch_list=fetches, scope=scope)

    x = _calibration(2, (2.0, 1.0))[:12]
    with get_transport("sim", a) as hw:  # build a's hardware, verilated once
        outs = {}
        for build in (b, a):  # b's parameters first, then a's loaded back
            acc = Accelerator.open(build, hw)
            (outs[build],) = acc.run(x)
            (want,) = golden(build, x)
            assert outs[build].tobytes() == want.tobytes(), build.name
        assert not np.array_equal(outs[a], outs[b])
