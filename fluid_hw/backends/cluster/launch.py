"""``fluid-hw launch``: start a parameter-server or collective job on MPI.

On one machine it runs the ``mpiexec`` of the PyPI ``mpich`` wheel (beside
the Python interpreter) with ``P + T`` ranks; ranks ``0..P-1`` are the servers
and the rest the trainers (see :mod:`.role`).  Every rank runs
:mod:`.run_rank`, which prefixes its output with its role.  With ``hosts`` the
same command spreads the ranks over machines (``mpiexec -hosts``); for Slurm,
:func:`srun_command` prints the equivalent ``srun`` line.

The launcher owns what it starts: the job gets a unique ``FLUID_HW_JOB_ID``
in its environment; on a timeout or Ctrl-C, and after every run, any process
still carrying that id is killed, and the shared-memory segments MPICH leaks
in ``/dev/shm`` when a rank dies are removed (only new ones no live process
holds).  ``resume`` starts from the last complete checkpoint; ``max_restarts``
relaunches a failed job that way automatically.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import checkpoint
from .errors import LaunchError

SHM_DIR = Path("/dev/shm")
_SHM_PATTERNS = (re.compile(r"^mpich_shm_"), re.compile(r"^ucx_shm_"))
MODES = ("sync", "async", "collective")
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class LaunchSpec:
    script: str
    args: list[str] = field(default_factory=list)
    pservers: int = 2
    trainers: int = 2
    mode: str = "sync"
    resume: bool = False
    checkpoint_dir: str | None = None
    checkpoint_every: int = 10
    timeout: float | None = None
    hosts: str | None = None
    mpiexec: str | None = None
    python: str = sys.executable
    max_restarts: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def nprocs(self) -> int:
        return (0 if self.mode == "collective" else self.pservers) + self.trainers

    def check(self) -> None:
        if self.mode not in MODES:
            raise LaunchError(f"--mode {self.mode!r}: use one of {list(MODES)}")
        if self.trainers < 1:
            raise LaunchError(f"--trainers must be >= 1, got {self.trainers}")
        if self.mode != "collective" and self.pservers < 1:
            raise LaunchError(f"--mode {self.mode} needs --pservers >= 1 (or --mode "
                              "collective)")
        if self.checkpoint_every < 0:
            raise LaunchError(f"--checkpoint-every must be >= 0, got {self.checkpoint_every}")
        if not Path(self.script).is_file():
            raise LaunchError(f"script {self.script!r} not found")
        if self.timeout is not None and self.timeout <= 0:
            raise LaunchError(f"--timeout must be > 0 seconds, got {self.timeout}")

    def ckpt_dir(self) -> str:
        if self.checkpoint_dir:
            return str(Path(self.checkpoint_dir).resolve())
        return str(Path("build", "cluster", Path(self.script).stem, "checkpoints").resolve())


def find_mpiexec(override: str | None = None) -> str:
    """``override``, ``$FLUID_HW_MPIEXEC``, the wheel's beside this Python, or PATH."""
    for cand in (override, os.environ.get("FLUID_HW_MPIEXEC")):
        if cand:
            path = shutil.which(cand)
            if path is None:
                raise LaunchError(f"mpiexec {cand!r} not found or not executable")
            return path
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mpiexec")
    if found:
        return found
    raise LaunchError("no mpiexec found: pip install 'fluid-hw[cluster]' (the mpich wheel ships "
                      "one), or set FLUID_HW_MPIEXEC")


