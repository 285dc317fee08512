"""Digits MLP and CNN inference on the GPU (fused and unfused kernels) against the CPU
executor: latency at batch 1 and throughput over batch sizes 1..4096.

    python benchmarks/bench_gpu.py [--out build/bench/gpu.json] [--quick]

Prints a table and writes JSON (schema ``fluid-hw/bench-gpu/1``) that the
FPGA-vs-GPU comparison reads::

    {"schema": "fluid-hw/bench-gpu/1",
     "gpu": {"present": bool, "name": str | null, "reason": str | null},
     "cpu": {"processor": str, "cores": int, "blas_threads": {...}},
     "results": [{"model": "mlp" | "cnn", "backend": "cpu" | "gpu-fused" | "gpu-unfused"
                  | "gpu-graph" (one CUDA graph, pinned buffers; adds "device_latency_ms")
                  (| "shim-fused" | "shim-unfused" with --host-shim),
                  "batch": int, "latency_ms": float (median of one run),
                  "throughput_per_s": float (images / s), "runs": int}, ...]}

Without a GPU (or CuPy) the CPU rows are measured and the GPU is reported absent.
Every timed run feeds host data and fetches the predictions back to the host, so
GPU times include the copies and a synchronisation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fluid_hw as fluid
from fluid_hw.frontend import models
from fluid_hw.ir.prune import prune

BATCHES = [1, 4, 16, 64, 256, 1024, 4096]
SCHEMA = "fluid-hw/bench-gpu/1"


def _gpu_status() -> tuple[bool, str | None, str | None]:
    try:
        from fluid_hw.backends.cuda.runtime import require_device

        cupy = require_device(0)
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return True, name.decode() if isinstance(name, bytes) else str(name), None
    except Exception as e:  # NoCUDADeviceError, or a broken CuPy install
        return False, None, str(e)


def _executors(gpu: bool, shim: bool) -> dict[str, Any]:
    exes: dict[str, Any] = {"cpu": fluid.Executor(fluid.CPUPlace())}
    if shim:  # the GPU code path on the host: a smoke test, not GPU times
        from fluid_hw.backends.cuda import CUDAExecutor, HostShimRuntime

        rt = HostShimRuntime(block=256, max_grid=1)
        exes["shim-fused"] = CUDAExecutor(runtime=rt, fuse=True)
        exes["shim-unfused"] = CUDAExecutor(runtime=rt, fuse=False)
    if gpu:
        from fluid_hw.backends.cuda import CUDAExecutor

        exes["gpu-fused"] = CUDAExecutor(fluid.CUDAPlace(0), fuse=True)
        exes["gpu-unfused"] = CUDAExecutor(fluid.CUDAPlace(0), fuse=False)
    return exes


def _time(exe: Any, prog: fluid.Program, feed: dict[str, np.ndarray], target: Any,
          budget_s: float, max_runs: int) -> tuple[float, int]:
    """Median seconds of one run (feed, run, fetch to host), after two warm-up runs."""
    for _ in range(2):
        exe.run(prog, feed=feed, fetch_list=[target])
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < 3 or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        exe.run(prog, feed=feed, fetch_list=[target])
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times)


def _graph_rows(model: str, infer: fluid.Program, m: Any, scope: fluid.Scope,
                shape: tuple[int, ...], batches: list[int], budget_s: float, max_runs: int,
                rng: np.random.Generator) -> list[dict[str, Any]]:
    """backend "gpu-graph": host to host through pinned buffers, and the graph launch
    alone on the device (CUDA events)."""
    from fluid_hw.backends.cuda import CUDAExecutor
    from fluid_hw.backends.cuda.graph import GraphRun

    exe = CUDAExecutor(fluid.CUDAPlace(0), fuse=True)
    rows = []
    for b in batches:
        x = rng.uniform(0, 16, (b, *shape)).astype(np.float32)
        g = GraphRun(exe, infer, {m.image.name: x}, [m.prediction.name], scope)
        feed = {m.image.name: x}
        for _ in range(2):
            g.run(feed)
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < max_runs and (len(times) < 3 or
                                         time.perf_counter() - start < budget_s):
            t0 = time.perf_counter()
            g.run(feed)
            times.append(time.perf_counter() - t0)
        sec = statistics.median(times)
        dev = statistics.median(g.device_time_s(20))
        rows.append({"model": model, "backend": "gpu-graph", "batch": b,
                     "latency_ms": sec * 1e3, "throughput_per_s": b / sec, "runs": len(times),
                     "device_latency_ms": dev * 1e3})
        print(f"  {model:4s} {'gpu-graph':12s} batch {b:5d}: {sec * 1e3:9.3f} ms  "
              f"{b / sec:12.0f} images/s  (graph on the device {dev * 1e3:.4f} ms)",
              flush=True)
    return rows


def run(batches: list[int], budget_s: float, max_runs: int, shim: bool = False
        ) -> dict[str, Any]:
    present, name, reason = _gpu_status()
    rng = np.random.default_rng(0)
    results = []
    for model in ("mlp", "cnn"):
        m = (models.digits_cnn if model == "cnn" else models.digits_mlp)()
        infer = prune(m.test_program, [m.image.name], [m.prediction.name])  # no loss, metric
        shape = (1, 8, 8) if model == "cnn" else (64,)
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            fluid.Executor().run(m.startup)
            for backend, exe in _executors(present, shim).items():
                for b in batches:
                    x = rng.uniform(0, 16, (b, *shape)).astype(np.float32)
                    feed = {m.image.name: x}
                    sec, runs = _time(exe, infer, feed, m.prediction.name, budget_s,
                                      max_runs)
                    results.append({"model": model, "backend": backend, "batch": b,
                                    "latency_ms": sec * 1e3, "throughput_per_s": b / sec,
                                    "runs": runs})
                    print(f"  {model:4s} {backend:12s} batch {b:5d}: {sec * 1e3:9.3f} ms  "
                          f"{b / sec:12.0f} images/s", flush=True)
            if present:  # the steady state as one CUDA graph, pinned host buffers
                results += _graph_rows(model, infer, m, scope, shape, batches, budget_s,
                                       max_runs, rng)
    return {"schema": SCHEMA,
            "gpu": {"present": present, "name": name, "reason": reason},
            "cpu": {"processor": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(),
                    # numpy's BLAS threads: on a loaded 2-core machine set them to 1
                    "blas_threads": {k: os.environ.get(k) for k in
                                     ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}},
            "results": results}


def table(report: dict[str, Any]) -> str:
    rows = report["results"]
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    batches = sorted({r["batch"] for r in rows})
    out = []
    g = report["gpu"]
    out.append(f"GPU: {g['name']}" if g["present"] else f"GPU: absent ({g['reason']})")
    for model in ("mlp", "cnn"):
        out.append(f"\n{model.upper()}: latency at batch 1 (ms), throughput (images/s)")
        head = f"{'batch':>7s}" + "".join(f"{b:>16s}" for b in backends)
        out.append(head)
        for b in batches:
            cells = []
            for be in backends:
                r = next((r for r in rows if r["model"] == model and r["backend"] == be
                          and r["batch"] == b), None)
                if r is None:
                    cells.append(f"{'-':>16s}")
                elif b == 1:
                    cells.append(f"{r['latency_ms']:>9.3f} ms/{r['throughput_per_s']:>4.0f}")
                else:
                    cells.append(f"{r['throughput_per_s']:>16.0f}")
            out.append(f"{b:>7d}" + "".join(cells))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/bench/gpu.json", help="JSON report path")
    ap.add_argument("--quick", action="store_true", help="batches 1, 64, 1024 only; short")
    ap.add_argument("--budget", type=float, default=0.3, help="seconds per measurement")
    ap.add_argument("--host-shim", action="store_true",
                    help="also run the CUDA executor on the host shim (checks the GPU code "
                         "path without a GPU; its times are not GPU times)")
    args = ap.parse_args(argv)
    batches = [1, 64, 1024] if args.quick else BATCHES
    print("fluid-hw GPU benchmark (digits MLP and CNN inference)", flush=True)
    report = run(batches, args.budget / (3 if args.quick else 1), 200, args.host_shim)
    print()
    print(table(report))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"\nJSON: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
