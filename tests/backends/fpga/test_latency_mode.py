"""``compile --optimize latency``: a small MLP (layers with NF > 1 and SF > 1, NF = 1,
SF = 1) built in latency mode is bit-exact in Verilator (also under random output
back-pressure), its MVAUs carry ``stream_input``, its measured latency (first input
beat to last output beat) equals the estimate and is shorter than the same folding's in
throughput mode (the timing model, exact in both modes: tests/rtl/test_mvau_stream.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.backends.fpga.options import CompileOptions
from fluid_hw.errors import FluidError
from fluid_hw.hls.stages import estimate_pipeline

L = fluid.layers


def _mlp() -> tuple[fluid.Program, fluid.Scope, str]:
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=[12], dtype="float32")
        h = L.fc(L.fc(x, 16, act="relu"), 8, act="relu")
        y = L.fc(h, 4)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return main.clone(for_test=True), scope, y.name


def test_unknown_optimize_mode_is_refused():
    with pytest.raises(FluidError, match="optimize mode"):
        CompileOptions(optimize="area")


@pytest.mark.slow
def test_latency_mode_mlp_is_bit_exact_and_its_latency_exact_in_verilator(tmp_path):
    program, scope, fetch = _mlp()
    rng = np.random.default_rng(0)
    out = tmp_path / "b"
    # fc_0: NF 4 x SF 3; fc_1: NF 1 x SF 4; fc_2: NF 4 x SF 1
    st = compile_program(program, scope, out, feeds=["x"], fetches=[fetch], target="sim",
                         calibration={"x": rng.standard_normal((64, 12)).astype(np.float32)},
                         folding={"fc_0": (4, 4), "fc_1": (8, 4),
                                  "fc_2": (1, 8)},
                         optimize="latency")
    specs = st.lowered.specs
    assert [(s.nf, s.sf) for s in specs] == [(4, 3), (1, 4), (4, 1)]
    assert all(s.stream_input for s in specs)
    assert read_report(out)["options"]["optimize"] == "latency"
    keys = simulate_build(out, {"x": rng.standard_normal((16, 12)).astype(np.float32)})
    assert keys["bit_exact"] and keys["mismatches"] == 0
    est = read_report(out)["estimate"]
    assert keys["measured"]["latency_cycles"] == est["latency_cycles"]
    assert keys["measured"]["initiation_interval"] == est["initiation_interval"]
    throughput = estimate_pipeline([replace(s, stream_input=False) for s in specs],
                                   fifo_depth=st.lowered.fifo_depth)
    assert est["latency_cycles"] < throughput.latency_cycles
    keys = simulate_build(out, {"x": rng.standard_normal((8, 12)).astype(np.float32)},
                          ready_prob=0.4)  # random back-pressure
    assert keys["bit_exact"] and keys["mismatches"] == 0
