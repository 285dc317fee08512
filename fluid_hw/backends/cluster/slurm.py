"""``fluid-hw launch --scheduler slurm``: the same job, started by Slurm.

Outside an allocation the job is written as a batch script (``#SBATCH`` lines
for the tasks, partition, time limit, nodes, tasks per node; the job's
variables exported; one ``srun --mpi=pmi2`` starting all ``P + T`` ranks) and
submitted with ``sbatch``; the launcher then follows it: the job's output file
is copied to ours as it grows, ``scontrol`` tells when it ended, and the exit
code the script records is the launch's.  Inside an allocation (``salloc``, or
a batch script of your own: ``SLURM_JOB_ID`` is set) ``srun`` runs at once.

Slurm tasks are MPI ranks, so the roles map as in every launch: tasks
``0..P-1`` serve, the rest train (:mod:`.role`); the ranks find each other
through Slurm's PMI-2, on whatever nodes the allocation holds.  After the job,
its output is also split per role (``<job dir>/slurm-<id>/pserver_0.log``,
``trainer_1.log``...).  Ctrl-C, SIGTERM or ``--timeout`` cancel it with
``scancel``.  Checkpoints and ``--resume``/``--max-restarts`` work as in a
local launch; the checkpoint and job folders must be on a file system every
node sees.

The pserver protocol's key: ``--key-file`` (or ``$FLUID_HW_CLUSTER_KEY_FILE``)
when given, else a fresh random key written (mode 0600) into the job folder;
the ranks get the file's path, never the key.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ToolNotFoundError
from ...fileio import atomic_write
from ...tools import find_tool
from .auth import KEY_ENV, KEY_FILE_ENV
from .errors import LaunchError
from .launch import (
    BLAS_THREAD_VARS,
    KEY_FILE_PLACEHOLDER,
    LOOPBACK_ENV,
    LaunchSpec,
    _pids_with_job,
    clean_shm,
    job_env,
    rank_command,
    run_command,
    shm_snapshot,
)

#: how often the state of a submitted job is polled (seconds)
POLL_S = 0.5
#: Slurm job states that are final
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
_PREFIX = re.compile(r"^\[(pserver|trainer) (\d+)\] ")


@dataclass
class SlurmOptions:
    """What a cluster user gives ``sbatch``."""

    partition: str | None = None
    time: str | None = None  # sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH...
    nodes: int | None = None
    ntasks_per_node: int | None = None
    sbatch_args: list[str] = field(default_factory=list)
    job_name: str | None = None
    job_dir: str | None = None

    def check(self, spec: LaunchSpec) -> None:
        if spec.hosts:
            raise LaunchError("--hosts and --scheduler slurm: Slurm chooses the nodes; use "
                              "--nodes (and --ntasks-per-node) instead")
        for name, v in (("--nodes", self.nodes), ("--ntasks-per-node", self.ntasks_per_node)):
            if v is not None and v < 1:
                raise LaunchError(f"{name} must be >= 1, got {v}")
        if self.nodes and self.ntasks_per_node and \
                self.nodes * self.ntasks_per_node < spec.nprocs:
            raise LaunchError(f"--nodes {self.nodes} x --ntasks-per-node "
                              f"{self.ntasks_per_node} < the job's {spec.nprocs} ranks")
        if self.time is not None and not re.fullmatch(r"[0-9:-]+|UNLIMITED|INFINITE",
                                                      self.time):
            raise LaunchError(f"--time {self.time!r}: use Slurm's forms (minutes, MM:SS, "
                              "HH:MM:SS, D-HH:MM)")
        if self.partition is not None and not re.fullmatch(r"[\w.,-]+", self.partition):
            raise LaunchError(f"--partition {self.partition!r} is not a partition name")
        if KEY_ENV in os.environ:
            raise LaunchError(f"--scheduler slurm: {KEY_ENV} is set and Slurm would copy it "
                              "to every node; unset it (the launcher makes a key file, or "
                              f"give one with --key-file / {KEY_FILE_ENV})")

    def folder(self, spec: LaunchSpec) -> Path:
        """Batch scripts, outputs, per-role logs and the generated key go here."""
        if self.job_dir:
            return Path(self.job_dir).resolve()
        return Path("build", "cluster", Path(spec.script).stem, "slurm").resolve()

    def name(self, spec: LaunchSpec) -> str:
        return self.job_name or f"fluid-hw-{Path(spec.script).stem}"


def in_allocation() -> bool:
    """Whether this process runs inside a Slurm allocation (salloc, sbatch)."""
    return bool(os.environ.get("SLURM_JOB_ID"))


def _key_file(spec: LaunchSpec, folder: Path) -> str:
    given = spec.key_path()
    if given:
        return given
    path = folder / f"cluster-{uuid.uuid4().hex[:12]}.key"
    atomic_write(path, secrets.token_hex(32).encode(), mode=0o600)
    return str(path)


def slurm_env(spec: LaunchSpec, opts: SlurmOptions, resume: bool, key_file: str
              ) -> dict[str, str]:
    """The ranks' variables under Slurm (the key as a file path)."""
    env = job_env(spec, resume, uuid.uuid4().hex)
    for k in BLAS_THREAD_VARS:  # one BLAS thread per rank unless told
        env[k] = os.environ.get(k, "1")
    if opts.nodes != 1:  # ranks on several nodes: MPI may not stay on loopback
        for k in LOOPBACK_ENV:
            env.pop(k, None)
    env[KEY_FILE_ENV] = key_file
    return env


