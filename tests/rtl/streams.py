"""amaranth.sim drivers for stream components: random-stall sources and sinks.

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

__all__ = ["simulate_streams"]


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
