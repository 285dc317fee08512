# amaranth: UnusedElaboratable=no
"""A requantiser shared by several PE lanes (issue 17): fewer physical lanes, the group
fed through them over several cycles and reassembled; bit-exact against requantize_model
under random stalls, with the latency the cost model is told."""

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.sim import Simulator

from fluid_hw.rtl._lane import Clamp
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.dwconv import DepthwiseConv, dwconv_latency
from fluid_hw.rtl.mvau import MVAU, mvau_latency, mvau_model
from fluid_hw.rtl.requant import (
    REQUANT_LATENCY,
    Requantiser,
    RequantPipe,
    requant_entries,
    requant_latency,
    requant_param_depth,
    requant_units,
    requantize_model,
)
from fluid_hw.rtl.stream import CreditQueue
from fluid_hw.rtl.swg import WindowGeometry

from .streams import run_full_rate, simulate_streams, write_params


@pytest.mark.parametrize("lanes,period,units", [
    (16, 8, 2), (16, 3, 6), (16, 6, 3), (16, 1, 16), (8, 16, 1), (10, 3, 4), (12, 5, 3),
    (1, 9, 1), (7, 2, 4),
])
def test_units_take_a_group_within_its_period(lanes, period, units):
    assert requant_units(lanes, period) == units
    steps = -(-lanes // units)
    assert steps <= max(1, period)
    assert requant_latency(lanes, units) == REQUANT_LATENCY + steps - 1
    # threshold / bias-only pipes have no multipliers to share
    assert requant_units(lanes, period, multipliers=False) == lanes


def _params(rng, c):
    bias = rng.integers(-2**20, 2**20, c)
    m = rng.integers(0, 2**15, c)
    n = rng.integers(20, 44, c)
    n[:2] = [0, 47]  # the extremes of the contract
    return bias, m, n


def _accs(rng, rows, c):
    acc = rng.integers(-2**31, 2**31, (rows, c)) >> rng.integers(0, 31, (rows, c))
    acc[0, :4] = [-2**31, 2**31 - 1, 0, -1]
    return acc


CASES = [  # lanes, units, channels, relu, clamp
    (4, 1, 8, False, None),
    (5, 2, 10, True, None),           # the last slice has one lane of two in use
    (6, 3, 12, False, Clamp(-3, 5)),  # narrow rails
    (8, 3, 8, True, Clamp(0, 15)),    # one channel group: the capture holds every slice
    (3, 2, 6, False, Clamp(-1, 1, bipolar=True)),
]


@pytest.mark.parametrize("lanes,units,c,relu,clamp", CASES)
def test_shared_requantiser_under_stalls(lanes, units, c, relu, clamp):
    rng = np.random.default_rng(lanes * 7 + units)
    bias, m, n = _params(rng, c)
    acc = _accs(rng, 9, c)
    dut = Requantiser("rq", lanes, c, bias=bias, multiplier=m, shift=n, relu=relu,
                      clamp=clamp, units=units)
    assert dut.pipe.units == units and dut.pipe.steps == -(-lanes // units)
    beats = [pack_lanes(row[i:i + lanes], 32) for row in acc for i in range(0, c, lanes)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(beats))], seed=units,
                              p_valid=0.8, p_ready=0.6)
    got = np.array([unpack_lanes(w, lanes, 8) for w in out]).reshape(acc.shape)
    np.testing.assert_array_equal(got, requantize_model(acc, bias, m, n, relu, clamp))


