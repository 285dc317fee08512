"""Requantiser and MVAU: bit-exact against their models under random stalls."""

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.mvau import MVAU, mvau_model, mvau_weight_entries
from fluid_hw.rtl.requant import Requantiser, requant_entries, requantize_model

from .streams import run_full_rate, simulate_streams


def _requant_params(rng, c):
    m = rng.integers(0, 2**15, c)
    n = rng.integers(20, 44, c)
    n[:2] = [0, 47]  # the extremes of the contract
    return rng.integers(-2**20, 2**20, c), m, n


def test_requantize_model_matches_contract_by_hand():
    # p = 100 * 3 = 300; (300 + 4) >> 3 = 38; round half up: (-12 + 4) >> 3 = -1
    acc = np.array([[100, -4, 1000, -1000]])
    out = requantize_model(acc, None, np.array([3, 3, 3, 3]), np.array([3, 3, 0, 0]), False)
    assert out.tolist() == [[38, -1, 127, -128]]
    assert requantize_model(acc, None, np.array([3] * 4), np.array([3] * 4), True).tolist() == \
        [[38, 0, 127, 0]]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("lanes", [1, 3])
def test_requantiser(relu, lanes):
    rng = np.random.default_rng(lanes + 2 * relu)
    c = 6
    bias, m, n = _requant_params(rng, c)
    acc = rng.integers(-2**31, 2**31, (10, c)) >> rng.integers(0, 31, (10, c))
    acc[0, :] = [-2**31, 2**31 - 1, 0, 1, -1, 12345]
    dut = Requantiser("rq", lanes, c, bias=bias, multiplier=m, shift=n, relu=relu)
    beats = [pack_lanes(row[i:i + lanes], 32) for row in acc for i in range(0, c, lanes)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(beats))], seed=lanes)
    got = np.array([unpack_lanes(w, lanes, 8) for w in out]).reshape(acc.shape)
    np.testing.assert_array_equal(got, requantize_model(acc, bias, m, n, relu))


def _mvau_case(rng, mw, mh, relu=True, with_bias=True, requant=True):
    w = rng.integers(-127, 128, (mh, mw))
    bias = rng.integers(-3000, 3000, mh) if with_bias else None
    m = rng.integers(1000, 2**15, mh) if requant else None
    n = rng.integers(19, 23, mh) if requant else None
    return w, bias, m, n


def _run_mvau(dut, x, seed, prologue=None, **kw):
    beats = [pack_lanes(row[i:i + dut.simd], 8) for row in x for i in range(0, dut.mw, dut.simd)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(x) * dut.nf)], seed=seed,
                              prologue=prologue, **kw)
    return np.array([unpack_lanes(wd, dut.pe, dut.out_bits)
                     for wd in out]).reshape(len(x), dut.mh)


@pytest.mark.parametrize("mw,mh,pe,simd", [(12, 8, 2, 3), (16, 8, 8, 1), (8, 4, 1, 8),
                                           (6, 3, 3, 6), (5, 7, 1, 1)])
def test_mvau_const(mw, mh, pe, simd):
    rng = np.random.default_rng(mw * mh + pe)
    w, bias, m, n = _mvau_case(rng, mw, mh)
    x = rng.integers(-128, 128, (5, mw))
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n, relu=True)
    got = _run_mvau(dut, x, seed=pe)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias, m, n, relu=True))


def test_mvau_int32_output_without_requantisation():
    rng = np.random.default_rng(7)
    w, bias, _, _ = _mvau_case(rng, 8, 4, requant=False)
    x = rng.integers(-128, 128, (4, 8))
    dut = MVAU("logits", 8, 4, 2, 2, weights=w, bias=bias, requantize=False)
    assert dut.out_bits == 32
    got = _run_mvau(dut, x, seed=1)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias))


