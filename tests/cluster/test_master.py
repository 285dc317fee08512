"""``fluid-hw master`` with ``submit``, ``jobs``, ``logs``, ``cancel``: real jobs of the
digits MLP run by a master in a subprocess (killed and restarted where a test says so).

Every master of a test carries a ``FLUID_HW_TEST_TAG`` its jobs inherit, so
:func:`.mpi_job.leftovers` sees any process or MPI segment a job left.
"""

import base64
import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from fluid_hw.backends.cluster.master_client import Client, submission

from .mpi_job import EXAMPLE, ROOT, Job, _kill_tagged, leftovers, load_params
from .mpi_job import assert_same as _assert_same
from .mpi_job import plain_run as _plain

pytest.importorskip("mpi4py")

TOKEN = "t0ken-" + uuid.uuid4().hex
MAX_UPLOAD = 1 << 20


class Master:
    """A ``fluid-hw master`` subprocess on a free loopback port."""

    def __init__(self, state: Path, tag: str, env: dict[str, str] | None = None) -> None:
        env = {**os.environ, **(env or {}), "FLUID_HW_TOKEN": TOKEN, "FLUID_HW_TEST_TAG": tag,
               "FLUID_HW_COMM_TIMEOUT": "60"}
        self.p = subprocess.Popen(
            [sys.executable, "-m", "fluid_hw.cli.main", "master", "--listen", "127.0.0.1:0",
             "--state", str(state), "--max-upload-bytes", str(MAX_UPLOAD)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True)
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        assert m, line
        self.url = m.group(1)
        self.client = Client(self.url, token=TOKEN)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait(timeout=10)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "FLUID_HW_TOKEN": TOKEN, "FLUID_HW_MASTER": self.url}
        return subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", *args], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def master(workdir):
    tag = uuid.uuid4().hex
    m = Master(workdir / "state", tag)
    m.tag = tag
    try:
        yield m
    finally:
        m.kill()
        _kill_tagged(tag)


def _digits(workdir, steps, *more, **fields):
    return submission(str(EXAMPLE), ["--steps", str(steps), *more], **fields)


def _wait_for(pred, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {seconds} s")


def _raw(master, method, path, body=b"", headers=None):
    """One request as sent, the master's status and decoded reply."""
    host, port = master.url.removeprefix("http://").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    out = r.status, json.loads(r.read())
    c.close()
    return out


def _state_files(workdir):
    return sorted(str(p.relative_to(workdir)) for p in (workdir / "state").rglob("*"))


def test_refused_requests_leave_nothing_behind(master, workdir):
    before = _state_files(workdir)
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    code, r = _raw(master, "GET", "/v1/jobs")
    assert code == 401 and "no token" in r["error"]
    code, r = _raw(master, "GET", "/v1/jobs", headers={"Authorization": "Bearer nope"})
    assert code == 403 and "wrong token" in r["error"]
    good = _digits(workdir, 5)
    code, r = _raw(master, "POST", "/v1/jobs", json.dumps(good).encode(),
                   {"Authorization": "Bearer nope"})
    assert code == 403
    big = {**good, "files": {**good["files"], "big.bin": base64.b64encode(
        os.urandom(MAX_UPLOAD)).decode()}}
    code, r = _raw(master, "POST", "/v1/jobs", json.dumps(big).encode(), auth)
    assert code == 413 and f"at most {MAX_UPLOAD}" in r["error"], r
    for bad in ("../escape.py", "/tmp/abs.py", "a/../../b.py"):
        sub = {**good, "files": {**good["files"], bad: base64.b64encode(b"x").decode()}}
        code, r = _raw(master, "POST", "/v1/jobs", json.dumps(sub).encode(), auth)
        assert code == 400 and "leaves the job's folder" in r["error"], (bad, r)
    code, r = _raw(master, "POST", "/v1/jobs", b"{not json", auth)
    assert code == 400 and "not valid JSON" in r["error"]
    code, r = _raw(master, "GET", "/v1/jobs/20260101-000000-00000000", headers=auth)
    assert code == 404 and "no job" in r["error"]
    assert _state_files(workdir) == before
    assert master.client.jobs() == []
    # the command line says why, too
    r = master.cli("jobs")
    assert r.returncode == 0
    env_less = subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", "jobs", "--master",
                               master.url], cwd=ROOT, capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items()
                                   if not k.startswith("FLUID_HW_TOKEN")}, timeout=60)
    assert env_less.returncode == 2 and "no token" in env_less.stderr
    # one master per state folder
    second = subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", "master", "--listen",
                             "127.0.0.1:0", "--state", str(workdir / "state")], cwd=ROOT,
                            env={**os.environ, "FLUID_HW_TOKEN": TOKEN}, capture_output=True,
                            text=True, timeout=60)
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"another master (pid {master.p.pid})" in second.stderr


