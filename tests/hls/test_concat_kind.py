"""hls kind ``concat``: the stream order it lowers to (a pixel of each HWC image in turn;
each input's whole stream in turn otherwise, which a window stage after it refuses),
the refusal of other axes, and the timing model of a join that takes each element from
one input: a beat a cycle, and FIFOs sized from what each input holds."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga.simulate import compare_stages
from fluid_hw.hls.kinds import KINDS
from fluid_hw.hls.lower import join_fifo_depths, lower
from fluid_hw.hls.partition import LoweringError
from fluid_hw.hls.stages import estimate_pipeline, graph_times
from fluid_hw.passes import quantize
from fluid_hw.rtl import ConcatSpec, StageGraph, TableSpec
from fluid_hw.rtl.spec import spec_from_structure

L = fluid.layers
N = 16


def _transposed(after: str) -> tuple[fluid.Program, fluid.Scope, str]:
    """A stem conv, transposed (H <-> W: no longer HWC), two element-wise branches,
    concat, then ``after`` (an fc, or a conv)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[2, 4, 5], dtype="float32")
        t = L.transpose(L.conv2d(x, 3, 3, padding=1, act="relu"), [0, 1, 3, 2])
        h = L.concat([L.sigmoid(t), L.tanh(t)], axis=1)
        out = L.fc(h, 4) if after == "fc" else L.conv2d(h, 2, 3)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return main.clone(for_test=True), scope, out.name


def _quantised(after: str):
    prog, scope, fetch = _transposed(after)
    x = np.random.default_rng(3).standard_normal((N, 2, 4, 5)).astype(np.float32)
    q = quantize(prog, [{"x": x}], scope=scope, executor=fluid.Executor(),
                 fetch_names=[fetch], feed_names=["x"])
    return q, scope, fetch, x


def test_inputs_not_channel_fastest_are_joined_stream_by_stream():
    q, scope, fetch, x = _quantised("fc")
    low = lower(q, scope, feed_names=["x"], fetch_names=[fetch])
    assert [s.kind for s in low.stages] == ["conv", "table", "table", "concat", "mvau"]
    cat = low.specs[3]
    assert cat.groups == 1 and cat.blocks == [60, 60] and low.stages[3].layout["stream"] == \
        "each input's stream in turn"
    names = sorted({low.partition.hw_input, *(v for s in low.stages for v in (s.out_var,
                                                                           *s.in_vars))})
    golden = dict(zip(names, fluid.Executor().run(q, feed={"x": x}, fetch_list=names,
                                                   scope=scope)))
    res = compare_stages(low, golden)
    assert res["first_divergence"] is None and all(r["mismatches"] == 0 for r in res["stages"])


def test_a_window_stage_refuses_a_concat_that_is_not_hwc():
    q, scope, fetch, _ = _quantised("conv")
    with pytest.raises(LoweringError, match="arrives in an order that is not HWC"):
        lower(q, scope, feed_names=["x"], fetch_names=[fetch])


def test_a_concat_along_another_axis_is_refused_by_name():
    q, scope, fetch, _ = _quantised("fc")
    op = next(op for op in q.global_block().ops if op.type == "quantized_concat")
    op._set_attr("axis", 2)
    with pytest.raises(LoweringError, match=r"quantized_concat 'concat_\d+' \(-> concat_\d+"
                                            r"\.tmp_0\.int8\) joins along axis 2; the "
                                            r"accelerator joins along the channel axis \(1\)"):
        lower(q, scope, feed_names=["x"], fetch_names=[fetch])


def _graph(delay: int) -> tuple[list, StageGraph]:
    """The input (4 channels a pixel) forked into a chain of ``delay`` tables (the long
    branch) and straight into the concat's second port (the short one); lanes 2."""
    t = np.arange(256) - 128
    specs = [TableSpec(f"long{k}", (4, 3, 3), t, lanes=2) for k in range(delay)]
    specs.append(ConcatSpec("cat", ((4, 3, 3), (4, 3, 3)), lanes=2))
    inputs = [(k - 1,) for k in range(delay)] + [(delay - 1, -1)]
    return specs, StageGraph.of(inputs)


def test_timing_model_takes_each_element_from_its_input_a_beat_a_cycle():
    assert KINDS["concat"].port_order is not None and KINDS["add"].port_order is None
    specs, graph = _graph(1)
    gt = graph_times(specs, graph, 2, 2)
    take, a, b = gt.take[1], gt.port[(1, 0)], gt.port[(1, 1)]
    pa, pb = specs[1].positions()
    assert len(take) == 72 and (take[pa] >= a).all() and (take[pb] >= b).all()
    beats = take[::2]
    assert (np.diff(beats) >= 1).all() and (take[1::2] == beats).all()
    # the input arrives a beat a cycle on both ports, the concat takes 36 beats a pixel
    # of each in turn: it finishes no earlier than 36 beats after its first
    assert beats[-1] - beats[0] >= 35
    est = estimate_pipeline(specs, graph=graph)
    row = est.stages[1]
    assert row.cycles == 36 and row.shape == {"in": [[4, 3, 3], [4, 3, 3]], "out": [8, 3, 3]}
    assert est.initiation_interval == 36


def test_join_fifos_grow_with_the_long_branch():
    """The short branch's input piles up what arrives while the concat waits for the long
    branch: the deeper the long branch, the deeper the FIFOs."""
    depths = []
    for delay in (1, 6, 12):
        specs, graph = _graph(delay)
        d = join_fifo_depths(specs, graph, 36, 2)
        depths.append(d.get((delay, 1), 2))
        assert d.get((delay, 0)) == d.get((delay, 1))
    assert depths[0] < depths[1] < depths[2]


def test_runtime_concat_costs_its_rescalers_as_fitted_and_reads_back():
    """Runtime multipliers and shifts: a rescaler on every input (also where the const
    values need none), the estimate the Yosys fit's (the unit's added LUT4 and
    flip-flops within 10%), a stage longer; read back from its structure with the same
    estimate."""
    kind = KINDS["concat"]
    for shapes, ln, lut, ff in ((((8,), (4,)), 1, 276, 127), (((8,), (4,)), 4, 831, 241),
                                (((8,), (4,), (4,)), 1, 371, 159),
                                (((8,), (4,), (4,), ), 4, 1128, 240)):
        const = ConcatSpec("cat", shapes, multipliers=(20000,) * len(shapes),
                           shifts=(15,) * len(shapes), lanes=ln)
        rt = ConcatSpec("cat", shapes, lanes=ln, weights_mode="runtime")
        a, b = kind.resources(const, (ln, ln)), kind.resources(rt, (ln, ln))
        assert b.lut - a.lut == pytest.approx(lut, rel=0.1)
        assert b.ff - a.ff == pytest.approx(ff, rel=0.1)
        assert b.dsp == a.dsp == ln
        back = spec_from_structure(rt.structure())
        assert back.runtime and kind.resources(back, (ln, ln)) == b
        assert kind.times(back, (ln, ln), np.zeros(1))[0] == \
            kind.times(const, (ln, ln), np.zeros(1))[0] + 1
    plain = ConcatSpec("cat", ((4,), (4,)), lanes=1)
    assert kind.resources(ConcatSpec("cat", ((4,), (4,)), lanes=1, weights_mode="runtime"),
                          (1, 1)).dsp == 1 > kind.resources(plain, (1, 1)).dsp
