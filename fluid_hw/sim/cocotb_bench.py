"""cocotb test bench of an accelerator; runs inside the simulator, started by
:func:`fluid_hw.sim.cocotb_runner.run_cocotb`, which passes its stimulus and expected
outputs in a ``.npz`` file named by ``$FLUID_HW_BENCH`` and reads the results back
from ``<that file>.json``.

Parts, as in cocotb's own examples: an AXI-Stream :class:`Driver` (random gaps in
``tvalid``), a :class:`Monitor` (random ``tready``, records output vectors and
checks ``tlast``), a :class:`ReferenceModel` (the expected vectors, computed by the
caller with the golden model), a :class:`Checker` (compares, names the first
mismatch), and an :class:`AxiLiteMaster` for registers and runtime weights.
All signals are driven on the falling edge and sampled in the read-only phase.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import Event, FallingEdge, ReadOnly, RisingEdge, with_timeout

OKAY, SLVERR = 0, 2


def _config() -> tuple[dict[str, Any], dict[str, np.ndarray], str]:
    path = os.environ["FLUID_HW_BENCH"]
    data = dict(np.load(path, allow_pickle=False))
    cfg = json.loads(str(data.pop("config")))
    return cfg, data, path + ".json"


class Cycles:
    """Counts rising clock edges (the bench's time base)."""

    def __init__(self, dut: Any) -> None:
        self.dut, self.now = dut, 0
        cocotb.start_soon(self._run())

    async def _run(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            self.now += 1


class Driver:
    """Drives ``s_axis``: one beat of ``lanes`` int8 elements per transfer, ``tlast``
    on the last beat of each vector; ``tvalid`` offered with probability ``p``."""

    def __init__(self, dut: Any, lanes: int, cycles: Cycles, p: float, rng: random.Random
                 ) -> None:
        self.dut, self.lanes, self.cycles, self.p, self.rng = dut, lanes, cycles, p, rng
        self.first: list[int] = []

    async def send(self, vectors: np.ndarray) -> None:
        dut, lanes = self.dut, self.lanes
        beats = vectors.shape[1] // lanes
        for v in vectors:
            raw = v.astype(np.int8).view(np.uint8)
            for b in range(beats):
                word = int.from_bytes(raw[b * lanes:(b + 1) * lanes].tobytes(), "little")
                await FallingEdge(dut.clk)
                while self.rng.random() >= self.p:
                    dut.s_axis_tvalid.value = 0
                    await FallingEdge(dut.clk)
                dut.s_axis_tdata.value = word
                dut.s_axis_tlast.value = int(b == beats - 1)
                dut.s_axis_tvalid.value = 1
                while True:
                    await ReadOnly()
                    if int(dut.s_axis_tready.value):
                        break
                    await FallingEdge(dut.clk)
                if b == 0:
                    self.first.append(self.cycles.now)
        await FallingEdge(dut.clk)
        dut.s_axis_tvalid.value = 0


class Monitor:
    """Samples ``m_axis`` transfers; ``tready`` high with probability ``p``."""

    def __init__(self, dut: Any, lanes: int, bits: int, length: int, count: int,
                 cycles: Cycles, p: float, rng: random.Random) -> None:
        self.dut, self.lanes, self.bits, self.length = dut, lanes, bits, length
        self.count, self.cycles, self.p, self.rng = count, cycles, p, rng
        self.vectors: list[np.ndarray] = []
        self.last: list[int] = []
        self.errors: list[str] = []
        self.done = Event()

    def _unpack(self, word: int) -> list[int]:
        mask, half = (1 << self.bits) - 1, 1 << (self.bits - 1)
        vals = [(word >> (self.bits * i)) & mask for i in range(self.lanes)]
        return [v - (1 << self.bits) if v >= half else v for v in vals]

    async def run(self) -> None:
        dut = self.dut
        beats = self.length // self.lanes
        cur: list[int] = []
        while len(self.vectors) < self.count:
            await FallingEdge(dut.clk)
            ready = self.rng.random() < self.p
            dut.m_axis_tready.value = int(ready)
            await ReadOnly()
            if ready and int(dut.m_axis_tvalid.value):
                cur += self._unpack(int(dut.m_axis_tdata.value))
                b = len(cur) // self.lanes - 1
                if int(dut.m_axis_tlast.value) != int(b == beats - 1):
                    self.errors.append(f"vector {len(self.vectors)} beat {b}: tlast wrong")
                if b == beats - 1:
                    self.vectors.append(np.array(cur))
                    self.last.append(self.cycles.now)
                    cur = []
        self.done.set()


class ReferenceModel:
    """Expected output vectors (the golden model's, computed by the caller)."""

    def __init__(self, expected: np.ndarray) -> None:
        self.expected = expected

    def __call__(self, i: int) -> np.ndarray:
        return self.expected[i]


class Checker:
    """Compares each received vector with the model; keeps the mismatches."""

    def __init__(self, model: ReferenceModel) -> None:
        self.model = model
        self.mismatches: list[str] = []

    def check(self, i: int, got: np.ndarray) -> None:
        want = self.model(i)
        if not np.array_equal(got, want):
            k = int(np.flatnonzero(got != want)[0])
            self.mismatches.append(f"vector {i} element {k}: got {got[k]}, expected {want[k]}")


class AxiLiteMaster:
    """AXI4-Lite master on the ``s_axil_*`` pins."""

    def __init__(self, dut: Any) -> None:
        self.dut = dut
        for n in ("awvalid", "wvalid", "bready", "arvalid", "rready"):
            getattr(dut, f"s_axil_{n}").value = 0

    async def write(self, addr: int, data: int, strb: int = 0xF, order: str = "together"
                    ) -> int:
        d = self.dut
        aw_done = w_done = False
        for _ in range(1000):
            await FallingEdge(d.clk)
            awv = not aw_done and (order != "w_first" or w_done)
            wv = not w_done and (order != "aw_first" or aw_done)
            d.s_axil_awvalid.value, d.s_axil_awaddr.value = int(awv), addr
            d.s_axil_wvalid.value, d.s_axil_wdata.value = int(wv), data
            d.s_axil_wstrb.value = strb
            await ReadOnly()
            aw_done |= awv and bool(int(d.s_axil_awready.value))
            w_done |= wv and bool(int(d.s_axil_wready.value))
            if aw_done and w_done:
                break
        else:
            raise AssertionError(f"write to 0x{addr:x}: address/data never accepted")
        await FallingEdge(d.clk)
        d.s_axil_awvalid.value = d.s_axil_wvalid.value = 0
        d.s_axil_bready.value = 1
        for _ in range(1000):
            await ReadOnly()
            if int(d.s_axil_bvalid.value):
                resp = int(d.s_axil_bresp.value)
                await FallingEdge(d.clk)
                d.s_axil_bready.value = 0
                return resp
            await FallingEdge(d.clk)
        raise AssertionError(f"write to 0x{addr:x}: no response")

    async def read(self, addr: int) -> tuple[int, int]:
        d = self.dut
        await FallingEdge(d.clk)
        d.s_axil_arvalid.value, d.s_axil_araddr.value = 1, addr
        for _ in range(1000):
            await ReadOnly()
            if int(d.s_axil_arready.value):
                break
            await FallingEdge(d.clk)
        await FallingEdge(d.clk)
        d.s_axil_arvalid.value = 0
        d.s_axil_rready.value = 1
        for _ in range(1000):
            await ReadOnly()
            if int(d.s_axil_rvalid.value):
                data, resp = int(d.s_axil_rdata.value), int(d.s_axil_rresp.value)
                await FallingEdge(d.clk)
                d.s_axil_rready.value = 0
                return data, resp
            await FallingEdge(d.clk)
        raise AssertionError(f"read of 0x{addr:x}: no response")


async def _start(dut: Any) -> Cycles:
    Clock(dut.clk, 10, unit="ns").start()  # cocotb 2: starts its own task
    dut.s_axis_tvalid.value = 0
    dut.m_axis_tready.value = 0
    dut.rst.value = 1
    for _ in range(4):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    return Cycles(dut)


@cocotb.test()
async def stream(dut: Any) -> None:
    """Stream the inputs under random stalls and check every output vector."""
    cfg, data, out_path = _config()
    info = cfg["info"]
    rng = random.Random(cfg["seed"])
    cycles = await _start(dut)
    axil = AxiLiteMaster(dut)
    regs = info["registers"]
    offset = 0  # runtime parameters: segments of param_words at param_bases
    for base, n in zip(data.get("param_bases", []), data.get("param_lengths", [])):
        assert await axil.write(regs["PARAM_ADDR"], int(base)) == OKAY
        for w in data["param_words"][offset:offset + int(n)]:
            assert await axil.write(regs["PARAM_DATA"], int(w)) == OKAY
        offset += int(n)
    x = data["inputs"]
    model = ReferenceModel(data["expected"])
    checker = Checker(model)
    driver = Driver(dut, info["in_lanes"], cycles, cfg["valid_prob"], rng)
    monitor = Monitor(dut, info["out_lanes"], info["out_bits"], info["out_len"], len(x),
                      cycles, cfg["ready_prob"], rng)
    c0, t0 = cycles.now, time.perf_counter()
    cocotb.start_soon(driver.send(x))
    cocotb.start_soon(monitor.run())
    await with_timeout(monitor.done.wait(), cfg["timeout_cycles"] * 10, "ns")
    wall, ncycles = time.perf_counter() - t0, cycles.now - c0
    for i, v in enumerate(monitor.vectors):
        checker.check(i, v)
    inferences, resp = await axil.read(regs["INFERENCES"])
    result = {
        "outputs": [v.tolist() for v in monitor.vectors], "cycles": ncycles,
        "wall_s": wall, "first_in": [c - c0 for c in driver.first],
        "last_out": [c - c0 for c in monitor.last], "mismatches": checker.mismatches,
        "protocol_errors": monitor.errors, "inferences_register": inferences,
    }
    with open(out_path, "w") as f:
        json.dump(result, f)
    assert not monitor.errors, monitor.errors[:3]
    assert not checker.mismatches, checker.mismatches[:3]
    assert resp == OKAY and inferences == len(x), f"INFERENCES = {inferences}"


@cocotb.test()
async def axil_protocol(dut: Any) -> None:
    """AXI4-Lite: the ID register, SLVERR on unmapped and read-only addresses, AW and W
    in either order, and every access answered."""
    cfg, _, _ = _config()
    regs = cfg["info"]["registers"]
    await _start(dut)
    axil = AxiLiteMaster(dut)
    assert await axil.read(regs["ID"]) == (0x464C4857, OKAY)
    assert (await axil.read(0xFFC))[1] == SLVERR
    assert await axil.write(0xFFC, 1) == SLVERR
    assert await axil.write(regs["ID"], 1) == SLVERR
    for order in ("together", "aw_first", "w_first"):
        assert await axil.write(regs["CONTROL"], 1, order=order) == OKAY
    assert await axil.read(regs["CONTROL"]) == (1, OKAY)
