"""AXI4-Lite register block against its model: responses, write effects, read data,
AW/W in either order, never hanging."""

import random
import zlib

import pytest
from amaranth.sim import Simulator

from fluid_hw.rtl import HardwareConfigError
from fluid_hw.rtl.axil import AXILiteModel, AXILiteRegisters
from fluid_hw.rtl.regmap import OKAY, SLVERR, register_map

from .axil_master import axil_read, axil_write, random_delays


def _value(name: str) -> int:
    return zlib.crc32(name.encode())


def test_axil_against_model():
    regs = register_map(runtime_params=True)
    dut = AXILiteRegisters(regs, addr_width=12, checked=["PARAM_DATA"])
    accept = {"PARAM_DATA": True}  # the design's verdict on PARAM_DATA writes
    model = AXILiteModel(regs, 12, _value, lambda name, data: accept.get(name, True))
    rng = random.Random(4)
    seen: list[tuple[str, int]] = []
    results = []

    async def strobes(ctx):
        async for _ in ctx.tick():
            for r in regs:
                n = r.name.lower()
                if r.writable and ctx.get(getattr(dut, f"we_{n}")):
                    seen.append((r.name, ctx.get(getattr(dut, f"w_{n}"))))

    async def master(ctx):
        for r in regs:
            if r.readable:
                ctx.set(getattr(dut, f"r_{r.name.lower()}"), _value(r.name))
        addrs = [r.offset for r in regs] + [0x4C, 0x100, 0xFFC, 0x13]
        for _ in range(120):
            addr = rng.choice(addrs)
            accept["PARAM_DATA"] = rng.random() < 0.6
            ctx.set(dut.wok_param_data, accept["PARAM_DATA"])
            if rng.random() < 0.5:
                strb = rng.choice([0xF, 0xF, 0x1, 0x6, 0x0])
                data = rng.getrandbits(32)
                resp = await axil_write(ctx, dut.bus, addr, data, strb, **random_delays(rng))
                results.append((resp, model.write(addr, data, strb)))
            else:
                got = await axil_read(ctx, dut.bus, addr, r_delay=rng.randrange(3))
                results.append((got, model.read(addr)))
        for _ in range(3):
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(strobes, background=True)
    sim.add_testbench(master)
    sim.run()
    for got, want in results:
        assert got == want
    assert seen == model.writes
    assert {resp for resp, _ in results if isinstance(resp, int)} == {OKAY, SLVERR}


def test_axil_unmapped_and_readonly_answer_slverr():
    regs = register_map(runtime_params=False)
    dut = AXILiteRegisters(regs, addr_width=12)
    out = {}

    async def master(ctx):
        out["w_ro"] = await axil_write(ctx, dut.bus, 0x00, 1)
        out["w_unmapped"] = await axil_write(ctx, dut.bus, 0x48, 1, w_delay=3)  # no PARAM_*
        out["r_unmapped"] = await axil_read(ctx, dut.bus, 0x800)
        out["w_ctrl"] = await axil_write(ctx, dut.bus, 0x10, 1, aw_delay=2)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(master)
    sim.run()
    assert out == {"w_ro": SLVERR, "w_unmapped": SLVERR, "r_unmapped": (0, SLVERR),
                   "w_ctrl": OKAY}


def test_axil_checked_names_writable_registers():
    with pytest.raises(HardwareConfigError, match=r"\['ID'\] in checked are not writable"):
        AXILiteRegisters(register_map(runtime_params=True), checked=["ID"])
