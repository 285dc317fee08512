"""One submitted job's runner: ``python -m fluid_hw.backends.cluster.master_job JOBDIR``.

The master starts it in a session of its own with ``JOBDIR/output.log`` as its
output, so the job outlives a master that stops or restarts.  It runs the job
through ``fluid-hw launch`` (:func:`.launch.launch`; under Slurm with
:func:`.slurm.run_slurm`), in ``JOBDIR/files``, and writes ``JOBDIR/exit.json``
(atomically) when it ends.  SIGTERM -- ``fluid-hw cancel`` -- stops the job the
way Ctrl-C stops a launch: every rank is killed (or the Slurm job cancelled).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ...errors import FluidError
from ...fileio import atomic_write
from .launch import LaunchSpec, launch, run_once


def _spec(rec: dict[str, object], files: Path) -> LaunchSpec:
    args = [str(a) for a in rec["args"]] if isinstance(rec["args"], list) else []
    script = str(files / str(rec["script"]))
    if rec.get("program"):  # a saved program job: every rank runs program_job on it
        from . import program_job

        script = program_job.__file__
        args = ["--job", str(files / str(rec["program"])), *args]
    timeout = rec.get("timeout")
    return LaunchSpec(
        script=script, args=args,
        pservers=int(str(rec["pservers"])), trainers=int(str(rec["trainers"])),
        mode=str(rec["mode"]), resume=bool(rec.get("resume_from")),
        checkpoint_dir=str(rec["checkpoint_dir"]),
        checkpoint_every=int(str(rec["checkpoint_every"])),
        timeout=float(timeout) if isinstance(timeout, int | float) else None,
        max_restarts=int(str(rec["max_restarts"])))


def run(job_dir: Path) -> int:
    rec = json.loads((job_dir / "job.json").read_text())
    spec = _spec(rec, job_dir / "files")
    print(f"fluid-hw master: job {rec['id']} ({rec['name']}): {spec.mode}, "
          f"{spec.pservers if spec.mode != 'collective' else 0} server(s), {spec.trainers} "
          f"trainer(s), scheduler {rec['scheduler']}"
          + (f", resuming job {rec['resume_from']}'s checkpoints" if spec.resume else ""),
          flush=True)
    runner: Callable[[LaunchSpec, bool, Callable[[str], None]], int] = run_once
    if rec["scheduler"] == "slurm":
        from .slurm import SlurmOptions, run_slurm

        runner = run_slurm(SlurmOptions(job_name=f"fluid-hw-{rec['name']}",
                                        job_dir=str(job_dir / "slurm")))
    try:
        return launch(spec, run=runner)
    except FluidError as e:
        print(f"fluid-hw master: error: {e}", flush=True)
        return 2
    except KeyboardInterrupt:
        print("fluid-hw master: the job was cancelled", flush=True)
        return 130


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fluid_hw.backends.cluster.master_job JOBDIR", file=sys.stderr)
        return 2

    def _term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)  # before launch() installs its own
    job_dir = Path(args[0]).resolve()
    try:
        rc = run(job_dir)
    except KeyboardInterrupt:
        rc = 130
    atomic_write(job_dir / "exit.json",
                 json.dumps({"exit_code": rc, "ended": time.time()}).encode())
    return rc


if __name__ == "__main__":
    sys.exit(main())
