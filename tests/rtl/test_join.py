"""Residual join: the model against a plain-int reference of the contract (random and
extreme multipliers and shifts, saturation), the RTL bit-exact against the model under
random valid on both inputs and random ready, full throughput and latency."""

import random

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.join import ADD_JOIN_LATENCY, AddJoin, add_join_model
from fluid_hw.rtl.stream import CreditQueue

from .streams import run_full_rate, simulate_streams


def reference(a: int, b: int, ma: int, na: int, mb: int, nb: int, relu: bool) -> int:
    """The contract in Python ints, word for word."""
    big_a, big_b = a * ma, b * mb
    n = max(na, nb)
    r = (big_a * 2**(n - na) + big_b * 2**(n - nb) + (2**(n - 1) if n else 0)) >> n
    return min(max(r, 0 if relu else -128), 127)


def random_params(r: random.Random) -> dict:
    """Multipliers and shifts: extremes (0, 1, 2^15 - 1; 0, 47), realistic scales
    (m * 2^-n near 1/4 .. 2, which both saturates and rounds) and anything in range."""
    def one() -> tuple[int, int]:
        kind = r.random()
        if kind < 0.25:
            return r.choice([0, 1, 2, 2**14, 2**15 - 1]), r.choice([0, 1, 46, 47])
        if kind < 0.45:  # small scales: exact ties (x.5) are frequent
            return r.randint(1, 7), r.randint(0, 3)
        if kind < 0.75:
            n = r.randint(13, 18)
            return r.randint(2**13, 2**15 - 1), n
        return r.randint(0, 2**15 - 1), r.randint(0, 47)
    (ma, na), (mb, nb) = one(), one()
    return {"ma": ma, "na": na, "mb": mb, "nb": nb, "relu": r.random() < 0.3}


def int8s(r: random.Random, k: int) -> list[int]:
    edge = [-128, -127, -1, 0, 1, 127]
    return [r.choice(edge) if r.random() < 0.2 else r.randint(-128, 127) for _ in range(k)]


def test_model_matches_contract_fuzzed():
    r = random.Random(13)
    for _ in range(400):
        p = random_params(r)
        a, b = int8s(r, 64), int8s(r, 64)
        got = add_join_model(np.array(a), np.array(b), **p)
        assert got.dtype == np.int8
        assert got.tolist() == [reference(x, y, **p) for x, y in zip(a, b)], p
    # every extreme pair of shifts, every sign, the largest multipliers
    grid = np.array([-128, -127, -64, -1, 0, 1, 63, 127])
    a, b = np.meshgrid(grid, grid)
    for na in (0, 1, 46, 47):
        for nb in (0, 1, 46, 47):
            for ma, mb in ((2**15 - 1, 2**15 - 1), (1, 2**15 - 1), (0, 3), (2**14, 2**14)):
                for relu in (False, True):
                    got = add_join_model(a, b, ma, na, mb, nb, relu)
                    want = [[reference(int(x), int(y), ma, na, mb, nb, relu)
                             for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
                    assert got.tolist() == want, (ma, na, mb, nb, relu)


def test_model_examples():
    # plain saturating sum (unit scales), and relu
    assert add_join_model(np.array([100, -100, 3]), np.array([100, -100, -5]),
                          1, 0, 1, 0).tolist() == [127, -128, -2]
    assert add_join_model(np.array([3]), np.array([-5]), 1, 0, 1, 0, relu=True).tolist() == [0]
    # one rounding of the exact sum: 1/2 + 1/2 = 1 (not 1 + 1 = 2 or 0 + 0 = 0)
    assert add_join_model(np.array([1]), np.array([1]), 1, 1, 1, 1).tolist() == [1]
    # half rounds up (toward +inf): -3/2 -> -1, 3/2 -> 2
    assert add_join_model(np.array([-3, 3]), np.array([0, 0]), 1, 1, 1, 0).tolist() == [-1, 2]
    # different shifts: a * 3/4 + b * 1/2 = 10.5 + 3 -> 14 (13.5 rounds up)
    assert add_join_model(np.array([14]), np.array([6]), 3, 2, 1, 1).tolist() == [14]


def run_join(dut: AddJoin, a: np.ndarray, b: np.ndarray, seed: int, p_valid: float = 0.7,
             p_ready: float = 0.7) -> np.ndarray:
    lanes = dut.lanes
    (out,) = simulate_streams(dut, [(dut.a, [pack_lanes(x, 8) for x in a]),
                                    (dut.b, [pack_lanes(x, 8) for x in b])],
                              [(dut.o, len(a))], seed=seed, p_valid=p_valid, p_ready=p_ready)
    return np.array([unpack_lanes(w, lanes, 8) for w in out]).reshape(a.shape)


@pytest.mark.parametrize("lanes,seed,p_valid,p_ready", [
    (1, 1, 0.7, 0.7), (2, 2, 0.5, 0.9), (3, 3, 0.9, 0.4), (4, 4, 1.0, 1.0), (2, 5, 0.6, 0.6)])
def test_join_bit_exact_under_random_stalls(lanes, seed, p_valid, p_ready):
    r = random.Random(seed)
    p = {1: {"ma": 23170, "na": 15, "mb": 27000, "nb": 16, "relu": False},
         5: {"ma": 3, "na": 2, "mb": 1, "nb": 1, "relu": False},  # many exact ties
         }.get(seed) or random_params(r)
    beats = 300
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (beats, lanes))
    b = rng.integers(-128, 128, (beats, lanes))
    a[:4], b[:4] = [[-128], [127], [-128], [127]], [[-128], [127], [127], [-128]]
    dut = AddJoin("join", lanes, **p)
    got = run_join(dut, a, b, seed, p_valid, p_ready)
    np.testing.assert_array_equal(got, add_join_model(a, b, **p), err_msg=str(p))


def check_fuzzed(seed: int, beats: int) -> None:
    r = random.Random(seed)
    p = random_params(r)
    if seed in (10, 11):  # both shifts extreme
        p.update(na=47 * (seed - 10), nb=47, ma=2**15 - 1, mb=2**15 - 1)
    lanes = r.randint(1, 4)
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (beats, lanes))
    b = rng.integers(-128, 128, (beats, lanes))
    dut = AddJoin("join", lanes, **p)
    got = run_join(dut, a, b, seed, p_valid=r.uniform(0.3, 1), p_ready=r.uniform(0.3, 1))
    np.testing.assert_array_equal(got, add_join_model(a, b, **p), err_msg=str(p))
    want = [[reference(int(x), int(y), **p) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
    assert got.tolist() == want


@pytest.mark.parametrize("seed", range(10, 22))
def test_join_rtl_fuzzed_params(seed):
    check_fuzzed(seed, 120)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 160))
