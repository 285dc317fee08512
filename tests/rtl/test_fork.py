"""Fork: every output sees every beat once, in order, under random stalls; valid never
follows ready; and a fork feeding a join (the residual block's shape, one branch
delayed) neither deadlocks nor loses a beat under random backpressure."""

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.fork import Fork, fork_model
from fluid_hw.rtl.join import AddJoin, add_join_model
from fluid_hw.rtl.stream import StreamFIFO
from fluid_hw.rtl.table import TableActivation

from .streams import simulate_streams


def test_fork_model():
    assert fork_model([1, 2, 3], 3) == [[1, 2, 3]] * 3
    assert fork_model([], 2) == [[], []]


@pytest.mark.parametrize("n,p_valid,p_ready,seed", [
    (1, 0.7, 0.7, 0), (2, 0.7, 0.5, 1), (2, 1.0, 1.0, 2), (3, 0.9, 0.3, 3), (4, 0.4, 0.9, 4)])
def test_fork_every_output_every_beat(n, p_valid, p_ready, seed):
    r = random.Random(seed)
    beats = [r.getrandbits(16) for _ in range(400)]
    dut = Fork(16, n)
    outs = simulate_streams(dut, [(dut.i, beats)], [(o, len(beats)) for o in dut.outputs],
                            seed=seed, p_valid=p_valid, p_ready=p_ready)
    assert outs == fork_model(beats, n)


def test_fork_taken_flags_and_ready():
    """An output that took the beat does not see it again while the other stalls; the
    input is released once both took it; every valid is the same whatever the readies."""
    dut = Fork(8, 2)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        o0, o1 = dut.outputs
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 0x5A)
        for r0 in (0, 1):  # valid does not depend on any ready
            for r1 in (0, 1):
                ctx.set(o0.ready, r0)
                ctx.set(o1.ready, r1)
                assert (ctx.get(o0.valid), ctx.get(o1.valid)) == (1, 1)
                assert ctx.get(dut.i.ready) == (r0 & r1)
        ctx.set(o0.ready, 1)
        ctx.set(o1.ready, 0)
        await ctx.tick()  # o0 takes the beat
        for r0 in (0, 1):
            ctx.set(o0.ready, r0)
            assert ctx.get(o0.valid) == 0 and ctx.get(o1.valid) == 1
            assert ctx.get(dut.i.ready) == 0
        for _ in range(3):  # o1 keeps stalling: o0 sees nothing more
            await ctx.tick()
            assert ctx.get(o0.valid) == 0 and ctx.get(dut.i.ready) == 0
        ctx.set(o1.ready, 1)
        assert ctx.get(dut.i.ready) == 1 and ctx.get(o1.payload) == 0x5A
        await ctx.tick()  # o1 takes it, the input moves on
        ctx.set(dut.i.payload, 0x33)
        assert (ctx.get(o0.valid), ctx.get(o1.valid)) == (1, 1)
        assert ctx.get(o0.payload) == 0x33
        ctx.set(dut.i.valid, 0)
        assert (ctx.get(o0.valid), ctx.get(o1.valid)) == (0, 0)
    sim.add_testbench(tb)
    sim.run()


def test_fork_full_throughput():
    dut = Fork(8, 3)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        for o in dut.outputs:
            ctx.set(o.ready, 1)
        ctx.set(dut.i.valid, 1)
        for k in range(20):
            ctx.set(dut.i.payload, k)
            _, _, rdy, *vs = await ctx.tick().sample(dut.i.ready,
                                                     *(o.valid for o in dut.outputs))
            assert rdy and all(vs)
    sim.add_testbench(tb)
    sim.run()


def test_fork_errors():
    with pytest.raises(HardwareConfigError, match=r"n \(the number of outputs\) must"):
        Fork(8, 0)
    with pytest.raises(HardwareConfigError, match="width must be an integer >= 1"):
        Fork(0, 2)


