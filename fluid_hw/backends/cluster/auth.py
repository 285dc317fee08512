"""Authentication of the parameter-server protocol: HMAC-SHA256 with a shared key.

Every point-to-point message (:mod:`.wire`) ends with a 32-byte tag,
``HMAC-SHA256(key, context || message-without-tag)``, where the context binds
it to this job and this hop: ``FLUID_HW_JOB_ID``, the sending rank, the
receiving rank and the MPI tag.  The header carries a sequence number per
(peer, MPI tag) that the sender increases by one per message; a receiver
accepts only numbers above the last one it accepted from that peer on that
tag.  So a message is acted on only if it was made by a holder of the key for
this job and this receiver and has not been seen before: a forged, altered,
reflected or replayed message -- or one without a tag -- is dropped and logged
(``fluid_hw.cluster``), never decoded.

The key, in order of precedence:

1. ``FLUID_HW_CLUSTER_KEY``: the key itself (its UTF-8 bytes, >= 16);
2. ``FLUID_HW_CLUSTER_KEY_FILE``: a regular file readable by its owner only
   (mode 0600 or stricter), whose contents less surrounding white space are the
   key (16 to 4096 bytes).

``fluid-hw launch`` on one machine makes a fresh random key per launch and
hands it to the ranks in their environment (never on a command line); with
``--hosts`` it needs a key file present on every host.  There is no
unauthenticated mode: a rank without a key refuses to send or receive.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ...tools import logger
from .errors import ClusterError
from .wire import MIN_BYTES, SEQ, SEQ_OFFSET, TAG_BYTES

KEY_ENV = "FLUID_HW_CLUSTER_KEY"
KEY_FILE_ENV = "FLUID_HW_CLUSTER_KEY_FILE"
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 4096
#: drops logged one by one per peer; after that only every 1000th (a flood
#: must not fill the disk)
LOG_FIRST_DROPS = 20

_CONTEXT = b"fluid-hw cluster v2\0"
_HOP = struct.Struct("<iii")
_GENERATE = "python -c 'import secrets; print(secrets.token_hex(32))'"

log = logger("cluster")


def _check_len(key: bytes, where: str) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise ClusterError(f"{where}: the cluster key is {len(key)} bytes; use at least "
                           f"{MIN_KEY_BYTES} (make one with {_GENERATE})")
    if len(key) > MAX_KEY_BYTES:
        raise ClusterError(f"{where}: the cluster key is {len(key)} bytes; use at most "
                           f"{MAX_KEY_BYTES}")
    return key


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """The key in ``path``: a regular file only its owner can read, 16-4096 bytes
    once surrounding white space is stripped."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ClusterError(f"{KEY_FILE_ENV}={str(p)!r}: cannot open the cluster key file "
                           f"({e.strerror}); it must exist on every host of the job") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ClusterError(f"{KEY_FILE_ENV}={str(p)!r} is not a regular file")
        if st.st_mode & 0o077:
            raise ClusterError(f"{KEY_FILE_ENV}={str(p)!r} has mode "
                               f"{stat.S_IMODE(st.st_mode):04o}: others can read the key; "
                               f"chmod 600 {p}")
        if st.st_size > MAX_KEY_BYTES + 64:
            raise ClusterError(f"{KEY_FILE_ENV}={str(p)!r} is {st.st_size} bytes; a key file "
                               f"holds at most {MAX_KEY_BYTES}")
        data = os.read(fd, MAX_KEY_BYTES + 65)
    finally:
        os.close(fd)
    return _check_len(data.strip(), f"{KEY_FILE_ENV}={str(p)!r}")


def load_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """The shared key from ``env`` (default ``os.environ``): ``FLUID_HW_CLUSTER_KEY``
    first, then ``FLUID_HW_CLUSTER_KEY_FILE``; None when neither is set."""
    e = os.environ if env is None else env
    raw = e.get(KEY_ENV, "")
    if raw:
        return _check_len(raw.encode(), KEY_ENV)
    path = e.get(KEY_FILE_ENV, "")
    if path:
        return read_key_file(path)
    return None


