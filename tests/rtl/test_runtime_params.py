# amaranth: UnusedElaboratable=no
"""Runtime parameters of the table activation, the average pool and the residual join:
each unit's parameters written through ``wr`` (in the load format the host's image
uses), then streamed under random stalls, bit-exact against the behavioural model; and
a whole accelerator of the three loaded through AXI4-Lite."""

import random

import numpy as np
import pytest

from fluid_hw.rtl import (
    AcceleratorTop,
    AvgPool,
    AvgPoolSpec,
    HardwareConfigError,
    TableActivation,
    TableSpec,
    WindowGeometry,
    avgpool_model,
    pack_lanes,
    param_image,
    param_layout,
    table_model,
    unpack_lanes,
)
from fluid_hw.rtl.join import (
    ADD_JOIN_RUNTIME_LATENCY,
    JOIN_ENTRY_BITS,
    AddJoin,
    add_join_model,
    join_entry,
)
from fluid_hw.rtl.join_spec import JoinSpec
from fluid_hw.rtl.requant import requant_entries
from fluid_hw.rtl.spec import spec_from_structure
from fluid_hw.rtl.stream import CreditQueue
from fluid_hw.rtl.top import StageGraph

from .streams import simulate_streams, write_entries, write_params
from .test_join import full_rate_join, random_params, reference, run_join
from .test_top import _load_params, run_top


