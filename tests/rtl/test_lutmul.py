"""LUT multipliers (rtl._lutmul): every operand pair against numpy, in amaranth.sim
(``style="plain"``) and on Verilator (``style="trellis"``, the ``CCU2C`` cells through
their model), exactly :data:`LUT_PRODUCT_LATENCY` cycles after the operands; and the
cost table against what Yosys' ``synth_ecp5`` makes of one product."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from amaranth import Cat, Const, Module, Signal, signed
from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil
from amaranth.sim import Simulator

from fluid_hw.boards.devices import ECP5
from fluid_hw.boards.toolchain import parse_yosys_stat
from fluid_hw.rtl._lutmul import (
    LUT_PRODUCT_LATENCY,
    bipolar_product,
    lut_product,
    lut_product_cost,
    lut_products,
    product_modules,
)
from fluid_hw.rtl._util import HardwareConfigError
from fluid_hw.sim._tools import ensure_yosys
from fluid_hw.sim.build import sim_cells, verilate
from fluid_hw.sim.verilog import YOSYS_SCRIPT
from fluid_hw.tools import find_tool

# (weight bits or "bipolar", activation bits, copies side by side)
KINDS = [(8, 8, 64), (4, 8, 16), (2, 8, 4), (1, 8, 2), ("bipolar", 8, 2), (3, 5, 4),
         (7, 3, 8), (8, 2, 4), (2, 2, 1), (4, 4, 1)]


def expected(kind: int | str, bbits: int) -> np.ndarray:
    """Product of every (a, b) pair, pair ``i`` being ``a = i >> bbits``, ``b = i`` low
    bits, both read as two's complement (``a`` as 0 -> -1, 1 -> +1 when bipolar)."""
    abits = 1 if kind == "bipolar" else int(kind)
    idx = np.arange(1 << (abits + bbits))
    a, b = idx >> bbits, idx & ((1 << bbits) - 1)
    b = np.where(b >> (bbits - 1), b - (1 << bbits), b)
    if kind == "bipolar":
        return np.where(a == 1, b, -b)
    return np.where(a >> (abits - 1), a - (1 << abits), a) * b


def product_of(m: Module, kind: int | str, a: Signal, b: Signal, name: str,
               style: str) -> Signal:
    if kind == "bipolar":
        return bipolar_product(m, a, b, name, style=style)
    return lut_product(m, a, b, name, style=style)


@pytest.mark.parametrize("kind,bbits,copies", [
    pytest.param(*k, marks=pytest.mark.slow) if k[:2] == (8, 8) else k for k in KINDS])
def test_every_pair_in_amaranth_sim(kind, bbits, copies):
    """All pairs, ``copies`` products side by side fed one new pair each per cycle from a
    counter; product ``i`` at cycle ``t + 2`` is pair ``t * copies + i``."""
    abits = 1 if kind == "bipolar" else int(kind)
    total = 1 << (abits + bbits)
    cb = copies.bit_length() - 1
    cycles = total // copies
    m = Module()
    cnt = Signal(max(1, (cycles - 1).bit_length()))
    m.d.sync += cnt.eq(cnt + 1)
    outs = []
    for i in range(copies):
        word = Cat(Const(i, cb), cnt) if cb else cnt
        a, b = word[bbits:bbits + abits], word[:bbits].as_signed()
        outs.append(product_of(m, kind, a if kind == "bipolar" else a.as_signed(), b,
                               f"m{i}", "plain"))
    assert len(outs[0]) == abits + bbits
    got = np.zeros(total, dtype=np.int64)
    sim = Simulator(m)
    sim.add_clock(1e-6)

    async def bench(ctx):
        await ctx.tick().repeat(LUT_PRODUCT_LATENCY)
        for t in range(cycles):
            for i, o in enumerate(outs):
                got[t * copies + i] = ctx.get(o)
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    np.testing.assert_array_equal(got, expected(kind, bbits), err_msg=f"{kind} x {bbits}")