def require_key(rank: int, env: Mapping[str, str] | None = None) -> bytes:
    key = load_key(env)
    if key is None:
        raise ClusterError(
            f"rank {rank}: no cluster key, so parameter-server messages cannot be "
            f"authenticated. fluid-hw launch sets one; for an mpiexec or srun line of your "
            f"own, give every rank {KEY_FILE_ENV}=<a file, mode 0600, present on every host> "
            f"(or {KEY_ENV}=<the key>); make a key with {_GENERATE} (docs/cluster.md, "
            "'Security')")
    return key


def job_id(env: Mapping[str, str]) -> str:
    """What tells this job's messages from another's with the same key:
    ``FLUID_HW_JOB_ID`` (unique per ``fluid-hw launch``), else Slurm's job and
    step ids, else nothing (then only a fresh key per job prevents a message of
    an earlier job being replayed into this one)."""
    if env.get("FLUID_HW_JOB_ID"):
        return env["FLUID_HW_JOB_ID"]
    if env.get("SLURM_JOB_ID"):
        return f"slurm:{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '')}"
    return ""


class Authenticator:
    """Seals outgoing and checks incoming messages of one rank."""

    def __init__(self, key: bytes, rank: int, job_id: str = "") -> None:
        self.key = _check_len(bytes(key), "Authenticator")
        self.rank = rank
        self.job = _CONTEXT + job_id.encode() + b"\0"
        self.sent: dict[tuple[int, int], int] = {}  # (dest, tag) -> last sequence number
        self.seen: dict[tuple[int, int], int] = {}  # (source, tag) -> last accepted
        self.dropped: dict[int, int] = {}  # source -> messages dropped

    @staticmethod
    def from_env(rank: int, env: Mapping[str, str] | None = None) -> Authenticator:
        e = os.environ if env is None else env
        return Authenticator(require_key(rank, e), rank, job_id(e))

    def _mac(self, buf: np.ndarray, src: int, dst: int, tag: int) -> bytes:
        h = hmac.new(self.key, self.job, hashlib.sha256)
        h.update(_HOP.pack(src, dst, tag))
        h.update(buf.data[:buf.nbytes - TAG_BYTES])
        return h.digest()

    def seal(self, buf: np.ndarray, dest: int, tag: int) -> np.ndarray:
        """Number and sign ``buf`` (from :func:`.wire.encode`) in place for one send
        to ``dest`` on ``tag``; do not change it until the send completes."""
        if buf.dtype != np.uint8 or buf.ndim != 1 or buf.nbytes < MIN_BYTES:
            raise ClusterError(f"rank {self.rank}: can only send buffers made by wire.encode")
        seq = self.sent.get((dest, tag), 0) + 1
        self.sent[(dest, tag)] = seq
        SEQ.pack_into(buf.data, SEQ_OFFSET, seq)
        buf[buf.nbytes - TAG_BYTES:] = np.frombuffer(self._mac(buf, self.rank, dest, tag),
                                                     np.uint8)
        return buf

    def check(self, buf: np.ndarray, src: int, tag: int) -> bool:
        """True if ``buf`` came from rank ``src`` on ``tag`` with a valid tag and a new
        sequence number; otherwise the message is logged and must be dropped."""
        if buf.nbytes < MIN_BYTES:
            return self._drop(src, tag, f"{buf.nbytes} bytes, too short to carry a tag")
        want = self._mac(buf, src, self.rank, tag)
        got = bytes(buf[buf.nbytes - TAG_BYTES:])
        if not hmac.compare_digest(want, got):
            return self._drop(src, tag, "bad or missing authentication tag (forged, altered, "
                              "or sent with another key or for another job)")
        seq = SEQ.unpack_from(buf.data, SEQ_OFFSET)[0]
        last = self.seen.get((src, tag), 0)
        if seq <= last:
            return self._drop(src, tag, f"replayed (sequence number {seq}, already at {last})")
        self.seen[(src, tag)] = seq
        return True

    def _drop(self, src: int, tag: int, why: str) -> bool:
        n = self.dropped.get(src, 0) + 1
        self.dropped[src] = n
        if n <= LOG_FIRST_DROPS or n % 1000 == 0:
            log.warning("rank %d: dropped a message from rank %d (MPI tag %d): %s; %d from "
                        "that rank so far%s", self.rank, src, tag, why, n,
                        "" if n < LOG_FIRST_DROPS else " (now logging every 1000th)")
        return False
