"""``fluid-hw launch``: start a parameter-server or collective job on MPI.

On one machine it runs the ``mpiexec.gforker`` of the PyPI ``mpich`` wheel
(beside the Python interpreter) with ``P + T`` ranks; ranks ``0..P-1`` are the
servers and the rest the trainers (see :mod:`.role`).  Every rank runs
:mod:`.run_rank`, which prefixes its output with its role.  With ``hosts`` the
wheel's hydra ``mpiexec -hosts`` spreads the ranks over machines; for Slurm,
:func:`srun_command` prints the equivalent ``srun`` line.

Exposure (docs/cluster.md, "Security"): on one machine nothing listens beyond
loopback -- gforker forks the ranks and talks PMI over socket pairs (hydra's
``mpiexec`` would listen on ``0.0.0.0`` whatever ``-iface`` says), and
:data:`LOOPBACK_ENV` keeps MPI's network transports on ``lo``.  Every launch
gets a fresh random key for the pserver protocol's HMAC (:mod:`.auth`), handed
to the ranks in their environment, never on a command line.  A multi-host job
needs a key file on every host (``--key-file`` or ``FLUID_HW_CLUSTER_KEY_FILE``).

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
import secrets
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
from typing import IO

from . import checkpoint
from .auth import KEY_ENV, KEY_FILE_ENV, read_key_file
from .errors import ClusterError, LaunchError

SHM_DIR = Path("/dev/shm")
_SHM_PATTERNS = (re.compile(r"^mpich_shm_"), re.compile(r"^ucx_shm_"))
MODES = ("sync", "async", "collective")
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: a single-host job's MPI transports listen on loopback only.  Measured with
#: ``ss -tlnp`` on MPICH 5.0.2: without them every rank listens on the host's
#: address too -- UCX (the default netmod) and libfabric's sockets and tcp providers
#: (``MPIR_CVAR_CH4_NETMOD=ofi``); MPIR_CVAR_CH4_OFI_IFNAME changed nothing
LOOPBACK_ENV = {"UCX_NET_DEVICES": "lo", "FI_SOCKETS_IFACE": "lo", "FI_TCP_IFACE": "lo"}
#: the key file named in print_commands when none is configured
KEY_FILE_PLACEHOLDER = "/path/to/cluster.key"


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
    key_file: str | None = None
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
        if self.hosts and os.environ.get(KEY_ENV):
            raise LaunchError(f"--hosts: {KEY_ENV} is set, and hydra would send it to the "
                              "other hosts unencrypted; unset it and give the key in a file "
                              f"on every host (--key-file or {KEY_FILE_ENV})")

    def key_path(self) -> str | None:
        """The key file of a multi-host job (``--key-file``, else
        ``$FLUID_HW_CLUSTER_KEY_FILE``), absolute; None when neither is given."""
        path = self.key_file or os.environ.get(KEY_FILE_ENV)
        return str(Path(path).expanduser().absolute()) if path else None

    def check_key(self) -> None:
        """A multi-host job needs a valid key file (it is read here as a check; every
        host reads its own copy)."""
        if not self.hosts:
            return
        path = self.key_path()
        if path is None:
            raise LaunchError("--hosts: the parameter-server protocol is authenticated with a "
                              "shared key; give a key file present on every host, mode 0600: "
                              f"--key-file PATH or {KEY_FILE_ENV}=PATH (make one with python "
                              "-c 'import secrets; print(secrets.token_hex(32))' > PATH)")
        try:
            read_key_file(path)
        except ClusterError as e:
            raise LaunchError(str(e)) from None

    def ckpt_dir(self) -> str:
        if self.checkpoint_dir:
            return str(Path(self.checkpoint_dir).resolve())
        return str(Path("build", "cluster", Path(self.script).stem, "checkpoints").resolve())


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_mpiexec(override: str | None = None, single_host: bool = False) -> str:
    """``override``, ``$FLUID_HW_MPIEXEC``, the wheel's beside this Python, or PATH.

    ``single_host``: MPICH's ``mpiexec.gforker`` beside the ``mpiexec`` found
    (it forks the ranks and listens on no port), when there is one."""
    for cand in (override, os.environ.get("FLUID_HW_MPIEXEC")):
        if cand:
            path = shutil.which(cand)
            if path is None:
                raise LaunchError(f"mpiexec {cand!r} not found or not executable")
            return path
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if _executable(beside) else shutil.which("mpiexec")
    if found is None:
        raise LaunchError("no mpiexec found: pip install 'fluid-hw[cluster]' (the mpich wheel "
                          "ships one), or set FLUID_HW_MPIEXEC")
    if single_host:
        for d in dict.fromkeys([Path(found).parent, Path(found).resolve().parent]):
            if _executable(d / "mpiexec.gforker"):
                return str(d / "mpiexec.gforker")
    return found


def is_gforker(mpiexec: str) -> bool:
    """Whether ``mpiexec`` is MPICH's gforker (one host, no listening port)."""
    return "gforker" in Path(mpiexec).name


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
    if spec.hosts:  # the key file's path; the key itself never goes on a command line
        env[KEY_FILE_ENV] = spec.key_path() or KEY_FILE_PLACEHOLDER
    else:
        env.update(LOOPBACK_ENV)
    env.update(spec.extra_env)
    return env