@pytest.mark.slow
def test_submit_watch_logs_cancel(master, workdir):
    t0 = time.time()
    r = master.cli("submit", "--pservers", "2", "--trainers", "2", str(EXAMPLE), "--steps",
                   "100000", "--log-every", "1")
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    first = _wait_for(lambda: (master.client.job(job).get("step") or 0) >= 3, 90, "progress")
    assert first
    s1 = master.client.job(job)["step"]
    _wait_for(lambda: master.client.job(job)["step"] > s1, 30, "more progress")
    listing = master.cli("jobs")
    assert re.search(rf"{job}\s+train_digits_dist\s+running\s+\d+", listing.stdout), listing
    logs = master.cli("logs", job)
    assert "[trainer 0] step " in logs.stdout and "[pserver 1]" in logs.stdout
    one = master.cli("logs", "--role", "pserver 1", job).stdout.splitlines()
    assert one and one[0].startswith("serving ") and not any("[" in ln for ln in one), one
    r = master.cli("cancel", job)
    assert r.returncode == 0 and "cancelled" in r.stdout, r.stdout + r.stderr
    st = master.client.job(job)
    assert st["state"] == "cancelled" and st["exit_code"] == 130
    assert "the job was cancelled" in master.cli("logs", job).stdout
    left = leftovers(Job(0, "", master.tag, t0))
    assert [x for x in left if x != f"process {master.p.pid}"] == []  # the master carries it


def _hello(workdir):
    script = workdir / "hello.py"
    script.write_text("from fluid_hw.backends.cluster import ClusterRole\n"
                      "import sys\n"
                      "print('hello', sys.argv[1], ClusterRole.from_env().label)\n")
    return script


