# amaranth: UnusedElaboratable=no
"""The UART-to-AXI bridge in amaranth.sim: the UART itself (loop-back, framing errors,
baud divisors), the command protocol against its behavioural model with a randomly
stalling AXI4-Lite slave and stream sink, and the bridge wired to a small
AcceleratorTop through ``connect`` (the path the board top uses)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from fluid_hw.rtl import AcceleratorTop, HardwareConfigError, MVAUSpec
from fluid_hw.rtl.regmap import OKAY, SLVERR
from fluid_hw.rtl.uart_bridge import (
    CMD_INFO,
    CMD_READ,
    CMD_STREAM_IN,
    CMD_WRITE,
    CMD_WRITE_BURST,
    ERR_BAD_COMMAND,
    ERR_CMD_TIMEOUT,
    ERR_FRAMING,
    PKT_BEAT,
    PKT_BEAT_LAST,
    RSP_INFO,
    RSP_READ,
    RSP_WRITE,
    RSP_WRITE_BURST,
    UartBridge,
    UartBridgeModel,
    UartRx,
    UartTx,
    baud_divisor,
)

# ---- serial-line helpers for testbenches ---------------------------------------------


async def send_bytes(ctx, line, data: bytes, divisor: int, stop: int = 1) -> None:
    for b in data:
        bits = [0] + [(b >> k) & 1 for k in range(8)] + [stop]
        for bit in bits:
            ctx.set(line, bit)
            for _ in range(divisor):
                await ctx.tick()
    ctx.set(line, 1)


def receiver(line, divisor: int, out: bytearray):
    """A background process decoding 8N1 bytes from ``line`` into ``out``."""
    async def proc(ctx) -> None:
        wait = -1      # cycles to the next sample point; -1: waiting for a start bit
        bit = 0
        value = 0
        async for _clk, _rst, v in ctx.tick().sample(line):
            if wait < 0:
                if not v:
                    wait, bit, value = divisor // 2 - 1, 0, 0
                continue
            if wait > 0:
                wait -= 1
                continue
            if bit == 0:
                assert v == 0, "start bit glitch"
            elif bit <= 8:
                value |= v << (bit - 1)
            else:
                assert v == 1, "stop bit is 0"
                out.append(value)
                wait = -1
                continue
            bit += 1
            wait = divisor - 1
    return proc


def split_packets(data: bytes, out_bytes: int, partial: bool = False
                  ) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Host-side parse: responses in order, and output beats (data, last); with
    ``partial`` an incomplete last packet is ignored."""
    sizes = {RSP_INFO: 9, RSP_READ: 6, RSP_WRITE: 2, RSP_WRITE_BURST: 2}
    resps, beats = [], []
    k = 0
    while k < len(data):
        tag = data[k]
        size = 1 + out_bytes if tag in (PKT_BEAT, PKT_BEAT_LAST) else sizes.get(tag, 1)
        if partial and k + size > len(data):
            break
        if tag in (PKT_BEAT, PKT_BEAT_LAST):
            beats.append((int.from_bytes(data[k + 1:k + 1 + out_bytes], "little"),
                          int(tag == PKT_BEAT_LAST)))
            k += 1 + out_bytes
        else:
            assert tag in sizes, f"unknown packet tag 0x{tag:02x} at byte {k}"
            resps.append(data[k:k + sizes[tag]])
            k += sizes[tag]
    return resps, beats


# ---- the UART ----------------------------------------------------------------------------


@pytest.mark.parametrize("divisor", [4, 5, 9])
def test_uart_loopback_and_framing_error(divisor):
    m = Module()
    m.submodules.tx = tx = UartTx(divisor)
    m.submodules.rx = rx = UartRx(divisor)
    line = Signal(init=1)
    m.d.comb += rx.rx.eq(line)
    data = bytes(random.Random(divisor).randrange(256) for _ in range(12))
    got: list[int] = []
    errors = []
    sim = Simulator(m)
    sim.add_clock(1e-8)

    async def collect(ctx) -> None:
        async for _clk, _rst, v, d, fe in ctx.tick().sample(rx.valid, rx.data,
                                                           rx.frame_error):
            if v:
                got.append(d)
            if fe:
                errors.append(len(got))

    async def bench(ctx) -> None:
        # the transmitter drives the line, with random gaps between bytes
        r = random.Random(1)
        for b in data:
            ctx.set(line, ctx.get(tx.tx))
            ctx.set(tx.i.payload, b)
            ctx.set(tx.i.valid, 1)
            while True:
                await ctx.tick()
                ctx.set(line, ctx.get(tx.tx))
                if not ctx.get(tx.i.ready):
                    break
            ctx.set(tx.i.valid, 0)
            while not ctx.get(tx.i.ready):
                await ctx.tick()
                ctx.set(line, ctx.get(tx.tx))
            for _ in range(r.randrange(0, 3 * divisor)):
                await ctx.tick()
                ctx.set(line, ctx.get(tx.tx))
        for _ in range(3 * divisor):
            await ctx.tick()
            ctx.set(line, ctx.get(tx.tx))
        assert bytes(got) == data
        # a byte with a 0 stop bit is dropped and flagged; the next one is fine
        await send_bytes(ctx, line, b"\x5a", divisor, stop=0)
        for _ in range(2 * divisor):
            await ctx.tick()
        await send_bytes(ctx, line, b"\xc3", divisor)
        for _ in range(2 * divisor):
            await ctx.tick()
        assert errors == [len(data)]
        assert bytes(got) == data + b"\xc3"

    sim.add_process(collect)
    sim.add_testbench(bench)
    sim.run()


