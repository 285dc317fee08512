"""Simulation speed of the FPGA back end on the digits-MLP accelerator (64-128-64-10,
int8, PE x SIMD folding, const weights):

* Amaranth -> Verilog time (RTLIL + Yosys), uncached;
* Verilator builds (batch harness, cocotb), uncached unless --cached;
* simulated cycles per second: the ctypes batch harness (C++ stimulus loop) against
  cocotb driving every cycle from Python, on the same design, and their ratio.

    python benchmarks/bench_sim.py [--vectors 4000] [--cocotb-vectors 20] [--cached]

Both speeds are wall-clock (the harness's CPU-time speed is printed too: on a busy
machine wall-clock includes waiting for a core).  Goals: harness >= 1 M cycles/s and
>= 20x cocotb.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from itertools import pairwise

import numpy as np

from fluid_hw.hls import MVAUStage, estimate_pipeline
from fluid_hw.rtl import AcceleratorTop
from fluid_hw.sim import Harness, emit_verilog, run_cocotb
from fluid_hw.sim.build import build_harness
from fluid_hw.sim.cocotb_runner import build_cocotb

DIMS = (64, 128, 64, 10)
FOLDING = ((8, 8), (4, 16), (2, 8))  # (pe, simd): 128, 128, 40 cycles per vector


def digits_mlp(seed: int = 0) -> AcceleratorTop:
    rng = np.random.default_rng(seed)
    stages = []
    for i, ((k, c), (pe, simd)) in enumerate(zip(pairwise(DIMS), FOLDING)):
        stages.append(MVAUStage.from_fc(
            f"fc{i + 1}", rng.integers(-127, 128, (k, c)), bias=rng.integers(-999, 999, c),
            multiplier=rng.integers(2**13, 2**15, c), shift=rng.integers(21, 24, c),
            relu=i < 2, pe=pe, simd=simd))
    return AcceleratorTop(stages, name="digits_mlp")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vectors", type=int, default=4000)
    ap.add_argument("--cocotb-vectors", type=int, default=20)
    ap.add_argument("--cached", action="store_true", help="reuse cached builds")
    args = ap.parse_args()
    private = None
    if not args.cached:  # a private cache, so that every step is measured
        private = tempfile.mkdtemp(prefix="fluid-hw-bench-")
        os.environ["FLUID_HW_CACHE"] = private
    try:
        run(args)
    finally:
        if private:
            shutil.rmtree(private, ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    top = digits_mlp()
    rows: list[tuple[str, str]] = []

    t0 = time.perf_counter()
    res = emit_verilog(top, use_cache=False)
    rows.append(("Amaranth -> Verilog (64-128-64-10)",
                 f"{time.perf_counter() - t0:.2f} s ({len(res.text) / 1e3:.0f} kB)"))
    t0 = time.perf_counter()
    hb = build_harness(top)
    rows.append(("Verilator build, batch harness",
                 f"{time.perf_counter() - t0:.1f} s" + (" (cached)" if hb.cached else "")))
    t0 = time.perf_counter()
    build_cocotb(top)
    rows.append(("Verilator build, cocotb", f"{time.perf_counter() - t0:.1f} s"))

    x = np.random.default_rng(1).integers(-128, 128, (args.vectors, DIMS[0]))
    with Harness(hb) as h:
        h.run(x[:50])  # warm up
        c0, w0 = time.process_time(), time.perf_counter()
        run = h.run(x)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    exact = np.array_equal(run.outputs, top.model(x))
    harness_cps = run.cycles / wall
    rows.append(("harness: cycles / wall s", f"{harness_cps / 1e6:.2f} M "
                 f"({run.cycles} cycles, {args.vectors} vectors, bit-exact: {exact})"))
    rows.append(("harness: cycles / CPU s", f"{run.cycles / cpu / 1e6:.2f} M"))

    xc = x[:args.cocotb_vectors]
    co = run_cocotb(top, xc, top.model(xc), ready_prob=1.0, valid_prob=1.0)
    rows.append(("cocotb per-cycle: cycles / wall s",
                 f"{co.cycles_per_s / 1e3:.1f} k ({co.cycles} cycles)"))
    rows.append(("ratio harness / cocotb", f"{harness_cps / co.cycles_per_s:.0f}x"))
    est = estimate_pipeline(top.specs)
    ii = float(np.median(np.diff(run.timestamps["out_last"][len(x) // 2:])))
    rows.append(("II estimated / measured", f"{est.initiation_interval} / {ii:.0f} cycles"))
    lat = int(run.timestamps["out_last"][0] - run.timestamps["in_first"][0])
    rows.append(("latency estimated / measured", f"{est.latency_cycles} / {lat} cycles"))

    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)} | value")
    print(f"{'-' * width}-|------")
    for k, v in rows:
        print(f"{k.ljust(width)} | {v}")


if __name__ == "__main__":
    main()
