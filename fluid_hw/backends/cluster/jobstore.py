"""The master's job records: one folder per job under ``<state>/jobs/``.

::

    <state>/jobs/<id>/job.json     the record (what to run, when, cancel requested)
    <state>/jobs/<id>/files/       the uploaded files (the script and its inputs)
    <state>/jobs/<id>/output.log   the job's output, written by its runner
    <state>/jobs/<id>/exit.json    the exit code, written once when it ends
    <state>/jobs/<id>/checkpoints/ (unless resumed from another job's)
    <state>/staging/               uploads being written (renamed into jobs/ whole)

Every file is written atomically (:func:`fluid_hw.fileio.atomic_write`); a job
folder appears in ``jobs/`` by one ``rename`` of a complete staging folder, so a
refused or interrupted upload leaves nothing in ``jobs/``.  The state of a job
is derived from the files and the processes, never kept in memory only, so a
restarted master knows its jobs: ``exit.json`` present -> ``succeeded``,
``failed`` or ``cancelled``; else its runner alive -> ``running``; else
``lost`` (the runner died with no exit code, e.g. the machine rebooted).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from ...fileio import atomic_write
from .errors import MasterError
from .launch import MODES

#: what one upload may hold (the request body's size is limited by the server)
MAX_FILES = 1000
MAX_PATH_CHARS = 255
MAX_ARGS = 256
SCHEDULERS = ("local", "slurm")
_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{8}")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_STEP = re.compile(r"^\[trainer 0\] step (\d+)", re.M)


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def check_id(job_id: str) -> str:
    if not _ID.fullmatch(job_id):
        raise MasterError(f"job id {job_id!r} is malformed (like 20260102-030405-0a1b2c3d)")
    return job_id


def safe_relpath(name: object) -> str:
    """An uploaded file's path: relative, inside its folder, plain characters."""
    if not isinstance(name, str) or not name or len(name) > MAX_PATH_CHARS:
        raise MasterError(f"upload path {name!r}: a relative path of 1..{MAX_PATH_CHARS} "
                          "characters")
    p = PurePosixPath(name)
    if p.is_absolute() or "\\" in name or "\0" in name or \
            any(part in ("..", "") for part in name.split("/")):
        raise MasterError(f"upload path {name!r} leaves the job's folder (absolute, '..', "
                          "or empty parts): give paths relative to the job's folder")
    return str(p)