def test_concurrent_submissions_get_their_own_jobs(master, workdir):
    script = _hello(workdir)
    ids: list[str] = []

    def one(i: int) -> None:
        rec = master.client.submit(submission(str(script), [str(i)], pservers=1, trainers=1))
        ids.append(rec["id"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 4
    for job in ids:
        st = master.client.wait(job, timeout=120)
        assert st["state"] == "succeeded", master.cli("logs", job).stdout
    texts = [master.cli("logs", job).stdout for job in ids]
    said = [re.search(r"^\[trainer 0\] hello (\d)", t, re.M) for t in texts]
    assert sorted(m.group(1) for m in said if m) == ["0", "1", "2", "3"], texts


@pytest.mark.slow
def test_killed_rank_resubmitted_resumes_and_a_restarted_master_keeps_its_records(
        master, workdir):
    """SIGKILL trainer 1 of a submitted job; --resume-from runs it again from the last
    checkpoint every server holds.  The master is killed while the resumed job runs; a
    new master on the same state folder knows both jobs and sees the second finish
    with the parameters of an unbroken run."""
    k, steps = 10, 120
    out = workdir / "A"
    r = master.cli("submit", "--checkpoint-every", str(k), str(EXAMPLE), "--steps",
                   str(steps), "--log-every", "1", "--save-params", str(out))
    assert r.returncode == 0, r.stderr
    first = r.stdout.strip()
    log, offset, killed_at = "", 0, None
    deadline = time.time() + 120
    while killed_at is None and time.time() < deadline:  # the log as it grows
        chunk = master.client.request("GET", f"/v1/jobs/{first}/logs?offset={offset}")
        log += chunk["text"]
        offset = chunk["next_offset"]
        m = re.search(r"^\[trainer 1\] pid (\d+)", log, re.M)
        seen = [int(x) for x in re.findall(r"^\[trainer 1\] step (\d+)", log, re.M)]
        if m and seen and seen[-1] >= 35:
            os.kill(int(m.group(1)), signal.SIGKILL)
            killed_at = seen[-1]
        assert not chunk["done"], log
        time.sleep(0.02)
    assert killed_at is not None and killed_at < steps - k, log
    st = master.client.wait(first, timeout=60)
    assert st["state"] == "failed" and st["exit_code"] != 0, st
    # where it really died: trainer 1 may have run a step or two past the one we saw
    log = master.cli("logs", first).stdout
    killed_at = max(int(x) for x in re.findall(r"^\[trainer 1\] step (\d+)", log, re.M))

    r = master.cli("submit", "--resume-from", first)
    assert r.returncode == 0, r.stderr
    second = r.stdout.strip()
    _wait_for(lambda: master.client.job(second).get("step") is not None, 60, "resumed steps")
    master.kill()  # mid-job: the job goes on without its master
    again = Master(workdir / "state", master.tag)
    try:
        listed = {j["id"]: j for j in again.client.jobs()}
        assert listed[first]["state"] == "failed"
        assert listed[second]["state"] in ("running", "succeeded"), listed[second]
        st = again.client.wait(second, timeout=120)
        assert st["state"] == "succeeded", again.cli("logs", second).stdout
        text = again.cli("logs", second).stdout
        start = int(re.search(r"\[trainer 0\] pid \d+, starting at step (\d+)", text)
                    .group(1))
        assert start % k == 0 and 0 < start <= killed_at + 1 and killed_at - start <= k + 1, text
        assert st["resume_from"] == first
    finally:
        again.kill()
    _assert_same(load_params(out), _plain(workdir / "B", steps))


def test_the_master_runs_jobs_through_slurm(slurm, workdir):
    tag = uuid.uuid4().hex
    m = Master(workdir / "state", tag, env=slurm)
    try:
        rec = m.client.submit(submission(str(_hello(workdir)), ["7"], pservers=1, trainers=1,
                                         scheduler="slurm"))
        st = m.client.wait(rec["id"], timeout=90)
        text = m.cli("logs", rec["id"]).stdout
        assert st["state"] == "succeeded" and st["scheduler"] == "slurm", text
        assert "submitted Slurm job" in text and "[trainer 0] hello 7 trainer 0" in text
        assert list((workdir / "state" / "jobs" / rec["id"] / "slurm").glob("slurm-*.out"))
    finally:
        m.kill()
        _kill_tagged(tag)


def _program_job(folder, steps=20):
    """The digits MLP's training program, saved as a program job."""
    import fluid_hw as fluid
    from fluid_hw.backends.cluster.program_job import save_job
    from fluid_hw.datasets import load_digits_split
    from fluid_hw.frontend import models

    m = models.digits_mlp(seed=1, optimizer=lambda: fluid.optimizer.Momentum(
        learning_rate=0.1, momentum=0.9))
    xtr, _, ytr, _ = load_digits_split()
    return save_job(folder, m.main, m.startup, {"x": xtr, "y": ytr},
                    {"pixels": "x", "label": "y"}, m.loss.name, batch_size=64, steps=steps)


@pytest.mark.slow
def test_a_saved_program_is_split_by_the_master_and_equals_one_process(master, workdir):
    """Fluid's master input: a saved training program + data-reader spec, no script."""
    job_dir = _program_job(workdir / "digits_job")
    plain = subprocess.run([sys.executable, "-m", "fluid_hw.backends.cluster.program_job",
                            "--job", str(job_dir), "--save-params", str(workdir / "B")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    r = master.cli("submit", "--program", str(job_dir), "--", "--save-params",
                   str(workdir / "A"))
    assert r.returncode == 0, r.stderr
    st = master.client.wait(r.stdout.strip(), timeout=120)
    assert st["state"] == "succeeded", master.cli("logs", st["id"]).stdout
    _assert_same(load_params(workdir / "A"), load_params(workdir / "B"))
    # a program that cannot be split is refused at submission, leaving nothing
    (job_dir / "job.json").write_text(json.dumps({
        **json.loads((job_dir / "job.json").read_text()), "batch_size": 63}))
    before = _state_files(workdir)
    r = master.cli("submit", "--program", str(job_dir))
    assert r.returncode == 2 and "does not split over 2 trainers" in r.stderr, r.stderr
    (job_dir / "job.json").write_text(json.dumps({
        **json.loads((job_dir / "job.json").read_text()), "batch_size": 64,
        "feeds": {"pixelz": "x", "label": "y"}}))
    r = master.cli("submit", "--program", str(job_dir))
    assert r.returncode == 2 and "'pixelz'" in r.stderr, r.stderr
    assert _state_files(workdir) == before
