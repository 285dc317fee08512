"""The whole accelerator in amaranth.sim: stage chains bit-exact against the model,
tlast framing, runtime weights through AXI4-Lite, counters and control."""

from types import SimpleNamespace

import numpy as np
import pytest
from amaranth import Cat

from fluid_hw.rtl import (
    AcceleratorTop,
    ConvSpec,
    HardwareConfigError,
    MaxPoolSpec,
    MVAUSpec,
    hwc_order,
    pack_lanes,
    param_image,
    unpack_lanes,
)
from fluid_hw.rtl.regmap import OKAY

from .axil_master import axil_read, axil_write
from .streams import simulate_streams


def _fc(rng, name, mw, mh, pe, simd, relu=True, mode="const", shift=(17, 21)):
    return MVAUSpec(name, mw, mh, pe=pe, simd=simd, weights=rng.integers(-127, 128, (mh, mw)),
                    bias=rng.integers(-2000, 2000, mh), multiplier=rng.integers(1, 2**15, mh),
                    shift=rng.integers(*shift, mh), relu=relu, weights_mode=mode)


def _ports(top):
    src = SimpleNamespace(valid=top.s_axis_tvalid, ready=top.s_axis_tready,
                          payload=Cat(top.s_axis_tdata, top.s_axis_tlast))
    snk = SimpleNamespace(valid=top.m_axis_tvalid, ready=top.m_axis_tready,
                          payload=Cat(top.m_axis_tdata, top.m_axis_tlast))
    return src, snk


def _beats(top, x):
    inl, beats = top.in_lanes, []
    for row in x:
        n = len(row) // inl
        for b in range(n):
            beats.append(pack_lanes(row[b * inl:(b + 1) * inl], 8) | (b == n - 1) << 8 * inl)
    return beats


def run_top(top, x, seed=0, prologue=None, **kw):
    src, snk = _ports(top)
    nbeats = len(x) * top.out_len // top.out_lanes
    (out,) = simulate_streams(top, [(src, _beats(top, x))], [(snk, nbeats)], seed=seed,
                              prologue=prologue, **kw)
    width = top.out_bits * top.out_lanes
    per = top.out_len // top.out_lanes
    lasts = [w >> width for w in out]
    assert lasts == [int(i % per == per - 1) for i in range(nbeats)]
    vals = [v for w in out for v in unpack_lanes(w & ((1 << width) - 1), top.out_lanes,
                                                  top.out_bits)]
    return np.array(vals).reshape(len(x), top.out_len)


@pytest.mark.parametrize("in_lanes,out_lanes", [(None, None), (2, 1), (8, 4)])
def test_mlp_chain(in_lanes, out_lanes):
    rng = np.random.default_rng(1)
    specs = [_fc(rng, "fc1", 16, 8, 2, 4), _fc(rng, "fc2", 8, 6, 3, 2),
             _fc(rng, "fc3", 6, 4, 4, 3, relu=False, shift=(14, 17))]
    top = AcceleratorTop(specs, in_lanes=in_lanes, out_lanes=out_lanes)
    x = rng.integers(-128, 128, (4, 16))
    np.testing.assert_array_equal(run_top(top, x, seed=3), top.model(x))


def test_int32_last_stage():
    rng = np.random.default_rng(2)
    last = MVAUSpec("logits", 8, 3, pe=3, simd=2, weights=rng.integers(-127, 128, (3, 8)),
                    bias=rng.integers(-99, 99, 3), requantize=False)
    top = AcceleratorTop([_fc(rng, "fc1", 4, 8, 2, 2), last])
    assert top.out_bits == 32
    x = rng.integers(-128, 128, (3, 4))
    np.testing.assert_array_equal(run_top(top, x), top.model(x))


def test_conv_pool_fc():
    rng = np.random.default_rng(3)
    conv = ConvSpec("conv1", (1, 6, 6), 4, kernel=3, padding=1, pe=2, simd=3,
                    weights=rng.integers(-127, 128, (4, 1, 3, 3)),
                    bias=rng.integers(-500, 500, 4), multiplier=rng.integers(1, 2**15, 4),
                    shift=rng.integers(14, 17, 4), relu=True)
    pool = MaxPoolSpec("pool1", (4, 6, 6), 2)
    w_chw = rng.integers(-127, 128, (5, 36))
    fc = MVAUSpec("fc", 36, 5, pe=1, simd=4, weights=w_chw[:, hwc_order(4, 3, 3)],
                  multiplier=rng.integers(1, 2**15, 5), shift=rng.integers(15, 18, 5))
    top = AcceleratorTop([conv, pool, fc])
    x = rng.integers(-128, 128, (2, 36))
    np.testing.assert_array_equal(run_top(top, x, seed=5), top.model(x))


