# amaranth: UnusedElaboratable=no
"""The accelerator's control path in amaranth.sim (issue 14): SOFT_RESET keeps packets
whole on both streams and never drops ``m_axis_tvalid`` without a transfer; BUSY/DONE
survive CONTROL.CLEAR_COUNTERS with items in flight; a PARAM_DATA write outside every
parameter segment answers SLVERR and writes nothing."""

import numpy as np
from amaranth.sim import Simulator

from fluid_hw.rtl import AcceleratorTop, pack_lanes, param_image, unpack_lanes
from fluid_hw.rtl.regmap import OKAY, SLVERR, design_constants, emit_markdown

from .axil_master import axil_read, axil_write
from .test_top import _bus, _fc, _load_params, run_top

SOFT_RESET, CLEAR = 0b011, 0b101  # with ENABLE kept at 1
BUSY, DONE, ENABLED, TLAST_ERROR, DROPPING = 1, 2, 4, 8, 16


def _top() -> AcceleratorTop:
    """8 int8 in 2 lanes (4 input beats), 4 int8 out in 1 lane (4 output beats)."""
    return AcceleratorTop([_fc(np.random.default_rng(7), "fc", 8, 4, 1, 2)])


class _Bench:
    """Register access by name, input beats, and a monitor of m_axis that checks the
    AXI4-Stream rule (valid, once high, stays high with the same payload until taken)
    and records every beat taken."""

    def __init__(self, top: AcceleratorTop) -> None:
        self.top, self.bus = top, _bus(top)
        self.regs = top.describe()["registers"]
        self.taken: list[tuple[int, int]] = []  # (tdata, tlast)

    async def read(self, ctx, name: str) -> int:
        data, resp = await axil_read(ctx, self.bus, self.regs[name])
        assert resp == OKAY
        return data

    async def write(self, ctx, name: str, value: int) -> int:
        return await axil_write(ctx, self.bus, self.regs[name], value)

    async def send(self, ctx, row, beats=None) -> None:
        """Beats ``beats`` (a range; default all) of one input packet."""
        top, inl = self.top, self.top.in_lanes
        n = len(row) // inl
        for b in beats if beats is not None else range(n):
            ctx.set(top.s_axis_tvalid, 1)
            ctx.set(top.s_axis_tdata, pack_lanes(row[b * inl:(b + 1) * inl], 8))
            ctx.set(top.s_axis_tlast, b == n - 1)
            await ctx.tick().until(top.s_axis_tready)
        ctx.set(top.s_axis_tvalid, 0)

    async def monitor(self, ctx) -> None:
        top = self.top
        held = None  # the beat offered and not taken on the last edge
        async for _, _, valid, ready, data, last in ctx.tick().sample(
                top.m_axis_tvalid, top.m_axis_tready, top.m_axis_tdata, top.m_axis_tlast):
            if held is not None:
                assert valid, f"m_axis_tvalid dropped without a transfer (beat {held})"
                assert (data, last) == held, "m_axis payload changed while waiting"
            held = None
            if valid and ready:
                self.taken.append((data, last))
            elif valid:
                held = (data, last)

    def run(self, tb) -> None:
        sim = Simulator(self.top)
        sim.add_clock(1e-8)
        sim.add_testbench(self.monitor, background=True)
        sim.add_testbench(tb)
        sim.run()

    def values(self, beats) -> list[int]:
        top = self.top
        return [v for d, _ in beats for v in unpack_lanes(d, top.out_lanes, top.out_bits)]


async def _ticks(ctx, n: int) -> None:
    for _ in range(n):
        await ctx.tick()


