"""A 1-channel convolutional network whose first convolution takes its windows from the
wide generator (SIMD 25 over a 1-channel 5x5 window: rtl.swg_wide), compiled from a
float program for ``--target sim`` and simulated in Verilator: bit for bit against the
golden model stage by stage, at the estimated initiation interval."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build

pytestmark = pytest.mark.slow

L = fluid.layers


def _program() -> tuple[fluid.Program, fluid.Scope, str]:
    """conv 4@5x5 pad 2 (relu) -> max pool 2 -> conv 4@3x3 (relu) -> fc 10 on 1x12x12."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=[1, 12, 12], dtype="float32")
        h = L.conv2d(x, 4, 5, padding=2, act="relu")
        h = L.pool2d(h, 2, "max", 2)
        h = L.conv2d(h, 4, 3, act="relu")
        y = L.fc(h, 10)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return main.clone(for_test=True), scope, y.name


def test_thin_input_convolution_on_the_wide_generator_is_bit_exact(tmp_path):
    program, scope, fetch = _program()
    rng = np.random.default_rng(0)
    out = tmp_path / "build"
    # conv2d_0 at 1 x 25: a whole window a cycle, 144 pixels x 4 neuron folds
    st = compile_program(program, scope, out, feeds=["x"], fetches=[fetch], target="sim",
                         calibration={"x": rng.standard_normal((32, 1, 12, 12))
                                      .astype(np.float32)},
                         folding={"conv2d_0": (1, 25), "conv2d_1": (2, 4)})
    first = st.lowered.specs[0]
    assert first.wide_window and not st.lowered.specs[2].wide_window
    keys = simulate_build(out, inputs={"x": rng.standard_normal((16, 1, 12, 12))
                                       .astype(np.float32)}, debug_stages=True)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 16
    dbg = keys["debug_stages"]
    assert dbg["first_divergence"] is None
    assert [s["mismatches"] for s in dbg["stages"]] == [0] * 4
    r = read_report(out)
    measured, est = r["measured"]["initiation_interval"], r["estimate"]["initiation_interval"]
    # conv2d_0 on the narrow generator: 12 x (12 x 25 + 2) = 3,624 cycles an image; on
    # the wide one 12 rows x (4 + 11 x 4): a window every 4 cycles (its neuron folds)
    assert r["stages"][0]["estimate"]["cycles"] == 12 * (4 + 11 * 4)
    assert abs(measured - est) <= 0.03 * est, r["measured"]
