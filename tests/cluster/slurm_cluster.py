"""A one-node Slurm cluster for the tests: its own munged, slurmctld and slurmd.

Everything lives in one temporary folder (configuration, munge key and socket,
state, logs); the daemons run in the foreground as our children, so they are
stopped by their pids.  The ``slurm`` fixture starts one per test session (with
pytest-xdist, one per worker that runs a Slurm test: ports and job ids differ).
Debian's ``slurm-wlm`` and ``munge`` are installed with ``apt-get`` when missing
and this process is root (as in CI); otherwise :func:`install` says why the
cluster cannot be had.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "sacct", "scancel", "sinfo")
#: CPUs the node advertises (more than this machine has: the tests run 4 ranks on 2 cores)
CPUS = 8


def _sbin(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _missing() -> list[str]:
    return [n for n in (*DAEMONS, *CLIENTS) if _sbin(n) is None]


def install() -> str | None:
    """Install slurm-wlm and munge if missing; None when present, else why not."""
    if not _missing():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return (f"Slurm is not installed ({', '.join(_missing())} missing) and this is not "
                "a root Debian machine that could apt-get install slurm-wlm munge")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # pytest-xdist workers each run this: one installs, the others wait for it
    with open(Path(tempfile.gettempdir()) / "fluid_hw_slurm_install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _missing():
            return None
        for cmd in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                     "-o", "DPkg::Lock::Timeout=300", "slurm-wlm", "munge"]):
            try:
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as e:
                return f"{' '.join(cmd)} failed: {e}"
            if r.returncode != 0:
                return f"{' '.join(cmd)} failed: {(r.stderr or r.stdout)[-400:]}"
    return None if not _missing() else f"after apt-get, still missing: {_missing()}"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class SlurmCluster:
    root: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, srun, fluid-hw launch --scheduler slurm) needs."""
        return {"SLURM_CONF": str(self.conf)}

    def log(self, name: str) -> str:
        with contextlib.suppress(OSError):
            return (self.root / f"{name}.log").read_text(errors="replace")[-3000:]
        return ""

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def start() -> SlurmCluster:
    """Configure and start the three daemons; wait until the node is idle."""
    root = Path(tempfile.mkdtemp(prefix="fluid_hw_slurm_"))
    os.chmod(root, 0o755)  # slurmd's job steps (as root) read the folder
    c = SlurmCluster(root)
    try:
        _start(c)
    except BaseException:
        c.stop()
        raise
    return c


def _start(c: SlurmCluster) -> None:
    r = c.root
    host = socket.gethostname().split(".")[0]
    for d in ("state", "spool", "munge"):
        (r / d).mkdir(mode=0o700)
    key = r / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o400)
    sock = r / "munge" / "munge.socket"
    ctld_port, d_port = _free_ports(2)
    # MPICH names its shared-memory segment after the PMI job ("<job>.<step>"): a fresh
    # cluster starting at job 1 again would meet a segment a killed job 1 left behind
    first_job = 1000 + secrets.randbelow(10**7)
    c.conf.write_text(f"""\
ClusterName=fluidhwtest
FirstJobId={first_job}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={r}/jobcomp.txt
MinJobAge=300
KillWait=5
InactiveLimit=0
NodeName={host} NodeAddr=127.0.0.1 CPUs={CPUS} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""")
    env = {**os.environ, "SLURM_CONF": str(c.conf)}
    c.procs["munged"] = subprocess.Popen(
        [_sbin("munged") or "munged", "-F", "--force", f"--socket={sock}", f"--key-file={key}",
         f"--log-file={r}/munged.log", f"--pid-file={r}/munge/munged.pid",
         f"--seed-file={r}/munge/munged.seed"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: sock.exists(), 10, c, "munged")
    for name in ("slurmctld", "slurmd"):
        c.procs[name] = subprocess.Popen(
            [_sbin(name) or name, "-D", "-f", str(c.conf)], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: _node_idle(env), 60, c, "slurmd")


def _node_idle(env: dict[str, str]) -> bool:
    r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True,
                       timeout=20)
    return r.returncode == 0 and r.stdout.strip().startswith("idle")


def _wait(ok: object, seconds: float, c: SlurmCluster, who: str) -> None:
    assert callable(ok)
    deadline = time.time() + seconds
    while time.time() < deadline:
        for name, p in c.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited ({p.returncode}):\n{c.log(name)}")
        if ok():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{who} not ready after {seconds} s:\n{c.log('slurmctld')}\n"
                       f"{c.log('slurmd')}")