def test_soft_reset_completes_a_half_sent_output_packet():
    top = _top()
    b = _Bench(top)
    x = np.random.default_rng(1).integers(-128, 128, (3, 8))
    want = top.model(x)
    seen = {}

    async def tb(ctx):
        ctx.set(top.m_axis_tready, 0)
        await b.send(ctx, x[0])
        await b.send(ctx, x[1])                 # a second item in flight
        await ctx.tick().until(top.m_axis_tvalid)
        ctx.set(top.m_axis_tready, 1)           # take one beat of four
        await ctx.tick()
        ctx.set(top.m_axis_tready, 0)
        await ctx.tick().until(top.m_axis_tvalid)
        await _ticks(ctx, 5)
        assert await b.write(ctx, "CONTROL", SOFT_RESET) == OKAY
        await _ticks(ctx, 20)                   # the consumer still stalls
        seen["status_stalled"] = await b.read(ctx, "STATUS")
        ctx.set(top.m_axis_tready, 1)
        await _ticks(ctx, 30)
        seen["flushed"] = list(b.taken)
        seen["after"] = [await b.read(ctx, n) for n in ("STATUS", "INPUTS", "INFERENCES")]
        await b.send(ctx, x[2])                 # the accelerator works on afterwards
        await _ticks(ctx, 60)
        seen["next"] = b.taken[len(seen["flushed"]):]
        seen["end"] = [await b.read(ctx, n) for n in ("STATUS", "INPUTS", "INFERENCES")]

    b.run(tb)
    assert seen["status_stalled"] & BUSY        # still completing the packet
    flushed = seen["flushed"]
    assert [last for _, last in flushed] == [0, 0, 0, 1]  # one whole packet, nothing more
    # the beats already made (the one taken, the one waiting, the one behind it in the
    # skid buffer), then zero beats to the packet's end
    assert b.values(flushed) == [*want[0][:3], 0]
    assert seen["after"] == [ENABLED, 0, 0]     # not busy, no inference counted
    assert [last for _, last in seen["next"]] == [0, 0, 0, 1]
    assert b.values(seen["next"]) == list(want[2])
    assert seen["end"] == [DONE | ENABLED, 1, 1]


def test_soft_reset_drops_a_half_accepted_input_packet_whole():
    top = _top()
    b = _Bench(top)
    x = np.random.default_rng(2).integers(-128, 128, (4, 8))
    want = top.model(x)
    seen = {}

    async def tb(ctx):
        ctx.set(top.m_axis_tready, 1)
        await b.send(ctx, x[0], range(2))       # half of packet 0
        assert await b.write(ctx, "CONTROL", SOFT_RESET) == OKAY
        seen["dropping"] = await b.read(ctx, "STATUS")
        await b.send(ctx, x[0], range(2, 4))    # its rest: taken and discarded
        seen["dropped"] = await b.read(ctx, "STATUS")
        await b.send(ctx, x[1])
        await _ticks(ctx, 60)
        seen["one"] = list(b.taken)
        seen["counts"] = [await b.read(ctx, n) for n in ("STATUS", "INPUTS", "INFERENCES")]
        # a host that will not finish the cut packet: SOFT_RESET again ends the drop
        await b.send(ctx, x[2], range(3))
        assert await b.write(ctx, "CONTROL", SOFT_RESET) == OKAY
        assert await b.read(ctx, "STATUS") & DROPPING
        assert await b.write(ctx, "CONTROL", SOFT_RESET) == OKAY
        seen["cancelled"] = await b.read(ctx, "STATUS")
        await b.send(ctx, x[3])
        await _ticks(ctx, 60)
        seen["two"] = b.taken[len(seen["one"]):]
        seen["end"] = [await b.read(ctx, n) for n in ("STATUS", "INPUTS", "INFERENCES")]

    b.run(tb)
    assert seen["dropping"] == ENABLED | DROPPING
    assert seen["dropped"] == ENABLED
    assert b.values(seen["one"]) == list(want[1])
    assert seen["counts"] == [DONE | ENABLED, 1, 1]  # framing in step: no TLAST_ERROR
    assert seen["cancelled"] == ENABLED
    assert b.values(seen["two"]) == list(want[3])
    assert [last for _, last in seen["two"]] == [0, 0, 0, 1]
    assert seen["end"] == [DONE | ENABLED, 1, 1]


