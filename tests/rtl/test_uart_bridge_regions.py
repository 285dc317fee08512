# amaranth: UnusedElaboratable=no
"""The UART bridge of several accelerator regions (one bitstream, one serial port) in
amaranth.sim: the REGION command and region-tagged output beats against the
behavioural model, with a randomly stalling AXI4-Lite slave, stream sink and stream
source per region; two AcceleratorTops driven through ``connect`` (the board top's
path); and the single-region bridge, which knows no REGION command."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.sim import Simulator

from fluid_hw.rtl import AcceleratorTop, HardwareConfigError, MVAUSpec
from fluid_hw.rtl.regmap import OKAY, SLVERR
from fluid_hw.rtl.uart_bridge import (
    CMD_INFO,
    CMD_READ,
    CMD_REGION,
    CMD_STREAM_IN,
    CMD_WRITE,
    CMD_WRITE_BURST,
    ERR_BAD_COMMAND,
    RSP_INFO,
    RSP_READ,
    RSP_REGION,
    RSP_WRITE,
    RSP_WRITE_BURST,
    UartBridge,
    UartBridgeModel,
    beat_tag,
)
from tests.rtl.test_uart_bridge import FakeSlave, axi_slave, receiver, send_bytes

SIZES = {RSP_INFO: 9, RSP_READ: 6, RSP_WRITE: 2, RSP_WRITE_BURST: 2, RSP_REGION: 4}


def split_region_packets(data: bytes, out_bytes: list[int], partial: bool = False
                         ) -> tuple[list[bytes], list[list[tuple[int, int]]]]:
    """Responses in order, and each region's output beats ``(data, last)``."""
    resps: list[bytes] = []
    beats: list[list[tuple[int, int]]] = [[] for _ in out_bytes]
    k = 0
    while k < len(data):
        tag = data[k]
        region = (tag - beat_tag(0, False)) // 2
        is_beat = 0 <= region < len(out_bytes)
        assert is_beat or tag in SIZES, f"unknown packet tag 0x{tag:02x} at byte {k}"
        size = 1 + out_bytes[region] if is_beat else SIZES[tag]
        if partial and k + size > len(data):
            break
        if is_beat:
            beats[region].append((int.from_bytes(data[k + 1:k + size], "little"), tag & 1))
        else:
            resps.append(data[k:k + size])
        k += size
    return resps, beats


def _le(v: int, n: int) -> bytes:
    return int(v).to_bytes(n, "little")


def region_commands(sizes: list[tuple[int, int]]) -> list[bytes]:
    """A session over two regions; the host waits for each answer (protocol rule)."""
    (ib0, _), (ib1, _) = sizes
    return [
        bytes([CMD_INFO]),                                          # version 2, region 0
        bytes([CMD_READ]) + _le(0x00, 2),
        bytes([CMD_REGION, 1]),
        bytes([CMD_INFO]),                                          # region 1's beat sizes
        bytes([CMD_READ]) + _le(0x00, 2),
        bytes([CMD_WRITE]) + _le(0x44, 2) + _le(0x1234, 4),
        bytes([CMD_WRITE_BURST]) + _le(0x48, 2) + _le(2, 2) + _le(0xDEADBEEF, 4) + _le(7, 4),
        bytes([CMD_STREAM_IN]) + _le(2, 2) + b"\x01" + bytes(range(1, 1 + 2 * ib1)),
        bytes([CMD_REGION, 7]),                                     # no such region
        bytes([CMD_READ]) + _le(0x44, 2),                           # still region 1
        bytes([CMD_REGION, 0]),
        bytes([CMD_READ]) + _le(0x44, 2),                           # region 0's own value
        bytes([CMD_STREAM_IN]) + _le(1, 2) + b"\x01" + bytes(range(0xA0, 0xA0 + ib0)),
        bytes([0x77]),
        bytes([CMD_INFO]),
    ]