def _int(spec: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    v = spec.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise MasterError(f"submission field {key!r}={v!r}: an integer in {lo}..{hi}")
    return v


def validate(sub: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Check a submission (decoded JSON); the job's record fields and its files.
    Nothing is written here."""
    if not isinstance(sub, dict):
        raise MasterError("a submission is a JSON object (see docs/cluster.md, 'The master')")
    known = {"name", "script", "program", "args", "files", "pservers", "trainers", "mode",
             "scheduler", "checkpoint_every", "max_restarts", "timeout", "resume_from"}
    extra = sorted(set(sub) - known)
    if extra:
        raise MasterError(f"submission fields {extra} unknown; known: {sorted(known)}")
    files_in = sub.get("files", {})
    if not isinstance(files_in, dict) or len(files_in) > MAX_FILES:
        raise MasterError(f"'files' is an object of at most {MAX_FILES} path: base64 entries")
    files: dict[str, bytes] = {}
    for name, data in files_in.items():
        rel = safe_relpath(name)
        if not isinstance(data, str):
            raise MasterError(f"upload {rel!r}: its content is a base64 string")
        try:
            files[rel] = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise MasterError(f"upload {rel!r}: its content is not valid base64") from None
    resume_from = sub.get("resume_from")
    program = sub.get("program")
    if resume_from is not None:
        check_id(str(resume_from))
        if sub.get("script") is None:  # the resumed job's
            sub = {**sub, "script": "resumed.py"}
    elif program is not None:  # a saved program job: a folder among the files
        program = safe_relpath(program)
        if not any(f.startswith(program + "/") for f in files):
            raise MasterError(f"program {program!r}: no uploaded file is in that folder")
        sub = {**sub, "script": sub.get("script") or program}
    script = safe_relpath(sub.get("script"))
    if resume_from is None and program is None and script not in files:
        raise MasterError(f"script {script!r} is not among the uploaded files {sorted(files)}")
    args = sub.get("args", [])
    if not isinstance(args, list) or len(args) > MAX_ARGS or \
            not all(isinstance(a, str) and "\0" not in a for a in args):
        raise MasterError(f"'args' is a list of at most {MAX_ARGS} strings")
    mode = sub.get("mode", "sync")
    if mode not in MODES:
        raise MasterError(f"mode {mode!r}: use one of {list(MODES)}")
    scheduler = sub.get("scheduler", "local")
    if scheduler not in SCHEDULERS:
        raise MasterError(f"scheduler {scheduler!r}: use one of {list(SCHEDULERS)}")
    name = sub.get("name") or Path(script).stem
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise MasterError(f"job name {name!r}: 1..64 letters, digits, '_', '.', '-'")
    timeout = sub.get("timeout")
    if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
        raise MasterError(f"timeout {timeout!r}: a number of seconds > 0")
    record = {
        "name": name, "script": script, "args": args, "mode": mode, "scheduler": scheduler,
        "pservers": _int(sub, "pservers", 2, 0, 1024),
        "trainers": _int(sub, "trainers", 2, 1, 1024),
        "checkpoint_every": _int(sub, "checkpoint_every", 10, 0, 10**9),
        "max_restarts": _int(sub, "max_restarts", 0, 0, 100),
        "timeout": timeout, "resume_from": resume_from, "program": program,
    }
    return record, files


class JobStore:
    """The job folders under ``root`` (thread-safe; one master per folder)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.jobs = self.root / "jobs"
        self.staging = self.root / "staging"
        for d in (self.root, self.jobs, self.staging):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._hold = _lock_state(self.root)  # one master per state folder, for its life
        for left in self.staging.iterdir():  # uploads a killed master was writing
            shutil.rmtree(left, ignore_errors=True)

    def folder(self, job_id: str) -> Path:
        d = self.jobs / check_id(job_id)
        if not (d / "job.json").is_file():
            raise MasterError(f"no job {job_id!r} (fluid-hw jobs lists them)")
        return d

    def create(self, record: dict[str, Any], files: dict[str, bytes],
               check: Callable[[Path, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Write a new job folder whole (staging, then one rename); its record.
        ``check(files folder, record)`` may still refuse it before the rename."""
        job_id = new_id()
        stage = self.staging / job_id
        stage.mkdir(mode=0o700)
        try:
            base = (stage / "files").resolve()
            base.mkdir()
            for rel, data in files.items():
                target = (base / rel).resolve()
                if not target.is_relative_to(base):  # validate() already refused these
                    raise MasterError(f"upload path {rel!r} leaves the job's folder")
                atomic_write(target, data, durable=False)
            if record.get("resume_from"):
                src = self.folder(record["resume_from"])
                old = self.read(record["resume_from"])
                shutil.copytree(src / "files", base, dirs_exist_ok=True)
                record = {**old, **{k: v for k, v in record.items()
                                    if k in ("args", "timeout", "max_restarts") and v}}
                record["resume_from"] = old["id"]
                record["checkpoint_dir"] = old["checkpoint_dir"]
            else:
                record["checkpoint_dir"] = str(self.jobs / job_id / "checkpoints")
            if check is not None:
                check(base, record)
            record.update(id=job_id, created=time.time(), cancel_requested=False, pid=None)
            record.pop("ended", None)
            atomic_write(stage / "job.json", json.dumps(record, indent=1).encode())
            os.rename(stage, self.jobs / job_id)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        return record

    def read(self, job_id: str) -> dict[str, Any]:
        rec: dict[str, Any] = json.loads((self.folder(job_id) / "job.json").read_text())
        return rec

    def update(self, job_id: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            rec = self.read(job_id)
            rec.update(fields)
            atomic_write(self.folder(job_id) / "job.json", json.dumps(rec, indent=1).encode())
            return rec

    def ids(self) -> list[str]:
        return sorted(d.name for d in self.jobs.iterdir()
                      if _ID.fullmatch(d.name) and (d / "job.json").is_file())

    def status(self, job_id: str) -> dict[str, Any]:
        """The record with ``state``, ``exit_code`` and ``step`` (trainer 0's last
        logged step) derived from the files and processes."""
        rec = self.read(job_id)
        d = self.folder(job_id)
        ex = None
        with contextlib.suppress(OSError, ValueError):
            ex = json.loads((d / "exit.json").read_text())
        if ex is not None:
            rec["exit_code"] = ex["exit_code"]
            rec["ended"] = ex["ended"]
            rec["state"] = "cancelled" if rec["cancel_requested"] else \
                "succeeded" if ex["exit_code"] == 0 else "failed"
        elif rec.get("pid") and runner_alive(rec["pid"], job_id):
            rec["state"] = "running"
        elif rec["cancel_requested"]:
            rec["state"] = "cancelled"
        else:
            rec["state"] = "lost" if rec.get("pid") else "starting"
        rec["step"] = last_step(d / "output.log")
        return rec


def _lock_state(root: Path) -> int:
    """An exclusive ``flock`` on ``root/master.lock`` (released when the process ends,
    however it ends); a second master on the folder is refused, naming the first."""
    path = root / "master.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise MasterError(f"another master (pid {holder}) serves the state folder {root}; "
                          "stop it, or give this one another --state") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def runner_alive(pid: int, job_id: str) -> bool:
    """Whether ``pid`` is a live (not zombie) runner of ``job_id``."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and f"FLUID_HW_MASTER_JOB={job_id}".encode() in env.split(b"\0")


def last_step(log: Path, tail: int = 64 * 1024) -> int | None:
    """Trainer 0's last ``step N`` line in the job's output (its progress)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - tail))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    steps = _STEP.findall(text)
    return int(steps[-1]) if steps else None
