"""Sequence framing of the accelerator top (a recurrent first stage) in amaranth.sim:
variable-length sequences back to back with TLAST per sequence, no padding, random
stalls on both streams; the per-step beats with the last-step flag; the output per
sequence (``"last"``) or per step (``"sequence"``); TLAST inside a step; the graphs a
recurrent stage cannot be in.

The recurrent stage here is a small test stage of this file (a saturating running sum
over the steps of each sequence, state reset at each sequence start, one cycle of
latency behind a registered output): it has the stream interface of the recurrent
stage kind (input beats of ``8 * in_dim + 1`` bits, the top bit the last-step flag).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from amaranth import Cat, Module, Signal
from amaranth.lib import stream
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fluid_hw.rtl import AcceleratorTop, HardwareConfigError, MVAUSpec, pack_lanes, unpack_lanes
from fluid_hw.rtl._util import Component
from fluid_hw.rtl.regmap import OKAY, emit_markdown
from fluid_hw.rtl.spec import StageSpec

from .axil_master import axil_read
from .streams import simulate_streams


class _RunningSum(Component):
    """s_t = clip(s_{t-1} + x_t) per lane, s reset at each sequence start; mode "last":
    s_T of each sequence; "sequence": every s_t with the last-step flag."""

    def __init__(self, dim: int, mode: str) -> None:
        self.dim, self.mode = dim, mode
        flag = int(mode == "sequence")
        super().__init__({"i": In(stream.Signature(8 * dim + 1)),
                          "o": Out(stream.Signature(8 * dim + flag))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        d = self.dim
        state = [Signal(8, name=f"s{j}") for j in range(d)]
        out = Signal(8 * d + 1)
        full = Signal()
        take = self.i.valid & self.i.ready
        last = self.i.payload[8 * d]
        m.d.comb += [self.i.ready.eq(~full | self.o.ready),
                     self.o.valid.eq(full), self.o.payload.eq(out[:len(self.o.payload)])]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += full.eq(0)
        new = []
        for j in range(d):
            x = self.i.payload[8 * j:8 * j + 8].as_signed()
            acc = Signal(range(-256, 256), name=f"acc{j}")
            sat = Signal(8, name=f"sat{j}")
            m.d.comb += acc.eq(state[j].as_signed() + x)
            with m.If(acc > 127):
                m.d.comb += sat.eq(127)
            with m.Elif(acc < -128):
                m.d.comb += sat.eq(-128)
            with m.Else():
                m.d.comb += sat.eq(acc)
            new.append(sat)
            with m.If(take):  # the next sequence starts from zero
                m.d.sync += state[j].eq(sat & ~last.replicate(8))
        with m.If(take & (last | (self.mode == "sequence"))):
            m.d.sync += [full.eq(1), out.eq(Cat(*new, last))]
        return m


@dataclass
class _RunningSumSpec(StageSpec):
    name: str
    dim: int
    sequence_io: str = "last"

    @property
    def in_len(self) -> int:
        return self.dim

    @property
    def out_len(self) -> int:
        return self.dim

    @property
    def in_lanes(self) -> int:
        return self.dim

    @property
    def out_lanes(self) -> int:
        return self.dim

    def structure(self) -> dict[str, Any]:
        return {"kind": "test_running_sum", "name": self.name, "dim": self.dim,
                "sequence_io": self.sequence_io}

    def component(self, lanes: tuple[int, int], ff_style: str) -> Any:
        return _RunningSum(self.dim, self.sequence_io)

    def sequence_model(self, seqs: list[np.ndarray]) -> list[np.ndarray]:
        """Per sequence [T, dim] -> its states [T, dim] (mode "sequence") or [dim]."""
        out = []
        for x in seqs:
            s = np.zeros(self.dim, np.int64)
            steps = []
            for t in range(len(x)):
                s = np.clip(s + x[t], -128, 127)
                steps.append(s)
            out.append(np.array(steps) if self.sequence_io == "sequence" else steps[-1])
        return out


def _ports(top: AcceleratorTop) -> tuple[SimpleNamespace, SimpleNamespace]:
    src = SimpleNamespace(valid=top.s_axis_tvalid, ready=top.s_axis_tready,
                          payload=Cat(top.s_axis_tdata, top.s_axis_tlast))
    snk = SimpleNamespace(valid=top.m_axis_tvalid, ready=top.m_axis_tready,
                          payload=Cat(top.m_axis_tdata, top.m_axis_tlast))
    return src, snk


def _sequence_beats(top: AcceleratorTop, seqs: list[np.ndarray]) -> list[int]:
    """The host's stream: every sequence's steps back to back, ``in_lanes`` elements a
    beat, TLAST on each sequence's last beat -- nothing else."""
    inl, beats = top.in_lanes, []
    for x in seqs:
        flat = np.asarray(x).reshape(-1)
        n = len(flat) // inl
        for b in range(n):
            beats.append(pack_lanes(flat[b * inl:(b + 1) * inl], 8) | (b == n - 1) << 8 * inl)
    return beats


