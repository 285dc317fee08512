"""Run onnx's C++ checker, version converter and shape inference where a crash cannot
take the caller down.

Those are C++ code reached with untrusted models: a bad model has made them abort
the whole process (``SIGABRT`` from a failed assertion inside shape inference).
They run in a worker process (:mod:`._onnx_worker`, started on first use and kept
for the next model) with an address-space limit (Linux) and a time limit.  A
worker that dies, runs out of memory or time is reported as
:class:`IsolatedFailure` (and replaced for the next call); the reader turns that
into a ``FormatError`` naming the file.  Where no worker can be started (an
interpreter embedded without an executable) or on non-POSIX systems the checks run
in-process.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from ...errors import OnnxWorkerError as IsolatedFailure
from . import _onnx_worker as proto

#: seconds one check may take
TIMEOUT_S = 120.0
#: address space one check may add to what the worker maps, on top of
#: ``MEMORY_PER_MODEL_BYTE`` bytes per byte of the model
MEMORY_BASE = 2 << 30
MEMORY_PER_MODEL_BYTE = 4


class Answer:
    """What the worker found: ``stage`` (``_onnx_worker.OK``, ``CHECKER``...) and its
    payload (the models, or a message)."""

    def __init__(self, stage: int, payload: bytes) -> None:
        self.stage = stage
        self.payload = payload

    @property
    def message(self) -> str:
        return self.payload.decode("utf-8", "replace")


class _Worker:
    def __init__(self) -> None:
        import onnx

        env = dict(os.environ)
        # the worker imports onnx from where this process found it
        site = str(Path(onnx.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
        # kept open while the worker lives; its tail explains a crash
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-u", proto.__file__], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, env=env, close_fds=True,
            start_new_session=True)
        self.pid = os.getpid()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self.stderr.close()

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait()
        except OSError:
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def said(self) -> str:
        """The last line the worker wrote to stderr (what C++ prints before it aborts)."""
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(size - 4096, 0))
            lines = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return f": {lines[-1].strip().rstrip('.')[-300:]}" if lines else ""

    def died(self) -> str:
        code = self.proc.wait()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"crashed ({name}){self.said()}"
        return f"exited with status {code}{self.said()}"

    def ask(self, head: bytes, data: bytes, timeout: float) -> Answer:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(head)
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except OSError:
            raise IsolatedFailure(self.died()) from None
        out = self.proc.stdout
        head = self._read(out, proto.ANSWER.size, timeout)
        stage, size = proto.ANSWER.unpack(head)
        return Answer(stage, self._read(out, size, timeout))

    def _read(self, f: IO[bytes], n: int, timeout: float) -> bytes:
        fd = f.fileno()
        chunks: list[bytes] = []
        got = 0
        deadline = time.monotonic() + timeout
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                raise IsolatedFailure(f"took longer than {timeout:g} s")
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise IsolatedFailure(self.died())
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


_lock = threading.Lock()
_worker: _Worker | None = None


def _close() -> None:
    if _worker is not None and _worker.pid == os.getpid():
        _worker.close()


atexit.register(_close)


def check_in_worker(data: bytes, opset: int, timeout: float | None = None) -> Answer:
    """The worker's verdict on a serialized model (see :mod:`._onnx_worker`).

    Raises :class:`IsolatedFailure` when the worker crashed, ran out of memory
    (:data:`MEMORY_BASE` plus :data:`MEMORY_PER_MODEL_BYTE` per byte of the model) or of
    time (:data:`TIMEOUT_S`).
    """
    global _worker
    memory = MEMORY_BASE + MEMORY_PER_MODEL_BYTE * len(data)
    head = proto.REQUEST.pack(opset, memory, len(data))
    with _lock:
        if os.name != "posix":  # select() on pipes is POSIX-only: check in-process
            return Answer(*proto.check(data, opset))
        if _worker is None or not _worker.alive():
            if _worker is not None and _worker.pid == os.getpid():
                _worker.kill()
            try:
                _worker = _Worker()
            except OSError:  # no usable interpreter (embedded Python): check in-process
                _worker = None
                return Answer(*proto.check(data, opset))
        worker = _worker
        try:
            answer = worker.ask(head, data, TIMEOUT_S if timeout is None else timeout)
        except BaseException:  # a crash, a timeout, or an interrupt mid-request
            worker.kill()
            _worker = None
            raise
    if answer.stage == proto.MEMORY:
        raise IsolatedFailure(f"ran out of memory (limit {memory >> 20} MiB beyond what the "
                              "worker maps)")
    return answer
