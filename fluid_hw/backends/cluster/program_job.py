"""A saved training program as a cluster job: Fluid's master input.

A *program job* is a folder::

    main.pb       the training program (forward, backward, optimizer ops), serialised
    startup.pb    its start-up program (the initializers)
    job.json      the data-reader spec: {"data": "data.npz", "feeds": {"pixels": "x",
                  "label": "y"}, "batch_size": 64, "steps": 100, "seed": 1,
                  "fetch": "mean_0.tmp_0", "log_every": 10}
    data.npz      the training arrays (rows = examples), no pickle

:func:`save_job` writes one from a program pair and arrays.  The master checks
it (:func:`check_job`: the programs parse, the feeds are the program's
variables, the arrays' shapes fit, the program splits with the
``DistributeTranspiler``) and runs this module as every rank's script
(``python -m fluid_hw.backends.cluster.run_rank program_job.py --job DIR``): each
rank transpiles the program for its role, servers serve, trainers take their
slice of global batch ``s`` (rows of a fixed shuffle per epoch, a function of
``seed`` and ``s`` only, so a resumed job sees the batches an unbroken one
would), and trainer 0 saves the trained parameters (``.npy`` per parameter) to
``--save-params``.  Run without a launcher it trains in one process: the
reference a cluster run equals.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# absolute imports: every rank runs this file as its script (runpy.run_path)
from fluid_hw.backends.cluster.errors import ClusterError
from fluid_hw.backends.cluster.role import ClusterRole, start_step
from fluid_hw.backends.cluster.transpiler import DistributeTranspiler, DistributeTranspilerConfig
from fluid_hw.backends.cpu.executor import Executor
from fluid_hw.fileio import atomic_write, read_file, read_npz
from fluid_hw.ir.program import Program
from fluid_hw.ir.scope import Scope, scope_guard

FILES = ("main.pb", "startup.pb", "job.json")


def global_batch(step: int, n: int, batch_size: int, seed: int) -> np.ndarray:
    """Row indices of global batch ``step``: a fixed shuffle per epoch, a function of
    ``seed`` and ``step`` alone (``examples/train_digits_dist.py`` uses it too)."""
    per_epoch = max(1, n // batch_size)
    epoch, k = divmod(step, per_epoch)
    order = np.random.default_rng(seed + epoch).permutation(n)
    return order[k * batch_size:(k + 1) * batch_size]


def save_job(folder: str | os.PathLike[str], main: Program, startup: Program,
             arrays: Mapping[str, np.ndarray], feeds: Mapping[str, str], fetch: str,
             batch_size: int, steps: int, seed: int = 1, log_every: int = 10) -> Path:
    """Write a program job (see the module's doc); its folder."""
    d = Path(folder)
    atomic_write(d / "main.pb", main.serialize_to_string())
    atomic_write(d / "startup.pb", startup.serialize_to_string())
    buf = io.BytesIO()
    named: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
    np.savez(buf, **named)
    atomic_write(d / "data.npz", buf.getvalue())
    spec = {"data": "data.npz", "feeds": dict(feeds), "fetch": fetch, "batch_size": batch_size,
            "steps": steps, "seed": seed, "log_every": log_every}
    atomic_write(d / "job.json", json.dumps(spec, indent=1).encode())
    return d


class Job:
    """A loaded, checked program job."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.dir = d = Path(folder)
        for f in FILES:
            if not (d / f).is_file():
                raise ClusterError(f"program job {str(d)!r} has no {f} (a program job holds "
                                   f"{', '.join(FILES)} and the data; see save_job)")
        try:
            spec = json.loads(read_file(d / "job.json", kind="program"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ClusterError(f"{d / 'job.json'}: not valid JSON ({e})") from None
        self.spec = _check_spec(spec, d)
        self.main = Program.parse_from_string(read_file(d / "main.pb", kind="program"),
                                              source=str(d / "main.pb"))
        self.startup = Program.parse_from_string(read_file(d / "startup.pb", kind="program"),
                                                 source=str(d / "startup.pb"))
        block = self.main.global_block()
        for var in [*self.spec["feeds"], self.spec["fetch"]]:
            if not block.has_var(var):
                raise ClusterError(f"job.json names variable {var!r}, which main.pb does not "
                                   "have; use the names of the program's data and loss")
        self.arrays = read_npz(d / self.spec["data"], kind="data", root=d,
                               names=sorted(set(self.spec["feeds"].values())))
        rows = {len(a) for a in self.arrays.values()}
        if len(rows) != 1:
            raise ClusterError(f"{self.spec['data']}: the fed arrays have different numbers "
                               f"of rows {sorted(rows)}")
        self.rows = rows.pop()
        if self.rows < self.spec["batch_size"]:
            raise ClusterError(f"{self.spec['data']} has {self.rows} rows, fewer than "
                               f"batch_size {self.spec['batch_size']}")

    def transpile(self, role: ClusterRole) -> DistributeTranspiler:
        t = DistributeTranspiler(DistributeTranspilerConfig(mode=role.transpiler_mode))
        t.transpile(role.trainer_id, program=self.main, pservers=role.pserver_endpoints,
                    trainers=role.trainers, sync_mode=role.sync_mode,
                    startup_program=self.startup)
        return t


def _check_spec(spec: Any, d: Path) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise ClusterError(f"{d / 'job.json'}: a JSON object (see save_job)")
    feeds = spec.get("feeds")
    if not isinstance(feeds, dict) or not feeds or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in feeds.items()):
        raise ClusterError(f"{d / 'job.json'}: 'feeds' maps each fed variable to an array "
                           "name in the data file")
    for key in ("batch_size", "steps"):
        v = spec.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ClusterError(f"{d / 'job.json'}: {key!r} must be a positive integer, "
                               f"got {v!r}")
    for key in ("data", "fetch"):
        if not isinstance(spec.get(key), str):
            raise ClusterError(f"{d / 'job.json'}: {key!r} must be a string")
    data = Path(spec["data"])
    if data.is_absolute() or ".." in data.parts:
        raise ClusterError(f"{d / 'job.json'}: 'data' {spec['data']!r} must stay in the job's "
                           "folder")
    return {"seed": 1, "log_every": 10, **spec}


def check_job(folder: str | os.PathLike[str], pservers: int, trainers: int, mode: str) -> Job:
    """Load the job and split it as the ranks will (errors name the fix)."""
    job = Job(folder)
    if job.spec["batch_size"] % trainers:
        raise ClusterError(f"batch_size {job.spec['batch_size']} does not split over "
                           f"{trainers} trainers")
    eps = [] if mode == "collective" else [f"rank:{i}" for i in range(pservers)]
    role = ClusterRole(mode, "TRAINER", pservers, pservers + trainers, 0, trainers, eps)
    job.transpile(role)
    return job


def serve(exe: Executor, t: DistributeTranspiler, role: ClusterRole) -> None:
    """A parameter server's whole part, in the current scope: its start-up program,
    then serving until every trainer has finished."""
    prog = t.get_pserver_program(role.endpoint)
    exe.run(t.get_startup_program(role.endpoint, prog))
    print(f"serving {len(t.placement[role.endpoint])} parameter block(s) "
          f"(pid {os.getpid()})", flush=True)
    exe.run(prog)
    print("done", flush=True)


def run(folder: str, save_params: str | None) -> int:
    job = Job(folder)
    spec = job.spec
    role = ClusterRole.from_env()
    exe = Executor()
    scope = Scope()
    with scope_guard(scope):
        if role.is_pserver:
            serve(exe, job.transpile(role), role)
            return 0
        if spec["batch_size"] % role.trainers:
            raise ClusterError(f"batch_size {spec['batch_size']} does not split over "
                               f"{role.trainers} trainers")
        share = spec["batch_size"] // role.trainers
        if role.is_local:
            main, exit_prog = job.main, None
            exe.run(job.startup)
        else:
            t = job.transpile(role)
            main, exit_prog = t.get_trainer_program(), t.get_trainer_exit_program()
            exe.run(t.get_trainer_startup_program())
        first = start_step(scope)
        print(f"pid {os.getpid()}, starting at step {first} of {spec['steps']}", flush=True)
        t0 = time.perf_counter()
        for step in range(first, spec["steps"]):
            idx = global_batch(step, job.rows, spec["batch_size"], spec["seed"])
            idx = idx[role.trainer_id * share:(role.trainer_id + 1) * share]
            feed = {var: job.arrays[arr][idx] for var, arr in spec["feeds"].items()}
            (value,) = exe.run(main, feed=feed, fetch_list=[spec["fetch"]])
            if spec["log_every"] and (step + 1) % spec["log_every"] == 0:
                print(f"step {step + 1} {spec['fetch']} {float(np.mean(value)):.4f}",
                      flush=True)
        if exit_prog is not None:
            exe.run(exit_prog)
        done = spec["steps"] - first
        if done:
            dt = time.perf_counter() - t0
            print(f"{done} steps in {dt:.2f} s", flush=True)
        if role.trainer_id == 0 and save_params:
            _save_params(scope, job.main, Path(save_params))
            print(f"saved parameters to {save_params}", flush=True)
    return 0


def _save_params(scope: Scope, program: Program, out: Path) -> None:
    for var in program.global_block().all_parameters():
        value = scope.find_value(var.name)
        arr = np.asarray(getattr(value, "data", value))
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        atomic_write(out / f"{var.name}.npy", buf.getvalue(), durable=False)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Train a saved program job (see "
                                 "fluid_hw/backends/cluster/program_job.py).")
    ap.add_argument("--job", required=True, help="the program job's folder")
    ap.add_argument("--save-params", metavar="DIR", help="trainer 0 saves the parameters here")
    a = ap.parse_args(argv)
    return run(a.job, a.save_params)


if __name__ == "__main__":
    sys.exit(main())
