"""The multiplier bound in a board build: the compile listing says how far the folded
design is from the device's bound (156 x clock / MACs on the 85F) and what binds, and
report.json / report.html carry the figures; with LUT multipliers the folding passes
the DSP-only bound and the lowered stages build those products in LUTs."""

from __future__ import annotations

import pytest

from fluid_hw.backends.fpga import compile_model, read_report
from fluid_hw.backends.fpga.report_html import render_report
from fluid_hw.hls.bound import multiplier_bound

from .test_steps import float_mlp  # noqa: F401  (module fixture)

MACS = 64 * 128 + 128 * 64 + 64 * 10


def test_the_listing_and_the_report_state_the_bound_and_what_binds(
        float_mlp, tmp_path, capfd):  # noqa: F811
    model, calib = float_mlp
    st = compile_model(model, tmp_path / "b", target="ulx3s-85f", calibration=calib)
    listing = capfd.readouterr().err
    b = st.autofold.bound
    assert b.macs == MACS and b.multipliers == 156 and b.clock_mhz == 100.0
    assert b.ii == st.lowered.estimate().initiation_interval == 256
    assert b.binding == "DSP"
    line = next(ln for ln in listing.splitlines() if "3/8 lower" in ln)
    assert "multiplier bound: II 256 against the bound's 109.1" in line
    assert "43 % of the bound" in line and "binds: DSP" in line
    rep = read_report(tmp_path / "b")["autofold"]["bound"]
    assert rep["macs_per_inference"] == MACS and rep["binding"] == "DSP"
    assert rep["multiplier_bound_per_s"] == pytest.approx(156 * 100e6 / MACS)
    assert rep["throughput_vs_multiplier_bound"] == pytest.approx(
        multiplier_bound(MACS, 156, 100.0, 256)["throughput_vs_multiplier_bound"], abs=1e-4)
    assert rep["multipliers_used"] == 32 + 32 + 4
    page = render_report(read_report(tmp_path / "b"))
    assert "vs multiplier bound" in page and "what binds the folding" in page


def test_lut_multipliers_pass_the_dsp_only_bound_in_the_lowering(
        float_mlp, tmp_path):  # noqa: F811
    model, calib = float_mlp
    st = compile_model(model, tmp_path / "b", target="ulx3s-85f", calibration=calib,
                       lut_multipliers=True, stop_after="lower")
    a = st.autofold
    assert a.lut_mults and st.lowered.lut_mults == a.lut_mults
    assert a.initiation_interval < a.bound.bound_ii
    # the lowered stages build what the search chose
    for s in st.lowered.specs:
        assert s.lut_mults == a.lut_mults.get(s.name, 0)
        assert (s.pe, s.simd) == a.folding[s.name]
    assert st.lowered.estimate().initiation_interval == a.initiation_interval
    for r in ("dsp", "lut", "bram"):
        assert a.resources[r] <= a.limits[r]


@pytest.mark.slow
def test_a_build_with_lut_multipliers_is_bit_exact_in_verilator(tmp_path):
    """autofold -> lowering -> Verilog -> Verilator with LUT multipliers: a small MLP on
    5 % of the 85F (7 DSPs) builds its extra products in LUTs and matches the golden
    model bit for bit."""
    import numpy as np

    import fluid_hw as fluid
    from fluid_hw.backends.fpga import compile_program, simulate

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[16], dtype="float32")
        y = fluid.layers.fc(fluid.layers.fc(x, 16, act="relu"), 10)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    rng = np.random.default_rng(0)
    st = compile_program(main.clone(for_test=True), scope, tmp_path / "b", feeds=["x"],
                         fetches=[y.name], target="ulx3s-85f", fraction=0.05,
                         lut_multipliers=True,
                         calibration={"x": rng.standard_normal((64, 16)).astype(np.float32)})
    assert st.autofold.lut_mults and sum(s.lut_mults for s in st.lowered.specs) == \
        sum(st.autofold.lut_mults.values())
    keys = simulate(tmp_path / "b", {"x": rng.standard_normal((32, 16)).astype(np.float32)})
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 32
