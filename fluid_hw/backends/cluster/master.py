"""``fluid-hw master``: a small HTTP service that takes jobs and runs them.

The standard library's ``http.server`` (one thread per request), JSON in and
out, under ``/v1``:

=======================================  ============================================
``POST /v1/jobs``                        submit: the script and its files (base64),
                                         arguments, servers, trainers, mode,
                                         scheduler (``local`` or ``slurm``)...; or
                                         ``resume_from`` a job: its files, resumed
                                         from its last complete checkpoint
``GET /v1/jobs``                         every job with its state and step
``GET /v1/jobs/ID``                      one job
``GET /v1/jobs/ID/logs?offset=N``        its output from byte N (``next_offset``,
                                         ``done`` for following it)
``POST /v1/jobs/ID/cancel``              stop it (every rank, or ``scancel``)
=======================================  ============================================

Every request carries ``Authorization: Bearer TOKEN`` (the master's
``FLUID_HW_TOKEN`` or token file, compared in constant time): none is 401,
another 403.  A request body over ``max_upload`` bytes is refused (413) from
its ``Content-Length``, before it is read (the body is then read and dropped, up
to ``DRAIN_FACTOR`` times the limit, so the client gets the reply); uploads are validated whole
(:func:`.jobstore.validate`: no path may leave the job's folder, no pickle --
files are bytes, the rest JSON) before anything is written, and a job's folder
appears only complete (:class:`.jobstore.JobStore`).  Submissions run
concurrently; each gets its own folder and runner process
(:mod:`.master_job`), which outlives the master, so a restarted master finds
its jobs, running or done, in the state folder.
"""

from __future__ import annotations

import hmac
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...errors import FluidError
from .errors import MasterError
from .jobstore import JobStore, runner_alive, validate

DEFAULT_PORT = 8470
DEFAULT_MAX_UPLOAD = 64 << 20
TOKEN_ENV = "FLUID_HW_TOKEN"
TOKEN_FILE_ENV = "FLUID_HW_TOKEN_FILE"
MIN_TOKEN_CHARS = 16
#: largest piece of a log one request returns
LOG_CHUNK = 1 << 20
#: a refused upload's body is read and dropped up to this many times max_upload,
#: for at most DRAIN_SECONDS, so the client sees the 413 instead of a reset
DRAIN_FACTOR = 4
DRAIN_SECONDS = 10.0
FINAL = ("succeeded", "failed", "cancelled", "lost")


def read_token(token_file: str | None = None) -> str | None:
    """``$FLUID_HW_TOKEN``, else the file ``token_file`` or ``$FLUID_HW_TOKEN_FILE``
    (readable by its owner only); None when none is given."""
    tok = os.environ.get(TOKEN_ENV, "").strip()
    path = token_file or os.environ.get(TOKEN_FILE_ENV)
    if not tok and path:
        p = Path(path).expanduser()
        try:
            st = p.stat()
            if st.st_mode & 0o077:
                raise MasterError(f"token file {str(p)!r} has mode {st.st_mode & 0o777:o}; "
                                  f"make it readable by its owner only: chmod 600 {p}")
            tok = p.read_text().strip()
        except OSError as e:
            raise MasterError(f"token file {str(p)!r}: {e.strerror}") from None
    if tok and len(tok) < MIN_TOKEN_CHARS:
        raise MasterError(f"the token is {len(tok)} characters; use at least "
                          f"{MIN_TOKEN_CHARS} (python -c 'import secrets; "
                          "print(secrets.token_hex(32))')")
    return tok or None