def test_regions_protocol_matches_model():
    sizes = [(2, 3), (3, 1)]
    divisor = 4
    dut = UartBridge(regions=sizes, divisor=divisor, rx_fifo_depth=4)
    commands = region_commands(sizes)
    slaves, ref = [FakeSlave(), FakeSlave()], [FakeSlave(), FakeSlave()]
    for s in (slaves[1], ref[1]):
        s.regs[0x00] = 0x11223344      # the regions' registers differ
    model = UartBridgeModel.of_regions(sizes, [s.read for s in ref], [s.write for s in ref],
                                       divisor)
    want_resps = model.feed(b"".join(commands))
    rng = random.Random(7)
    out_beats = [[(rng.randrange(1 << (8 * ob)), int(k % 2 == 1)) for k in range(n)]
                 for (_, ob), n in zip(sizes, (4, 5))]

    m = Module()
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(1e-8)
    tx_bytes = bytearray()
    sim.add_process(receiver(dut.tx, divisor, tx_bytes))
    beats_in: list[list[tuple[int, int]]] = [[], []]
    ports = dut.region_ports
    for k, p in enumerate(ports):
        sim.add_process(axi_slave(p.axil, slaves[k], random.Random(3 + k)))

        def sink(p=p, k=k):
            async def proc(ctx) -> None:
                r = random.Random(5 + k)
                ib = 8 * p.in_bytes
                while True:
                    rd = r.random() < 0.3
                    ctx.set(p.s_axis.ready, rd)
                    _, _, v, d = await ctx.tick().sample(p.s_axis.valid, p.s_axis.payload)
                    if v and rd:
                        beats_in[k].append((d & ((1 << ib) - 1), d >> ib))
            return proc

        def source(p=p, k=k):
            async def proc(ctx) -> None:
                r = random.Random(9 + k)
                for _ in range(40 * divisor):
                    await ctx.tick()
                for data, last in out_beats[k]:
                    for _ in range(r.randrange(40 * divisor)):
                        await ctx.tick()
                    ctx.set(p.m_axis.payload, data | last << (8 * p.out_bytes))
                    ctx.set(p.m_axis.valid, 1)
                    await ctx.tick().until(p.m_axis.ready)
                    ctx.set(p.m_axis.valid, 0)
            return proc

        sim.add_process(sink())
        sim.add_process(source())
    outs = [ob for _, ob in sizes]

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
            for _ in range(100 * 10 * divisor):
                if len(split_region_packets(bytes(tx_bytes), outs, True)[0]) >= n_resp:
                    break
                await ctx.tick()
        expect = len(want_resps) + sum(len(b) * (1 + ob) for b, ob in zip(out_beats, outs))
        for _ in range(400 * divisor * 12):
            if len(tx_bytes) >= expect:
                break
            await ctx.tick()
        for _ in range(30 * divisor):
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()

    resps, beats = split_region_packets(bytes(tx_bytes), outs)
    assert b"".join(resps) == want_resps
    assert beats == out_beats                     # each region's beats, tagged as its own
    for k in range(2):
        want_k = [b for b, r in zip(model.s_axis, model.s_axis_region) if r == k]
        assert beats_in[k] == want_k and want_k
        assert slaves[k].writes == ref[k].writes
    assert slaves[0].writes == [] and len(slaves[1].writes) == 3
    # INFO: version 2 and the selected region's beat sizes; REGION's answers
    assert resps[0][:4] == bytes([RSP_INFO]) + b"FH\x02" and resps[0][5:7] == bytes([2, 3])
    assert resps[2] == bytes([RSP_REGION, OKAY, 1, 2])
    assert resps[3][5:7] == bytes([3, 1])
    assert resps[4] == bytes([RSP_READ, OKAY]) + _le(0x11223344, 4)
    assert resps[7] == bytes([RSP_REGION, SLVERR, 1, 2])
    assert resps[8] == bytes([RSP_READ, OKAY]) + _le(0x1234, 4)
    assert resps[10] == bytes([RSP_READ, OKAY]) + _le(0, 4)
    assert resps[-1][4] == ERR_BAD_COMMAND and resps[-1][5:7] == bytes([2, 3])


def test_the_single_region_bridge_knows_no_region_command():
    """Byte-compatible: 0x06 stays an unknown command of a one-region bridge (its
    argument byte 0x00 is a NOP), in the model and in the hardware."""
    divisor = 4
    dut = UartBridge(in_bytes=1, out_bytes=1, divisor=divisor)
    host = bytes([CMD_REGION, 0, CMD_INFO])
    model = UartBridgeModel(1, 1, FakeSlave().read, FakeSlave().write, divisor)
    want = model.feed(host)
    assert want[0] == RSP_INFO and want[2:4] == b"H\x01" and want[4] == ERR_BAD_COMMAND
    m = Module()
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(1e-8)
    tx_bytes = bytearray()
    sim.add_process(receiver(dut.tx, divisor, tx_bytes))

    async def bench(ctx) -> None:
        ctx.set(dut.rx, 1)
        await ctx.tick()
        await send_bytes(ctx, dut.rx, host, divisor)
        for _ in range(20 * 10 * divisor):
            if len(tx_bytes) >= 9:
                break
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    assert bytes(tx_bytes) == want
    assert "regions" not in dut.describe() and dut.describe()["protocol_version"] == 1


def _mvau(rng, name: str, mw: int, mh: int, pe: int, simd: int) -> AcceleratorTop:
    return AcceleratorTop([MVAUSpec(name, mw=mw, mh=mh, pe=pe, simd=simd,
                                    weights=rng.integers(-127, 128, (mh, mw)),
                                    bias=rng.integers(-300, 300, mh),
                                    multiplier=rng.integers(15000, 30000, mh),
                                    shift=rng.integers(16, 19, mh), relu=False)])


