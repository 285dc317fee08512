"""Stage descriptions and their estimates; estimates against cycle counts measured in
amaranth.sim on the generated top (the Verilator counterpart is in tests/sim)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from fluid_hw.hls import (
    ConvStage,
    MaxPoolStage,
    MVAUStage,
    estimate_pipeline,
    estimate_stage,
    hwc_order,
)
from fluid_hw.rtl import AcceleratorTop, HardwareConfigError, pack_lanes

RNG = np.random.default_rng(0)


def fc(name, mw, mh, pe, simd, relu=True, **kw):
    return MVAUStage(name, mw, mh, pe=pe, simd=simd, weights=RNG.integers(-127, 128, (mh, mw)),
                     bias=RNG.integers(-999, 999, mh), multiplier=RNG.integers(1, 2**15, mh),
                     shift=RNG.integers(17, 21, mh), relu=relu, **kw)


def conv(name, shape, m, k, pad, pe, simd, stride=1):
    c = shape[0]
    return ConvStage(name, shape, m, kernel=k, padding=pad, stride=stride, pe=pe, simd=simd,
                     weights=RNG.integers(-127, 128, (m, c, k, k)),
                     bias=RNG.integers(-99, 99, m), multiplier=RNG.integers(1, 2**15, m),
                     shift=RNG.integers(14, 17, m), relu=True)


def measure(stages, n=3):
    """(latency of the first inference, initiation intervals) from amaranth.sim with the
    input always valid and the output always ready."""
    top = AcceleratorTop(stages)
    inl, bpv = top.in_lanes, top.in_len // top.in_lanes
    x = RNG.integers(-128, 128, (n, top.in_len))
    beats = [pack_lanes(row[i:i + inl], 8) for row in x for i in range(0, top.in_len, inl)]
    ins, outs = [], []
    sim = Simulator(top)
    sim.add_clock(1e-8)

    async def tb(ctx):
        ctx.set(top.m_axis_tready, 1)
        cyc = bi = 0
        while len(outs) < n:
            if bi < len(beats):
                ctx.set(top.s_axis_tvalid, 1)
                ctx.set(top.s_axis_tdata, beats[bi])
                ctx.set(top.s_axis_tlast, bi % bpv == bpv - 1)
            else:
                ctx.set(top.s_axis_tvalid, 0)
            if bi < len(beats) and ctx.get(top.s_axis_tready):
                if bi % bpv == 0:
                    ins.append(cyc)
                bi += 1
            if ctx.get(top.m_axis_tvalid) and ctx.get(top.m_axis_tlast):
                outs.append(cyc)
            await ctx.tick()
            cyc += 1

    sim.add_testbench(tb)
    sim.run()
    return outs[0] - ins[0], np.diff(outs).tolist()


def test_stage_dataclasses_and_layouts():
    w_kc = RNG.integers(-127, 128, (6, 4))
    s = MVAUStage.from_fc("fc", w_kc, multiplier=np.ones(4, int), shift=np.zeros(4, int))
    assert (s.mw, s.mh) == (6, 4) and np.array_equal(s.weights, w_kc.T)
    assert (s.in_len, s.out_len, s.in_lanes, s.out_lanes, s.out_bits) == (6, 4, 1, 1, 8)
    c = conv("c", (2, 5, 5), 4, 3, 1, 2, 2)
    assert c.out_shape == (4, 5, 5) and c.padding == (1, 1, 1, 1) and c.mw == 18
    # the matrix column order is (ky, kx, c), c fastest
    assert c.matrix()[1, 1] == c.weights[1, 1, 0, 0]
    p = MaxPoolStage("p", (4, 5, 5), 2)
    assert p.stride == (2, 2) and p.out_shape == (4, 2, 2)
    x = np.arange(24).reshape(2, 3, 4)
    assert np.array_equal(x.reshape(-1)[hwc_order(2, 3, 4)], x.transpose(1, 2, 0).reshape(-1))


def test_stage_errors_name_the_stage():
    with pytest.raises(HardwareConfigError, match="stage 'fc9': PE=3 must divide"):
        fc("fc9", 8, 8, 3, 1)
    with pytest.raises(HardwareConfigError, match="stage 'c': filter has shape"):
        ConvStage("c", (1, 4, 4), 2, kernel=3, weights=np.zeros((2, 1, 2, 2), np.int8),
                  multiplier=[1, 1], shift=[0, 0])
    with pytest.raises(HardwareConfigError, match="requantisation needs 'multiplier'"):
        MVAUStage("q", 2, 2, weights=np.zeros((2, 2), np.int8))
    with pytest.raises(HardwareConfigError, match="shift values must lie in"):
        MVAUStage("q", 2, 2, weights=np.zeros((2, 2), np.int8), multiplier=[1, 1],
                  shift=[0, 48])


def test_stage_estimate_numbers():
    e = estimate_stage(fc("fc1", 64, 32, 4, 8))
    assert e.cycles == (64 // 8) * (32 // 4)
    # products + two per requantiser lane: the 4 PE lanes' results come once every
    # SF = 8 cycles, so one shared requantiser lane serves them (rtl.requant)
    assert e.resources.dsp == 4 * 8 + 2 * 1
    assert e.resources.bram > 0 and e.resources.lut > 0 and e.resources.ff > 0
    rep = e.as_report()
    assert rep["folding"] == {"pe": 4, "simd": 8} and rep["estimate"]["ii"] == 64
    small = estimate_stage(fc("fc2", 8, 4, 1, 1))
    assert small.resources.bram <= 1  # tiny constant memories become LUT ROM
    runtime = estimate_stage(fc("fc3", 64, 32, 4, 8, weights_mode="runtime"))
    assert runtime.resources.dsp == e.resources.dsp


@pytest.mark.parametrize("make", [
    lambda: [fc("fc1", 16, 8, 2, 4), fc("fc2", 8, 6, 3, 2), fc("fc3", 6, 4, 2, 3, False)],
    lambda: [conv("c1", (1, 8, 8), 4, 3, 1, 2, 3), MaxPoolStage("p1", (4, 8, 8), 2)],
    lambda: [conv("c1", (2, 7, 7), 6, 3, 0, 2, 6, stride=2)],
], ids=["mlp", "conv-pool", "conv-stride2"])
def test_estimates_match_simulation(make):
    stages = make()
    est = estimate_pipeline(stages)
    latency, iis = measure(stages)
    assert abs(latency - est.latency_cycles) <= 0.1 * latency
    assert abs(iis[-1] - est.initiation_interval) <= 0.1 * iis[-1]
    pipe = est.as_report()
    assert pipe["initiation_interval"] == est.initiation_interval
    assert pipe["resources"]["dsp"] == sum(s.resources.dsp for s in est.stages)


def test_pipeline_resources_are_the_estimates_without_the_timing_model():
    """stages.pipeline_resources (what the folding search costs each trial with) equals
    estimate_pipeline's resources (MLPs, a conv + pool + fc, a depthwise design)."""
    from fluid_hw.backends.fpga.calibration import calibration_designs
    from fluid_hw.hls.stages import pipeline_resources

    designs = calibration_designs()
    for name in ("mlp_64_128_64_10", "mlp_16_64_16_pe", "conv_pool_fc", "conv_dw_8_pe4"):
        specs = designs[name]
        assert pipeline_resources(specs) == estimate_pipeline(specs).resources, name
