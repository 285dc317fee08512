"""The requantiser's rails from the stage's format (_lane.Clamp): narrow signed,
unsigned and bipolar outputs in int8 lanes, in amaranth simulation against the
behavioural model, and the model against the golden model's requantize kernel."""

import numpy as np
import pytest

from fluid_hw.rtl import Clamp
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.mvau import MVAU, mvau_model
from fluid_hw.rtl.requant import Requantiser, requantize_model
from tests.op_harness import run_op

from .streams import simulate_streams

# (clamp, relu, the requantize op's attributes that give the same rails)
CASES = [
    (Clamp(0, 15), False, {"bits": 4, "signed": False}),
    (Clamp(-2, 1), False, {"bits": 2}),
    (Clamp(-2, 1), True, {"bits": 2, "relu": True}),
    (Clamp(-64, 63), False, {"bits": 7}),
    (Clamp(-1, 1, bipolar=True), False, {"bits": 1, "bipolar": True}),
]


def _signed8(words, lanes):
    return np.array([unpack_lanes(w, lanes, 8) for w in words])


@pytest.mark.parametrize(("clamp", "relu", "attrs"), CASES)
def test_requantiser_clamps_to_the_rails(clamp, relu, attrs):
    rng = np.random.default_rng(clamp.hi + 3 * relu)
    c, lanes = 4, 2
    bias = rng.integers(-2**12, 2**12, c)
    m = rng.integers(1, 2**15, c)
    n = rng.integers(12, 20, c)
    acc = rng.integers(-2**18, 2**18, (12, c))
    acc[0] = [0, -1, 1, -bias[3]]  # a zero sum: bipolar gives +1
    want = requantize_model(acc, bias, m, n, relu, clamp)
    gold = run_op("requantize", {"X": (acc + bias).astype(np.int32),
                                 "Multiplier": m.astype(np.int32), "Shift": n.astype(np.int32)},
                  attrs)["Out"]
    np.testing.assert_array_equal(want, gold)
    assert len(np.unique(want)) > 1
    dut = Requantiser("rq", lanes, c, bias=bias, multiplier=m, shift=n, relu=relu, clamp=clamp)
    beats = [pack_lanes(row[i:i + lanes], 32) for row in acc for i in range(0, c, lanes)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(beats))], seed=1)
    np.testing.assert_array_equal(_signed8(out, lanes).reshape(acc.shape), want)


def test_bipolar_mvau_is_exact():
    """Bipolar weights and inputs, bipolar outputs (m = 1, n = 0: the sum's sign)."""
    rng = np.random.default_rng(7)
    mw, mh = 12, 4
    w = rng.choice([-1, 1], (mh, mw))
    x = rng.choice([-1, 1], (6, mw))
    clamp = Clamp(-1, 1, bipolar=True)
    ones = np.ones(mh, np.int64)
    dut = MVAU("fc", mw, mh, 2, 3, weights=w, bias=None, multiplier=ones,
               shift=np.zeros(mh, np.int64), clamp=clamp)
    beats = [pack_lanes(row[i:i + 3], 8) for row in x for i in range(0, mw, 3)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(x) * dut.nf)], seed=2)
    got = _signed8(out, 2).reshape(len(x), mh)
    want = mvau_model(x, w, None, ones, np.zeros(mh, np.int64), False, clamp)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.where(x @ w.T >= 0, 1, -1))


def test_clamp_rails_must_fit_int8():
    with pytest.raises(HardwareConfigError, match="within int8"):
        Clamp(0, 255)


@pytest.mark.parametrize(("clamp", "t_n", "attrs"), [
    (Clamp(0, 15), 15, {"bits": 4, "signed": False}),
    (Clamp(-2, 1), 3, {"bits": 2, "out_bias": -2}),
    (Clamp(0, 3), 3, {"bits": 3}),  # a relu'd signed 3-bit output: [0, 3]
    (Clamp(-1, 1, bipolar=True), 1, {"bits": 1, "bipolar": True}),
])
def test_threshold_lanes_count_crossings(clamp, t_n, attrs):
    """thresholds in place of the requantisation: the amaranth pipeline, the behavioural
    model and the golden multi_threshold kernel agree (equal thresholds, values equal to
    a threshold, int32 ends)."""
    rng = np.random.default_rng(t_n)
    c, lanes = 4, 2
    bias = rng.integers(-2**10, 2**10, c)
    th = np.sort(rng.integers(-2**12, 2**12, (c, t_n)), axis=1)
    th[0, :] = th[0, 0]  # all equal: crossed together
    th[1, 0] = -2**31
    acc = rng.integers(-2**13, 2**13, (16, c))
    acc[0] = th[:, 0] - bias  # exactly at the first threshold
    acc[1] = th[:, -1] - bias - 1  # just below the last
    want = requantize_model(acc, bias, None, None, False, clamp, th)
    gold = run_op("multi_threshold", {"X": (acc + bias).astype(np.int32),
                                      "Thresholds": th.astype(np.int32)}, attrs)["Out"]
    np.testing.assert_array_equal(want, gold)
    dut = Requantiser("rq", lanes, c, bias=bias, clamp=clamp, thresholds=th)
    beats = [pack_lanes(row[i:i + lanes], 32) for row in acc for i in range(0, c, lanes)]
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, len(beats))], seed=3)
    np.testing.assert_array_equal(_signed8(out, lanes).reshape(acc.shape), want)


def test_thresholds_need_const_rails_and_no_relu():
    th = np.zeros((2, 3), np.int64)
    with pytest.raises(HardwareConfigError, match="thresholds need const"):
        Requantiser("rq", 1, 2, thresholds=th)  # no rails
    with pytest.raises(HardwareConfigError, match="thresholds need const"):
        Requantiser("rq", 1, 2, clamp=Clamp(0, 3), thresholds=th, runtime=True)
    with pytest.raises(HardwareConfigError, match="fold a relu"):
        Requantiser("rq", 1, 2, clamp=Clamp(0, 3), thresholds=th, relu=True)
