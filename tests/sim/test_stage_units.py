"""The depthwise convolution, average pool and table activation on Verilator, in one
build: small fuzzed instances side by side in one top (ECP5 cells simulated through
their models, runtime weights loaded through ``wr``), each stream driven with random
valid and ready by a C++ loop, bit-exact against the behavioural models."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from amaranth import Module
from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil
from amaranth.lib import wiring

from fluid_hw.rtl import (
    AvgPool,
    DepthwiseConv,
    TableActivation,
    WindowGeometry,
    avgpool_model,
    depthwise_model,
    dw_weight_entries,
    pack_lanes,
    table_model,
    unpack_lanes,
)
from fluid_hw.rtl.requant import requant_entries
from fluid_hw.sim import BuildError
from fluid_hw.sim._tools import cache_dir, ensure_yosys, verilator_version
from fluid_hw.sim.build import build_lock, keep_failed, sim_cells, slim, verilate
from fluid_hw.sim.verilog import YOSYS_SCRIPT

pytestmark = pytest.mark.slow

TOP = "stage_units"


class Units(wiring.Component):
    """Components side by side: unit ``n``'s ports become ``n_i``, ``n_o`` (and
    ``n_wr``)."""

    def __init__(self, units: dict[str, wiring.Component]) -> None:
        self.units = units
        members = {}
        for n, u in units.items():
            for port, member in u.signature.members.items():
                members[f"{n}_{port}"] = member
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for n, u in self.units.items():
            m.submodules[n] = u
            wiring.connect(m, wiring.flipped(getattr(self, f"{n}_i")), u.i)
            wiring.connect(m, u.o, wiring.flipped(getattr(self, f"{n}_o")))
            if "wr" in u.signature.members:
                wiring.connect(m, wiring.flipped(getattr(self, f"{n}_wr")), u.wr)
        return m


def driver_cpp(names: list[str], writers: list[str]) -> str:
    """A C++ loop driving stream ``n_i`` / draining ``n_o`` of every unit with random
    valid and ready; first the ``wr`` writes.  Stimulus file: ``seed p_valid p_ready
    max_cycles``, the writes (``count``, then ``unit en addr data``), per unit the input
    beats (``count`` then hex words) and the expected output count.  Prints, per unit, the
    output beats as one line of hex words."""
    n = len(names)

    def port(unit: str, name: str) -> str:  # Verilator escapes "__" in port names
        return f"top->{unit}_{name}".replace("__", "___05F")

    set_in = "\n".join(
        f"      case {k}: {port(u, 'i__valid')} = v; {port(u, 'i__payload')} = p; break;"
        for k, u in enumerate(names))
    get_in_ready = "\n".join(f"      case {k}: return {port(u, 'i__ready')};"
                             for k, u in enumerate(names))
    set_out_ready = "\n".join(f"      case {k}: {port(u, 'o__ready')} = r; break;"
                              for k, u in enumerate(names))
    get_out = "\n".join(
        f"      case {k}: *p = (uint64_t){port(u, 'o__payload')}; "
        f"return {port(u, 'o__valid')};" for k, u in enumerate(names))
    set_wr = "\n".join(
        f"      case {k}: {port(u, 'wr__en')} = en; {port(u, 'wr__addr')} = a; "
        f"{port(u, 'wr__data')} = d; break;" for k, u in enumerate(writers))
    return f"""\
#include "Vaccel.h"
#include "verilated.h"
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

static Vaccel* top;
static void set_in(int k, int v, uint64_t p) {{
  switch (k) {{
{set_in}
  }}
}}
static int in_ready(int k) {{
  switch (k) {{
{get_in_ready}
  }}
  return 0;
}}
static void set_out_ready(int k, int r) {{
  switch (k) {{
{set_out_ready}
  }}
}}
static int get_out(int k, uint64_t* p) {{
  switch (k) {{
{get_out}
  }}
  return 0;
}}
static void set_wr(int k, uint64_t en, uint64_t a, uint64_t d) {{
  switch (k) {{
{set_wr}
  default: (void)en; (void)a; (void)d;
  }}
}}
static void tick() {{
  top->clk = 1; top->eval();
  top->clk = 0; top->eval();
}}

