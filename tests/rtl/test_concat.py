# amaranth: UnusedElaboratable=no
"""Channel concat: the model against a plain-int reference of the contract (fuzzed
multipliers and shifts, odd channel counts, two to four inputs, saturation, relu), the
hardware form of the rescale constants exhaustively over every int8, the RTL bit-exact
against the model under random valid on every input and random ready (lanes 1 to 4),
full throughput and latency, and the spec's checks."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Fragment

from fluid_hw.rtl import ConcatSpec, stage_lanes
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.concat import (
    CONCAT_ENTRY_BITS,
    CONCAT_RUNTIME_LATENCY,
    ConcatJoin,
    concat_entry,
    concat_latency,
    concat_model,
    concat_positions,
    concat_rescale,
)
from fluid_hw.rtl.spec import param_image, param_layout, spec_from_structure
from fluid_hw.rtl.stream import CreditQueue

from .streams import simulate_streams, write_params
from .test_join import int8s


def rescale(x: int, m: int, n: int, relu: bool) -> int:
    """The contract in Python ints."""
    r = (x * m + (1 << (n - 1))) >> n if n else x * m
    return min(max(r, 0 if relu else -128), 127)


def reference(xs: list[list[list[int]]], blocks: list[int], groups: int, ms: list[int],
              ns: list[int], relu: bool) -> list[list[int]]:
    """Per example: group by group, each input's block in turn, rescaled."""
    out = []
    for ex in range(len(xs[0])):
        row = []
        for g in range(groups):
            for p, b in enumerate(blocks):
                row += [rescale(v, ms[p], ns[p], relu) for v in xs[p][ex][g * b:(g + 1) * b]]
        out.append(row)
    return out


def one_scale(r: random.Random) -> tuple[int, int]:
    """A multiplier and shift: unchanged (1, 0), identities 2^n, extremes, realistic
    scales below 1 (what the quantisation pass makes), anything in range."""
    kind = r.random()
    if kind < 0.2:
        return (1, 0) if r.random() < 0.5 else (1 << (n := r.randint(0, 14)), n)
    if kind < 0.35:
        return r.choice([0, 1, 2**15 - 1]), r.choice([0, 1, 22, 23, 24, 47])
    if kind < 0.7:
        return r.randint(2**14, 2**15 - 1), r.randint(14, 17)
    return r.randint(0, 2**15 - 1), r.randint(0, 47)


def random_case(r: random.Random, lanes: int) -> dict:
    k = r.randint(2, 4)
    blocks = [lanes * r.choice([1, 1, 3, 5]) for _ in range(k)]
    scales = [one_scale(r) for _ in range(k)]
    if r.random() < 0.25:  # every input at the output's scale: no multiplier
        scales = [(1, 0)] * k
    return {"blocks": blocks, "multipliers": [m for m, _ in scales],
            "shifts": [n for _, n in scales], "relu": r.random() < 0.3}


def test_model_matches_contract_fuzzed():
    r = random.Random(5)
    for _ in range(300):
        c = random_case(r, r.randint(1, 3))
        groups = r.randint(1, 4)
        xs = [[int8s(r, groups * b) for _ in range(2)] for b in c["blocks"]]
        got = concat_model([np.array(x) for x in xs], c["blocks"], groups, c["multipliers"],
                           c["shifts"], c["relu"])
        assert got.dtype == np.int8
        assert got.tolist() == reference(xs, c["blocks"], groups, c["multipliers"],
                                         c["shifts"], c["relu"]), c


def test_positions_interleave_blocks_group_by_group():
    a, b = concat_positions([2, 3], 2)
    assert a.tolist() == [0, 1, 5, 6] and b.tolist() == [2, 3, 4, 7, 8, 9]
    (whole_a, whole_b) = concat_positions([4, 1], 1)
    assert whole_a.tolist() == [0, 1, 2, 3] and whole_b.tolist() == [4]


def test_hardware_form_of_the_constants_changes_no_result():
    """``m = 2^n`` as (1, 0) and a shift of 23 or more as (0, 0): the same value for every
    int8 and every multiplier (the largest product is below 2^22)."""
    x = np.arange(-128, 128)
    cases = [(1 << n, n) for n in range(15)] + [(m, n) for m in (1, 2**14, 2**15 - 1)
                                                for n in range(21, 48)]
    r = random.Random(1)
    cases += [(r.randint(0, 2**15 - 1), r.randint(0, 47)) for _ in range(300)]
    for m, n in cases:
        hm, hn = concat_rescale(m, n)
        for relu in (False, True):
            want = [rescale(int(v), m, n, relu) for v in x]
            assert [rescale(int(v), hm, hn, relu) for v in x] == want, (m, n)
    assert concat_rescale(16384, 14) == (1, 0) and concat_rescale(3, 23) == (0, 0)
    assert concat_rescale(24355, 15) == (24355, 15)
    assert concat_latency([1, 2], [0, 1]) == 2 and concat_latency([1, 3], [0, 2]) == 5