@pytest.mark.parametrize("lanes,seed", [(1, 0), (3, 1), (4, 2)])
def test_runtime_table_every_lane_takes_every_write(lanes, seed):
    rng = np.random.default_rng(seed)
    old, table = rng.integers(-128, 128, (2, 256))
    # every entry written twice, in random order, the second time with its final value
    order = rng.permutation(256)
    entries = [(int(a), int(old[a]) & 0xFF) for a in order]
    entries += [(int(a), int(table[a]) & 0xFF) for a in rng.permutation(256)]
    dut = TableActivation("act", lanes, runtime=True)
    x = rng.integers(-128, 128, (240 // lanes, lanes))
    x[0], x[1] = -128, 127
    (out,) = simulate_streams(dut, [(dut.i, [pack_lanes(b, 8) for b in x])],
                              [(dut.o, len(x))], seed=seed, p_valid=0.6, p_ready=0.6,
                              prologue=write_entries(dut.wr, [(0, a, e) for a, e in entries]))
    got = np.array([unpack_lanes(w, lanes, 8) for w in out])
    np.testing.assert_array_equal(got, table_model(x, table))


@pytest.mark.parametrize("lanes,seed", [(1, 3), (3, 4)])
def test_runtime_avgpool(lanes, seed):
    rng = np.random.default_rng(seed)
    g = WindowGeometry(6, 5, 4, (3, 2), (2, 2), (1, 0, 1, 1), (1, 1))
    m, n = int(rng.integers(2**12, 2**15)), int(rng.integers(14, 19))
    dut = AvgPool("avg", g, lanes, runtime=True, relu=seed == 4)
    ims = [rng.integers(-128, 128, (5, 4, 6)) for _ in range(2)]
    beats = [pack_lanes(v, 8) for im in ims for v in im.reshape(-1, lanes)]
    want = np.stack([avgpool_model(im, g, m, n, seed == 4) for im in ims])
    (entry,) = requant_entries("avg", 1, None, np.array([m]), np.array([n]))
    (out,) = simulate_streams(dut, [(dut.i, beats)], [(dut.o, want.size // lanes)],
                              seed=seed, prologue=write_params(dut.wr, [(0, [entry])]))
    got = np.array([v for w in out for v in unpack_lanes(w, lanes, 8)])
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def check_runtime_join(seed: int, p: dict, beats: int = 120) -> None:
    r = random.Random(seed)
    lanes = r.randint(1, 3)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(-128, 128, (2, beats, lanes))
    a[:2], b[:2] = [[-128], [127]], [[127], [-128]]
    dut = AddJoin("join", lanes, relu=p["relu"], runtime=True)
    entry = join_entry("join", p["ma"], p["na"], p["mb"], p["nb"])
    assert entry < 2**JOIN_ENTRY_BITS
    got = run_join_loaded(dut, a, b, seed, entry)
    np.testing.assert_array_equal(got, add_join_model(a, b, **p), err_msg=str(p))
    want = [[reference(int(x), int(y), **p) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
    assert got.tolist() == want


def run_join_loaded(dut, a, b, seed, entry):
    lanes = dut.lanes
    (out,) = simulate_streams(dut, [(dut.a, [pack_lanes(x, 8) for x in a]),
                                    (dut.b, [pack_lanes(x, 8) for x in b])],
                              [(dut.o, len(a))], seed=seed, p_valid=0.7, p_ready=0.7,
                              prologue=write_params(dut.wr, [(0, [entry])]))
    return np.array([unpack_lanes(w, lanes, 8) for w in out]).reshape(a.shape)


@pytest.mark.parametrize("seed", range(30, 38))
def test_runtime_join_fuzzed_params(seed):
    p = random_params(random.Random(seed))
    if seed == 30:  # the widest: both shifts 47, the largest multipliers
        p.update(ma=2**15 - 1, na=47, mb=2**15 - 1, nb=47)
    if seed == 31:  # b the big input (larger shift), a unshifted
        p.update(na=0, nb=47)
    check_runtime_join(seed, p)


def test_runtime_join_reloaded_across_every_shift_class():
    """One join reloaded between bursts, over the narrow datapath's cases: n_small 0, 1,
    near and beyond 24 (the output 0), shift differences near and beyond 23, either input
    the big one, extreme and random multipliers; every burst bit-exact."""
    from amaranth.sim import Simulator

    r = random.Random(5)
    sets = []
    for ns in (0, 1, 2, 22, 23, 24, 25, 47):
        for d in (0, 1, 21, 22, 23, 24, 30, 47):
            if ns + d <= 47:
                ms = [r.choice([0, 1, 2**15 - 1]), r.randint(1, 2**15 - 1)]
                r.shuffle(ms)
                big, small = (ns + d, ns)
                na, nb = (big, small) if len(sets) % 2 else (small, big)
                sets.append({"ma": ms[0], "na": na, "mb": ms[1], "nb": nb})
    rng = np.random.default_rng(5)
    edge = np.array([-128, -127, -1, 0, 1, 126, 127])
    a = np.concatenate([np.repeat(edge, 7), rng.integers(-128, 128, 15)]).reshape(-1, 2)
    b = np.concatenate([np.tile(edge, 7), rng.integers(-128, 128, 15)]).reshape(-1, 2)
    dut = AddJoin("join", 2, runtime=True)
    got = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        for p in sets:
            await write_params(dut.wr, [(0, [join_entry("j", **p)])])(ctx)
            out = []
            for x, y in zip(a, b):
                ctx.set(dut.a.valid, 1)
                ctx.set(dut.b.valid, 1)
                ctx.set(dut.a.payload, pack_lanes(x, 8))
                ctx.set(dut.b.payload, pack_lanes(y, 8))
                *_, ov, op = await ctx.tick().sample(dut.o.valid, dut.o.payload)
                if ov:
                    out.append(unpack_lanes(op, 2, 8))
            ctx.set(dut.a.valid, 0)
            ctx.set(dut.b.valid, 0)
            while len(out) < len(a):
                *_, ov, op = await ctx.tick().sample(dut.o.valid, dut.o.payload)
                if ov:
                    out.append(unpack_lanes(op, 2, 8))
            got.append(out)

    sim.add_testbench(bench)
    sim.run()
    assert len(sets) > 40
    for p, out in zip(sets, got):
        np.testing.assert_array_equal(out, add_join_model(a, b, **p), err_msg=str(p))


def test_runtime_join_equals_the_const_join():
    """The same parameters built in and loaded give the same outputs."""
    p = {"ma": 23170, "na": 15, "mb": 27000, "nb": 16, "relu": False}
    rng = np.random.default_rng(9)
    a, b = rng.integers(-128, 128, (2, 200, 2))
    const = run_join(AddJoin("join", 2, **p), a, b, seed=9)
    loaded = run_join_loaded(AddJoin("join", 2, runtime=True), a, b, 9,
                             join_entry("join", p["ma"], p["na"], p["mb"], p["nb"]))
    np.testing.assert_array_equal(loaded, const)
    np.testing.assert_array_equal(loaded, add_join_model(a, b, **p))


def test_runtime_join_full_throughput_and_latency():
    rng = np.random.default_rng(7)
    p = {"ma": 20000, "na": 13, "mb": 9000, "nb": 15, "relu": True}
    dut = AddJoin("join", 2, relu=True, runtime=True)
    a, b = rng.integers(-128, 128, (2, 60, 2))
    entry = join_entry("j", p["ma"], p["na"], p["mb"], p["nb"])
    ins, outs, vals = full_rate_join(dut, a, b, write_params(dut.wr, [(0, [entry])]))
    assert np.diff(ins).tolist() == [1] * (len(a) - 1)  # one beat per cycle
    lat = ADD_JOIN_RUNTIME_LATENCY + CreditQueue.latency
    assert [o - i for i, o in zip(ins, outs)] == [lat] * len(a)
    np.testing.assert_array_equal(vals, add_join_model(a, b, **p))


def test_runtime_units_need_no_constants_and_const_units_need_them():
    g = WindowGeometry(4, 4, 4, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1))
    with pytest.raises(HardwareConfigError, match="give the table, or runtime=True"):
        TableActivation("t", 1)
    with pytest.raises(HardwareConfigError, match="give the multiplier and shift, or runtime"):
        AvgPool("p", g, 2, multiplier=3)
    with pytest.raises(HardwareConfigError, match="give ma, na, mb and nb, or runtime"):
        AddJoin("j", 1, ma=1, na=0, mb=1)
    with pytest.raises(HardwareConfigError, match=r"nb must be an integer in \[0, 47\]"):
        join_entry("stage 'j'", 1, 0, 1, 48)
    with pytest.raises(HardwareConfigError, match="weights_mode must be 'const' or 'runtime'"):
        TableSpec("t", (4,), weights_mode="ram")
    assert "wr" not in AddJoin("j", 1, ma=1, na=0, mb=1, nb=0).signature.members


def _three_kinds(rng, mode):
    """A table, an average pool and a join fed by the pool and the table."""
    table = TableSpec("act", (4, 6, 6), rng.integers(-128, 128, 256), weights_mode=mode)
    pool = AvgPoolSpec("pool", (4, 6, 6), kernel=3, stride=1, padding=1,
                       multiplier=int(rng.integers(2**13, 2**15)), shift=int(rng.integers(15, 18)),
                       weights_mode=mode)
    join = JoinSpec("add", (4, 6, 6), ma=int(rng.integers(2**13, 2**15)), na=15,
                    mb=int(rng.integers(2**13, 2**15)), nb=int(rng.integers(12, 18)),
                    relu=True, weights_mode=mode)
    return [table, pool, join]


@pytest.mark.slow
def test_runtime_table_pool_and_join_through_axil():
    rng = np.random.default_rng(11)
    specs = _three_kinds(rng, "runtime")
    graph = StageGraph.of([(-1,), (0,), (1, 0)], {(2, 1): 150})
    top = AcceleratorTop(specs, graph=graph, in_lanes=2)
    segs, bits = param_layout(specs)
    assert [(s.stage, s.kind, s.depth, s.entry_bits, s.words_per_entry) for s in segs] == [
        ("act", "table", 256, 8, 1), ("pool", "requant", 1, 54, 2), ("add", "join", 1, 46, 2)]
    const = AcceleratorTop(_three_kinds(np.random.default_rng(11), "const"), graph=graph,
                           in_lanes=2)
    assert not const.runtime and const.registers != top.registers
    assert top.design_hash != const.design_hash
    # the runtime design does not depend on the values it is loaded with
    assert AcceleratorTop(_three_kinds(np.random.default_rng(12), "runtime"), graph=graph,
                          in_lanes=2).design_hash == top.design_hash
    # design.json's stages read back as runtime stages with the same layout
    again = [spec_from_structure(st) for st in top.describe()["stages"]]
    assert [s.runtime for s in again] == [True] * 3 and param_layout(again) == (segs, bits)
    x = rng.integers(-128, 128, (2, 144))
    got = run_top(top, x, prologue=_load_params(top, specs), seed=3)
    np.testing.assert_array_equal(got, top.model(x))
    np.testing.assert_array_equal(got, const.model(x))
    assert sum(len(w) for _, w in param_image(specs)) == 256 + 2 + 2