def test_shared_requantiser_runtime_parameters_keep_the_lane_format():
    """The loader writes lane l's entries (requant_entries[l::lanes]) to memory l, as for
    an unshared pipe; the pipe steers them into its physical lanes' memories."""
    lanes, units, c = 5, 2, 15
    rng = np.random.default_rng(5)
    bias, m, n = _params(rng, c)
    acc = _accs(rng, 6, c)
    dut = Requantiser("rq", lanes, c, runtime=True, units=units)
    entries = requant_entries("rq", c, bias, m, n)
    load = write_params(dut.pipe.wr, [(lane, entries[lane::lanes]) for lane in range(lanes)])
    beats = [pack_lanes(row[i:i + lanes], 32) for row in acc for i in range(0, c, lanes)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(beats))], seed=3,
                              prologue=load)
    got = np.array([unpack_lanes(w, lanes, 8) for w in out]).reshape(acc.shape)
    np.testing.assert_array_equal(got, requantize_model(acc, bias, m, n, False))


@pytest.mark.parametrize("lanes,units", [(4, 1), (7, 3)])
def test_shared_pipe_latency_and_busy(lanes, units):
    """Groups as fast as the pipe takes them (one every ``steps`` cycles): each result
    ``requant_latency`` cycles after its ``i_valid``; ``busy`` in between."""
    c = 2 * lanes
    rng = np.random.default_rng(lanes)
    bias, m, n = _params(rng, c)
    acc = _accs(rng, 3, c).reshape(-1, lanes)
    dut = RequantPipe("rq", lanes, c, bias=bias, multiplier=m, shift=n, units=units)
    steps = dut.steps
    assert dut.latency == requant_latency(lanes, units) == REQUANT_LATENCY + steps - 1
    sent, got, busy = [], [], []

    async def tb(ctx):
        for cyc in range(len(acc) * steps + dut.latency + 2):
            k, off = divmod(cyc, steps)
            start = off == 0 and k < len(acc)
            ctx.set(dut.i_valid, start)
            if start:
                ctx.set(dut.i_acc, pack_lanes(acc[k], 32))
                ctx.set(dut.i_idx, k % 2)
                sent.append(cyc)
            busy.append(ctx.get(dut.busy))
            if ctx.get(dut.o_valid):
                got.append((cyc, unpack_lanes(ctx.get(dut.o_data), lanes, 8)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert [t for t, _ in got] == [s + dut.latency for s in sent]
    assert busy[:steps * len(acc)] == [off != 0 for _ in acc for off in range(steps)]
    want = requantize_model(acc.reshape(-1, c), bias, m, n, False).reshape(-1, lanes)
    np.testing.assert_array_equal(np.array([v for _, v in got]), want)


def test_units_equal_to_lanes_change_nothing():
    rng = np.random.default_rng(1)
    bias, m, n = _params(rng, 6)
    kw = dict(bias=bias, multiplier=m, shift=n, relu=True)
    plain = rtlil.convert(RequantPipe("rq", 3, 6, **kw), name="rq")
    assert rtlil.convert(RequantPipe("rq", 3, 6, units=3, **kw), name="rq") == plain


def test_threshold_pipes_and_bad_units():
    th = np.sort(np.random.default_rng(2).integers(-99, 99, (4, 3)), axis=1)
    pipe = RequantPipe("rq", 4, 4, clamp=Clamp(0, 3), thresholds=th, units=1)
    assert pipe.units == 4 and pipe.latency == REQUANT_LATENCY  # comparators: not shared
    assert RequantPipe("rq", 4, 4, requantize=False, units=1).units == 4
    # as few physical lanes as the steps need: 6 lanes in 2 steps take 3
    assert RequantPipe("rq", 6, 6, multiplier=[1] * 6, shift=[1] * 6, units=4).units == 3
    with pytest.raises(HardwareConfigError, match="0 physical requantiser lanes for 4"):
        RequantPipe("rq", 4, 4, multiplier=[1] * 4, shift=[1] * 4, units=0)
    with pytest.raises(HardwareConfigError, match="5 physical requantiser lanes for 4"):
        RequantPipe("rq", 4, 4, multiplier=[1] * 4, shift=[1] * 4, units=5)


def _mvau_beats(x, simd):
    return [pack_lanes(row[i:i + simd], 8) for row in x for i in range(0, x.shape[1], simd)]


@pytest.mark.parametrize("mw,mh,pe,simd,units,clamp", [
    (16, 12, 6, 4, 2, None),           # SF 4: three slices of two
    (24, 10, 5, 8, 2, Clamp(-7, 7)),   # SF 3: two lanes, the last slice half used
    (8, 16, 8, 1, 1, Clamp(0, 15)),    # SF 8: one lane for all eight PEs
])
def test_mvau_shares_its_requantiser(mw, mh, pe, simd, units, clamp):
    rng = np.random.default_rng(mw + mh + pe)
    w = rng.integers(-127, 128, (mh, mw))
    bias = rng.integers(-3000, 3000, mh)
    m = rng.integers(1000, 2**15, mh)
    n = rng.integers(17, 21, mh)
    x = rng.integers(-128, 128, (5, mw))
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n,
               relu=True, clamp=clamp)
    assert dut.requant.units == units == requant_units(pe, mw // simd)
    (out,) = simulate_streams(dut, [(dut.i, _mvau_beats(x, simd))],
                              [(dut.o, len(x) * dut.nf)], seed=pe)
    got = np.array([unpack_lanes(v, pe, 8) for v in out]).reshape(len(x), mh)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias, m, n, True, clamp))