def test_clear_counters_with_items_in_flight():
    top = _top()
    b = _Bench(top)
    x = np.random.default_rng(3).integers(-128, 128, (2, 8))
    want = top.model(x)
    seen = {}

    async def source(ctx):
        for row in x:
            await b.send(ctx, row)

    async def tb(ctx):
        ctx.set(top.m_axis_tready, 0)
        await _ticks(ctx, 80)                   # both items in, no output taken
        seen["before"] = [await b.read(ctx, n) for n in ("STATUS", "INPUTS")]
        assert await b.write(ctx, "CONTROL", CLEAR) == OKAY
        seen["cleared"] = [await b.read(ctx, n) for n in ("STATUS", "INPUTS", "INFERENCES")]
        ctx.set(top.m_axis_tready, 1)
        await _ticks(ctx, 40)
        seen["after"] = [await b.read(ctx, n) for n in
                         ("STATUS", "INPUTS", "INFERENCES", "BUSY_CYCLES")]
        await _ticks(ctx, 20)
        seen["busy_cycles_later"] = await b.read(ctx, "BUSY_CYCLES")

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(b.monitor, background=True)
    sim.add_testbench(source, background=True)
    sim.add_testbench(tb)
    sim.run()
    assert seen["before"] == [BUSY | ENABLED, 2]
    assert seen["cleared"] == [BUSY | ENABLED, 0, 0]
    status, inputs, inferences, busy_cycles = seen["after"]
    assert status == DONE | ENABLED             # not stuck busy
    assert (inputs, inferences) == (0, 2)       # both completed after the clear
    assert seen["busy_cycles_later"] == busy_cycles  # stopped counting
    assert b.values(b.taken) == [v for row in want for v in row]


def test_param_data_outside_every_segment_answers_slverr():
    rng = np.random.default_rng(4)
    specs = [_fc(rng, "fc1", 16, 4, 2, 4, mode="runtime")]
    top = AcceleratorTop(specs)
    # weights 8 words per PE, requantisation 4: segments of 8 words with gaps of 4
    assert top.segment_bits == 3 and [s.words for s in top.segments] == [8, 8, 4, 4]
    gaps = [s.base + s.words + k for s in top.segments[:-1] for k in range(8 - s.words)]
    bus = _bus(top)
    regs = top.describe()["registers"]
    seen: dict[str, list] = {"good": [], "bad": []}

    async def load(ctx):
        await _load_params(top, specs)(ctx)
        for addr in [*gaps, top.param_words, top.param_words + 5, 0xFFFFFFFF]:
            assert await axil_write(ctx, bus, regs["PARAM_ADDR"], addr) == OKAY
            for word in (0x7FFF7FFF, 0x0001FFFF):  # would clobber an entry if written
                seen["bad"].append(await axil_write(ctx, bus, regs["PARAM_DATA"], word))
            data, _ = await axil_read(ctx, bus, regs["PARAM_ADDR"])
            assert data == addr                # not advanced
        base, words = param_image(specs)[-1]   # the last entry (2 words) is still fine
        assert await axil_write(ctx, bus, regs["PARAM_ADDR"], base + len(words) - 2) == OKAY
        for w in words[-2:]:
            seen["good"].append(await axil_write(ctx, bus, regs["PARAM_DATA"], int(w)))

    x = rng.integers(-128, 128, (3, 16))
    got = run_top(top, x, prologue=load)
    assert set(seen["bad"]) == {SLVERR} and seen["good"] == [OKAY, OKAY]
    np.testing.assert_array_equal(got, top.model(x))


def test_registers_read_their_documented_reset_values():
    top = _top()
    b = _Bench(top)
    const = design_constants(top.describe())
    got = {}

    async def tb(ctx):
        for r in top.registers:
            if r.readable and r.name != "CYCLES_LO":  # counts from the first cycle
                got[r.name] = await b.read(ctx, r.name)

    b.run(tb)
    assert got == {r.name: const.get(r.name, r.reset) for r in top.registers
                   if r.readable and r.name != "CYCLES_LO"}
    assert got["STATUS"] == ENABLED


def test_registers_md_documents_the_control_path():
    rng = np.random.default_rng(5)
    runtime = AcceleratorTop([_fc(rng, "fc1", 16, 4, 2, 4, mode="runtime")])
    md = emit_markdown(runtime.registers, runtime.describe())
    for text in ("A *packet* is one item", "active high and synchronous", "## SOFT_RESET",
                 "## What clears what", "| STATUS.TLAST_ERROR | 0 | 0 | kept |",
                 "`weights.npz`", "`bases` (int64 [S]", "PARAM_ADDR is in no parameter "
                 "segment", "| 0x014 | STATUS | ro | 0x4 |"):
        assert text in md, text
    const = _top()
    md = emit_markdown(const.registers, const.describe())
    assert "PARAM_DATA" not in md and "weights.npz" not in md and "## SOFT_RESET" in md