def secret_env(spec: LaunchSpec) -> dict[str, str]:
    """What only the launched processes' environment carries: on one machine a fresh
    random key per launch (``/proc/PID/environ`` is readable by its owner only)."""
    return {} if spec.hosts else {KEY_ENV: secrets.token_hex(32)}


def rank_command(spec: LaunchSpec) -> list[str]:
    return [spec.python, "-u", "-m", "fluid_hw.backends.cluster.run_rank", spec.script,
            *spec.args]


def mpiexec_command(spec: LaunchSpec, env: dict[str, str]) -> list[str]:
    mpiexec = find_mpiexec(spec.mpiexec, single_host=not spec.hosts)
    cmd = [mpiexec, "-n", str(spec.nprocs)]
    if spec.hosts:
        if is_gforker(mpiexec):
            raise LaunchError(f"--hosts: {mpiexec} starts ranks on this machine only; use "
                              "MPICH's hydra mpiexec")
        cmd += ["-hosts", spec.hosts]
    for k, v in env.items():  # explicit, so remote hosts get them too
        cmd += ["-genv", k, v]
    return cmd + rank_command(spec)


def srun_command(spec: LaunchSpec, nodes: int | None = None) -> str:
    """The Slurm equivalent (``srun`` starts the ranks through PMI)."""
    env = job_env(spec, spec.resume, "")
    env.pop("FLUID_HW_JOB_ID")  # the ranks use Slurm's job and step ids instead
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

def _pump(stream: IO[str], write: Callable[[str], None]) -> None:
    for line in iter(stream.readline, ""):
        write(line)


def run_once(spec: LaunchSpec, resume: bool, write: Callable[[str], None]) -> int:
    """Run the job once; its exit code (124 on timeout)."""
    job_id = uuid.uuid4().hex
    env = job_env(spec, resume, job_id)
    cmd = mpiexec_command(spec, env)
    if not spec.hosts and not is_gforker(cmd[0]):
        write(f"fluid-hw launch: {cmd[0]} is not MPICH's mpiexec.gforker; if it is hydra, its "
              "control port listens on every interface while the job runs (docs/cluster.md, "
              "'Security')\n")
    full_env = {**os.environ, **env, **secret_env(spec)}
    if not spec.hosts:
        full_env.pop(KEY_FILE_ENV, None)  # the launch's own key is the one in force
    return run_command(cmd, full_env, job_id, spec.timeout, write)


def run_command(cmd: list[str], full_env: dict[str, str], job_id: str, timeout: float | None,
                write: Callable[[str], None]) -> int:
    """Run a launcher command (``mpiexec`` or ``srun``) in a session of its own, its
    output to ``write``; stop it after ``timeout`` (exit code 124) or on Ctrl-C, then
    kill what carries ``job_id`` and remove the MPI segments it left."""
    before = shm_snapshot()
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True)
    pump = threading.Thread(target=_pump, args=(proc.stdout, write), daemon=True)
    pump.start()
    rc: int | None = None
    try:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            write(f"fluid-hw launch: the job ran past --timeout {timeout:g} s; "
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


def launch(spec: LaunchSpec, write: Callable[[str], None] | None = None,
           run: Callable[[LaunchSpec, bool, Callable[[str], None]], int] = run_once) -> int:
    """Run the job (and restart it from its checkpoint up to ``max_restarts`` times);
    ``run`` runs it once (default: MPI on this machine or ``--hosts``)."""
    spec.check()
    spec.check_key()

    def _stdout(s: str) -> None:
        sys.stdout.write(s)
        sys.stdout.flush()

    out = write or _stdout
    old = None
    if threading.current_thread() is threading.main_thread():
        def _term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt  # runs run_once's clean-up
        old = signal.signal(signal.SIGTERM, _term)
    try:
        return _launch(spec, out, run)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _launch(spec: LaunchSpec, out: Callable[[str], None],
            run: Callable[[LaunchSpec, bool, Callable[[str], None]], int] = run_once) -> int:
    resume = spec.resume
    attempt = 0
    while True:
        if resume:
            out(f"fluid-hw launch: resuming from the last complete checkpoint in "
                f"{spec.ckpt_dir()} ({_describe_checkpoints(spec)})\n")
        rc = run(spec, resume, out)
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


def print_commands(spec: LaunchSpec, write: Callable[[str], object]) -> None:
    """The commands for a real cluster (nothing is run)."""
    env = job_env(spec, spec.resume, "")
    env.pop("FLUID_HW_JOB_ID")
    if spec.hosts and spec.key_path() is None:
        write(f"# every host needs the key file (mode 0600) at the path given in {KEY_FILE_ENV};"
              "\n# make one with: python -c 'import secrets; print(secrets.token_hex(32))' > "
              f"{KEY_FILE_PLACEHOLDER}\n")
    write("# mpiexec (MPICH hydra), ranks spread over --hosts:\n")
    write(" ".join(shlex.quote(a) for a in mpiexec_command(spec, env)) + "\n")
    write("# Slurm:\n")
    write(srun_command(spec) + "\n")