def test_products_sharing_a_chain_in_amaranth_sim():
    """lut_products: an int4 x int8 and an int2 x int3 product side by side, every pair."""
    m = Module()
    cnt = Signal(12)
    m.d.sync += cnt.eq(cnt + 1)
    pairs = [(cnt[8:12].as_signed(), cnt[:8].as_signed()), (cnt[3:5].as_signed(),
                                                            cnt[:3].as_signed())]
    outs = lut_products(m, pairs, "g")
    got: list[list[int]] = [[], []]
    sim = Simulator(m)
    sim.add_clock(1e-6)

    async def bench(ctx):
        await ctx.tick().repeat(LUT_PRODUCT_LATENCY)
        for _ in range(1 << 12):
            for g, o in zip(got, outs, strict=True):
                g.append(ctx.get(o))
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    np.testing.assert_array_equal(got[0], expected(4, 8))
    np.testing.assert_array_equal(got[1][:32], expected(2, 3))


def test_bad_operands_are_refused():
    m = Module()
    m._MustUse__used = True  # only the refusals are of interest
    with pytest.raises(HardwareConfigError, match=r"'w': a 9-bit weight.*MULT18X18D"):
        lut_product(m, Signal(signed(9)), Signal(signed(8)), "w")
    with pytest.raises(HardwareConfigError, match="style must be one of"):
        lut_product(m, Signal(signed(4)), Signal(signed(8)), "w", style="dsp")
    with pytest.raises(HardwareConfigError, match="bipolar product 'x': the weight has 2"):
        bipolar_product(m, Signal(2), Signal(signed(8)), "x")
    with pytest.raises(HardwareConfigError, match="not measured"):
        lut_product_cost(4, 12)


def _verilog(m: Module, ports: list[Signal]) -> str:
    """Verilog as the simulation flow emits it (fluid_hw.sim.verilog's Yosys passes)."""
    ensure_yosys()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        il = rtlil.convert(m, ports=ports, name="lutmul", emit_src=False)
        il += product_modules(il)
        yosys = find_yosys(lambda ver: ver >= (0, 40))
        script = [f"read_rtlil <<rtlil\n{il}\nrtlil", *YOSYS_SCRIPT, "write_verilog -norename"]
        return yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)


def _driver(lanes: list[tuple[int, int, int, int]], cycles: int) -> str:
    """C++: each cycle sets lane ``k``'s operands to pair ``(t * copies + i) mod total``
    (``lanes[k] = (abits, bbits, copies, i)``), then prints every product."""
    sets = "\n".join(
        f"    {{ long x = (t * {c} + {i}) % {1 << (ab + bb)}L; "
        f"top->a{k} = x >> {bb}; top->b{k} = x & {(1 << bb) - 1}; }}"
        for k, (ab, bb, c, i) in enumerate(lanes))
    prints = "\n".join(f'    std::printf("%x ", (unsigned)top->p{k});'
                       for k in range(len(lanes)))
    return f"""\
#include "Vaccel.h"
#include "verilated.h"
#include <cstdio>
int main() {{
  VerilatedContext ctx;
  Vaccel* top = new Vaccel{{&ctx}};
  top->clk = 0; top->rst = 0; top->eval();
  for (long t = 0; t < {cycles + LUT_PRODUCT_LATENCY}; t++) {{
{sets}
    top->eval();
{prints}
    std::printf("\\n");
    top->clk = 1; top->eval(); top->clk = 0; top->eval();
  }}
  delete top;
  return 0;
}}
"""