def run_concat(dut: ConcatJoin, xs: list[np.ndarray], seed: int, p_valid: float,
               p_ready: float, prologue=None) -> np.ndarray:
    """Each input [beats, lanes] on its port; the output beats as one [N, lanes] array."""
    lanes = dut.lanes
    total = sum(len(x) for x in xs)
    sources = [(getattr(dut, p), [pack_lanes(v, 8) for v in x]) for p, x in zip(dut.ports, xs)]
    (out,) = simulate_streams(dut, sources, [(dut.o, total)], seed=seed, p_valid=p_valid,
                              p_ready=p_ready, prologue=prologue)
    return np.array([unpack_lanes(w, lanes, 8) for w in out])


def entries(ms: list[int], ns: list[int]) -> list[int]:
    return [concat_entry("cat", m, n) for m, n in zip(ms, ns)]


def check_fuzzed(seed: int, lanes: int, groups: int, runtime: bool = False) -> None:
    r = random.Random(seed)
    c = random_case(r, lanes)
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-128, 128, (groups * b,)) for b in c["blocks"]]
    for x in xs:
        x[:2] = -128, 127
    if runtime:  # the same values loaded through wr
        dut = ConcatJoin("cat", lanes, c["blocks"], relu=c["relu"], runtime=True)
        load = write_params(dut.wr, [(0, entries(c["multipliers"], c["shifts"]))])
    else:
        dut = ConcatJoin("cat", lanes, c["blocks"], multipliers=c["multipliers"],
                         shifts=c["shifts"], relu=c["relu"])
        load = None
    got = run_concat(dut, [x.reshape(-1, lanes) for x in xs], seed, r.uniform(0.3, 1),
                     r.uniform(0.3, 1), load)
    want = concat_model([x[None] for x in xs], c["blocks"], groups, c["multipliers"],
                        c["shifts"], c["relu"])
    np.testing.assert_array_equal(got.reshape(1, -1), want, err_msg=str(c))


@pytest.mark.parametrize("seed,lanes", [(1, 1), (2, 1), (3, 2), (4, 3), (5, 4), (6, 2),
                                        (7, 1), (8, 3)])
def test_concat_rtl_bit_exact_under_random_stalls(seed, lanes):
    check_fuzzed(seed, lanes, groups=6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 124))
def test_concat_rtl_fuzzed_more(seed):
    check_fuzzed(seed, lanes=random.Random(seed).randint(1, 4), groups=12)


@pytest.mark.parametrize("seed,lanes", [(11, 1), (12, 2), (13, 3), (14, 1), (15, 4), (16, 2)])
def test_runtime_concat_loaded_then_streamed_bit_exact(seed, lanes):
    """Multipliers and shifts written through ``wr``, then streamed under random stalls:
    the model's outputs, also where the values would build no multiplier."""
    check_fuzzed(seed, lanes, groups=5, runtime=True)


def test_runtime_concat_reloaded_across_every_shift_class():
    """One runtime concat reloaded between bursts, over every class of shift (0, 1, the
    identity 2^n, 22-25 around the product's width, 47) and extreme and random
    multipliers, each input its own; every burst bit-exact against the model."""
    from amaranth.sim import Simulator

    r = random.Random(8)
    classes = [(m, n) for n in (0, 1, 2, 14, 15, 22, 23, 24, 25, 47)
               for m in (0, 1, 1 << min(n, 14), 2**15 - 1, r.randint(1, 2**15 - 1))]
    r.shuffle(classes)
    blocks, lanes, groups = [2, 4, 2], 2, 3
    sets = [classes[i:i + 3] for i in range(0, len(classes) - 2, 3)]
    rng = np.random.default_rng(8)
    edge = [-128, -127, -1, 0, 1, 126, 127]
    xs = [np.array((edge * 4)[:groups * b]) if p else rng.integers(-128, 128, groups * b)
          for p, b in enumerate(blocks)]
    dut = ConcatJoin("cat", lanes, blocks, relu=False, runtime=True)
    ports = [getattr(dut, p) for p in dut.ports]
    total = sum(groups * b for b in blocks) // lanes
    out: list = []

    async def bench(ctx):
        for k, ps in enumerate(sets):
            await write_params(dut.wr, [(0, entries(*zip(*ps)))])(ctx)
            for g in range(groups):
                for p, b in enumerate(blocks):
                    for j in range(g * b, (g + 1) * b, lanes):
                        ctx.set(ports[p].valid, 1)
                        ctx.set(ports[p].payload, pack_lanes(xs[p][j:j + lanes], 8))
                        await ctx.tick().until(ports[p].ready)
                        ctx.set(ports[p].valid, 0)
            while len(out) < (k + 1) * total:  # drained before the next load
                await ctx.tick()

    async def mon(ctx):
        ctx.set(dut.o.ready, 1)
        while True:
            *_, ov, op = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if ov:
                out.append(unpack_lanes(op, lanes, 8))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(mon, background=True)
    sim.run()
    assert len(sets) >= 15
    got = np.array(out).reshape(len(sets), -1)
    for ps, row in zip(sets, got):
        ms, ns = zip(*ps)
        want = concat_model([x[None] for x in xs], blocks, groups, ms, ns)
        np.testing.assert_array_equal(row[None], want, err_msg=str(ps))


