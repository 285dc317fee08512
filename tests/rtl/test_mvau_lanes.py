"""MVAU lanes of mixed multiplier kinds (``lut_mults``) and narrow weights
(``weight_bits``, two products per DSP at 4 bits or less): bit-exact against
``mvau_model`` under random stalls, the lane plan and its cost, the spec round trip."""

import numpy as np
import pytest
from amaranth.back import rtlil

from fluid_hw.rtl import MVAUSpec
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.multipliers import (
    act_operand_bits,
    dsp_pairs,
    lane_kinds,
    mvau_multipliers,
    packs_two,
    weight_range,
)
from fluid_hw.rtl.mvau import MVAU, mvau_model, mvau_weight_entries
from fluid_hw.rtl.requant import requant_entries
from fluid_hw.rtl.spec import spec_from_structure

from .streams import simulate_streams, write_params


def _weights(rng, wb, shape):
    lo, hi = weight_range(wb)
    if wb == 1:
        return rng.choice([-1, 1], shape)
    w = rng.integers(lo, hi + 1, shape)
    w.flat[:2] = [lo, hi]  # the extremes of the width
    return w


def _run(dut, x, seed, prologue=None):
    beats = [pack_lanes(row[i:i + dut.simd], 8) for row in x for i in range(0, dut.mw, dut.simd)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(x) * dut.nf)], seed=seed,
                              prologue=prologue)
    return np.array([unpack_lanes(wd, dut.pe, dut.out_bits)
                     for wd in out]).reshape(len(x), dut.mh)


CASES = [  # (weight_bits, mw, mh, pe, simd, lut_mults)
    (8, 12, 8, 2, 3, 0), (8, 12, 8, 2, 3, 4), (8, 12, 8, 2, 3, 6),
    (4, 8, 8, 4, 2, 0), (4, 8, 8, 4, 2, 3), (4, 8, 8, 4, 2, 8), (4, 6, 6, 3, 2, 1),
    (2, 8, 4, 4, 2, 0), (2, 8, 4, 4, 2, 5),
    (1, 8, 4, 2, 4, 0), (1, 8, 4, 2, 4, 3),
    (5, 6, 4, 2, 3, 2), (7, 4, 4, 2, 2, 0),
]


@pytest.mark.parametrize(("wb", "mw", "mh", "pe", "simd", "lut"), CASES,
                         ids=[f"w{c[0]}-{c[3]}x{c[4]}-lut{c[5]}" for c in CASES])
def test_mvau_lanes_bit_exact(wb, mw, mh, pe, simd, lut):
    rng = np.random.default_rng(100 * wb + 10 * lut + pe)
    w = _weights(rng, wb, (mh, mw))
    bias = rng.integers(-3000, 3000, mh)
    m, n = rng.integers(1000, 2**15, mh), rng.integers(12, 20, mh)
    x = rng.integers(-128, 128, (5, mw))
    x[0, :] = -128  # the extremes of the activations against the weights' extremes
    x[1, :] = 127
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n,
               lut_mults=lut, weight_bits=wb)
    np.testing.assert_array_equal(_run(dut, x, seed=wb + lut),
                                  mvau_model(x, w, bias, m, n))


ACT_CASES = [  # (weight_bits, act range, pe, simd, lut_mults)
    (4, (0, 15), 4, 2, 0), (4, (0, 15), 4, 2, 3), (4, (0, 15), 4, 2, 8),
    (8, (0, 15), 2, 3, 2), (4, (-8, 7), 2, 4, 1), (1, (-1, 1), 2, 4, 3),
    (6, (0, 15), 2, 2, 1),  # 6-bit weights x 5-bit operands: two share a DSP
]


@pytest.mark.parametrize(("wb", "rng_", "pe", "simd", "lut"), ACT_CASES,
                         ids=[f"w{c[0]}-a{c[1][0]}..{c[1][1]}-{c[2]}x{c[3]}-lut{c[4]}"
                              for c in ACT_CASES])
def test_mvau_narrow_activations_bit_exact(wb, rng_, pe, simd, lut):
    """``act_bits``: each lane multiplies the low bits of its int8 lane (the values'
    two's complement width), in DSP, shared-DSP and LUT lanes alike; the int32 sums
    exact for the range's extremes against the weights' extremes."""
    lo, hi = rng_
    ab = act_operand_bits(lo, hi)
    mw, mh = 4 * simd, 2 * pe
    rng = np.random.default_rng(ab * 10 + lut)
    w = _weights(rng, wb, (mh, mw))
    x = rng.integers(lo, hi + 1, (5, mw))
    x[0, :], x[1, :] = lo, hi
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, requantize=False, lut_mults=lut,
               weight_bits=wb, act_bits=ab)
    np.testing.assert_array_equal(_run(dut, x, seed=lut + 1), x @ w.T)


