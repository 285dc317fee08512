"""An AXI4-Lite master for amaranth.sim testbenches, with configurable channel order
and random delays."""

from __future__ import annotations

import random


async def axil_write(ctx, bus, addr: int, data: int, strb: int = 0xF, *,
                     aw_delay: int = 0, w_delay: int = 0, b_delay: int = 0,
                     timeout: int = 100) -> int:
    """Drive AW after ``aw_delay`` cycles and W after ``w_delay`` (either order),
    accept B after ``b_delay``; return BRESP."""
    aw_done = w_done = False
    cycle = 0
    ctx.set(bus.bready, 0)
    while not (aw_done and w_done):
        awv = not aw_done and cycle >= aw_delay
        wv = not w_done and cycle >= w_delay
        ctx.set(bus.awvalid, awv)
        ctx.set(bus.awaddr, addr)
        ctx.set(bus.wvalid, wv)
        ctx.set(bus.wdata, data)
        ctx.set(bus.wstrb, strb)
        _, _, awr, wr = await ctx.tick().sample(bus.awready, bus.wready)
        aw_done |= awv and bool(awr)
        w_done |= wv and bool(wr)
        cycle += 1
        assert cycle < timeout, f"AXI-Lite write to 0x{addr:x} not accepted"
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    for _ in range(b_delay):
        await ctx.tick()
    ctx.set(bus.bready, 1)
    for _ in range(timeout):
        _, _, bv, resp = await ctx.tick().sample(bus.bvalid, bus.bresp)
        if bv:
            ctx.set(bus.bready, 0)
            return resp
    raise AssertionError(f"AXI-Lite write to 0x{addr:x}: no response")


async def axil_read(ctx, bus, addr: int, *, r_delay: int = 0, timeout: int = 100
                    ) -> tuple[int, int]:
    """Return (RDATA, RRESP)."""
    ctx.set(bus.rready, 0)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.araddr, addr)
    for _ in range(timeout):
        _, _, ready = await ctx.tick().sample(bus.arready)
        if ready:
            break
    else:
        raise AssertionError(f"AXI-Lite read of 0x{addr:x} not accepted")
    ctx.set(bus.arvalid, 0)
    for _ in range(r_delay):
        await ctx.tick()
    ctx.set(bus.rready, 1)
    for _ in range(timeout):
        _, _, rv, data, resp = await ctx.tick().sample(bus.rvalid, bus.rdata, bus.rresp)
        if rv:
            ctx.set(bus.rready, 0)
            return data, resp
    raise AssertionError(f"AXI-Lite read of 0x{addr:x}: no response")


def random_delays(rng: random.Random) -> dict[str, int]:
    order = rng.choice(["aw_first", "w_first", "together"])
    d = rng.randrange(1, 4)
    return {"aw_delay": d if order == "w_first" else 0,
            "w_delay": d if order == "aw_first" else 0,
            "b_delay": rng.randrange(0, 3)}