class Master:
    """The service's state: the job store, the token, the limits, the runners."""

    def __init__(self, state: str | os.PathLike[str], token: str,
                 max_upload: int = DEFAULT_MAX_UPLOAD, scheduler: str = "local") -> None:
        self.store = JobStore(state)
        self.token = token
        self.max_upload = max_upload
        self.scheduler = scheduler
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def submit(self, sub: Any) -> dict[str, Any]:
        if isinstance(sub, dict) and "scheduler" not in sub:
            sub = {**sub, "scheduler": self.scheduler}
        record, files = validate(sub)
        rec = self.store.create(record, files, check=_check_program)
        self._start(rec["id"])
        return self.store.status(rec["id"])

    def _start(self, job_id: str) -> None:
        d = self.store.folder(job_id)
        env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, TOKEN_FILE_ENV)}
        env["FLUID_HW_MASTER_JOB"] = job_id
        with open(d / "output.log", "ab") as log:
            p = subprocess.Popen([sys.executable, "-m", "fluid_hw.backends.cluster.master_job",
                                  str(d)], cwd=d / "files", stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        with self._lock:
            self._children[job_id] = p
        self.store.update(job_id, pid=p.pid, started=time.time())

    def reap(self) -> None:
        """Collect the runners that ended (no zombies)."""
        with self._lock:
            for job_id, p in list(self._children.items()):
                if p.poll() is not None:
                    del self._children[job_id]

    def cancel(self, job_id: str) -> dict[str, Any]:
        st = self.store.status(job_id)
        if st["state"] in FINAL:
            return st
        self.store.update(job_id, cancel_requested=True)
        pid = st.get("pid")
        if pid and runner_alive(pid, job_id):
            os.kill(pid, signal.SIGTERM)  # the runner stops its ranks, then writes exit.json
            deadline = time.time() + 30
            while runner_alive(pid, job_id) and time.time() < deadline:
                self.reap()
                time.sleep(0.1)
        return self.store.status(job_id)

    def logs(self, job_id: str, offset: int) -> dict[str, Any]:
        st = self.store.status(job_id)
        path = self.store.folder(job_id) / "output.log"
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(LOG_CHUNK)
        except FileNotFoundError:
            data = b""
        return {"text": data.decode(errors="replace"), "next_offset": offset + len(data),
                "done": st["state"] in FINAL and len(data) < LOG_CHUNK, "state": st["state"]}


def _check_program(files: Path, rec: dict[str, Any]) -> None:
    """A saved program job is loaded and split here, as its ranks will split it, so a
    program that cannot run is refused at submission (:mod:`.program_job`)."""
    if not rec.get("program"):
        return
    from .program_job import check_job

    try:
        check_job(files / rec["program"], rec["pservers"], rec["trainers"], rec["mode"])
    except FluidError as e:
        raise MasterError(f"program {rec['program']!r}: {e}") from None


def _handler(master: Master) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "fluid-hw-master/1"
        _body_read = False

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write(f"fluid-hw master: {self.address_string()} {format % args}\n")

        def _send(self, code: int, obj: Any) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, msg: str) -> None:
            self.close_connection = True
            self._send(code, {"error": msg})
            self._discard_body()

        def _discard_body(self) -> None:
            """Read and drop a refused request's unread body (never stored), so that
            the client, still sending, gets the reply instead of a reset connection;
            a body declared over DRAIN_FACTOR x max_upload is not waited for."""
            raw = self.headers.get("Content-Length", "")
            left = int(raw) if raw.isdigit() and not self._body_read else 0
            if left > DRAIN_FACTOR * master.max_upload:
                return
            try:
                self.connection.settimeout(DRAIN_SECONDS)
                while left > 0:
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    left -= len(chunk)
            except OSError:
                pass

        def _authorised(self) -> bool:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                self._error(401, f"no token: send 'Authorization: Bearer TOKEN' (fluid-hw "
                            f"submit/jobs/logs/cancel read {TOKEN_ENV} or --token-file)")
                return False
            if not hmac.compare_digest(auth[7:].strip().encode(), master.token.encode()):
                self._error(403, "wrong token")
                return False
            return True

        def _route(self, method: str) -> None:
            if not self._authorised():
                return
            url = urlsplit(self.path)
            parts = [p for p in url.path.split("/") if p]
            try:
                if parts[:2] != ["v1", "jobs"]:
                    raise LookupError
                master.reap()
                if method == "GET" and len(parts) == 2:
                    st = master.store
                    self._send(200, {"jobs": [st.status(i) for i in st.ids()]})
                elif method == "GET" and len(parts) == 3:
                    self._send(200, master.store.status(parts[2]))
                elif method == "GET" and len(parts) == 4 and parts[3] == "logs":
                    q = parse_qs(url.query)
                    offset = int(q.get("offset", ["0"])[0])
                    if offset < 0:
                        raise MasterError(f"offset {offset} must be >= 0")
                    self._send(200, master.logs(parts[2], offset))
                elif method == "POST" and len(parts) == 2:
                    n = self._length()
                    if n > master.max_upload:  # refused unread
                        self._error(413, f"the upload is {n} bytes; this master takes at "
                                    f"most {master.max_upload} (fluid-hw master "
                                    "--max-upload-bytes)")
                    else:
                        self._send(201, master.submit(self._body(n)))
                elif method == "POST" and len(parts) == 4 and parts[3] == "cancel":
                    self._send(200, master.cancel(parts[2]))
                else:
                    raise LookupError
            except LookupError:
                self._error(404, f"no such request: {method} {url.path} (docs/cluster.md, "
                            "'The master')")
            except (FluidError, ValueError) as e:
                code = 404 if isinstance(e, MasterError) and "no job" in str(e) else 400
                self._error(code, str(e))

        def _length(self) -> int:
            raw = self.headers.get("Content-Length")
            if raw is None or not raw.isdigit():
                raise MasterError("a submission needs a Content-Length header")
            return int(raw)

        def _body(self, n: int) -> Any:
            self._body_read = True
            try:
                return json.loads(self.rfile.read(n))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise MasterError(f"the submission is not valid JSON: {e}") from None

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

    return Handler


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise MasterError(f"--listen {listen!r}: give HOST:PORT, e.g. 127.0.0.1:{DEFAULT_PORT}")
    return host.strip("[]"), int(port)


def serve(master: Master, listen: str, ready: Any = None) -> None:
    """Serve until interrupted; ``ready(url)`` is called once listening."""
    host, port = parse_listen(listen)
    httpd = ThreadingHTTPServer((host, port), _handler(master))
    httpd.daemon_threads = True
    url = f"http://{host}:{httpd.server_address[1]}"
    if ready is not None:
        ready(url)
    try:
        httpd.serve_forever(poll_interval=0.5)
    finally:
        httpd.server_close()