def test_mvau_shared_latency_and_throughput():
    """Full rate: one vector every NF * SF cycles still, each output beat
    mvau_latency(..., pe, sf) + the queue after its neuron fold's last beat."""
    mw, mh, pe, simd = 12, 8, 4, 4  # SF 3, NF 2: two requantiser lanes, two slices
    rng = np.random.default_rng(8)
    w = rng.integers(-127, 128, (mh, mw))
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=rng.integers(-99, 99, mh),
               multiplier=rng.integers(1000, 2**15, mh), shift=np.full(mh, 18))
    assert (dut.requant.units, dut.requant.steps) == (2, 2)
    lat = mvau_latency(simd, True, pe=pe, sf=3)
    assert dut.latency == lat == mvau_latency(simd) + 1
    x = rng.integers(-128, 128, (6, mw))
    taken, outs, _ = run_full_rate(dut, [(dut.i, _mvau_beats(x, simd))], len(x) * dut.nf)
    # the first vector: neuron fold f issues its last beat sf * (f + 1) cycles after the
    # vector's last input beat, and leaves the queue lat + the queue's latency later
    first = [taken[dut.sf - 1] + dut.sf * (f + 1) + lat + CreditQueue.latency
             for f in range(dut.nf)]
    assert outs[:dut.nf] == first
    assert np.diff(outs[dut.nf - 1::dut.nf])[1:].tolist() == [dut.nf * dut.sf] * (len(x) - 2)


def test_dwconv_shares_its_requantiser_and_the_dsps_go():
    geom = WindowGeometry(6, 5, 5, (2, 2), (1, 1), (1, 1, 0, 0))
    pe = 6  # a channel group every 4 window beats: two requantiser lanes
    rng = np.random.default_rng(3)
    kw = dict(weights=rng.integers(-127, 128, (6, 1, 2, 2)), bias=rng.integers(-99, 99, 6),
              multiplier=rng.integers(1000, 2**15, 6), shift=np.full(6, 16))
    dut = DepthwiseConv("dw", geom, pe, ff_style="trellis", **kw)
    assert dut.requant.units == 2 and dut.latency == dwconv_latency(True, pe=pe, k=4)
    assert dwconv_latency(True, pe=pe, k=4) == dwconv_latency() + 2
    text = rtlil.convert(dut, name="dw")
    # one MULT18X18D a MAC lane, two a physical requantiser lane (was 6 + 2 * 6)
    assert text.count("cell \\MULT18X18D") == 6 + 2 * 2
    # each physical lane's parameters: groups x 4 entries (three used)
    assert requant_param_depth(pe, 2, 1) == 4