def _sequences(rng: np.random.Generator, n: int, dim: int, max_len: int) -> list[np.ndarray]:
    lengths = rng.integers(1, max_len + 1, n)
    lengths[:2] = (1, max_len)  # the shortest and the longest
    return [rng.integers(-60, 61, (int(t), dim)) for t in lengths]


@pytest.mark.parametrize("in_lanes,seed", [(None, 1), (2, 2), (1, 3)])
def test_sequence_output_mixed_lengths(in_lanes: int | None, seed: int) -> None:
    """Mode "sequence": one output beat per step, TLAST on each sequence's last; the
    input is exactly sum(lengths) x beats per step beats (no padding), random stalls."""
    rng = np.random.default_rng(seed)
    spec = _RunningSumSpec("rnn", 4, "sequence")
    top = AcceleratorTop([spec], in_lanes=in_lanes)
    seqs = _sequences(rng, 12, 4, 9)
    beats = _sequence_beats(top, seqs)
    steps = sum(len(x) for x in seqs)
    assert len(beats) == steps * (4 // top.in_lanes)  # no padding on the wire
    src, snk = _ports(top)
    (out,) = simulate_streams(top, [(src, beats)], [(snk, steps)], seed=seed)
    width = 8 * top.out_lanes
    want = spec.sequence_model(seqs)
    lasts = [w >> width for w in out]
    assert lasts == [int(t == len(x) - 1) for x in seqs for t in range(len(x))]
    got = np.array([unpack_lanes(w & ((1 << width) - 1), 4, 8) for w in out])
    np.testing.assert_array_equal(got, np.concatenate(want))


def test_last_step_then_fixed_stage() -> None:
    """Mode "last": one packet per sequence through an ordinary stage behind it."""
    rng = np.random.default_rng(7)
    rnn = _RunningSumSpec("rnn", 6, "last")
    fc = MVAUSpec("fc", 6, 4, pe=2, simd=3, weights=rng.integers(-127, 128, (4, 6)),
                  bias=rng.integers(-500, 500, 4), multiplier=rng.integers(1, 2**15, 4),
                  shift=rng.integers(17, 21, 4), relu=False)
    top = AcceleratorTop([rnn, fc], in_lanes=3, out_lanes=1)
    seqs = _sequences(rng, 10, 6, 7)
    src, snk = _ports(top)
    (out,) = simulate_streams(top, [(src, _sequence_beats(top, seqs))], [(snk, 4 * len(seqs))],
                              seed=4)
    assert [w >> 8 for w in out] == [int(i % 4 == 3) for i in range(4 * len(seqs))]
    got = np.array([unpack_lanes(w & 0xFF, 1, 8) for w in out]).reshape(len(seqs), 4)
    want = fc.model(np.array(rnn.sequence_model(seqs)))
    np.testing.assert_array_equal(got, want)
    assert top.describe()["sequence"] == "last"
    md = emit_markdown(top.registers, top.describe())
    assert "one input item is a sequence" in md and "no padding" in md


def test_counters_and_tlast_inside_a_step() -> None:
    """INPUTS and INFERENCES count sequences; TLAST on a beat inside a step sets
    STATUS.TLAST_ERROR (bit 3)."""
    top = AcceleratorTop([_RunningSumSpec("rnn", 2, "sequence")], in_lanes=1)
    bus = SimpleNamespace(**{n: getattr(top, f"s_axil_{n}") for n in (
        "awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp",
        "bvalid", "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid",
        "rready")})
    regs = top.describe()["registers"]
    seen: dict[str, Any] = {}

    async def send(ctx: Any, tlasts: list[int]) -> None:
        for k, last in enumerate(tlasts):
            ctx.set(top.s_axis_tvalid, 1)
            ctx.set(top.s_axis_tdata, k + 1)
            ctx.set(top.s_axis_tlast, last)
            await ctx.tick().until(top.s_axis_tready)
        ctx.set(top.s_axis_tvalid, 0)
        for _ in range(20):
            await ctx.tick()

    async def tb(ctx: Any) -> None:
        async def rd(name: str) -> int:
            data, resp = await axil_read(ctx, bus, regs[name])
            assert resp == OKAY
            return data
        ctx.set(top.m_axis_tready, 1)
        await send(ctx, [0, 0, 0, 1, 0, 1])  # sequences of 2 and 1 steps
        seen["ok"] = [await rd(n) for n in ("INPUTS", "INFERENCES", "STATUS")]
        await send(ctx, [1, 0])  # TLAST on the first beat of a step
        seen["bad"] = await rd("STATUS")

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen["ok"] == [2, 2, 0b0110]  # done, enabled; no TLAST error
    assert seen["bad"] & 0b1000


def test_recurrent_stage_placement() -> None:
    rng = np.random.default_rng(0)
    fc = MVAUSpec("fc", 4, 4, pe=1, simd=4, weights=rng.integers(-127, 128, (4, 4)),
                  multiplier=np.ones(4, np.int64), shift=np.full(4, 8))
    with pytest.raises(HardwareConfigError, match="must be the first stage"):
        AcceleratorTop([fc, _RunningSumSpec("rnn", 4, "last")])
    with pytest.raises(HardwareConfigError, match="must be the last stage"):
        AcceleratorTop([_RunningSumSpec("rnn", 4, "sequence"), fc])
    with pytest.raises(HardwareConfigError, match="none of"):
        AcceleratorTop([_RunningSumSpec("rnn", 4, "steps")])
    with pytest.raises(HardwareConfigError, match="one time step per beat"):
        AcceleratorTop([_RunningSumSpec("rnn", 4, "sequence")], out_lanes=2)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sequence", "last"])
def test_verilator_sequences(mode: str) -> None:
    """The batch harness's sequence loop on the Verilog: 64 sequences of lengths 1..50
    sent as exactly sum(lengths) x 2 beats (4 elements a step, 2 lanes) with stalls,
    bit-exact, INPUTS / INFERENCES one per sequence."""
    from fluid_hw.sim.harness import Harness

    rng = np.random.default_rng(11)
    spec = _RunningSumSpec("rnn", 4, mode)
    top = AcceleratorTop([spec], in_lanes=2)
    seqs = _sequences(rng, 64, 4, 50)
    lengths = [len(x) for x in seqs]
    with Harness(top) as h:
        res = h.run_sequences(np.concatenate(seqs), lengths, ready_prob=0.7, valid_prob=0.8,
                              seed=2)
        counters = h.counters()
        with pytest.raises(Exception, match="at least one step"):
            h.run_sequences(np.zeros((3, 4)), [3, 0])
    want = spec.sequence_model(seqs)
    np.testing.assert_array_equal(res.outputs, np.concatenate(want) if mode == "sequence"
                                  else np.array(want))
    assert counters["INPUTS"] == counters["INFERENCES"] == 64
    # each sequence's beats (2 a step) took at least as many cycles on the bus
    span = res.timestamps["in_last"] - res.timestamps["in_first"]
    assert (span >= 2 * np.array(lengths) - 1).all()
