# amaranth: UnusedElaboratable=no
"""AcceleratorBoardTop: an accelerator behind the UART bridge on a board (fast).

Its checks (AXI ports, a bridge with ``connect``), its PLL and no-PLL variants, and the
whole board top in amaranth.sim: the serial pin in, reset synchroniser, bridge,
accelerator, serial pin out.  The real bitstreams of it are built by
tests/backends/fpga/test_bitstream.py."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.sim import Simulator

from fluid_hw.boards import AXI_PORTS, AcceleratorBoardTop, BoardTop, missing_axi_ports
from fluid_hw.errors import FluidError
from fluid_hw.rtl import AcceleratorTop, MVAUSpec
from fluid_hw.rtl.uart_bridge import (
    CMD_READ,
    CMD_REGION,
    CMD_STREAM_IN,
    RSP_READ,
    RSP_REGION,
    UartBridge,
)
from tests.boards.designs import DotMac

PERIOD = 40e-9


def accel() -> AcceleratorTop:
    rng = np.random.default_rng(3)
    return AcceleratorTop([MVAUSpec("fc", mw=4, mh=2, pe=2, simd=4,
                                    weights=rng.integers(-127, 128, (2, 4)),
                                    bias=np.array([5, -7]), multiplier=np.array([9000, 12000]),
                                    shift=np.array([14, 15]))])


def test_checks():
    with pytest.raises(FluidError, match=r"lacks the AXI ports \['s_axil_awaddr'"):
        AcceleratorBoardTop(DotMac(2), "ulx3s-25f", bridge=UartBridge(in_bytes=1, out_bytes=1,
                                                                      divisor=8))
    with pytest.raises(FluidError, match="a bridge is needed"):
        AcceleratorBoardTop(accel(), "ulx3s-25f", bridge=None)

    class NoConnect(UartBridge):
        connect = None  # type: ignore[assignment]

    with pytest.raises(FluidError, match=r"has no connect\(m, core\)"):
        AcceleratorBoardTop(accel(), "ulx3s-25f",
                            bridge=NoConnect(in_bytes=4, out_bytes=2, divisor=8))
    assert missing_axi_ports(accel()) == [] and len(AXI_PORTS) == 25


def test_pll_and_no_pll():
    made = []

    def factory(hz):
        made.append(hz)
        return UartBridge(in_bytes=4, out_bytes=2, clk_hz=hz, baud=3e6)

    top = AcceleratorBoardTop(accel(), "ulx3s-85f", clock_mhz=100, bridge=factory)
    assert isinstance(top, BoardTop) and made == [pytest.approx(100e6)]
    d = top.describe()
    assert d["pll"]["primitive"] == "EHXPLLL" and d["uart"]["divisor"] == 33
    assert d["pins"]["uart_rx"] == {"port": "uart_rx", "site": "M1"}
    il = rtlil.convert(top, name="board_top")
    assert "EHXPLLL" in il and "\\uart_tx" in il
    sim_top = AcceleratorBoardTop(accel(), "icebreaker", clock_mhz=30, pll=False,
                                  bridge=UartBridge(in_bytes=4, out_bytes=2, divisor=4))
    assert sim_top.pll_params is None and sim_top.clock_mhz == 12.0
    assert sim_top.reset_port == ("button", False)  # active low on the iCEBreaker


async def _send(ctx, pin, data: bytes, divisor: int) -> None:
    for b in data:
        for bit in [0, *((b >> k) & 1 for k in range(8)), 1]:
            ctx.set(pin, bit)
            await ctx.delay(divisor * PERIOD)


async def _receive(ctx, pin, n: int, divisor: int, timeout_bits: int = 4000) -> bytes:
    out = bytearray()
    waited = 0
    while len(out) < n:
        while ctx.get(pin):
            await ctx.delay(PERIOD)
            waited += 1
            assert waited < timeout_bits * divisor, f"only {bytes(out).hex()} received"
        await ctx.delay(divisor * PERIOD * 1.5)
        v = 0
        for k in range(8):
            v |= ctx.get(pin) << k
            await ctx.delay(divisor * PERIOD)
        assert ctx.get(pin) == 1, "stop bit"
        out.append(v)
    return bytes(out)


def test_the_whole_board_top_answers_on_its_serial_pins():
    divisor = 4
    acc = accel()
    top = AcceleratorBoardTop(acc, "ulx3s-25f", pll=False,
                              bridge=UartBridge(in_bytes=4, out_bytes=2, divisor=divisor))
    x = np.array([[10, -20, 30, -40]])
    want = acc.model(x)
    sim = Simulator(top)

    async def clock(ctx):
        while True:
            ctx.set(top.clk25, 0)
            await ctx.delay(PERIOD / 2)
            ctx.set(top.clk25, 1)
            await ctx.delay(PERIOD / 2)

    got: dict[str, bytes] = {}

    async def bench(ctx):
        ctx.set(top.uart_rx, 1)
        ctx.set(top.button, 1)             # reset held (active high on the ULX3S)
        await ctx.delay(10 * PERIOD)
        ctx.set(top.button, 0)
        await ctx.delay(10 * PERIOD)
        await _send(ctx, top.uart_rx, bytes([CMD_READ, 0, 0]), divisor)
        got["id"] = await _receive(ctx, top.uart_tx, 6, divisor)
        await _send(ctx, top.uart_rx, bytes([CMD_STREAM_IN, 1, 0, 1])
                    + bytes(int(v) & 0xFF for v in x[0]), divisor)
        got["out"] = await _receive(ctx, top.uart_tx, 3, divisor)

    sim.add_process(clock)
    sim.add_testbench(bench)
    sim.run()
    assert got["id"] == bytes([RSP_READ, 0]) + (0x464C4857).to_bytes(4, "little")
    assert got["out"][0] == 0x91   # one beat, with tlast
    np.testing.assert_array_equal(np.frombuffer(got["out"][1:], np.int8), want[0])


def test_two_regions_share_the_board_tops_serial_pins():
    """Two accelerators behind one bridge: REGION 1 selects the second, whose output
    beat comes back tagged 0x93 (region 1, tlast)."""
    divisor = 4
    rng = np.random.default_rng(5)
    second = AcceleratorTop([MVAUSpec("fc_b", mw=2, mh=1, pe=1, simd=2,
                                      weights=rng.integers(-127, 128, (1, 2)),
                                      bias=np.array([3]), multiplier=np.array([20000]),
                                      shift=np.array([15]))])
    first = accel()
    with pytest.raises(FluidError, match="2 accelerator cores but the bridge addresses 1"):
        AcceleratorBoardTop([first, second], "ulx3s-25f", pll=False,
                            bridge=UartBridge(in_bytes=4, out_bytes=2, divisor=divisor))
    top = AcceleratorBoardTop([first, second], "ulx3s-25f", pll=False,
                              bridge=UartBridge(regions=[(4, 2), (2, 1)], divisor=divisor))
    assert top.cores == [first, second]
    x = np.array([[100, -7]])
    want = second.model(x)
    sim = Simulator(top)

    async def clock(ctx):
        while True:
            ctx.set(top.clk25, 0)
            await ctx.delay(PERIOD / 2)
            ctx.set(top.clk25, 1)
            await ctx.delay(PERIOD / 2)

    got: dict[str, bytes] = {}

    async def bench(ctx):
        ctx.set(top.uart_rx, 1)
        ctx.set(top.button, 1)
        await ctx.delay(10 * PERIOD)
        ctx.set(top.button, 0)
        await ctx.delay(10 * PERIOD)
        await _send(ctx, top.uart_rx, bytes([CMD_REGION, 1]), divisor)
        got["region"] = await _receive(ctx, top.uart_tx, 4, divisor)
        await _send(ctx, top.uart_rx, bytes([CMD_STREAM_IN, 1, 0, 1])
                    + bytes(int(v) & 0xFF for v in x[0]), divisor)
        got["out"] = await _receive(ctx, top.uart_tx, 2, divisor)

    sim.add_process(clock)
    sim.add_testbench(bench)
    sim.run()
    assert got["region"] == bytes([RSP_REGION, 0, 1, 2])
    assert got["out"][0] == 0x93   # region 1's beat, with tlast
    np.testing.assert_array_equal(np.frombuffer(got["out"][1:], np.int8), want[0])