class Residual(wiring.Component):
    """``o = join(long(x), skip(x))``: a fork, a branch of ``long_tables`` identity table
    activations (a pipeline that stalls), a skip FIFO of ``skip_depth`` (0: none), and an
    :class:`AddJoin`; ``swap`` puts the long branch on the join's ``b`` input."""

    def __init__(self, lanes: int, long_tables: int, skip_depth: int, swap: bool,
                 params: dict) -> None:
        self.lanes, self.long_tables, self.skip_depth, self.swap = (
            lanes, long_tables, skip_depth, swap)
        self.join = AddJoin("join", lanes, **params)
        super().__init__({"i": In(stream.Signature(8 * lanes)),
                          "o": Out(stream.Signature(8 * lanes))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.fork = fork = Fork(8 * self.lanes, 2)
        m.submodules.join = join = self.join
        wiring.connect(m, wiring.flipped(self.i), fork.i)
        long_out = fork.o0
        identity = (np.arange(256) + 128) % 256 - 128  # table[x & 0xFF] == x
        for k in range(self.long_tables):
            m.submodules[f"t{k}"] = t = TableActivation(f"t{k}", self.lanes, identity)
            wiring.connect(m, long_out, t.i)
            long_out = t.o
        skip_out = fork.o1
        if self.skip_depth:
            m.submodules.skip = fifo = StreamFIFO(8 * self.lanes, self.skip_depth)
            wiring.connect(m, skip_out, fifo.i)
            skip_out = fifo.o
        a, b = (skip_out, long_out) if self.swap else (long_out, skip_out)
        wiring.connect(m, a, join.a)
        wiring.connect(m, b, join.b)
        wiring.connect(m, join.o, wiring.flipped(self.o))
        return m


@pytest.mark.parametrize("long_tables,skip_depth,swap,p_valid,p_ready,seed", [
    (0, 2, False, 0.7, 0.7, 1),   # a + a, the a branch direct, the b branch through a FIFO
    (0, 8, True, 0.9, 0.4, 2),
    (2, 0, False, 0.7, 0.7, 3),   # the long branch holds beats, no skip FIFO: stalls only
    (2, 8, True, 0.8, 0.6, 4),
    (3, 16, False, 1.0, 1.0, 5),
])
def test_fork_into_join_no_deadlock(long_tables, skip_depth, swap, p_valid, p_ready, seed):
    lanes = 2
    params = {"ma": 20000, "na": 15, "mb": 11000, "nb": 14, "relu": seed % 2 == 0}
    dut = Residual(lanes, long_tables, skip_depth, swap, params)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (400, lanes))
    (out,) = simulate_streams(dut, [(dut.i, [pack_lanes(v, 8) for v in x])],
                              [(dut.o, len(x))], seed=seed, p_valid=p_valid, p_ready=p_ready,
                              max_cycles=20_000)
    got = np.array([unpack_lanes(w, lanes, 8) for w in out])
    np.testing.assert_array_equal(got, add_join_model(x, x, **params))


def cycles_for(dut: Residual, beats: int) -> int:
    """Cycles to push ``beats`` beats through with valid and ready always high."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    done = {"cycles": 0}

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        got = cyc = 0
        while got < beats:
            _, _, ov = await ctx.tick().sample(dut.o.valid)
            got += ov
            cyc += 1
        done["cycles"] = cyc
    sim.add_testbench(tb)
    sim.run()
    return done["cycles"]


def test_skip_fifo_sized_from_latency_keeps_full_rate():
    """HARDWARE.md: without a skip FIFO the fork waits for the long branch on every
    beat; one as deep as the long branch's latency lets the block run at full rate."""
    params = {"ma": 1, "na": 0, "mb": 1, "nb": 0}
    beats = 100
    unbuffered = cycles_for(Residual(1, 3, 0, False, params), beats)
    buffered = cycles_for(Residual(1, 3, 8, False, params), beats)
    assert buffered < beats + 20
    assert unbuffered > 2 * beats