def srun_argv(spec: LaunchSpec, opts: SlurmOptions, srun: list[str] | None = None
              ) -> list[str]:
    argv = [*(srun or find_tool("srun")), "-n", str(spec.nprocs), "--mpi=pmi2",
            "--kill-on-bad-exit=1"]
    if opts.nodes:
        argv += ["-N", str(opts.nodes)]
    if opts.ntasks_per_node:
        argv += [f"--ntasks-per-node={opts.ntasks_per_node}"]
    return argv + rank_command(spec)


def batch_script(spec: LaunchSpec, opts: SlurmOptions, env: dict[str, str], folder: Path,
                 srun: list[str] | None = None) -> str:
    """The ``sbatch`` script of the job (output to ``<folder>/slurm-<id>.out``)."""
    q = shlex.quote
    lines = ["#!/bin/bash", f"#SBATCH --job-name={opts.name(spec)}",
             f"#SBATCH --ntasks={spec.nprocs}", f"#SBATCH --output={folder}/slurm-%j.out",
             f"#SBATCH --chdir={Path.cwd()}"]
    if opts.partition:
        lines.append(f"#SBATCH --partition={opts.partition}")
    if opts.time:
        lines.append(f"#SBATCH --time={opts.time}")
    if opts.nodes:
        lines.append(f"#SBATCH --nodes={opts.nodes}")
    if opts.ntasks_per_node:
        lines.append(f"#SBATCH --ntasks-per-node={opts.ntasks_per_node}")
    lines.append("")
    lines += [f"export {k}={q(v)}" for k, v in env.items()]
    lines += ["", 'echo "fluid-hw: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
              " ".join(q(a) for a in srun_argv(spec, opts, srun)),
              "rc=$?", f"echo $rc > {q(str(folder))}/exit-$SLURM_JOB_ID", "exit $rc", ""]
    return "\n".join(lines)


def print_batch_script(spec: LaunchSpec, opts: SlurmOptions,
                       write: Callable[[str], object]) -> None:
    """The batch script ``--scheduler slurm`` would submit (nothing is written or run;
    the key file is the one given, else a placeholder)."""
    opts.check(spec)
    env = slurm_env(spec, opts, spec.resume, spec.key_path() or KEY_FILE_PLACEHOLDER)
    env.pop("FLUID_HW_JOB_ID")
    write(batch_script(spec, opts, env, opts.folder(spec), srun=["srun"]))


def run_slurm(opts: SlurmOptions) -> Callable[[LaunchSpec, bool, Callable[[str], None]], int]:
    """A ``run`` for :func:`.launch.launch`: one Slurm job per attempt."""
    def run(spec: LaunchSpec, resume: bool, write: Callable[[str], None]) -> int:
        opts.check(spec)
        folder = opts.folder(spec)
        folder.mkdir(parents=True, exist_ok=True)
        env = slurm_env(spec, opts, resume, _key_file(spec, folder))
        if in_allocation():
            full = {**os.environ, **env}
            return run_command(srun_argv(spec, opts), full, env["FLUID_HW_JOB_ID"],
                               spec.timeout, write)
        return _submit_and_follow(spec, opts, env, folder, write)
    return run


