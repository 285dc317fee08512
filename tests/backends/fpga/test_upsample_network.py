"""A decoder-like network -- conv -> nearest upsampling x2 -> conv, the shape of a U-Net's
up path -- compiled from a float program with calibration data for the sim target (the
first conv two output channels a cycle, so the upsample stage has two lanes) and
simulated in Verilator on 32 inputs: bit for bit against the golden model, every stage
too, at the estimated initiation interval and latency, and under random output
backpressure."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.hls.folding import FoldingBudget

pytestmark = pytest.mark.slow

L = fluid.layers
N = 32


def _decoder() -> tuple[fluid.Program, fluid.Scope, str]:
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=[2, 5, 5], dtype="float32")
        h = L.conv2d(x, 4, 3, padding=1, act="relu")
        h = L.resize_nearest(h, scale=2, align_corners=False)
        y = L.conv2d(h, 3, 3, padding=1)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return main.clone(for_test=True), scope, y.name


def test_decoder_is_bit_exact_at_the_estimated_rate(tmp_path):
    prog, scope, fetch = _decoder()
    rng = np.random.default_rng(0)
    calib, x = (rng.standard_normal((N, 2, 5, 5)).astype(np.float32) for _ in range(2))
    out = tmp_path / "dec"
    st = compile_program(prog, scope, out, feeds=["x"], fetches=[fetch],
                         calibration={"x": calib}, budget=FoldingBudget(macs=8),
                         folding={"conv2d_0": (2, 1)})
    assert [s.kind for s in st.lowered.stages] == ["conv", "upsample", "conv"]
    assert st.lowered.specs[1].out_shape == (4, 10, 10)
    assert st.lowered.top().lanes[1] == (2, 2)
    keys = simulate_build(out, {"x": x}, debug_stages=True)
    assert keys["bit_exact"] and keys["mismatches"] == 0 and keys["inputs"] == N
    dbg = keys["debug_stages"]
    assert dbg["first_divergence"] is None
    assert [s["mismatches"] for s in dbg["stages"]] == [0, 0, 0]
    r = read_report(out)
    est, got = r["estimate"], r["measured"]
    print(f"\ndecoder: II measured {got['initiation_interval']} / estimated "
          f"{est['initiation_interval']}, latency {got['latency_cycles']} / "
          f"{est['latency_cycles']}; bottleneck {est['bottleneck']}")
    assert got["initiation_interval"] == pytest.approx(est["initiation_interval"], rel=0.02)
    assert got["latency_cycles"] == pytest.approx(est["latency_cycles"], rel=0.05)
    # the output stalled at random: nothing lost, duplicated or reordered
    keys = simulate_build(out, {"x": x[:8]}, ready_prob=0.4)
    assert keys["bit_exact"] and keys["mismatches"] == 0 and keys["inputs"] == 8
