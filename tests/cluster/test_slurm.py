"""``fluid-hw launch --scheduler slurm`` on a one-node Slurm cluster (the ``slurm``
fixture): the digits MLP with 2 servers + 2 trainers ends where a plain run does;
async and collective run; a job past --timeout is cancelled with scancel; inside an
allocation the launcher runs srun directly.  Nothing is left behind."""

import os
import subprocess
import sys
import time

import pytest

from fluid_hw.backends.cluster.slurm import job_state

from .mpi_job import (
    EXAMPLE,
    ROOT,
    STEPS,
    fail_once_script,
    hang_script,
    launch,
    leftovers,
    load_params,
)
from .mpi_job import assert_same as _assert_same
from .mpi_job import plain_run as _plain

pytest.importorskip("mpi4py")


def _args(workdir, mode, *more):
    return ["--scheduler", "slurm", "--mode", mode, "--pservers", "2", "--trainers", "2",
            "--timeout", "100", "--job-dir", str(workdir / "jobs"), "--checkpoint-dir",
            str(workdir / "ckpt"), *more]


@pytest.mark.parametrize("mode", ["sync", "collective"])
def test_slurm_job_saves_the_parameters_of_a_single_process_run(mode, slurm, workdir):
    job = launch([*_args(workdir, mode), str(EXAMPLE), "--steps", str(STEPS), "--log-every",
                  "0", "--save-params", str(workdir / "A")], env=slurm)
    assert job.rc == 0, job.out
    assert "submitted Slurm job" in job.out
    _assert_same(load_params(workdir / "A"), _plain(workdir / "B"))
    # the output split per role, beside the job's output file
    logs = sorted(p.name for p in (workdir / "jobs").glob("slurm-*/*.log"))
    want = ["trainer_0.log", "trainer_1.log"]
    if mode == "sync":
        want = ["pserver_0.log", "pserver_1.log", *want]
    assert [n for n in logs if n != "other.log"] == want, logs
    trainer0 = next((workdir / "jobs").glob("slurm-*/trainer_0.log")).read_text()
    assert "saved parameters" in trainer0
    assert leftovers(job) == []


def test_slurm_async_job_trains(slurm, workdir):
    """Async is not deterministic: the recipe of test_launch's async test (Adam, batch
    128, decay), fewer steps; the bound is well below what it reaches."""
    job = launch([*_args(workdir, "async"), str(EXAMPLE), "--steps", "100", "--log-every",
                  "0", "--batch-size", "128", "--lr-decay-steps", "200", "--optimizer",
                  "adam", "--lr", "0.005"], env=slurm)
    assert job.rc == 0, job.out
    acc = [float(ln.split()[-1]) for ln in job.lines("trainer 0") if "accuracy" in ln]
    assert acc and acc[0] > 0.8, job.out
    assert leftovers(job) == []


def test_slurm_timeout_cancels_the_job(slurm, workdir):
    script = hang_script(workdir)
    args = _args(workdir, "sync")
    args[args.index("--timeout") + 1] = "4"
    t0 = time.time()
    job = launch([*args, str(script)], env=slurm, timeout=60)
    assert job.rc == 124, job.out
    assert "cancelling Slurm job" in job.out
    assert time.time() - t0 < 40
    jid = job.out.split("submitted Slurm job ")[1].split()[0]
    env = {**os.environ, **slurm}
    state = subprocess.run(["scontrol", "show", "job", "-o", jid], env=env,
                           capture_output=True, text=True).stdout
    assert "JobState=CANCELLED" in state, state
    assert leftovers(job, wait_s=10) == []


def test_inside_an_allocation_srun_runs_at_once(slurm, workdir):
    """salloc -n 3 fluid-hw launch --scheduler slurm: no sbatch, srun in the allocation."""
    env = {**os.environ, **slurm}
    r = subprocess.run(["salloc", "-n", "3", sys.executable, "-m", "fluid_hw.cli.main",
                        "launch", *_args(workdir, "sync")[:-4], "--pservers", "1",
                        "--trainers", "2", "--checkpoint-dir", str(workdir / "ckpt"),
                        str(EXAMPLE), "--steps", "5", "--log-every", "0"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "submitted Slurm job" not in r.stdout
    assert "[trainer 0] final test accuracy" in r.stdout, r.stdout


def test_slurm_option_errors_name_the_fix(workdir):
    r = subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", "launch", "--scheduler",
                        "slurm", "--hosts", "a,b", str(EXAMPLE)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--nodes" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", "launch", "--scheduler",
                        "slurm", "--nodes", "1", "--ntasks-per-node", "2", str(EXAMPLE)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "4 ranks" in r.stderr, r.stderr


def test_job_state_of_an_unknown_job(slurm, monkeypatch):
    for k, v in slurm.items():
        monkeypatch.setenv(k, v)
    assert job_state("999999") == "GONE"


def test_a_failed_slurm_job_is_resubmitted_with_resume(slurm, workdir):
    """--max-restarts under Slurm: the second attempt is a new Slurm job, resuming."""
    script, marker = fail_once_script(workdir)
    args = _args(workdir, "sync")
    args[args.index("--pservers") + 1] = "1"
    args[args.index("--trainers") + 1] = "1"
    job = launch([*args, "--max-restarts", "1", str(script), str(marker)], env=slurm,
                 timeout=90)
    assert job.rc == 0, job.out
    assert job.out.count("submitted Slurm job") == 2 and "restart 1 of 1" in job.out
    assert job.lines("trainer 0")[-1] == "resume 1", job.out
    assert leftovers(job) == []


def test_print_commands_shows_the_batch_script(tmp_path):
    """No Slurm needed: the script --scheduler slurm would submit, the key by path."""
    r = subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", "launch", "--scheduler",
                        "slurm", "--print-commands", "--partition", "cpu", "--nodes", "2",
                        "--ntasks-per-node", "2", "--time", "01:00:00", "--job-dir",
                        str(tmp_path), str(EXAMPLE), "--steps", "5"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for line in ("#SBATCH --ntasks=4", "#SBATCH --partition=cpu", "#SBATCH --nodes=2",
                 "#SBATCH --time=01:00:00", "#SBATCH --ntasks-per-node=2",
                 f"#SBATCH --output={tmp_path}/slurm-%j.out", "export FLUID_HW_MODE=sync",
                 "export FLUID_HW_CLUSTER_KEY_FILE=/path/to/cluster.key"):
        assert line in r.stdout.splitlines(), (line, r.stdout)
    assert "srun -n 4 --mpi=pmi2" in r.stdout and "FLUID_HW_CLUSTER_KEY=" not in r.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written
