"""amaranth.sim drivers for stream components: random-stall sources and sinks
(:func:`simulate_streams`), full-rate runs that record when beats move
(:func:`run_full_rate`), and runtime parameter writes (:func:`write_params`).

Sources are background testbenches (they may be left with unsent items); sinks are
critical and stop the simulation once they have their expected count, failing after
``max_cycles``.  After that each sink keeps ``ready`` high for ``extra_cycles`` and
fails if anything else comes out (nothing duplicated).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence

from amaranth import Module, Signal
from amaranth.sim import Simulator

__all__ = ["simulate_streams", "run_full_rate", "held_source", "write_entries",
           "write_params"]


def simulate_streams(dut: object, sources: Sequence[tuple[object, Sequence[int]]],
                     sinks: Sequence[tuple[object, int]], *, seed: int = 0,
                     p_valid: float = 0.7, p_ready: float = 0.7, max_cycles: int = 50_000,
                     extra_cycles: int = 30,
                     prologue: Callable[[object], Awaitable[None]] | None = None
                     ) -> list[list[int]]:
    rng = random.Random(seed)
    started = {"go": prologue is None}
    results: list[list[int]] = [[] for _ in sinks]
    sent = [0] * len(sources)

    # a wrapper with one register, so that pure wiring still has a clock domain
    top = Module()
    top.submodules.dut = dut
    tick = Signal()
    top.d.sync += tick.eq(~tick)
    sim = Simulator(top)
    sim.add_clock(1e-8)

    if prologue is not None:
        async def pro(ctx: object) -> None:
            await prologue(ctx)
            started["go"] = True
        sim.add_testbench(pro)

    def make_source(k: int, s: object, items: Sequence[int]) -> Callable:
        r = random.Random(rng.random())

        async def source(ctx: object) -> None:
            while not started["go"]:
                await ctx.tick()
            for item in items:
                while r.random() > p_valid:
                    await ctx.tick()
                ctx.set(s.valid, 1)
                ctx.set(s.payload, item)
                await ctx.tick().until(s.ready)
                ctx.set(s.valid, 0)
                sent[k] += 1
        return source

    def make_sink(k: int, s: object, count: int) -> Callable:
        r = random.Random(rng.random())

        async def sink(ctx: object) -> None:
            out = results[k]
            cycles = 0
            while not started["go"]:
                await ctx.tick()
            while len(out) < count:
                rd = r.random() < p_ready
                ctx.set(s.ready, rd)
                _, _, valid, payload = await ctx.tick().sample(s.valid, s.payload)
                if rd and valid:
                    out.append(payload)
                cycles += 1
                assert cycles < max_cycles, (
                    f"sink {k}: only {len(out)} of {count} items after {cycles} cycles")
            ctx.set(s.ready, 1)
            for _ in range(extra_cycles):
                _, _, valid = await ctx.tick().sample(s.valid)
                assert not valid, f"sink {k}: more than {count} items"
        return sink

    for k, (s, items) in enumerate(sources):
        sim.add_testbench(make_source(k, s, items), background=True)
    for k, (s, count) in enumerate(sinks):
        sim.add_testbench(make_sink(k, s, count))
    sim.run()
    return results


def write_entries(wr: object, writes: Sequence[tuple[int, int, int]]
                  ) -> Callable[[object], Awaitable[None]]:
    """A prologue writing through ``wr`` (:func:`fluid_hw.rtl._mem.ParamWriteSignature`)
    each ``(memory, address, entry)``, one a cycle, with bit ``memory`` of ``wr.en``."""
    async def prologue(ctx: object) -> None:
        for mem, addr, entry in writes:
            ctx.set(wr.en, 1 << mem)
            ctx.set(wr.addr, addr)
            ctx.set(wr.data, entry)
            await ctx.tick()
        ctx.set(wr.en, 0)
    return prologue


def write_params(wr: object, memories: Sequence[tuple[int, Sequence[int]]]
                 ) -> Callable[[object], Awaitable[None]]:
    """:func:`write_entries` of each ``(memory, entries)``: its entries at addresses 0,
    1, ..."""
    return write_entries(wr, [(mem, addr, entry) for mem, entries in memories
                              for addr, entry in enumerate(entries)])


def held_source(port: object, items: Sequence[int]) -> Callable:
    """A testbench sending ``items`` on ``port`` back to back: ``valid`` high from the
    first item to the last, each held until ``ready``."""
    async def source(ctx: object) -> None:
        for item in items:
            ctx.set(port.valid, 1)
            ctx.set(port.payload, item)
            await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)
    return source


def run_full_rate(dut: object, sources: Sequence[tuple[object, Sequence[int]]], count: int,
                  *, watch: object | None = None,
                  prologue: Callable[[object], Awaitable[None]] | None = None
                  ) -> tuple[list[int], list[int], list[int]]:
    """Every source sending back to back (:func:`held_source`, after ``prologue``) and
    ``dut.o`` always ready, until ``count`` beats came out: the cycles at which ``watch``
    (the first source's port unless given: it may be a port inside ``dut``) moved a
    beat, the cycles at which ``o`` did, and ``o``'s payloads."""
    watch = sources[0][0] if watch is None else watch
    taken: list[int] = []
    outs: list[int] = []
    vals: list[int] = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    started = [prologue is None]
    if prologue is not None:
        async def pro(ctx: object) -> None:
            await prologue(ctx)
            started[0] = True
        sim.add_testbench(pro)

    def feed(port: object, items: Sequence[int]) -> Callable:
        async def tb(ctx: object) -> None:
            while not started[0]:
                await ctx.tick()
            await held_source(port, items)(ctx)
        return tb

    async def monitor(ctx: object) -> None:
        ctx.set(dut.o.ready, 1)
        cyc = 0
        while len(outs) < count:
            _, _, wv, wr, ov, op = await ctx.tick().sample(watch.valid, watch.ready,
                                                           dut.o.valid, dut.o.payload)
            if wv and wr:
                taken.append(cyc)
            if ov:
                outs.append(cyc)
                vals.append(op)
            cyc += 1

    for port, items in sources:
        sim.add_testbench(feed(port, items), background=True)
    sim.add_testbench(monitor)
    sim.run()
    return taken, outs, vals