def test_join_rtl_fuzzed_params_more(seed):
    check_fuzzed(seed, 400)


def full_rate_join(dut, a, b, prologue=None):
    """Both inputs offered every cycle, the output always ready: the cycles at which
    ``a`` moved a beat (``b`` moved on the same ones), the output's cycles and values."""
    sources = [(dut.a, [pack_lanes(x, 8) for x in a]), (dut.b, [pack_lanes(x, 8) for x in b])]
    ins, outs, vals = run_full_rate(dut, sources, len(a), prologue=prologue)
    assert run_full_rate(dut, sources, len(a), watch=dut.b, prologue=prologue)[0] == ins
    return ins, outs, [unpack_lanes(op, dut.lanes, 8) for op in vals]


def test_join_full_throughput_and_latency():
    rng = np.random.default_rng(7)
    p = {"ma": 20000, "na": 15, "mb": 9000, "nb": 13, "relu": True}
    dut = AddJoin("join", 2, **p)
    a, b = rng.integers(-128, 128, (60, 2)), rng.integers(-128, 128, (60, 2))
    ins, outs, vals = full_rate_join(dut, a, b)
    assert np.diff(ins).tolist() == [1] * (len(a) - 1)  # one beat per cycle
    assert dut.latency == ADD_JOIN_LATENCY
    assert [o - i for i, o in zip(ins, outs)] == [ADD_JOIN_LATENCY + CreditQueue.latency] * len(a)
    np.testing.assert_array_equal(vals, add_join_model(a, b, **p))


def test_join_waits_for_both_inputs():
    """A beat leaves neither input until the other side is valid too (no drop)."""
    from amaranth.sim import Simulator

    dut = AddJoin("join", 1, ma=1, na=0, mb=1, nb=0)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = []

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.a.valid, 1)
        ctx.set(dut.a.payload, 5)
        for _ in range(10):
            _, _, ar, ov = await ctx.tick().sample(dut.a.ready, dut.o.valid)
            assert not ar and not ov
        ctx.set(dut.b.valid, 1)
        ctx.set(dut.b.payload, 7)
        _, _, ar, br = await ctx.tick().sample(dut.a.ready, dut.b.ready)
        assert ar and br
        ctx.set(dut.a.valid, 0)
        ctx.set(dut.b.valid, 0)
        for _ in range(15):
            _, _, ov, op = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if ov:
                got.append(op)
    sim.add_testbench(tb)
    sim.run()
    assert got == [12]


def test_join_errors():
    with pytest.raises(HardwareConfigError, match=r"join 'j': na must be an integer in \[0, 47\]"):
        AddJoin("j", 1, ma=1, na=48, mb=1, nb=0)
    with pytest.raises(HardwareConfigError, match=r"mb must be an integer in \[0, 32767\]"):
        AddJoin("j", 1, ma=1, na=0, mb=2**15, nb=0)
    with pytest.raises(HardwareConfigError, match="lanes must be an integer >= 1"):
        AddJoin("j", 0, ma=1, na=0, mb=1, nb=0)
    with pytest.raises(HardwareConfigError, match="ff_style must be one of"):
        AddJoin("j", 1, ma=1, na=0, mb=1, nb=0, ff_style="fast")
    with pytest.raises(HardwareConfigError, match="inputs have shapes"):
        add_join_model(np.zeros(3, int), np.zeros(4, int), 1, 0, 1, 0)
