"""Per-channel affine unit: its model equals the golden kernels (quantized_affine then
requantize); the unit is bit-exact against the model under random stalls on both sides
(odd channel counts, several lane counts, batch-norm parameters with negative gammas,
a zero variance and a zero gamma, saturation at both rails), with const and runtime
weights, int32 outputs, one beat a cycle at its stated latency."""

import numpy as np
import pytest

from fluid_hw.passes._quant_affine import integer_affine
from fluid_hw.passes.quantize import requant_params
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.affine import AffineUnit, affine_latency, affine_model
from fluid_hw.rtl.mvau import mvau_weight_entries
from fluid_hw.rtl.requant import requant_entries
from fluid_hw.rtl.stream import CreditQueue
from tests.op_harness import run_op

from .streams import run_full_rate, simulate_streams, write_params


def bn_case(rng, c, s_in=0.05, s_out=0.04):
    """Integer parameters the quantisation pass makes of a batch norm with ``c``
    channels: negative gammas, one channel of zero variance (epsilon 1e-5), one of zero
    gamma; ``(w, bias, multiplier, shift)``."""
    gamma = rng.uniform(0.3, 2.0, c) * rng.choice([-1, 1], c)
    beta, mean = rng.normal(0, 1, c), rng.normal(0, 2, c)
    var = rng.uniform(0.2, 4, c)
    var[0] = 0.0
    if c > 2:
        gamma[2] = 0.0
    a = gamma / np.sqrt(var + 1e-5)
    w, bias, s_w = integer_affine(a, beta - mean * a, s_in, s_out, 2**31 - 1 - 127 * 128)
    mn = [requant_params(v) for v in s_in * s_w / s_out]
    return w, bias, np.array([m for m, _ in mn]), np.array([n for _, n in mn])


def run_unit(dut, x, seed, prologue=None, **kw):
    """``x`` [beats, C / pe ... flattened] channel fastest -> the unit's outputs, same
    order."""
    pe = dut.pe
    flat = np.asarray(x).reshape(-1)
    beats = [pack_lanes(flat[i:i + pe], 8) for i in range(0, flat.size, pe)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(beats))], seed=seed,
                              prologue=prologue, **kw)
    return np.array([v for wd in out for v in unpack_lanes(wd, pe, dut.out_bits)])