def _load_params(top, specs):
    async def load(ctx):
        for base, words in param_image(specs):
            assert await axil_write(ctx, _bus(top), 0x44, base) == OKAY
            for w in words:
                assert await axil_write(ctx, _bus(top), 0x48, int(w)) == OKAY
    return load


def _bus(top):
    return SimpleNamespace(**{n: getattr(top, f"s_axil_{n}") for n in (
        "awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp",
        "bvalid", "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid",
        "rready")})


def test_runtime_weights_through_axil():
    rng = np.random.default_rng(4)
    specs = [_fc(rng, "fc1", 8, 4, 2, 4, mode="runtime"), _fc(rng, "fc2", 4, 2, 1, 2)]
    top = AcceleratorTop(specs)
    assert top.runtime and top.param_words > 0
    x = rng.integers(-128, 128, (3, 8))
    got = run_top(top, x, prologue=_load_params(top, specs))
    np.testing.assert_array_equal(got, top.model(x))


def test_runtime_conv_pool_through_axil():
    rng = np.random.default_rng(6)
    conv = ConvSpec("conv1", (2, 5, 5), 4, kernel=3, padding=1, pe=2, simd=2,
                    weights=rng.integers(-127, 128, (4, 2, 3, 3)),
                    bias=rng.integers(-500, 500, 4), multiplier=rng.integers(1, 2**15, 4),
                    shift=rng.integers(14, 17, 4), relu=True, weights_mode="runtime")
    specs = [conv, MaxPoolSpec("pool1", (4, 5, 5), 2)]
    top = AcceleratorTop(specs, in_lanes=1)
    x = rng.integers(-128, 128, (2, 50))
    got = run_top(top, x, prologue=_load_params(top, specs), seed=2)
    np.testing.assert_array_equal(got, top.model(x))


def test_counters_status_and_control():
    from amaranth.sim import Simulator

    rng = np.random.default_rng(5)
    top = AcceleratorTop([_fc(rng, "fc1", 4, 2, 1, 4)], out_lanes=2)
    bus = _bus(top)
    seen = {}

    async def tb(ctx):
        regs = {n: o for n, o in top.describe()["registers"].items()}

        async def rd(name):
            data, resp = await axil_read(ctx, bus, regs[name])
            assert resp == OKAY
            return data
        seen["id"] = await rd("ID")
        ctx.set(top.m_axis_tready, 1)
        for k in range(3):  # three vectors of one beat each, tlast wrong on the last
            ctx.set(top.s_axis_tvalid, 1)
            ctx.set(top.s_axis_tdata, k)
            ctx.set(top.s_axis_tlast, k < 2)
            await ctx.tick().until(top.s_axis_tready)
        ctx.set(top.s_axis_tvalid, 0)
        for _ in range(40):
            await ctx.tick()
        for n in ("INPUTS", "INFERENCES", "STATUS", "CYCLES_LO", "CYCLES_HI", "BUSY_CYCLES"):
            seen[n] = await rd(n)
        await axil_write(ctx, bus, regs["CONTROL"], 0)  # ENABLE = 0
        ctx.set(top.s_axis_tvalid, 1)
        for _ in range(5):
            _, _, ready = await ctx.tick().sample(top.s_axis_tready)
            assert not ready
        ctx.set(top.s_axis_tvalid, 0)
        seen["in_stall"] = await rd("IN_STALL_CYCLES")
        await axil_write(ctx, bus, regs["CONTROL"], 0b011)  # enable + soft reset
        seen["after_reset"] = [await rd("INPUTS"), await rd("STATUS")]

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen["id"] == 0x464C4857
    assert seen["INPUTS"] == 3 and seen["INFERENCES"] == 3
    assert seen["STATUS"] == 0b1110  # done, enabled, tlast error; not busy
    assert 40 < seen["CYCLES_LO"] < 200 and seen["CYCLES_HI"] == 0
    assert 0 < seen["BUSY_CYCLES"] < seen["CYCLES_LO"]
    assert seen["in_stall"] >= 5
    assert seen["after_reset"] == [0, 0b100]


def test_chain_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(HardwareConfigError, match="takes 8 elements but stage 'a' produces 6"):
        AcceleratorTop([_fc(rng, "a", 4, 6, 1, 1), _fc(rng, "b", 8, 2, 1, 1)])
    with pytest.raises(HardwareConfigError, match="SIMD=3 must divide"):
        _fc(rng, "a", 4, 6, 1, 3)
    with pytest.raises(HardwareConfigError, match="stage 'a': weights must be an integer"):
        MVAUSpec("a", 2, 2, weights=np.ones((2, 2)), multiplier=[1, 1], shift=[1, 1])
    with pytest.raises(HardwareConfigError, match="only the last"):
        AcceleratorTop([MVAUSpec("a", 2, 2, weights=np.ones((2, 2), np.int8), requantize=False),
                        _fc(rng, "b", 2, 2, 1, 1)])
