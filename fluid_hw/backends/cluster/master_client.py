"""Talking to ``fluid-hw master``: what ``fluid-hw submit``, ``jobs``, ``logs`` and
``cancel`` send (see :mod:`.master` for the requests)."""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import MasterError
from .master import DEFAULT_PORT, FINAL, TOKEN_ENV, TOKEN_FILE_ENV, read_token

MASTER_ENV = "FLUID_HW_MASTER"


def master_url(url: str | None = None) -> str:
    return (url or os.environ.get(MASTER_ENV) or f"http://127.0.0.1:{DEFAULT_PORT}").rstrip("/")


class Client:
    def __init__(self, url: str | None = None, token: str | None = None,
                 token_file: str | None = None, timeout: float = 60) -> None:
        self.url = master_url(url)
        self.token = token if token is not None else read_token(token_file)
        if not self.token:
            raise MasterError(f"no token for the master: set {TOKEN_ENV}, or {TOKEN_FILE_ENV} "
                              "/ --token-file to a file (mode 0600) holding the master's")
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read()).get("error", "")
            except (ValueError, OSError):
                msg = ""
            raise MasterError(f"the master refused {method} {path}: {msg or e.reason} "
                              f"(HTTP {e.code})") from None
        except (urllib.error.URLError, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            raise MasterError(f"cannot reach the master at {self.url}: {reason} (is fluid-hw "
                              f"master running? --master URL or {MASTER_ENV}; an upload over "
                              "the master's --max-upload-bytes is cut off too)") from None

    def submit(self, sub: dict[str, Any]) -> dict[str, Any]:
        rec: dict[str, Any] = self.request("POST", "/v1/jobs", sub)
        return rec

    def jobs(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.request("GET", "/v1/jobs")["jobs"]
        return out

    def job(self, job_id: str) -> dict[str, Any]:
        rec: dict[str, Any] = self.request("GET", f"/v1/jobs/{job_id}")
        return rec

    def cancel(self, job_id: str) -> dict[str, Any]:
        rec: dict[str, Any] = self.request("POST", f"/v1/jobs/{job_id}/cancel", {})
        return rec

    def logs(self, job_id: str, write: Callable[[str], object], follow: bool = False,
             poll_s: float = 0.5) -> str:
        """Write the job's output; with ``follow`` until it ends.  Its final state."""
        offset = 0
        while True:
            r = self.request("GET", f"/v1/jobs/{job_id}/logs?offset={offset}")
            if r["text"]:
                write(r["text"])
            offset = r["next_offset"]
            if r["done"] or not follow:
                return str(r["state"])
            if not r["text"]:
                time.sleep(poll_s)

    def wait(self, job_id: str, states: Sequence[str] = FINAL, timeout: float = 300,
             poll_s: float = 0.3) -> dict[str, Any]:
        deadline = time.time() + timeout
        while True:
            st = self.job(job_id)
            if st["state"] in states or time.time() > deadline:
                return st
            time.sleep(poll_s)


def submission(script: str, args: Sequence[str], files: Sequence[str] = (),
               **fields: Any) -> dict[str, Any]:
    """The request body of ``fluid-hw submit``: ``script`` and ``files`` read here,
    uploaded under their paths relative to the script's folder."""
    base = Path(script).resolve().parent
    up: dict[str, str] = {}
    for f in [script, *files]:
        p = Path(f).resolve()
        if not p.is_file():
            raise MasterError(f"{f!r} is not a file")
        if not p.is_relative_to(base):
            raise MasterError(f"{f!r} is outside the script's folder {str(base)!r}; the job "
                              "gets the files under their paths relative to it")
        up[p.relative_to(base).as_posix()] = base64.b64encode(p.read_bytes()).decode()
    return {"script": Path(script).name, "args": list(args), "files": up,
            **{k: v for k, v in fields.items() if v is not None}}


def program_submission(folder: str, args: Sequence[str], **fields: Any) -> dict[str, Any]:
    """The request body for a saved program job (:mod:`.program_job`): every file of
    ``folder``, uploaded under ``<folder name>/``."""
    base = Path(folder).resolve()
    if not (base / "main.pb").is_file():
        raise MasterError(f"{folder!r} is not a program job (no main.pb; write one with "
                          "fluid_hw.backends.cluster.program_job.save_job)")
    up = {f"{base.name}/{p.relative_to(base).as_posix()}":
          base64.b64encode(p.read_bytes()).decode()
          for p in sorted(base.rglob("*")) if p.is_file()}
    return {"program": base.name, "args": list(args), "files": up,
            **{k: v for k, v in fields.items() if v is not None}}