def test_model_is_the_golden_affine_then_requantize():
    rng = np.random.default_rng(0)
    c = 5
    w, bias, m, n = bn_case(rng, c)
    x = rng.integers(-128, 128, (3, c, 4, 2)).astype(np.int8)
    x[0, :, 0, 0], x[0, :, 0, 1] = -128, 127
    for relu in (False, True):
        acc = run_op("quantized_affine", {"X": x, "Weight": w, "Bias": bias})["Out"]
        gold = run_op("requantize", {"X": acc, "Multiplier": m.astype(np.int32),
                                     "Shift": n.astype(np.int32)}, {"relu": relu})["Out"]
        got = affine_model(x.transpose(0, 2, 3, 1), w, bias, m, n, relu)
        np.testing.assert_array_equal(got, gold.transpose(0, 2, 3, 1))
    # without a multiplier the model is the int32 accumulator
    np.testing.assert_array_equal(affine_model(x.transpose(0, 2, 3, 1), w, bias),
                                  acc.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("c,pe,seed", [(1, 1, 1), (3, 1, 2), (5, 5, 3), (6, 3, 4),
                                       (7, 7, 5), (4, 2, 6)])
def test_affine_const_is_bit_exact_under_stalls(c, pe, seed):
    rng = np.random.default_rng(seed)
    w, bias, m, n = bn_case(rng, c)
    relu = bool(seed % 2)
    dut = AffineUnit("bn", c, pe, weights=w, bias=bias, multiplier=m, shift=n, relu=relu)
    x = rng.integers(-128, 128, (24, c))  # 24 pixels, HWC
    x[:2] = [-128], [127]
    got = run_unit(dut, x, seed, p_valid=0.7, p_ready=0.6)
    want = affine_model(x, w, bias, m, n, relu)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    if c > 2:  # the scales are meaningful: both rails and the middle are hit
        assert (want == 127).any() and ((want == 0) if relu else (want == -128)).any()
        assert ((want > -128) & (want < 127)).mean() > 0.3
        assert (want[:, 2] == want[0, 2]).all()  # gamma 0: a constant channel


def test_affine_runtime_weights_two_sets_through_one_design():
    rng = np.random.default_rng(11)
    c, pe = 6, 3
    dut = AffineUnit("bn", c, pe, runtime=True, relu=False)
    assert len(dut.wr.en) == 2 * pe
    x = rng.integers(-128, 128, (10, c))
    for _ in range(2):
        w, bias, m, n = bn_case(rng, c)
        words = mvau_weight_entries(w.reshape(-1, 1), pe, 1)
        params = requant_entries("bn", c, bias, m, n)

        load = write_params(dut.wr, [m for p in range(pe)
                                     for m in ((p, words[p]), (pe + p, params[p::pe]))])
        got = run_unit(dut, x, seed=3, prologue=load)
        np.testing.assert_array_equal(got.reshape(x.shape), affine_model(x, w, bias, m, n))


def test_affine_int32_outputs_with_bias():
    rng = np.random.default_rng(5)
    c, pe = 3, 3
    w = rng.integers(-128, 128, c)
    bias = rng.integers(-2**30, 2**30, c)
    dut = AffineUnit("s", c, pe, weights=w, bias=bias, requantize=False)
    x = rng.integers(-128, 128, (8, c))
    got = run_unit(dut, x, seed=5)
    assert dut.out_bits == 32
    np.testing.assert_array_equal(got.reshape(x.shape), affine_model(x, w, bias))


def test_affine_full_rate_and_latency():
    rng = np.random.default_rng(4)
    c, pe = 4, 2
    w, bias, m, n = bn_case(rng, c)
    dut = AffineUnit("bn", c, pe, weights=w, bias=bias, multiplier=m, shift=n)
    x = rng.integers(-128, 128, (30, pe))
    ins, outs, out = run_full_rate(dut, [(dut.i, [pack_lanes(b, 8) for b in x])], len(x))
    vals = [unpack_lanes(op, pe, 8) for op in out]
    assert np.diff(ins).tolist() == [1] * (len(x) - 1)  # one beat per cycle
    lat = affine_latency() + CreditQueue.latency
    assert [o - i for i, o in zip(ins, outs)] == [lat] * len(x)
    np.testing.assert_array_equal(np.reshape(vals, (-1, c)),
                                  affine_model(x.reshape(-1, c), w, bias, m, n))


def test_affine_trellis_cells():
    from amaranth.back import rtlil

    dut = AffineUnit("bn", 4, 2, weights=np.ones(4, np.int8), multiplier=np.ones(4, int),
                     shift=np.ones(4, int), ff_style="trellis")
    text = rtlil.convert(dut, name="bn")
    # one MULT18X18D per lane for the product, two per requantiser lane
    assert text.count("cell \\MULT18X18D") == 2 + 2 * 2
    assert text.count('parameter \\REG_OUTPUT_CLK "CLK0"') == 2 + 2 * 2


def test_affine_errors():
    ones = {"multiplier": np.ones(4, int), "shift": np.ones(4, int)}
    with pytest.raises(HardwareConfigError, match="affine unit 'bn': PE=3 must divide the 4 "
                                                  "channels"):
        AffineUnit("bn", 4, 3, weights=np.zeros(4, np.int8), **ones)
    with pytest.raises(HardwareConfigError, match=r"weights has shape \(5,\), expected \(4,\)"):
        AffineUnit("bn", 4, 2, weights=np.zeros(5, np.int8), **ones)
    with pytest.raises(HardwareConfigError, match="const weights need the factors"):
        AffineUnit("bn", 4, 2, **ones)
    with pytest.raises(HardwareConfigError, match=r"multiplier values must lie in \[0, 32767\]"):
        AffineUnit("bn", 4, 2, weights=np.zeros(4, np.int8), multiplier=np.full(4, -1),
                   shift=np.ones(4, int))