@pytest.mark.slow
def test_every_pair_on_verilator_with_ccu2c_cells(tmp_path):
    """The ``trellis`` products (``CCU2C`` instances) in the Verilog that Yosys would
    synthesise, on Verilator with the cell model, every pair of every kind, alone and
    four on one chain (lut_products)."""
    m = Module()
    ports: list[Signal] = []
    lanes: list[tuple[int, int, int, int]] = []
    owner: list[tuple[int | str, int]] = []
    def lane(kind: int | str, bbits: int) -> tuple[Signal, Signal]:
        k = len(lanes)
        abits = 1 if kind == "bipolar" else int(kind)
        a = Signal(1 if kind == "bipolar" else signed(abits), name=f"a{k}")
        b = Signal(signed(bbits), name=f"b{k}")
        lanes.append((abits, bbits, 1, 0))
        owner.append((kind, bbits))
        return a, b

    def out(p: Signal, a: Signal, b: Signal) -> None:
        po = Signal(len(p), name=f"p{len(ports) // 3}")
        m.d.comb += po.eq(p)
        ports.extend([a, b, po])

    for kind, bbits, _ in KINDS:  # one copy of each: C++ streams a pair per cycle
        a, b = lane(kind, bbits)
        out(product_of(m, kind, a, b, f"m{len(lanes)}", "trellis"), a, b)
    group = [lane(kind, bbits) for kind, bbits in ((4, 8), (8, 8), (3, 5), (8, 2))]
    for p, (a, b) in zip(lut_products(m, group, "g", style="trellis"), group, strict=True):
        out(p, a, b)
    cycles = max((1 << (ab + bb)) // c for ab, bb, c, _ in lanes)
    verilog = _verilog(m, ports)
    assert "CCU2C" in verilog
    (tmp_path / "top.v").write_text(verilog)
    (tmp_path / "main.cpp").write_text(_driver(lanes, cycles))
    exe = verilate([tmp_path / "top.v", *sim_cells(verilog, tmp_path)], "lutmul", tmp_path,
                   exe_sources=[tmp_path / "main.cpp"], output="Vlutmul")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=300)
    rows = out.stdout.splitlines()[LUT_PRODUCT_LATENCY:]
    got = np.array([[int(v, 16) for v in r.split()] for r in rows])
    for k, (ab, bb, c, i) in enumerate(lanes):
        kind, _ = owner[k]
        width = ab + bb
        total = 1 << (ab + bb)
        vals = got[:total // c, k]
        vals = np.where(vals >> (width - 1), vals - (1 << width), vals)
        np.testing.assert_array_equal(vals, expected(kind, bb)[i::c],
                                      err_msg=f"lane {k}: {kind} x {bb}, copy {i}")


def synthesise(tmp: Path, kind: int | str, abits: int, bbits: int) -> dict[str, int]:
    """Cells of one product (``trellis``, or ``"yosys"``: ``a * b`` registered twice)
    as Yosys' ``synth_ecp5 -nodsp`` maps it, the operands being the top's ports."""
    m = Module()
    a = Signal(1 if kind == "bipolar" else signed(abits), name="a")
    b = Signal(signed(bbits), name="b")
    if kind == "yosys":
        p1, p = Signal(signed(abits + bbits)), Signal(signed(abits + bbits))
        m.d.sync += [p1.eq(a * b), p.eq(p1)]
    else:
        p = product_of(m, kind, a, b, "m", "trellis")
    po = Signal(len(p), name="p")
    m.d.comb += po.eq(p)
    work = tmp / f"{kind}_{abits}x{bbits}"
    work.mkdir()
    il = rtlil.convert(m, ports=[a, b, po], name="top")
    (work / "top.il").write_text(il + product_modules(il))
    (work / "s.ys").write_text("read_rtlil top.il\nsynth_ecp5 -nodsp -top top\n"
                               "tee -q -o stat.json stat -json\n")
    subprocess.run([*find_tool("yosys"), "-q", "-s", "s.ys"], cwd=work, check=True,
                   capture_output=True, timeout=300)
    return parse_yosys_stat(work / "stat.json")


@pytest.mark.slow
@pytest.mark.parametrize("kind,abits,bbits", [(8, 8, 8), (4, 4, 8), (2, 2, 8), (1, 1, 8),
                                              ("bipolar", 1, 8), (4, 4, 4), (8, 8, 2),
                                              (2, 2, 2)])
def test_cost_table_is_what_yosys_makes(tmp_path, kind, abits, bbits):
    cells = synthesise(tmp_path, kind, abits, bbits)
    res = ECP5.count_resources(cells)
    cost = lut_product_cost(abits, bbits, bipolar=kind == "bipolar")
    assert res.get("carry", 0) == pytest.approx(cost.ccu2c, abs=1)
    assert cells.get("LUT4", 0) == pytest.approx(cost.lut4, abs=2)
    assert res["ff"] == cost.ff
    if (abits, bbits) == (8, 8):  # against Yosys' own mapping of a * b: under 1/3.5 of its LUTs
        own = ECP5.count_resources(synthesise(tmp_path, "yosys", abits, bbits))
        assert res["lut"] * 3.5 <= own["lut"], (res, own)


def test_cost_table_refuses_what_was_not_measured():
    c = lut_product_cost(8, 8)
    assert c.lut == c.lut4 + 2 * c.ccu2c
    with pytest.raises(HardwareConfigError, match="bipolar"):
        lut_product_cost(2, 8, bipolar=True)