def job_env(spec: LaunchSpec, resume: bool, job_id: str) -> dict[str, str]:
    """The variables every rank gets (see :mod:`.role`)."""
    env = {
        "FLUID_HW_MODE": spec.mode,
        "FLUID_HW_TRAINERS": str(spec.trainers),
        "FLUID_HW_PSERVERS": "0" if spec.mode == "collective" else str(spec.pservers),
        "FLUID_HW_CHECKPOINT_DIR": spec.ckpt_dir(),
        "FLUID_HW_CHECKPOINT_EVERY": str(spec.checkpoint_every),
        "FLUID_HW_RESUME": "1" if resume else "0",
        "FLUID_HW_JOB_ID": job_id,
        "PYTHONUNBUFFERED": "1",
    }
    # BLAS worker threads spin while they wait, like a blocking MPI call: give each
    # rank its share of this machine's cores (1 when oversubscribed) unless told
    share = str(max(1, (os.cpu_count() or 1) // spec.nprocs)) if not spec.hosts else "1"
    for k in BLAS_THREAD_VARS:
        env[k] = os.environ.get(k, share)
    env.update(spec.extra_env)
    return env


def rank_command(spec: LaunchSpec) -> list[str]:
    return [spec.python, "-u", "-m", "fluid_hw.backends.cluster.run_rank", spec.script,
            *spec.args]


def mpiexec_command(spec: LaunchSpec, env: dict[str, str]) -> list[str]:
    cmd = [find_mpiexec(spec.mpiexec), "-n", str(spec.nprocs)]
    if spec.hosts:
        cmd += ["-hosts", spec.hosts]
    for k, v in env.items():  # explicit, so remote hosts get them too
        cmd += ["-genv", k, v]
    return cmd + rank_command(spec)


def srun_command(spec: LaunchSpec, nodes: int | None = None) -> str:
    """The Slurm equivalent (``srun`` starts the ranks through PMI)."""
    env = job_env(spec, spec.resume, "")
    env.pop("FLUID_HW_JOB_ID")  # only the local launcher's clean-up needs it
    exports = ",".join(["ALL", *(f"{k}={v}" for k, v in env.items())])
    n = f"-N {nodes} " if nodes else ""
    return (f"srun {n}-n {spec.nprocs} --mpi=pmi2 --export={shlex.quote(exports)} "
            + " ".join(shlex.quote(a) for a in rank_command(spec)))


# -- processes and shared memory we own -------------------------------------------

def _pids_with_job(job_id: str) -> list[int]:
    needle = f"FLUID_HW_JOB_ID={job_id}".encode()
    out = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            if needle in (d / "environ").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


def kill_job(job_id: str) -> int:
    """SIGKILL every process carrying ``FLUID_HW_JOB_ID=job_id``; how many there were."""
    pids = _pids_with_job(job_id)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def _shm_in_use() -> set[str]:
    """Names under /dev/shm that some live process maps or holds open."""
    used: set[str] = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (d / "maps").read_text().splitlines():
                i = line.find("/dev/shm/")
                if i >= 0:
                    used.add(line[i + 9:].split(" (deleted)")[0].strip())
        with contextlib.suppress(OSError):
            for fd in (d / "fd").iterdir():
                with contextlib.suppress(OSError):
                    t = os.readlink(fd)
                    if t.startswith("/dev/shm/"):
                        used.add(t[9:])
    return used


def shm_snapshot() -> set[str]:
    try:
        return set(os.listdir(SHM_DIR))
    except OSError:
        return set()


def clean_shm(before: set[str]) -> list[str]:
    """Remove MPI segments that appeared since ``before`` and nobody uses."""
    new = [n for n in shm_snapshot() - before if any(p.match(n) for p in _SHM_PATTERNS)]
    if not new:
        return []
    used = _shm_in_use()
    removed = []
    for n in new:
        if n not in used:
            with contextlib.suppress(OSError):
                (SHM_DIR / n).unlink()
                removed.append(n)
    return removed


# -- running ----------------------------------------------------------------------

def _pump(stream: object, write: Callable[[str], None]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        write(line)


def run_once(spec: LaunchSpec, resume: bool, write: Callable[[str], None]) -> int:
    """Run the job once; its exit code (124 on timeout)."""
    job_id = uuid.uuid4().hex
    env = job_env(spec, resume, job_id)
    cmd = mpiexec_command(spec, env)
    before = shm_snapshot()
    full_env = {**os.environ, **env}
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True)
    pump = threading.Thread(target=_pump, args=(proc.stdout, write), daemon=True)
    pump.start()
    rc: int | None = None
    try:
        try:
            rc = proc.wait(timeout=spec.timeout)
        except subprocess.TimeoutExpired:
            write(f"fluid-hw launch: the job ran past --timeout {spec.timeout:g} s; "
                  "stopping it\n")
            rc = 124
    finally:
        if proc.poll() is None:  # timeout or Ctrl-C: let hydra stop its ranks, then kill
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        left = kill_job(job_id)
        deadline = time.monotonic() + 5
        while _pids_with_job(job_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        pump.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
        removed = clean_shm(before)
        if left or removed:
            write(f"fluid-hw launch: cleaned up {left} leftover process(es) and "
                  f"{len(removed)} shared-memory segment(s)\n")
    assert rc is not None
    return rc


def launch(spec: LaunchSpec, write: Callable[[str], None] | None = None) -> int:
    """Run the job (and restart it from its checkpoint up to ``max_restarts`` times)."""
    spec.check()
    out = write or (lambda s: (sys.stdout.write(s), sys.stdout.flush()))
    old = None
    if threading.current_thread() is threading.main_thread():
        def _term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt  # runs run_once's clean-up
        old = signal.signal(signal.SIGTERM, _term)
    try:
        return _launch(spec, out)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _launch(spec: LaunchSpec, out: Callable[[str], None]) -> int:
    resume = spec.resume
    attempt = 0
    while True:
        if resume:
            out(f"fluid-hw launch: resuming from the last complete checkpoint in "
                f"{spec.ckpt_dir()} ({_describe_checkpoints(spec)})\n")
        rc = run_once(spec, resume, out)
        if rc == 0 or rc == 124 or attempt >= spec.max_restarts:
            return rc
        attempt += 1
        out(f"fluid-hw launch: the job failed (exit code {rc}); restart {attempt} of "
            f"{spec.max_restarts} from the last checkpoint\n")
        resume = True


def _describe_checkpoints(spec: LaunchSpec) -> str:
    root = Path(spec.ckpt_dir())
    if spec.mode == "collective":
        s = checkpoint.steps(root / "trainer")
        return f"newest step {s[-1]}" if s else "none yet: starting at step 0"
    per = [set(checkpoint.steps(root / f"pserver_{i}")) for i in range(spec.pservers)]
    common = set.intersection(*per) if per else set()
    return f"newest step held by every server: {max(common)}" if common else \
        "none held by every server: starting at step 0"


def print_commands(spec: LaunchSpec, write: Callable[[str], None]) -> None:
    """The commands for a real cluster (nothing is run)."""
    env = job_env(spec, spec.resume, "")
    env.pop("FLUID_HW_JOB_ID")
    write("# mpiexec (MPICH hydra), ranks spread over --hosts:\n")
    write(" ".join(shlex.quote(a) for a in mpiexec_command(spec, env)) + "\n")
    write("# Slurm:\n")
    write(srun_command(spec) + "\n")