def test_mvau_narrow_int32_outputs_are_the_exact_sums():
    """Without requantisation the accumulator itself: every int4 product and the
    shared-DSP split exact, for every weight against -128 and 127."""
    rng = np.random.default_rng(3)
    w = np.tile(np.arange(-8, 8), (4, 1))  # all 16 int4 values in each row
    x = np.vstack([np.full(16, -128), np.full(16, 127), rng.integers(-128, 128, (3, 16))])
    dut = MVAU("fc", 16, 4, 4, 4, weights=w, requantize=False, weight_bits=4)
    assert len(dsp_pairs(4, 4, 0, 4)) == 8
    np.testing.assert_array_equal(_run(dut, x, seed=1), x @ w.T)


@pytest.mark.parametrize("wb", [4, 1])
def test_mvau_narrow_runtime_weights(wb):
    rng = np.random.default_rng(wb)
    mw, mh, pe, simd = 8, 4, 2, 4
    w = _weights(rng, wb, (mh, mw))
    bias, m, n = rng.integers(-99, 99, mh), rng.integers(1000, 2**15, mh), np.full(mh, 14)
    dut = MVAU("fc", mw, mh, pe, simd, runtime=True, weight_bits=wb, lut_mults=2)
    assert dut.word_bits == simd * wb
    words = mvau_weight_entries(w, pe, simd, wb)
    assert max(max(ws) for ws in words) < 1 << (simd * wb)
    params = requant_entries("fc", mh, bias, m, n)
    load = write_params(dut.wr, [*((p, words[p]) for p in range(pe)),
                                 *((pe + p, params[p::pe]) for p in range(pe))])
    x = rng.integers(-128, 128, (3, mw))
    np.testing.assert_array_equal(_run(dut, x, seed=5, prologue=load),
                                  mvau_model(x, w, bias, m, n))


def test_lane_plan_and_cost():
    assert lane_kinds(2, 3, 4) == [[False, False, True], [True, True, True]]
    # shared DSPs: LUT products go by pairs (PE 2 and 3 in lane 1 together), so every
    # two of them free a DSP; a last odd PE (one DSP a product) goes first
    assert lane_kinds(4, 2, 2, 4) == [[False, False], [False, False], [False, True],
                                      [False, True]]
    assert mvau_multipliers(4, 2, 2, 4).dsp == 3
    assert lane_kinds(5, 2, 3, 4)[3:] == [[False, True], [True, True]]
    assert mvau_multipliers(5, 2, 3, 4).dsp == 4
    # narrow activation operands: narrower products, more of them share a DSP
    assert [act_operand_bits(*r) for r in ((0, 15), (-8, 7), (-1, 1), (0, 127),
                                           (-128, 127))] == [5, 4, 2, 8, 8]
    assert not packs_two(6) and packs_two(6, 5) and not packs_two(8, 5)
    assert mvau_multipliers(4, 2, 0, 6, 5).dsp == 4
    with pytest.raises(HardwareConfigError, match="do not fit an int8 lane"):
        act_operand_bits(0, 255)
    with pytest.raises(HardwareConfigError, match="act_bits=9 must lie in 2-8"):
        mvau_multipliers(4, 2, 0, 4, 9)
    # int8: one DSP per product that is not a LUT one
    assert mvau_multipliers(16, 8, 0, 8) == (128, 0)
    assert mvau_multipliers(16, 8, 64, 8) == (64, 64)
    # int4 / bipolar: PE pairs share a DSP; an odd PE or a LUT partner keeps its own
    assert mvau_multipliers(16, 8, 0, 4) == (64, 0)
    assert mvau_multipliers(3, 2, 0, 4) == (4, 0)
    assert mvau_multipliers(4, 2, 3, 4).dsp == 3  # pairs (0, 0), (0, 1), PE 2 lane 0 alone
    assert mvau_multipliers(4, 2, 0, 1).dsp == 4
    assert mvau_multipliers(4, 2, 0, 5).dsp == 8  # 5 bits: too wide to pack
    with pytest.raises(HardwareConfigError, match=r"lut_mults=9 must lie in 0 \.\. PE"):
        mvau_multipliers(4, 2, 9, 8)