@pytest.mark.parametrize("mode", ["plain", "scaled", "runtime"])
def test_concat_full_throughput_latency_and_turns(mode):
    """One beat a cycle with every input valid and the output ready; only the input
    whose turn it is sees ready; the result ``latency`` + the queue's cycles later
    (runtime: after the parameters are written, also for values a const concat builds
    no multiplier for)."""
    from amaranth.sim import Simulator

    blocks, lanes = [4, 2, 6], 2
    ms, ns = ([20000, 1, 9000], [15, 0, 13]) if mode == "scaled" else ([1, 1, 1], [0, 0, 0])
    if mode == "runtime":
        dut = ConcatJoin("cat", lanes, blocks, relu=True, runtime=True)
        load = write_params(dut.wr, [(0, entries(ms, ns))])
    else:
        dut = ConcatJoin("cat", lanes, blocks, multipliers=ms, shifts=ns, relu=True)
    assert dut.latency == {"plain": 2, "scaled": 5, "runtime": CONCAT_RUNTIME_LATENCY}[mode]
    writes = len(blocks) if mode == "runtime" else 0

    async def prologue(ctx, p):
        """The parameter writes (by input 0's source), the same cycles elsewhere."""
        if writes and p == 0:
            await load(ctx)
        else:
            for _ in range(writes):
                await ctx.tick()
    groups = 8
    rng = np.random.default_rng(3)
    xs = [rng.integers(-128, 128, (groups * b // lanes, lanes)) for b in blocks]
    ports = [getattr(dut, p) for p in dut.ports]
    turns = [p for _ in range(groups) for p, b in enumerate(blocks) for _ in range(b // lanes)]
    ins, outs, vals = [], [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    def source(p):
        async def tb(ctx):
            await prologue(ctx, p)
            port = ports[p]
            ctx.set(port.valid, 1)
            for x in xs[p]:
                ctx.set(port.payload, pack_lanes(x, 8))
                await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
        return tb

    async def mon(ctx):
        await prologue(ctx, -1)
        ctx.set(dut.o.ready, 1)
        cyc = 0
        while len(outs) < len(turns):
            res = await ctx.tick().sample(*(q.ready for q in ports), dut.o.valid,
                                          dut.o.payload)
            ready, (ov, op) = [int(v) for v in res[2:-2]], res[-2:]
            if cyc < len(turns):  # every input valid: the one whose turn it is moves
                assert ready == [int(p == turns[cyc]) for p in range(len(ports))], cyc
                ins.append(cyc)
            if ov:
                outs.append(cyc)
                vals.append(unpack_lanes(op, lanes, 8))
            cyc += 1

    for p in range(len(ports)):
        sim.add_testbench(source(p), background=True)
    sim.add_testbench(mon)
    sim.run()
    assert [o - i for i, o in zip(ins, outs)] == [dut.latency + CreditQueue.latency] * len(ins)
    want = concat_model([x.reshape(1, -1) for x in xs], blocks, groups, ms, ns, relu=True)
    np.testing.assert_array_equal(np.array(vals).reshape(1, -1), want)


def test_spec_shapes_lanes_order_and_structure():
    s = ConcatSpec("cat", ((6, 3, 2), (9, 3, 2)), multipliers=(24355, 1), shifts=(15, 0))
    assert s.groups == 6 and s.blocks == [6, 9] and s.n_inputs == 2
    assert s.input_ports == ("a", "b") and s.out_shape == (15, 3, 2)
    assert s.in_len == s.out_len == 90 and [s.port_len(p) for p in (0, 1)] == [36, 54]
    assert s.port_shape(1) == (9, 3, 2) and s.latency == 5
    assert s.lanes_after(4) == (1, 1) and s.lanes_after(6) == (3, 3)
    assert np.array_equal(np.concatenate(s.positions()) % 15 < 15, np.ones(90, bool))
    back = spec_from_structure({**s.structure(), "lanes": [3, 3]})
    assert isinstance(back, ConcatSpec) and back.structure() == {**s.structure(), "lanes": 3}
    assert s.params() == {"multipliers": [24355, 1], "shifts": [15, 0]}
    # vectors: one group, the whole vectors in turn
    v = ConcatSpec("v", ((5,), (3,)), relu=True)
    assert v.groups == 1 and v.blocks == [5, 3] and v.latency == 2
    assert stage_lanes([v], [(-1, -1)]) == [(1, 1)]


def test_runtime_spec_loads_an_entry_per_input():
    """Runtime: the structure says so (a const one is unchanged), one segment of an
    entry per input, a rescaler whatever the values, and a component with ``wr``."""
    kw = dict(multipliers=(24355, 1, 0), shifts=(15, 0, 0), lanes=2)
    shapes = ((6, 3, 2), (4, 3, 2), (2, 3, 2))
    s = ConcatSpec("cat", shapes, weights_mode="runtime", **kw)
    const = ConcatSpec("cat", shapes, **kw)
    assert "mode" not in const.structure() and s.structure()["mode"] == "runtime"
    assert s.runtime and s.latency == CONCAT_RUNTIME_LATENCY and const.latency == 5
    assert s.param_memories() == [("concat", 0, 3, CONCAT_ENTRY_BITS)]
    assert const.param_memories() == []
    assert s.param_entries() == [[24355 | 15 << 16, 1, 0]]
    back = spec_from_structure(s.structure())
    assert isinstance(back, ConcatSpec) and back.runtime and back.structure() == s.structure()
    segs, _ = param_layout([s])
    assert [(g.kind, g.depth, g.words_per_entry) for g in segs] == [("concat", 3, 1)]
    ((base, words),) = param_image([s])
    assert base == 0 and words.tolist() == [24355 | 15 << 16, 1, 0]
    comp = s.component((2, 2), "plain")
    assert comp.runtime and "wr" in comp.signature.members and comp.latency == 6
    Fragment.get(comp, None)  # it elaborates
    plain = ConcatSpec("v", ((4,), (2,)), lanes=2, weights_mode="runtime")
    assert plain.latency == CONCAT_RUNTIME_LATENCY  # (1, 0) everywhere: still rescaled
    with pytest.raises(HardwareConfigError, match=r"input 1: shift must be an integer in "
                                                  r"\[0, 47\], got 48"):
        concat_entry("stage 'cat': input 1", 1, 48)
    with pytest.raises(HardwareConfigError, match="give the multipliers and shifts, or "
                                                  "runtime=True"):
        ConcatJoin("cat", 1, [1, 1])


@pytest.mark.parametrize("kwargs,match", [
    ({"shapes": ((4, 2, 2),)}, "takes 2 to 8 inputs"),
    ({"shapes": ((4, 2, 2), (4, 3, 2))}, "equal but in the first"),
    ({"shapes": ((4, 2, 2), (2, 2, 2)), "lanes": 4}, r"lanes=4 must divide every input's block"),
    ({"shapes": ((4, 2, 2), (2, 2, 2)), "groups": 3}, "groups=3 must divide"),
    ({"shapes": ((4,), (2,)), "multipliers": (1, 2**15)}, r"multipliers \[1, 32768\]"),
    ({"shapes": ((4,), (2,)), "shifts": (0,)}, "one per input"),
])
def test_spec_refuses_what_it_cannot_build(kwargs, match):
    with pytest.raises(HardwareConfigError, match=match):
        ConcatSpec("cat", **kwargs)


def test_component_refuses_lanes_that_split_a_block():
    with pytest.raises(HardwareConfigError, match=r"lanes=2 must divide every input's block "
                                                  r"of elements \[4, 3\]"):
        ConcatJoin("cat", 2, [4, 3], multipliers=[1, 1], shifts=[0, 0])
    with pytest.raises(HardwareConfigError, match="input 1's shift must be an integer in"):
        ConcatJoin("cat", 1, [4, 3], multipliers=[1, 1], shifts=[0, 48])
