"""The residual join and fork on Verilator, in one build: a join with ECP5 cells
(``ff_style="trellis"``: MULT18X18D and TRELLIS_FF through their models) driven on
both inputs with independent random valid, and a residual block (fork, a long branch
of two table activations, a skip FIFO, a join), each with random ready, bit-exact
against the behavioural models.  Build and driver as ``test_stage_units``."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fluid_hw.rtl._util import pack_lanes, unpack_lanes
from fluid_hw.rtl.fork import Fork
from fluid_hw.rtl.join import AddJoin, add_join_model
from fluid_hw.rtl.stream import StreamFIFO
from fluid_hw.rtl.table import TableActivation, table_model

from .test_stage_units import build, driver_cpp, emit, run

pytestmark = pytest.mark.slow

LANES = 4
JOIN = {"ma": 23170, "na": 15, "mb": 5, "nb": 2, "relu": False}  # 0.71 a + 1.25 b
BLOCK = {"ma": 3, "na": 2, "mb": 1, "nb": 1, "relu": True}        # relu(0.75 t(x) + 0.5 x)


class JoinUnits(wiring.Component):
    """Streams ``<unit>_i`` / ``<unit>_o`` as the stage-units driver expects: unit ``ja``
    is the join's ``a`` input and its output, ``jb`` its ``b`` input (``jb_o`` never
    valid), ``rb`` the residual block."""

    def __init__(self) -> None:
        self.join = AddJoin("join", LANES, ff_style="trellis", **JOIN)
        self.table = (np.arange(256) * 37 + 11) % 256 - 128  # a scrambling table
        w = 8 * LANES
        super().__init__({f"{u}_{p}": (In if p == "i" else Out)(stream.Signature(w))
                          for u in ("ja", "jb", "rb") for p in ("i", "o")})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        w = 8 * LANES
        m.submodules.join = j = self.join
        wiring.connect(m, wiring.flipped(self.ja_i), j.a)
        wiring.connect(m, wiring.flipped(self.jb_i), j.b)
        wiring.connect(m, j.o, wiring.flipped(self.ja_o))
        m.d.comb += self.jb_o.valid.eq(0)
        # residual block: o = relu(0.75 * t(t(x)) + 0.5 * x)
        m.submodules.fork = fork = Fork(w, 2)
        m.submodules.t0 = t0 = TableActivation("t0", LANES, self.table)
        m.submodules.t1 = t1 = TableActivation("t1", LANES, self.table)
        m.submodules.skip = skip = StreamFIFO(w, 8)
        m.submodules.block_join = bj = AddJoin("block", LANES, ff_style="trellis", **BLOCK)
        wiring.connect(m, wiring.flipped(self.rb_i), fork.i)
        wiring.connect(m, fork.o0, t0.i)
        wiring.connect(m, t0.o, t1.i)
        wiring.connect(m, t1.o, bj.a)
        wiring.connect(m, fork.o1, skip.i)
        wiring.connect(m, skip.o, bj.b)
        wiring.connect(m, bj.o, wiring.flipped(self.rb_o))
        return m


@pytest.fixture(scope="module")
def design():
    top = JoinUnits()
    names = ["ja", "jb", "rb"]
    return {"exe": build(emit(top), driver_cpp(names, [])), "table": top.table}


@pytest.mark.parametrize("seed,p_valid,p_ready", [(1, 0.7, 0.6), (2, 1.0, 1.0), (3, 0.4, 0.9)])
def test_join_and_block_on_verilator(design, tmp_path, seed, p_valid, p_ready):
    rng = np.random.default_rng(seed)
    n = 500
    a, b, x = (rng.integers(-128, 128, (n, LANES)) for _ in range(3))
    a[:2], b[:2] = -128, 127
    beats = [[pack_lanes(v, 8) for v in arr] for arr in (a, b, x)]
    streams = [(beats[0], n), (beats[1], 0), (beats[2], n)]
    outs, cycles = run(design["exe"], tmp_path, streams, [], seed=seed, p_valid=p_valid,
                       p_ready=p_ready)
    got = [np.array([unpack_lanes(wd, LANES, 8) for wd in out]) for out in outs]
    np.testing.assert_array_equal(got[0], add_join_model(a, b, **JOIN))
    assert outs[1] == []
    t = design["table"]
    np.testing.assert_array_equal(got[2], add_join_model(table_model(table_model(x, t), t),
                                                         x, **BLOCK))
    if p_valid == p_ready == 1.0:
        assert cycles < n + 40  # full rate through both