def _submit_and_follow(spec: LaunchSpec, opts: SlurmOptions, env: dict[str, str],
                       folder: Path, write: Callable[[str], None]) -> int:
    script = folder / f"job-{env['FLUID_HW_JOB_ID'][:12]}.sbatch"
    atomic_write(script, batch_script(spec, opts, env, folder).encode(), mode=0o700)
    sbatch = [*find_tool("sbatch"), "--parsable", *opts.sbatch_args, str(script)]
    r = subprocess.run(sbatch, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise LaunchError(f"sbatch refused the job ({' '.join(sbatch)}): "
                          f"{(r.stderr or r.stdout).strip()}")
    job = r.stdout.strip().split(";")[0]
    write(f"fluid-hw launch: submitted Slurm job {job} ({spec.nprocs} tasks; batch script "
          f"{script}; output {folder}/slurm-{job}.out)\n")
    out = folder / f"slurm-{job}.out"
    before = shm_snapshot()
    try:
        return _follow(spec, job, out, folder, write)
    finally:  # ranks Slurm killed on this node leave MPICH's segments behind
        deadline = time.monotonic() + 3 * POLL_S + 15  # past Slurm's KillWait
        while _pids_with_job(env["FLUID_HW_JOB_ID"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        clean_shm(before)


def _follow(spec: LaunchSpec, job: str, out: Path, folder: Path,
            write: Callable[[str], None]) -> int:
    deadline = time.monotonic() + spec.timeout if spec.timeout else None
    pos = 0
    state = ""
    try:
        while True:
            pos = _copy_new(out, pos, write)
            state = job_state(job)
            if state in FINAL_STATES or state == "GONE":
                break
            if deadline is not None and time.monotonic() > deadline:
                write(f"fluid-hw launch: the job ran past --timeout {spec.timeout:g} s; "
                      f"cancelling Slurm job {job}\n")
                cancel(job)
                _wait_final(job)
                _copy_new(out, pos, write)
                return 124
            time.sleep(POLL_S)
    except BaseException:  # Ctrl-C, SIGTERM: the job goes with the launcher
        cancel(job)
        raise
    time.sleep(POLL_S)  # the last lines of the output file
    _copy_new(out, pos, write, final=True)
    split_roles(out, folder / f"slurm-{job}")
    code_file = folder / f"exit-{job}"
    with contextlib.suppress(OSError, ValueError):
        return int(code_file.read_text().strip())
    write(f"fluid-hw launch: Slurm job {job} ended {state} without an exit code\n")
    return 1


def _copy_new(path: Path, pos: int, write: Callable[[str], None], final: bool = False) -> int:
    """Write the complete lines added to ``path`` since ``pos`` (``final``: all that
    is left); the new position."""
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            data = f.read()
    except FileNotFoundError:
        return pos
    if final and data and not data.endswith(b"\n"):
        data += b"\n"
    end = data.rfind(b"\n") + 1
    if end:
        write(data[:end].decode(errors="replace"))
    return pos + end


def job_state(job: str) -> str:
    """The Slurm state of ``job`` (``PENDING``, ``RUNNING``, ``COMPLETED``...), or
    ``GONE`` when Slurm no longer knows it."""
    r = subprocess.run([*find_tool("scontrol"), "show", "job", "-o", job],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"\bJobState=(\S+)", r.stdout)
    if r.returncode != 0 or m is None:
        return "GONE" if "Invalid job id" in r.stderr else "UNKNOWN"
    return m.group(1)


def _wait_final(job: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and job_state(job) not in (*FINAL_STATES, "GONE"):
        time.sleep(POLL_S)


def cancel(job: str) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError, ToolNotFoundError):
        subprocess.run([*find_tool("scancel"), job], capture_output=True, timeout=60)


def split_roles(out: Path, folder: Path) -> list[Path]:
    """One log per role (``pserver_0.log``, ``trainer_1.log``...) from the job's
    prefixed output; lines of no role go to ``other.log``."""
    try:
        text = out.read_text(errors="replace")
    except OSError:
        return []
    per: dict[str, list[str]] = {}
    for line in text.splitlines(keepends=True):
        m = _PREFIX.match(line)
        key = f"{m.group(1)}_{m.group(2)}" if m else "other"
        per.setdefault(key, []).append(line[m.end():] if m else line)
    written = []
    for key, lines in sorted(per.items()):
        path = folder / f"{key}.log"
        atomic_write(path, "".join(lines).encode(), durable=False)
        written.append(path)
    return written
