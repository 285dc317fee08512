"""MVAU latency mode (``stream_input``): bit-exact under random stalls, and its first
neuron fold starting on partial input, the cycle model (the ``mvau`` kind's times)
exact against amaranth.sim."""

import numpy as np
import pytest

from fluid_hw.hls.kinds import get_kind
from fluid_hw.rtl._util import pack_lanes
from fluid_hw.rtl.mvau import MVAU, mvau_model
from fluid_hw.rtl.spec import MVAUSpec

from .streams import run_full_rate
from .test_requant_mvau import _mvau_case, _run_mvau

# (mw, mh, pe, simd): NF > 1 and SF > 1, NF = 1, SF = 1, PE = SIMD = 1
FOLDINGS = [(12, 8, 2, 3), (8, 4, 4, 2), (8, 4, 1, 8), (6, 3, 3, 1), (5, 3, 1, 1)]


@pytest.mark.parametrize("mw,mh,pe,simd", FOLDINGS)
@pytest.mark.parametrize("p_valid", [0.3, 0.9])
def test_stream_input_bit_exact_under_stalls(mw, mh, pe, simd, p_valid):
    rng = np.random.default_rng(mw * mh + pe + int(10 * p_valid))
    w, bias, m, n = _mvau_case(rng, mw, mh)
    x = rng.integers(-128, 128, (6, mw))
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n,
               relu=True, stream_input=True)
    got = _run_mvau(dut, x, seed=pe + simd, p_valid=p_valid, p_ready=0.6)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias, m, n, relu=True))


def test_stream_input_int32_outputs():
    """int32 outputs (no requantiser) in latency mode."""
    rng = np.random.default_rng(5)
    w, bias, _, _ = _mvau_case(rng, 8, 4, requant=False)
    x = rng.integers(-128, 128, (4, 8))
    dut = MVAU("logits", 8, 4, 2, 2, weights=w, bias=bias, requantize=False,
               stream_input=True)
    np.testing.assert_array_equal(_run_mvau(dut, x, seed=3), mvau_model(x, w, bias))


def _out_cycles(stream: bool, mw: int, mh: int, pe: int, simd: int
                ) -> tuple[list[int], list[int], np.ndarray]:
    """One vector at full rate: the input beats' cycles, the output beats' cycles, and
    the kind's model of the output beats' cycles from the input beats' ones."""
    rng = np.random.default_rng(1)
    w, bias, m, n = _mvau_case(rng, mw, mh)
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n,
               stream_input=stream)
    x = rng.integers(-128, 128, (1, mw))
    beats = [pack_lanes(x[0, i:i + simd], 8) for i in range(0, mw, simd)]
    taken, outs, _ = run_full_rate(dut, [(dut.i, beats)], dut.nf)
    spec = MVAUSpec("fc", mw, mh, pe=pe, simd=simd, weights=w, bias=bias, multiplier=m,
                    shift=n, stream_input=stream)
    t_in = np.repeat(np.asarray(taken, np.float64), simd)
    model = get_kind("mvau").times(spec, (simd, pe), t_in)[::pe]
    return taken, outs, model


@pytest.mark.parametrize("mw,mh,pe,simd", [(16, 8, 2, 2), (16, 4, 4, 4), (8, 8, 8, 1),
                                         (32, 4, 2, 16), (16, 2, 1, 8)])
def test_stream_input_starts_on_partial_input_and_model_is_exact(mw, mh, pe, simd):
    t_tp, o_tp, m_tp = _out_cycles(False, mw, mh, pe, simd)
    t_st, o_st, m_st = _out_cycles(True, mw, mh, pe, simd)
    sf = mw // simd
    # the model is exact in both modes, output beat by output beat
    assert o_tp == m_tp.tolist() and o_st == m_st.tolist()
    # fold 0 no longer waits for the whole vector: SF - 1 cycles earlier (and the
    # requantiser's sharing steps)
    assert o_st[0] - t_st[-1] <= o_tp[0] - t_tp[-1] - (sf - 1)


def test_stream_input_runtime_weights():
    """Runtime weights and requantisation parameters (one requantiser lane a PE)."""
    from fluid_hw.rtl.mvau import mvau_weight_entries
    from fluid_hw.rtl.requant import requant_entries

    from .streams import write_params

    rng = np.random.default_rng(11)
    mw, mh, pe, simd = 8, 6, 3, 4
    w, bias, m, n = _mvau_case(rng, mw, mh)
    dut = MVAU("fc", mw, mh, pe, simd, runtime=True, relu=True, stream_input=True)
    words = mvau_weight_entries(w, pe, simd)
    params = requant_entries("fc", mh, bias, m, n)
    load = write_params(dut.wr, [(p, words[p]) for p in range(pe)]
                        + [(pe + p, params[p::pe]) for p in range(pe)])
    x = rng.integers(-128, 128, (4, mw))
    got = _run_mvau(dut, x, seed=2, prologue=load)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias, m, n, relu=True))


@pytest.mark.parametrize("simd,lut_mults", [(16, 0), (8, 3)])
def test_stream_input_paired_tree_with_packed_products(simd, lut_mults):
    """Latency mode's adder tree (a register every second level) with 4-bit weights,
    two PEs' products sharing a multiplier (their correction bits into the tree's
    adders, some of them unregistered) and some LUT products: bit-exact."""
    rng = np.random.default_rng(simd + lut_mults)
    mw, mh, pe = 2 * simd, 4, 2
    _, bias, m, n = _mvau_case(rng, mw, mh)
    w = rng.integers(-8, 8, (mh, mw))
    x = rng.integers(-128, 128, (4, mw))
    dut = MVAU("fc", mw, mh, pe, simd, weights=w, bias=bias, multiplier=m, shift=n,
               weight_bits=4, lut_mults=lut_mults, stream_input=True)
    assert dut.tree_depth == (simd.bit_length() - 1) // 2 + 1
    got = _run_mvau(dut, x, seed=simd, p_valid=0.7, p_ready=0.7)
    np.testing.assert_array_equal(got, mvau_model(x, w, bias, m, n))