def test_shared_dsp_in_the_netlist():
    """ff_style="trellis": the int4 MVAU instantiates one MULT18X18D per PE pair and
    lane, the int8 one per product, and LUT lanes none."""
    def dsps(**kw):
        dut = MVAU("fc", 4, 4, 4, 2, weights=np.ones((4, 4), int), multiplier=np.ones(4, int),
                   shift=np.ones(4, int), ff_style="trellis", **kw)
        return rtlil.convert(dut, name="fc").count("cell \\MULT18X18D")
    rq = dsps(lut_mults=8)  # the requantiser's alone
    assert dsps() - rq == 8
    assert dsps(weight_bits=4) - rq == 4
    assert dsps(weight_bits=4, lut_mults=3) - rq == 3 == mvau_multipliers(4, 2, 3, 4).dsp


def test_spec_fields_round_trip_and_checks():
    rng = np.random.default_rng(0)
    w = _weights(rng, 4, (8, 6))
    kw = dict(pe=2, simd=3, weights=w, multiplier=np.ones(8, int), shift=np.ones(8, int))
    s = MVAUSpec("fc", 6, 8, lut_mults=3, weight_bits=4, **kw)
    st = s.structure()
    assert st["lut_mults"] == 3 and st["weight_bits"] == 4
    back = spec_from_structure(st)
    assert (back.lut_mults, back.weight_bits) == (3, 4) and back.structure() == st
    plain = MVAUSpec("fc", 6, 8, **kw).structure()
    assert "lut_mults" not in plain and "weight_bits" not in plain  # int8 designs unchanged
    assert s.param_memories() == []
    rt = MVAUSpec("fc", 6, 8, pe=2, simd=3, weights_mode="runtime", weight_bits=4)
    assert rt.param_memories()[0] == ("weights", 0, 8, 12)
    bip = spec_from_structure(MVAUSpec("fc", 6, 8, weight_bits=1,
                                       **{**kw, "weights": _weights(rng, 1, (8, 6))}).structure())
    assert bip.weight_bits == 1
    with pytest.raises(HardwareConfigError, match=r"weight_bits=4\): weights values must lie "
                                                  r"in \[-8, 7\]"):
        MVAUSpec("fc", 6, 8, weight_bits=4, **{**kw, "weights": w * 3})
    with pytest.raises(HardwareConfigError, match="bipolar weights"):
        MVAUSpec("fc", 6, 8, weight_bits=1, **{**kw, "weights": np.zeros((8, 6), int)})
    with pytest.raises(HardwareConfigError, match="lut_mults=7 must lie"):
        MVAUSpec("fc", 6, 8, lut_mults=7, **kw)
    with pytest.raises(HardwareConfigError, match="weight_bits=9"):
        MVAUSpec("fc", 6, 8, weight_bits=9, **kw)
    # narrow activation operands: a structure key only when narrow, and the model
    # refuses inputs the operand cannot hold (the hardware would keep their low bits)
    na = MVAUSpec("fc", 6, 8, act_bits=5, **kw)
    assert na.structure()["act_bits"] == 5 and "act_bits" not in plain
    assert spec_from_structure(na.structure()).act_bits == 5
    np.testing.assert_array_equal(na.model(np.full((1, 6), 15)),
                                  MVAUSpec("fc", 6, 8, **kw).model(np.full((1, 6), 15)))
    with pytest.raises(HardwareConfigError, match=r"stage 'fc': inputs in \[0, 16\] but "
                                                  r"the stage multiplies 5-bit"):
        na.model(np.array([[0, 16, 1, 2, 3, 4]]))


def test_conv_and_fc_chain_with_lane_kinds():
    """A convolution (int4 weights, shared DSPs and LUT lanes) into a fully-connected
    stage (bipolar weights, some LUT lanes): the whole accelerator in amaranth.sim
    against the specs' models."""
    from fluid_hw.rtl import AcceleratorTop, ConvSpec

    from .test_top import run_top

    rng = np.random.default_rng(9)
    conv = ConvSpec("conv1", (2, 5, 5), 4, kernel=3, padding=1, pe=4, simd=6,
                    weights=_weights(rng, 4, (4, 2, 3, 3)), bias=rng.integers(-99, 99, 4),
                    multiplier=rng.integers(1, 2**15, 4), shift=rng.integers(19, 21, 4),
                    relu=True, lut_mults=7, weight_bits=4)
    fc = MVAUSpec("fc", 100, 6, pe=2, simd=4, weights=_weights(rng, 1, (6, 100)),
                  multiplier=rng.integers(1, 2**15, 6), shift=rng.integers(17, 19, 6),
                  lut_mults=3, weight_bits=1)
    top = AcceleratorTop([conv, fc])
    x = rng.integers(-128, 128, (2, 50))
    np.testing.assert_array_equal(run_top(top, x, seed=2), top.model(x))