def test_baud_divisor():
    assert baud_divisor(100e6, 3_000_000) == 33
    assert baud_divisor(30e6, 3_000_000) == 10
    assert baud_divisor(25e6, 115200) == 217
    with pytest.raises(HardwareConfigError, match=r"at least 4 clock cycles.*at most"):
        baud_divisor(12e6, 6_000_000)
    with pytest.raises(HardwareConfigError, match=r"off .*choose a baud rate near"):
        baud_divisor(12e6, 2_500_000)  # 4.8 cycles a bit: 4.2 % off
    with pytest.raises(HardwareConfigError, match="give divisor"):
        UartBridge(in_bytes=1, out_bytes=1)


# ---- the protocol against the model ---------------------------------------------------

REGS = {0x00: 0x464C4857, 0x10: 1, 0x44: 0}   # readable registers of the fake slave
WO = {0x48}                                   # a write-only window


class FakeSlave:
    """Register semantics for both the model and the simulated AXI slave."""

    def __init__(self) -> None:
        self.regs = dict(REGS)
        self.writes: list[tuple[int, int]] = []

    def read(self, addr: int) -> tuple[int, int]:
        a = addr & ~3
        if a in self.regs:
            return self.regs[a], OKAY
        return 0, (OKAY if a in WO else SLVERR)

    def write(self, addr: int, data: int) -> int:
        a = addr & ~3
        if a in self.regs or a in WO:
            self.writes.append((a, data))
            if a in self.regs:
                self.regs[a] = data
            return OKAY
        return SLVERR


def axi_slave(bus, slave: FakeSlave, rng: random.Random):
    """A randomly slow AXI4-Lite slave process (AW and W accepted independently)."""
    async def proc(ctx) -> None:
        aw = w = None
        while True:
            ctx.set(bus.awready, aw is None and rng.random() < 0.5)
            ctx.set(bus.wready, w is None and rng.random() < 0.5)
            ctx.set(bus.arready, rng.random() < 0.5)
            _, _, awv, awr, awa, wv, wr, wd, arv, arr, ara = await ctx.tick().sample(
                bus.awvalid, bus.awready, bus.awaddr, bus.wvalid, bus.wready, bus.wdata,
                bus.arvalid, bus.arready, bus.araddr)
            if awv and awr:
                aw = awa
            if wv and wr:
                w = wd
            if arv and arr:
                ctx.set(bus.awready, 0)
                ctx.set(bus.wready, 0)
                ctx.set(bus.arready, 0)
                for _ in range(rng.randrange(3)):
                    await ctx.tick()
                data, resp = slave.read(ara)
                ctx.set(bus.rdata, data)
                ctx.set(bus.rresp, resp)
                ctx.set(bus.rvalid, 1)
                await ctx.tick().until(bus.rready)
                ctx.set(bus.rvalid, 0)
            if aw is not None and w is not None:
                ctx.set(bus.awready, 0)
                ctx.set(bus.wready, 0)
                ctx.set(bus.arready, 0)
                for _ in range(rng.randrange(3)):
                    await ctx.tick()
                ctx.set(bus.bresp, slave.write(aw, w))
                ctx.set(bus.bvalid, 1)
                await ctx.tick().until(bus.bready)
                ctx.set(bus.bvalid, 0)
                aw = w = None
    return proc