int main(int argc, char** argv) {{
  const int N = {n}, NW = {len(writers)};
  VerilatedContext ctx;
  top = new Vaccel{{&ctx}};
  FILE* f = std::fopen(argv[1], "r");
  unsigned long seed; double pv, pr; long max_cycles, nw;
  if (std::fscanf(f, "%lu %lf %lf %ld %ld", &seed, &pv, &pr, &max_cycles, &nw) != 5) return 3;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  top->clk = 0; top->rst = 1; top->eval();
  for (int i = 0; i < 4; i++) tick();
  top->rst = 0; top->eval();
  for (long w = 0; w < nw; w++) {{
    int k; unsigned long long en, a, d;
    if (std::fscanf(f, "%d %llx %llx %llx", &k, &en, &a, &d) != 4) return 3;
    set_wr(k, en, a, d); top->eval(); tick();
  }}
  for (int k = 0; k < NW; k++) set_wr(k, 0, 0, 0);
  std::vector<std::vector<uint64_t>> in(N), out(N);
  std::vector<long> want(N);
  std::vector<size_t> next(N, 0);
  std::vector<int> offering(N, 0);
  for (int k = 0; k < N; k++) {{
    long c; if (std::fscanf(f, "%ld", &c) != 1) return 3;
    in[k].resize(c);
    for (long i = 0; i < c; i++) {{
      unsigned long long v; if (std::fscanf(f, "%llx", &v) != 1) return 3; in[k][i] = v;
    }}
    if (std::fscanf(f, "%ld", &want[k]) != 1) return 3;
  }}
  long cycle = 0, extra = 0;
  std::vector<int> rdy(N), took(N);
  for (;; cycle++) {{
    bool done = true;
    for (int k = 0; k < N; k++) done = done && (long)out[k].size() >= want[k];
    if (done || cycle >= max_cycles) break;
    for (int k = 0; k < N; k++) {{
      if (!offering[k] && next[k] < in[k].size() && u01(rng) < pv) offering[k] = 1;
      set_in(k, offering[k], offering[k] ? in[k][next[k]] : 0);
      rdy[k] = (long)out[k].size() < want[k] && u01(rng) < pr;
      set_out_ready(k, rdy[k]);
    }}
    top->eval();
    for (int k = 0; k < N; k++) {{
      took[k] = offering[k] && in_ready(k);
      uint64_t p;
      if (get_out(k, &p) && rdy[k]) out[k].push_back(p);
    }}
    tick();
    for (int k = 0; k < N; k++) if (took[k]) {{ next[k]++; offering[k] = 0; }}
  }}
  // nothing more may come out (nothing duplicated)
  for (int k = 0; k < N; k++) {{ set_in(k, 0, 0); set_out_ready(k, 1); }}
  for (int c = 0; c < 64; c++) {{
    top->eval();
    for (int k = 0; k < N; k++) {{ uint64_t p; extra += get_out(k, &p); }}
    tick();
  }}
  for (int k = 0; k < N; k++) {{
    for (uint64_t v : out[k]) std::printf("%llx ", (unsigned long long)v);
    std::printf("\\n");
  }}
  std::printf("%ld %ld\\n", cycle, extra);
  delete top;
  return cycle >= max_cycles ? 2 : 0;
}}
"""


def emit(top: wiring.Component) -> str:
    """Verilog of ``top`` as :func:`fluid_hw.sim.emit_verilog` makes it (same Yosys
    passes), for a component that is not a whole accelerator."""
    ensure_yosys()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        il = rtlil.convert(top, name=TOP, emit_src=False)
        yosys = find_yosys(lambda ver: ver >= (0, 40))
        script = [f"read_rtlil <<rtlil\n{il}\nrtlil", *YOSYS_SCRIPT, "write_verilog -norename"]
        return yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)


def build(verilog: str, cpp: str) -> Path:
    """The simulator executable, built once per Verilog and driver (cached)."""
    key = hashlib.sha256("\0".join([verilog, cpp, verilator_version()]).encode()
                         ).hexdigest()[:24]
    root = cache_dir() / "units"
    exe = root / key / "obj" / "Vsim"
    if exe.exists():
        return exe
    with build_lock(root / f"{key}.lock"):
        if exe.exists():
            return exe
        work = root / f"{key}.{os.getpid()}.tmp"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "top.v").write_text(verilog)
        (work / "main.cpp").write_text(cpp)
        try:
            verilate([work / "top.v", *sim_cells(verilog, work)], TOP, work,
                     exe_sources=[work / "main.cpp"], output="Vsim")
        except BuildError:
            keep_failed(work, root / key)
            raise
        slim(work)
        shutil.rmtree(root / key, ignore_errors=True)
        os.replace(work, root / key)
    return exe


def run(exe: Path, tmp: Path, streams: list[tuple[list[int], int]],
        writes: list[tuple[int, int, int, int]], *, seed: int, p_valid: float,
        p_ready: float, max_cycles: int = 400_000) -> tuple[list[list[int]], int]:
    lines = [f"{seed} {p_valid} {p_ready} {max_cycles} {len(writes)}"]
    lines += [f"{k} {en:x} {a:x} {d:x}" for k, en, a, d in writes]
    for beats, want in streams:
        lines += [str(len(beats)), " ".join(f"{b:x}" for b in beats) or "", str(want)]
    stim = tmp / f"stim{seed}.txt"
    stim.write_text("\n".join(lines) + "\n")
    p = subprocess.run([str(exe), str(stim)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"simulation failed ({p.returncode}): {p.stdout[-500:]}{p.stderr}"
    rows = p.stdout.splitlines()
    outs = [[int(v, 16) for v in row.split()] for row in rows[:len(streams)]]
    cycles, extra = (int(v) for v in rows[len(streams)].split())
    assert extra == 0, f"{extra} output beats after the expected ones"
    return outs, cycles


def beats_of(images, lanes):
    flat = np.concatenate([np.asarray(im).reshape(-1) for im in images])
    return [pack_lanes(flat[i:i + lanes], 8) for i in range(0, len(flat), lanes)]


def images_of(rng, geom, n):
    return [rng.integers(-128, 128, (geom.height, geom.width, geom.channels))
            for _ in range(n)]


@pytest.fixture(scope="module")
def design():
    """Fuzzed (seeded) instances: a const depthwise conv (ECP5 cells, requantised,
    relu), a runtime one (int32 outputs), an average pool and a table activation."""
    rng = np.random.default_rng(2024)
    g_a = WindowGeometry(4, 7, 6, (3, 3), (2, 1), (1, 0, 2, 1), (1, 2))
    g_b = WindowGeometry(3, 6, 5, (5, 3), (1, 2), (2, 1, 2, 0), (1, 1))
    g_p = WindowGeometry(6, 6, 5, (3, 2), (2, 2), (1, 0, 1, 1), (1, 1))
    w_a = rng.integers(-128, 128, (4, 1, 3, 3))
    p_a = {"bias": rng.integers(-2000, 2000, 4), "multiplier": rng.integers(2**12, 2**15, 4),
           "shift": rng.integers(21, 23, 4) + 1}
    table = rng.integers(-128, 128, 256)
    pool_scale = (round(2**17 / 6), 17)
    units = {
        "dwa": DepthwiseConv("dwa", g_a, 2, weights=w_a, relu=True, ff_style="trellis", **p_a),
        "dwb": DepthwiseConv("dwb", g_b, 1, runtime=True, requantize=False, ff_style="trellis"),
        "avg": AvgPool("avg", g_p, 3, multiplier=pool_scale[0], shift=pool_scale[1],
                       ff_style="trellis"),
        "tab": TableActivation("tab", 4, table),
    }
    t0 = time.perf_counter()
    verilog = emit(Units(units))
    names = list(units)
    exe = build(verilog, driver_cpp(names, ["dwb"]))
    return {"exe": exe, "units": units, "names": names, "geoms": (g_a, g_b, g_p),
            "w_a": w_a, "p_a": p_a, "table": table, "pool_scale": pool_scale,
            "build_s": time.perf_counter() - t0}


@pytest.mark.parametrize("seed,p_valid,p_ready", [(1, 0.7, 0.6), (2, 1.0, 1.0)])
def test_units_bit_exact_on_verilator(design, tmp_path, seed, p_valid, p_ready):
    rng = np.random.default_rng(seed)
    g_a, g_b, g_p = design["geoms"]
    units = design["units"]
    n = 3  # images back to back
    # runtime weights of the second depthwise conv: a fresh set per run
    w_b = rng.integers(-128, 128, (3, 1, 5, 3))
    bias_b = rng.integers(-2**20, 2**20, 3)
    writes = [(0, 1 << 0, a, word) for a, word in enumerate(dw_weight_entries(w_b, 1)[0])]
    writes += [(0, 1 << 1, a, e) for a, e in enumerate(requant_entries("dwb", 3, bias_b, None,
                                                                       None))]
    ims = {k: images_of(rng, g, n) for k, g in (("dwa", g_a), ("dwb", g_b), ("avg", g_p))}
    x_tab = rng.integers(-128, 128, (300, 4))
    want = {
        "dwa": np.stack([depthwise_model(im, design["w_a"], g_a, relu=True, **design["p_a"])
                         for im in ims["dwa"]]),
        "dwb": np.stack([depthwise_model(im, w_b, g_b, bias_b) for im in ims["dwb"]]),
        "avg": np.stack([avgpool_model(im, g_p, *design["pool_scale"]) for im in ims["avg"]]),
        "tab": table_model(x_tab, design["table"]),
    }
    lanes = {"dwa": 2, "dwb": 1, "avg": 3, "tab": 4}
    bits = {k: 32 if k == "dwb" else 8 for k in lanes}
    streams = []
    for k in design["names"]:
        beats = [pack_lanes(b, 8) for b in x_tab] if k == "tab" else beats_of(ims[k], lanes[k])
        streams.append((beats, want[k].size // lanes[k]))
    outs, cycles = run(design["exe"], tmp_path, streams, writes, seed=seed, p_valid=p_valid,
                       p_ready=p_ready)
    for k, out in zip(design["names"], outs):
        got = np.array([v for w in out for v in unpack_lanes(w, lanes[k], bits[k])])
        np.testing.assert_array_equal(got.reshape(want[k].shape), want[k], err_msg=k)
    assert units["dwa"].out_bits == 8 and units["dwb"].out_bits == 32
    assert cycles > 0