def test_bridge_drives_two_accelerators_through_connect():
    rng = np.random.default_rng(1)
    accs = [_mvau(rng, "fc_a", 4, 2, 2, 2), _mvau(rng, "fc_b", 6, 3, 1, 3)]
    infos = [a.describe() for a in accs]
    sizes = [(i["in_lanes"], i["out_lanes"]) for i in infos]
    assert sizes == [(2, 2), (3, 1)]
    divisor = 4
    bridge = UartBridge(regions=sizes, divisor=divisor)
    m = Module()
    m.submodules.acc0, m.submodules.acc1 = accs
    m.submodules.bridge = bridge
    bridge.connect(m, accs)
    xs = [rng.integers(-128, 128, (2, 4)), rng.integers(-128, 128, (2, 6))]
    wants = [a.model(x) for a, x in zip(accs, xs)]

    def stream(k: int) -> bytes:
        ib = sizes[k][0]
        return b"".join(bytes([CMD_STREAM_IN]) + _le(len(v) // ib, 2) + b"\x01"
                        + bytes(int(e) & 0xFF for e in v) for v in xs[k])

    # region 1 first, then region 0 while region 1 may still be answering
    steps = [bytes([CMD_REGION, 1]), stream(1), bytes([CMD_REGION, 0]), stream(0),
             bytes([CMD_READ, 0x2C, 0]), bytes([CMD_REGION, 1]), bytes([CMD_READ, 0x2C, 0]),
             bytes([CMD_READ, 0, 0])]
    outs = [ob for _, ob in sizes]
    sim = Simulator(m)
    sim.add_clock(1e-8)
    tx_bytes = bytearray()
    sim.add_process(receiver(bridge.tx, divisor, tx_bytes))

    async def wait(ctx, done) -> None:
        for _ in range(80 * 10 * divisor):
            if done(*split_region_packets(bytes(tx_bytes), outs, True)):
                return
            await ctx.tick()
        raise AssertionError(f"no answer; received {bytes(tx_bytes).hex(' ')}")

    async def bench(ctx) -> None:
        ctx.set(bridge.rx, 1)
        await ctx.tick()
        answers = 0
        for k, s in enumerate(steps):
            if k == 4:  # every output beat before the counters are read
                await wait(ctx, lambda r, b: len(b[0]) == 2 and len(b[1]) == 6)
            await send_bytes(ctx, bridge.rx, s, divisor)
            if s[0] != CMD_STREAM_IN:
                answers += 1
                await wait(ctx, lambda r, b, n=answers: len(r) >= n)

    sim.add_testbench(bench)
    sim.run()
    resps, beats = split_region_packets(bytes(tx_bytes), outs)
    assert resps[0] == bytes([RSP_REGION, OKAY, 1, 2])
    assert resps[2] == bytes([RSP_READ, OKAY, 2, 0, 0, 0])   # region 0: 2 inferences
    assert resps[4] == bytes([RSP_READ, OKAY, 2, 0, 0, 0])   # region 1: 2 inferences
    assert resps[5] == bytes([RSP_READ, OKAY]) + (0x464C4857).to_bytes(4, "little")
    for k, (want, (_, ob)) in enumerate(zip(wants, sizes)):
        data = b"".join(_le(d, ob) for d, _ in beats[k])
        got = np.frombuffer(data, np.int8).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
        per_vector = want.shape[1] // ob
        assert [last for _, last in beats[k]] == ([0] * (per_vector - 1) + [1]) * 2


def test_region_bridge_checks_its_arguments():
    with pytest.raises(HardwareConfigError, match=r"9 regions; a bridge addresses 1 to 8"):
        UartBridge(regions=[(1, 1)] * 9, divisor=8)
    with pytest.raises(HardwareConfigError, match="not both"):
        UartBridge(in_bytes=1, out_bytes=1, regions=[(1, 1)], divisor=8)
    with pytest.raises(HardwareConfigError, match=r"in 0, out 1 \(region 1\)"):
        UartBridge(regions=[(1, 1), (0, 1)], divisor=8)
    bridge = UartBridge(regions=[(2, 1), (4, 1)], divisor=8)
    assert bridge.describe()["regions"][1] == {"address": 1, "in_bytes": 4, "out_bytes": 1,
                                               "beat_tags": [0x92, 0x93]}
    with pytest.raises(HardwareConfigError, match="has 2 regions but was given 1 cores"):
        bridge.connect(Module(), [object()])
    acc = _mvau(np.random.default_rng(0), "fc", 4, 2, 1, 2)
    acc._MustUse__used = True
    with pytest.raises(HardwareConfigError, match=r"core of region 1's s_axis_tdata is 16 "):
        bridge.connect(Module(), [acc, acc])