def host_commands(in_bytes: int) -> list[bytes]:
    """Commands of a session; the host waits for each one's response (protocol rule)."""
    le = int.to_bytes
    c = [bytes([CMD_INFO]),
         bytes([CMD_READ]) + le(0x00, 2, "little"),
         bytes([CMD_WRITE]) + le(0x44, 2, "little") + le(0x1234, 4, "little"),
         bytes([CMD_READ]) + le(0x44, 2, "little"),
         bytes([CMD_READ]) + le(0x80, 2, "little"),          # unmapped: SLVERR
         bytes([CMD_WRITE_BURST]) + le(0x48, 2, "little") + le(3, 2, "little")
         + b"".join(le(w, 4, "little") for w in (0xDEADBEEF, 7, 0x80000000)),
         bytes([0x77]),                                       # unknown command
         bytes([CMD_WRITE_BURST]) + le(0x48, 2, "little") + le(0, 2, "little")]
    for v in range(3):                                        # 3 vectors of 2 beats
        c.append(bytes([CMD_STREAM_IN]) + le(2, 2, "little") + bytes([1])
                 + bytes((16 * v + k) & 0xFF for k in range(2 * in_bytes)))
    c.append(bytes([CMD_STREAM_IN]) + le(1, 2, "little") + bytes([0])   # no tlast
             + bytes(range(0xA0, 0xA0 + in_bytes)))
    c.append(bytes([CMD_INFO]))
    return c


@pytest.mark.parametrize("in_bytes,out_bytes,divisor", [(2, 3, 4), (1, 4, 6)])
def test_bridge_protocol_matches_model(in_bytes, out_bytes, divisor):
    rng = random.Random(in_bytes * 10 + out_bytes)
    dut = UartBridge(in_bytes=in_bytes, out_bytes=out_bytes, divisor=divisor,
                     rx_fifo_depth=4)
    commands = host_commands(in_bytes)
    host = b"".join(commands)
    out_beats = [(rng.randrange(1 << (8 * out_bytes)), int(k % 3 == 2)) for k in range(7)]

    # the model, with its own slave
    ref_slave = FakeSlave()
    model = UartBridgeModel(in_bytes, out_bytes, ref_slave.read, ref_slave.write, divisor)
    want_resps = model.feed(host)
    want_beats = out_beats

    m = Module()
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(1e-8)
    slave = FakeSlave()
    tx_bytes = bytearray()
    beats_in: list[tuple[int, int]] = []
    sim.add_process(axi_slave(dut.axil, slave, random.Random(3)))
    sim.add_process(receiver(dut.tx, divisor, tx_bytes))

    async def s_axis_sink(ctx) -> None:
        r = random.Random(5)
        ib = 8 * in_bytes
        while True:
            rd = r.random() < 0.3
            ctx.set(dut.s_axis.ready, rd)
            _, _, v, p = await ctx.tick().sample(dut.s_axis.valid, dut.s_axis.payload)
            if v and rd:
                beats_in.append((p & ((1 << ib) - 1), p >> ib))

    async def m_axis_source(ctx) -> None:
        r = random.Random(6)
        for _ in range(40 * divisor):  # outputs start while commands are still coming
            await ctx.tick()
        for data, last in out_beats:
            for _ in range(r.randrange(60 * divisor)):
                await ctx.tick()
            ctx.set(dut.m_axis.payload, data | last << (8 * out_bytes))
            ctx.set(dut.m_axis.valid, 1)
            await ctx.tick().until(dut.m_axis.ready)
            ctx.set(dut.m_axis.valid, 0)

    async def bench(ctx) -> None:
        ctx.set(dut.rx, 1)
        for _ in range(5):
            await ctx.tick()
        n_resp = 0
        for c in commands:
            await send_bytes(ctx, dut.rx, c, divisor)
            if c[0] in (CMD_STREAM_IN, 0x77):
                continue
            n_resp += 1
            for _ in range(100 * 10 * divisor):  # wait for the response
                if len(split_packets(bytes(tx_bytes), out_bytes, partial=True)[0]) >= n_resp:
                    break
                await ctx.tick()
        expect = len(want_resps) + len(want_beats) * (1 + out_bytes)
        for _ in range(200 * divisor * 12):
            if len(tx_bytes) >= expect:
                break
            await ctx.tick()
        for _ in range(30 * divisor):  # nothing more comes
            await ctx.tick()

    sim.add_process(s_axis_sink)
    sim.add_process(m_axis_source)
    sim.add_testbench(bench)
    sim.run()

    resps, beats = split_packets(bytes(tx_bytes), out_bytes)
    assert b"".join(resps) == want_resps
    assert beats == want_beats
    assert beats_in == model.s_axis
    assert slave.writes == ref_slave.writes
    # the first INFO: magic, version, no errors; the last one reports the unknown command
    assert resps[0][:4] == bytes([RSP_INFO]) + b"FH\x01" and resps[0][4] == 0
    assert resps[0][5:7] == bytes([in_bytes, out_bytes])
    assert int.from_bytes(resps[0][7:9], "little") == divisor
    assert resps[-1][4] == ERR_BAD_COMMAND
    assert resps[4] == bytes([RSP_READ, SLVERR, 0, 0, 0, 0])


