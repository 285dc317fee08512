"""The channel concat on Verilator, in one build: fuzzed (seeded) concat units side by
side -- with ECP5 cells (``ff_style="trellis"``: MULT18X18D and TRELLIS_FF through
their models) and plain, two and three inputs, with and without rescaling, odd
blocks, lanes 1 to 3 -- every input driven with its own random valid and every output
with random ready, bit-exact against the behavioural model.  Build and driver as
``test_stage_units``."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fluid_hw.rtl._util import pack_lanes, unpack_lanes
from fluid_hw.rtl.concat import ConcatJoin, concat_model

from .test_stage_units import build, driver_cpp, emit, run

pytestmark = pytest.mark.slow


def _units() -> dict[str, ConcatJoin]:
    """Three rescaling units (one plain, two with ECP5 cells) and one without rescaling,
    their constants fuzzed from a fixed seed."""
    r = random.Random(2025)

    def scaled() -> tuple[int, int]:
        return r.choice([(1, 0), (r.randint(2**14, 2**15 - 1), r.randint(14, 17)),
                         (r.randint(1, 2**15 - 1), r.randint(0, 30))])

    out = {}
    for name, lanes, blocks, ff, plain in (("c0", 1, [5, 3], "trellis", False),
                                           ("c1", 3, [6, 3, 9], "trellis", False),
                                           ("c2", 2, [2, 4], "plain", False),
                                           ("c3", 1, [3, 7, 1], "plain", True)):
        ks = [(1, 0)] * len(blocks) if plain else [scaled() for _ in blocks]
        if not plain and all(k == (1, 0) for k in ks):
            ks[-1] = (24355, 15)
        out[name] = ConcatJoin(name, lanes, blocks, multipliers=[m for m, _ in ks],
                               shifts=[n for _, n in ks], relu=r.random() < 0.5,
                               ff_style=ff)
    return out


class ConcatUnits(wiring.Component):
    """Streams ``<unit><port>_i`` / ``<unit><port>_o`` as the stage-units driver expects:
    ``<unit>a`` is the unit's first input and its output, ``<unit>b``, ... its other
    inputs (their ``_o`` never valid)."""

    def __init__(self, units: dict[str, ConcatJoin]) -> None:
        self.units = units
        members = {}
        for n, u in units.items():
            for p in u.ports:
                members[f"{n}{p}_i"] = In(stream.Signature(8 * u.lanes))
                members[f"{n}{p}_o"] = Out(stream.Signature(8 * u.lanes))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for n, u in self.units.items():
            m.submodules[n] = u
            for p in u.ports:
                wiring.connect(m, wiring.flipped(getattr(self, f"{n}{p}_i")), getattr(u, p))
                if p != "a":
                    m.d.comb += getattr(self, f"{n}{p}_o").valid.eq(0)
            wiring.connect(m, u.o, wiring.flipped(getattr(self, f"{n}a_o")))
        return m


@pytest.fixture(scope="module")
def design():
    units = _units()
    names = [f"{n}{p}" for n, u in units.items() for p in u.ports]
    return {"exe": build(emit(ConcatUnits(units)), driver_cpp(names, [])), "units": units}


@pytest.mark.parametrize("seed,p_valid,p_ready", [(1, 0.7, 0.6), (2, 1.0, 1.0), (3, 0.4, 0.9)])
def test_concat_units_on_verilator(design, tmp_path, seed, p_valid, p_ready):
    rng = np.random.default_rng(seed)
    groups = 40
    streams, want = [], {}
    for n, u in design["units"].items():
        xs = [rng.integers(-128, 128, groups * b) for b in u.blocks]
        for x in xs:
            x[:2] = -128, 127
        want[n] = concat_model([x[None] for x in xs], u.blocks, groups,
                               u.multipliers, u.shifts, u.relu)
        total = groups * sum(u.blocks) // u.lanes
        for p, x in enumerate(xs):
            beats = [pack_lanes(v, 8) for v in x.reshape(-1, u.lanes)]
            streams.append((beats, total if p == 0 else 0))
    outs, cycles = run(design["exe"], tmp_path, streams, [], seed=seed, p_valid=p_valid,
                       p_ready=p_ready)
    k = 0
    for n, u in design["units"].items():
        got = np.array([unpack_lanes(w, u.lanes, 8) for w in outs[k]]).reshape(1, -1)
        np.testing.assert_array_equal(got, want[n], err_msg=n)
        assert all(outs[k + p] == [] for p in range(1, len(u.ports)))
        k += len(u.ports)
    if p_valid == p_ready == 1.0:  # a beat a cycle through every unit
        longest = max(groups * sum(u.blocks) // u.lanes for u in design["units"].values())
        assert cycles < longest + 40
