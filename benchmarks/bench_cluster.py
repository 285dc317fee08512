"""Cluster back end: step time of the digits MLP for 1 vs 2 trainers, parameter
servers vs collective all-reduce, on this machine; plus the MPI latency and
bandwidth that the scaling model of docs/cluster.md takes as inputs.

    python benchmarks/bench_cluster.py [--steps 300] [--batch-size 64] [--repeat 3]

Every configuration trains the same global batch (strong scaling: T trainers
take batch/T rows each) through ``fluid-hw launch``; the figure is trainer 0's
mean step time after start-up (best of ``--repeat`` runs, as other work on the
machine only ever slows a run down).  ``--pingpong`` (run under mpiexec by
this script) measures one-way message time between two ranks for a range of
sizes and fits ``t(n) = alpha + n / bandwidth``.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fluid_hw.backends.cluster.launch import BLAS_THREAD_VARS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_digits_dist.py"
_MS = re.compile(r"^\[trainer 0\] \d+ steps in [\d.]+ s, ([\d.]+) ms/step", re.M)
_LOCAL_MS = re.compile(r"^\d+ steps in [\d.]+ s, ([\d.]+) ms/step", re.M)

CONFIGS = [  # (label, mode, pservers, trainers)
    ("local, 1 process", "local", 0, 1),
    ("pserver sync, 2 ps x 1 trainer", "sync", 2, 1),
    ("pserver sync, 2 ps x 2 trainers", "sync", 2, 2),
    ("pserver async, 2 ps x 2 trainers", "async", 2, 2),
    ("collective, 1 trainer", "collective", 0, 1),
    ("collective, 2 trainers", "collective", 0, 2),
]


def run_config(mode: str, pservers: int, trainers: int, steps: int, batch: int,
               ckpt: Path) -> float:
    common = [str(EXAMPLE), "--steps", str(steps), "--batch-size", str(batch),
              "--log-every", "0"]
    if mode == "local":
        cmd = [sys.executable, *common]
    else:
        cmd = [sys.executable, "-m", "fluid_hw.cli.main", "launch", "--mode", mode,
               "--pservers", str(pservers), "--trainers", str(trainers), "--checkpoint-every",
               "0", "--checkpoint-dir", str(ckpt), "--timeout", "300", *common]
    # one BLAS thread everywhere (the launcher's default when ranks >= cores): OpenBLAS
    # threads spin while waiting, and on a shared machine that costs 10x on this model
    env = {**os.environ, **{k: "1" for k in BLAS_THREAD_VARS}}
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=360, env=env)
    m = (_LOCAL_MS if mode == "local" else _MS).search(r.stdout)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    return float(m.group(1))


def pingpong() -> None:
    """Run under mpiexec -n 2: one-way time per size, with the back end's own waits."""
    from fluid_hw.backends.cluster.comm import get_comm
    from fluid_hw.backends.cluster.wire import Kind, encode

    c = get_comm()
    sizes = [64, 1024, 16 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024]
    for n in sizes:
        buf = encode(Kind.PARAM, "x", np.zeros(n // 4, np.float32))
        reps = max(20, min(400, (64 << 20) // max(n, 1) // 8))
        c.barrier("sync")
        t0 = time.perf_counter()
        for _ in range(reps):
            if c.rank == 0:
                c.wait([c.isend(buf, 1, 1)], "ping")
                c.recv(1, 2, "pong")
            else:
                c.recv(0, 1, "ping")
                c.wait([c.isend(buf, 0, 2)], "pong")
        one_way = (time.perf_counter() - t0) / reps / 2
        if c.rank == 0:
            print(f"PINGPONG {n} {one_way:.9f}", flush=True)


def measure_pingpong() -> list[tuple[int, float]]:
    from fluid_hw.backends.cluster.launch import find_mpiexec

    # pserver messages are authenticated: a key for this run (docs/cluster.md, Security)
    env = {**os.environ, "FLUID_HW_CLUSTER_KEY": secrets.token_hex(32)}
    r = subprocess.run([find_mpiexec(), "-n", "2", sys.executable, __file__, "--pingpong"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    pts = [(int(a), float(b)) for a, b in re.findall(r"PINGPONG (\d+) ([\d.e-]+)", r.stdout)]
    if r.returncode != 0 or not pts:
        raise SystemExit(f"ping-pong failed:\n{r.stdout}{r.stderr}")
    return pts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64, help="global batch (default 64)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration (best)")
    ap.add_argument("--pingpong", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pingpong:
        pingpong()
        return
    print(f"digits MLP 64-128-64-10, momentum, global batch {args.batch_size}, "
          f"{args.steps} steps, {os.cpu_count()} cores; best of {args.repeat}\n")
    print(f"| {'configuration':34s} | ranks | ms/step | samples/s |")
    print(f"|{'-' * 36}|-------|---------|-----------|")
    tmp = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    try:
        for label, mode, ps, tr in CONFIGS:
            ms = min(run_config(mode, ps, tr, args.steps, args.batch_size, tmp / label[:8])
                     for _ in range(args.repeat))
            ranks = 1 if mode == "local" else (0 if mode == "collective" else ps) + tr
            print(f"| {label:34s} | {ranks:5d} | {ms:7.2f} | {args.batch_size / ms * 1e3:9.0f} |",
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pts = measure_pingpong()
    n = np.array([p[0] for p in pts], float)
    t = np.array([p[1] for p in pts], float)
    beta, alpha = np.polyfit(n, t, 1)
    print("\nMPI one-way message time (2 ranks, this machine, fluid-hw waits):")
    for size, sec in pts:
        print(f"  {size:>9d} B  {sec * 1e6:9.1f} us")
    print(f"fit t(n) = alpha + n/B: alpha = {alpha * 1e6:.0f} us, B = {1 / beta / 1e9:.2f} GB/s")


if __name__ == "__main__":
    main()