def test_bridge_timeout_and_framing_flags():
    divisor = 4
    dut = UartBridge(in_bytes=1, out_bytes=1, divisor=divisor, idle_timeout=200)
    m = Module()
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(1e-8)
    tx_bytes = bytearray()
    sim.add_process(receiver(dut.tx, divisor, tx_bytes))
    sim.add_process(axi_slave(dut.axil, FakeSlave(), random.Random(0)))

    async def bench(ctx) -> None:
        ctx.set(dut.rx, 1)
        await ctx.tick()
        await send_bytes(ctx, dut.rx, bytes([CMD_WRITE, 0x10]), divisor)  # then silence
        for _ in range(400):
            await ctx.tick()
        await send_bytes(ctx, dut.rx, b"\x00", divisor, stop=0)          # framing error
        for _ in range(3 * divisor):
            await ctx.tick()
        await send_bytes(ctx, dut.rx, bytes([CMD_INFO, CMD_INFO]), divisor)
        for _ in range(40 * 20 * divisor):
            if len(tx_bytes) >= 18:
                break
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    assert tx_bytes[0] == RSP_INFO and tx_bytes[4] == ERR_CMD_TIMEOUT | ERR_FRAMING
    assert tx_bytes[9] == RSP_INFO and tx_bytes[13] == 0   # cleared by the first read


# ---- wired to an accelerator -------------------------------------------------------------


def test_bridge_drives_an_accelerator_through_connect():
    rng = np.random.default_rng(0)
    spec = MVAUSpec("fc", mw=4, mh=2, pe=2, simd=2, weights=rng.integers(-127, 128, (2, 4)),
                    bias=rng.integers(-300, 300, 2), multiplier=np.array([20000, 30000]),
                    shift=np.array([17, 18]), relu=False)
    acc = AcceleratorTop([spec])
    info = acc.describe()
    divisor = 4
    bridge = UartBridge(in_bytes=info["in_lanes"], out_bytes=info["out_lanes"],
                        divisor=divisor)
    m = Module()
    m.submodules.acc = acc
    m.submodules.bridge = bridge
    bridge.connect(m, acc)
    x = rng.integers(-128, 128, (2, 4))
    want = acc.model(x)
    host = bytearray([CMD_READ, 0, 0])
    for v in x:
        host += bytes([CMD_STREAM_IN, 2, 0, 1]) + bytes(int(e) & 0xFF for e in v)
    host += bytes([CMD_READ, 0x2C, 0])  # INFERENCES
    sim = Simulator(m)
    sim.add_clock(1e-8)
    tx_bytes = bytearray()
    sim.add_process(receiver(bridge.tx, divisor, tx_bytes))

    async def bench(ctx) -> None:
        ctx.set(bridge.rx, 1)
        await ctx.tick()
        await send_bytes(ctx, bridge.rx, bytes(host[:3 + 2 * 8]), divisor)
        for _ in range(60 * 10 * divisor):   # both outputs, before asking the counter
            if len(tx_bytes) >= 6 + 2 * 3:
                break
            await ctx.tick()
        await send_bytes(ctx, bridge.rx, bytes(host[3 + 2 * 8:]), divisor)
        for _ in range(20 * 10 * divisor):
            if len(tx_bytes) >= 6 + 2 * 3 + 6:
                break
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    resps, beats = split_packets(bytes(tx_bytes), 2)
    assert resps[0] == bytes([RSP_READ, OKAY]) + (0x464C4857).to_bytes(4, "little")
    assert resps[1] == bytes([RSP_READ, OKAY, 2, 0, 0, 0])
    got = np.array([[(d >> 8 * k) & 0xFF for k in range(2)] for d, _ in beats],
                   np.uint8).view(np.int8).reshape(2, 2)
    np.testing.assert_array_equal(got, want)
    assert [last for _, last in beats] == [1, 1]


def test_connect_checks_the_core():
    acc = AcceleratorTop([MVAUSpec("fc", mw=4, mh=2, pe=1, simd=2,
                                   weights=np.ones((2, 4), int), multiplier=np.ones(2, int),
                                   shift=np.zeros(2, int))])
    acc._MustUse__used = True
    bridge = UartBridge(in_bytes=4, out_bytes=1, divisor=8)
    bridge._MustUse__used = True
    with pytest.raises(HardwareConfigError, match=r"s_axis_tdata is 16 bits but the bridge"):
        bridge.connect(Module(), acc)
    with pytest.raises(HardwareConfigError, match="flat AXI ports"):
        bridge.connect(Module(), object())
