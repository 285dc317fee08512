"""Running real MPI jobs from tests: a hard timeout, and proof nothing is left behind.

Every job is ``fluid-hw launch`` in a subprocess of its own session, with a
unique ``FLUID_HW_TEST_TAG`` in its environment (the ranks inherit it).  On a
timeout the whole session is killed, then every process still carrying the
tag.  :func:`leftovers` lists processes with the tag and MPI shared-memory
segments created since the job started that nobody holds.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fluid_hw.backends.cluster.launch import SHM_DIR, _shm_in_use

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_digits_dist.py"

#: every wait inside a rank gives up after this long (the launcher's --timeout is the
#: outer bound, the subprocess timeout the last one)
RANK_TIMEOUT_S = 60


@dataclass
class Job:
    rc: int
    out: str
    tag: str
    started: float

    def lines(self, who: str) -> list[str]:
        """Output lines of one rank, e.g. ``who="trainer 0"``, without the prefix."""
        p = f"[{who}] "
        return [ln[len(p):] for ln in self.out.splitlines() if ln.startswith(p)]


def _tagged(tag: str) -> list[int]:
    needle = f"FLUID_HW_TEST_TAG={tag}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (d / "environ").read_bytes().split(b"\0"):
                    out.append(int(d.name))
    return out


def _kill_tagged(tag: str) -> None:
    for pid in _tagged(tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def start(args: Sequence[str], tag: str | None = None, env: dict[str, str] | None = None
          ) -> tuple[subprocess.Popen[str], str]:
    """``fluid-hw launch ARGS`` started; ``env``: more variables (e.g. ``SLURM_CONF``)."""
    tag = tag or uuid.uuid4().hex
    env = {**os.environ, **(env or {}), "FLUID_HW_TEST_TAG": tag,
           "FLUID_HW_COMM_TIMEOUT": str(RANK_TIMEOUT_S), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "fluid_hw.cli.main", "launch", *args],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    return p, tag


def stop(p: subprocess.Popen[str], tag: str) -> None:
    """Kill the launcher's session and everything carrying the tag."""
    with contextlib.suppress(OSError):
        os.killpg(p.pid, signal.SIGKILL)
    _kill_tagged(tag)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=10)


def lines_until(p: subprocess.Popen[str], deadline: float) -> Iterator[str]:
    """The job's output lines as they come, ending at EOF or at ``deadline`` (a
    reader thread, so a silent job cannot block the test)."""
    q: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        left = deadline - time.time()
        if left <= 0:
            return
        try:
            line = q.get(timeout=left)
        except queue.Empty:
            return
        if line is None:
            return
        yield line


def launch(args: Sequence[str], timeout: float = 120, env: dict[str, str] | None = None
           ) -> Job:
    """Run ``fluid-hw launch ARGS`` to the end (killing it after ``timeout``)."""
    t0 = time.time()
    p, tag = start(args, env=env)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p, tag)
        out = p.stdout.read() if p.stdout else ""
        raise AssertionError(f"fluid-hw launch {' '.join(args)} ran past {timeout} s:\n"
                             f"{out}") from None
    return Job(p.returncode, out, tag, t0)


def leftovers(job: Job, wait_s: float = 3.0) -> list[str]:
    """Processes of the job still alive, MPI segments it left in /dev/shm."""
    deadline = time.time() + wait_s
    while True:
        procs = _tagged(job.tag)
        shm = []
        with contextlib.suppress(OSError):
            for n in os.listdir(SHM_DIR):
                if not n.startswith(("mpich_shm_", "ucx_shm_")):
                    continue
                with contextlib.suppress(OSError):
                    if (SHM_DIR / n).stat().st_mtime >= job.started - 1:
                        shm.append(n)
        if shm:
            used = _shm_in_use()
            shm = [n for n in shm if n not in used]
        found = [f"process {pid}" for pid in procs] + [f"/dev/shm/{n}" for n in shm]
        if not found or time.time() > deadline:
            return found
        time.sleep(0.2)


def load_params(d: Path) -> dict[str, object]:
    import numpy as np

    return {f.stem: np.load(f, allow_pickle=False) for f in sorted(Path(d).glob("*.npy"))}


#: steps of the jobs compared with a plain run
STEPS = 20


def plain_run(out: Path, steps: int = STEPS, extra: Sequence[str] = ()) -> dict[str, object]:
    """The single-process reference run of the example; its saved parameters."""
    r = subprocess.run([sys.executable, str(EXAMPLE), "--steps", str(steps), "--log-every", "0",
                        "--save-params", str(out), *extra], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return load_params(out)


def assert_same(a: dict[str, object], b: dict[str, object], atol: float = 1e-6) -> None:
    """Equal parameter sets, up to ``atol`` (docs/cluster.md: float32 rounding)."""
    import numpy as np

    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=0, atol=atol, err_msg=k)


def hang_script(d: Path) -> Path:
    """A job script whose ranks start and then hang (for timeouts and cancels)."""
    script = d / "hang.py"
    script.write_text("import time\n"
                      "from fluid_hw.backends.cluster import ClusterRole\n"
                      "ClusterRole.from_env()\n"
                      "print('up', flush=True)\n"
                      "time.sleep(600)\n")
    return script


def fail_once_script(d: Path) -> tuple[Path, Path]:
    """A job script whose trainers fail (exit 3) the first time -- they leave the
    marker file, its argument -- and then print ``resume $FLUID_HW_RESUME``."""
    script, marker = d / "once.py", d / "failed-once"
    script.write_text(
        "import os, sys\n"
        "from fluid_hw.backends.cluster import ClusterRole\n"
        "role = ClusterRole.from_env()\n"
        "if role.is_trainer and not os.path.exists(sys.argv[1]):\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    raise SystemExit(3)\n"
        "print('resume', os.environ['FLUID_HW_RESUME'])\n")
    return script, marker