def test_mvau_runtime_weights():
    rng = np.random.default_rng(11)
    mw, mh, pe, simd = 8, 6, 3, 4
    w, bias, m, n = _mvau_case(rng, mw, mh, relu=False)
    dut = MVAU("fc", mw, mh, pe, simd, runtime=True, relu=False)
    words = mvau_weight_entries(w, pe, simd)
    params = requant_entries("fc", mh, bias, m, n)

    async def load(ctx):
        for p in range(pe):
            for a, word in enumerate(words[p]):
                ctx.set(dut.wr.en, 1 << p)
                ctx.set(dut.wr.addr, a)
                ctx.set(dut.wr.data, word)
                await ctx.tick()
            for a, word in enumerate(params[p::pe]):
                ctx.set(dut.wr.en, 1 << (pe + p))
                ctx.set(dut.wr.addr, a)
                ctx.set(dut.wr.data, word)
                await ctx.tick()
        ctx.set(dut.wr.en, 0)

    x = rng.integers(-128, 128, (4, mw))
    got = _run_mvau(dut, x, seed=2, prologue=load)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias, m, n, relu=False))


def test_mvau_full_throughput():
    """No stalls: one output vector every NF * SF cycles once the pipeline is full."""

    rng = np.random.default_rng(3)
    mw, mh, pe, simd = 8, 8, 2, 4  # SF = 2, NF = 4: 8 cycles per vector
    w, bias, m, n = _mvau_case(rng, mw, mh)
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n)
    x = rng.integers(-128, 128, (12, mw))
    beats = [pack_lanes(row[i:i + simd], 8) for row in x for i in range(0, mw, simd)]
    _, times, _ = run_full_rate(dut, [(dut.i, beats)], len(x) * dut.nf)
    last_of_vector = times[dut.nf - 1::dut.nf]
    assert np.diff(last_of_vector)[2:].tolist() == [dut.nf * dut.sf] * (len(x) - 3)


def test_mvau_rejects_bad_folding():
    with pytest.raises(HardwareConfigError, match="PE=3 must divide MH=8"):
        MVAU("fc1", 8, 8, 3, 1, weights=np.zeros((8, 8), np.int8), multiplier=np.ones(8),
             shift=np.ones(8))
    with pytest.raises(HardwareConfigError, match="weights values must lie"):
        MVAU("fc1", 2, 1, 1, 1, weights=np.array([[200, 0]]), multiplier=[1], shift=[1])


def test_mvau_trellis_input_copies():
    """ff_style="trellis": one TRELLIS_FF per bit of each PE's input copy and of each
    requantiser lane's multiplier inputs (the Verilator
    tests in tests/sim run such a design bit-exact through the primitive's model)."""
    from amaranth.back import rtlil

    w = np.zeros((4, 6), np.int8)
    dut = MVAU("fc", 6, 4, 2, 3, weights=w, multiplier=np.ones(4, int), shift=np.ones(4, int),
               ff_style="trellis")
    text = rtlil.convert(dut, name="fc")
    # a PE group of accumulators every SF = 2 cycles: the two PEs share one requantiser lane
    assert dut.requant.units == 1
    # per PE and lane an 8-bit input copy; per requantiser lane the multiplier inputs
    # (32-bit sum, 17-bit multiplier)
    assert text.count("cell \\TRELLIS_FF") == 2 * 3 * 8 + 1 * (32 + 17)
    # and every product a MULT18X18D with its own input and output registers (rtl._dsp):
    # one per PE and lane, two per requantiser lane
    assert text.count("cell \\MULT18X18D") == 2 * 3 + 2 * 1
    assert text.count('parameter \\REG_OUTPUT_CLK "CLK0"') == 2 * 3 + 2 * 1
    with pytest.raises(HardwareConfigError, match="ff_style must be one of"):
        MVAU("fc", 6, 4, 2, 3, weights=w, multiplier=np.ones(4, int),
             shift=np.ones(4, int), ff_style="keep")
