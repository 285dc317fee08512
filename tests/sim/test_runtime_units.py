"""The table activation, average pool and residual join with runtime parameters on
Verilator, in one build: each run writes a fresh fuzzed parameter set through the
units' ``wr`` ports (the host's load format), then drives every stream with random
valid and ready; bit-exact against the behavioural models.  Build and driver as
``test_stage_units``."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fluid_hw.rtl import AvgPool, TableActivation, WindowGeometry, avgpool_model, table_model
from fluid_hw.rtl._util import pack_lanes, unpack_lanes
from fluid_hw.rtl.join import AddJoin, add_join_model, join_entry
from fluid_hw.rtl.requant import requant_entries

from ..rtl.test_join import random_params
from .test_stage_units import beats_of, build, driver_cpp, emit, images_of, run

pytestmark = pytest.mark.slow

LANES = {"tab": 4, "avg": 3, "ja": 2, "jb": 2}
GEOM = WindowGeometry(6, 6, 5, (3, 2), (2, 2), (1, 0, 1, 1), (1, 1))


class RuntimeUnits(wiring.Component):
    """Streams ``<unit>_i`` / ``<unit>_o`` and writers ``<unit>_wr`` as the stage-units
    driver expects: ``tab`` a 4-lane table, ``avg`` a 3-lane average pool (ECP5
    cells), ``ja`` / ``jb`` a 2-lane join's inputs a and b (ECP5 cells; its output on
    ``ja_o``, ``jb_o`` never valid, its ``wr`` as ``ja_wr``)."""

    def __init__(self) -> None:
        self.tab = TableActivation("tab", LANES["tab"], runtime=True)
        self.avg = AvgPool("avg", GEOM, LANES["avg"], runtime=True, ff_style="trellis")
        self.join = AddJoin("join", LANES["ja"], runtime=True, ff_style="trellis")
        members = {}
        for u, n in LANES.items():
            members[f"{u}_i"] = In(stream.Signature(8 * n))
            members[f"{u}_o"] = Out(stream.Signature(8 * n))
        for u, unit in (("tab", self.tab), ("avg", self.avg), ("ja", self.join)):
            members[f"{u}_wr"] = unit.signature.members["wr"]
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.tab, m.submodules.avg, m.submodules.join = self.tab, self.avg, self.join
        for u, unit in (("tab", self.tab), ("avg", self.avg)):
            wiring.connect(m, wiring.flipped(getattr(self, f"{u}_i")), unit.i)
            wiring.connect(m, unit.o, wiring.flipped(getattr(self, f"{u}_o")))
        wiring.connect(m, wiring.flipped(self.ja_i), self.join.a)
        wiring.connect(m, wiring.flipped(self.jb_i), self.join.b)
        wiring.connect(m, self.join.o, wiring.flipped(self.ja_o))
        m.d.comb += self.jb_o.valid.eq(0)
        for u, unit in (("tab", self.tab), ("avg", self.avg), ("ja", self.join)):
            wiring.connect(m, wiring.flipped(getattr(self, f"{u}_wr")), unit.wr)
        return m


@pytest.fixture(scope="module")
def exe():
    return build(emit(RuntimeUnits()), driver_cpp(list(LANES), ["tab", "avg", "ja"]))


@pytest.mark.parametrize("seed,p_valid,p_ready", [
    (1, 0.7, 0.6), (2, 1.0, 1.0), (3, 0.5, 0.9), (4, 0.8, 0.5)])
def test_runtime_units_bit_exact_on_verilator(exe, tmp_path, seed, p_valid, p_ready):
    rng = np.random.default_rng(seed)
    table = rng.integers(-128, 128, 256)
    m, n = int(rng.integers(1, 2**15)), int(rng.integers(12, 20))
    jp = {**random_params(random.Random(seed)), "relu": False}  # relu is built in
    if seed == 3:  # the widest shifts and multipliers, b the big input
        jp.update(ma=2**15 - 1, na=46, mb=2**15 - 1, nb=47)
    writes = [(0, 1, a, int(v) & 0xFF) for a, v in enumerate(table)]
    writes += [(1, 1, 0, requant_entries("avg", 1, None, np.array([m]), np.array([n]))[0])]
    writes += [(2, 1, 0, join_entry("join", jp["ma"], jp["na"], jp["mb"], jp["nb"]))]
    x_tab = rng.integers(-128, 128, (300, LANES["tab"]))
    ims = images_of(rng, GEOM, 3)
    a, b = rng.integers(-128, 128, (2, 400, LANES["ja"]))
    a[:2], b[:2] = -128, 127
    want = {"tab": table_model(x_tab, table),
            "avg": np.stack([avgpool_model(im, GEOM, m, n) for im in ims]),
            "ja": add_join_model(a, b, **jp)}
    streams = [([pack_lanes(v, 8) for v in x_tab], len(x_tab)),
               (beats_of(ims, LANES["avg"]), want["avg"].size // LANES["avg"]),
               ([pack_lanes(v, 8) for v in a], len(a)), ([pack_lanes(v, 8) for v in b], 0)]
    outs, cycles = run(exe, tmp_path, streams, writes, seed=seed, p_valid=p_valid,
                       p_ready=p_ready)
    for u, out in zip(("tab", "avg", "ja"), outs):
        got = np.array([v for w in out for v in unpack_lanes(w, LANES[u], 8)])
        np.testing.assert_array_equal(got.reshape(want[u].shape), want[u],
                                      err_msg=f"{u} {jp if u == 'ja' else ''}")
    assert outs[3] == []
    if p_valid == p_ready == 1.0:
        assert cycles < len(a) + 40  # the join at full rate
