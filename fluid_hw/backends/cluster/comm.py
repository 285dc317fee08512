"""MPI through mpi4py: point-to-point messages, collectives, and waiting politely.

Every wait here is non-blocking MPI (``Isend``/``improbe``/``Iallreduce``...)
tested in a loop that sleeps with exponential back-off (20 us doubling to
``FLUID_HW_POLL_MAX_US``, default 1000 us).  A blocking MPICH call spins a core
at 100 %; with 2 servers and 2 trainers on a 2-core machine that spinning
starves the ranks doing real work (measured: a 33 kB ping-pong takes 8 ms
spinning, 0.5 ms sleeping).  Each wait gives up after ``FLUID_HW_COMM_TIMEOUT``
seconds (default 600) with an error naming the peer, so nothing hangs forever.

Point-to-point messages are authenticated (:mod:`.auth`): :meth:`Comm.isend`
numbers and signs each buffer, :meth:`Comm.poll` drops (and logs) any message
whose tag or sequence number is wrong before it is decoded.  The collectives
carry bare tensors and are not authenticated.

mpi4py is imported on first use: importing the cluster back end (e.g. to
transpile) does not start MPI.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .auth import Authenticator
from .errors import ClusterError
from .wire import Message, decode

#: message tags
TAG_TO_SERVER = 11
TAG_TO_TRAINER = 12
TAG_PEER = 13

_POLL_MIN_S = 20e-6


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ClusterError(f"{name}={raw!r} is not a number") from None


def comm_timeout() -> float:
    """Seconds any single wait may take (``FLUID_HW_COMM_TIMEOUT``, default 600)."""
    return _env_float("FLUID_HW_COMM_TIMEOUT", 600.0)


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ClusterError("the cluster back end needs mpi4py and MPICH: "
                           "pip install 'fluid-hw[cluster]'") from e
    return MPI


class Backoff:
    """How a waiting rank passes time: for the first ``yield_us`` (default
    ``FLUID_HW_YIELD_US``, 200 us) it only yields the core (``sched_yield``
    returns at once when nobody else wants it), then it sleeps, 20 us doubling
    to ``FLUID_HW_POLL_MAX_US`` (default 1000 us).  ``reset`` when something
    happened."""

    def __init__(self, yield_us: float | None = None) -> None:
        self.max_s = _env_float("FLUID_HW_POLL_MAX_US", 1000.0) * 1e-6
        self.yield_s = (yield_us if yield_us is not None
                        else _env_float("FLUID_HW_YIELD_US", 200.0)) * 1e-6
        self.reset()

    def reset(self) -> None:
        self.delay = _POLL_MIN_S
        self.until = time.perf_counter() + self.yield_s

    def sleep(self) -> None:
        if time.perf_counter() < self.until:
            os.sched_yield()
            return
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, self.max_s)


#: a transfer in progress: a large (rendezvous) message moves only while both sides
#: call MPI, so a side with one in flight yields (no sleeping) for up to this long
ACTIVE_YIELD_US = 20000.0


class Comm:
    """One process's view of the job: its rank, and messages to and from others."""

    def __init__(self, comm: Any = None, auth: Authenticator | None = None) -> None:
        self.MPI = _mpi()
        self.comm = comm if comm is not None else self.MPI.COMM_WORLD
        self.rank: int = self.comm.Get_rank()
        self.size: int = self.comm.Get_size()
        self.timeout = comm_timeout()
        self.pending: list[tuple[Any, np.ndarray]] = []
        self._auth = auth

    @property
    def auth(self) -> Authenticator:
        """This rank's :class:`.auth.Authenticator`, from the environment on first
        point-to-point use (collective-only jobs need no key)."""
        if self._auth is None:
            self._auth = Authenticator.from_env(self.rank)
        return self._auth

    # -- waiting -----------------------------------------------------------
    def wait(self, reqs: Sequence[Any], what: str, active: bool = False) -> None:
        """Wait for every request (``active``: a transfer is under way, the peer is
        calling MPI too -- yield rather than sleep)."""
        reqs = [r for r in reqs if r is not None]
        if not reqs:
            return
        b = Backoff(ACTIVE_YIELD_US if active else None)
        deadline = time.monotonic() + self.timeout
        while not self.MPI.Request.Testall(reqs):
            if time.monotonic() > deadline:
                raise ClusterError(f"rank {self.rank}: {what} did not finish within "
                                   f"{self.timeout:.0f} s (FLUID_HW_COMM_TIMEOUT); is every "
                                   "rank alive and running the matching program?")
            b.sleep()

    # -- point to point ----------------------------------------------------
    def isend(self, buf: np.ndarray, dest: int, tag: int) -> Any:
        """Send ``buf`` (from :func:`.wire.encode`, signed here in place: leave it
        alone until the request completes)."""
        if not 0 <= dest < self.size:
            raise ClusterError(f"rank {self.rank}: cannot send to rank {dest}; the job has "
                               f"{self.size} ranks (0..{self.size - 1})")
        self.auth.seal(buf, dest, tag)
        return self.comm.Isend([buf, self.MPI.BYTE], dest, tag)

    def post(self, buf: np.ndarray, dest: int, tag: int) -> None:
        """Send without waiting: the request (and its buffer) is kept until
        :meth:`flush`.  Any later MPI call (probing for a reply...) moves it on,
        so a large (rendezvous) send overlaps with what comes next instead of
        costing a round trip of its own; MPI keeps one sender's messages in order."""
        self.pending.append((self.isend(buf, dest, tag), buf))
        if len(self.pending) > 64:
            self.reap()

    def reap(self) -> None:
        """Forget the posted sends that have finished."""
        self.pending = [(r, b) for r, b in self.pending if not r.Test()]

    def flush(self, what: str) -> None:
        """Wait for every posted send."""
        self.wait([r for r, _ in self.pending], what, active=True)
        self.pending.clear()

    def poll(self, source: int, tag: int) -> tuple[Message, int] | None:
        """A waiting authentic message (and its source rank), or None.  A message
        that fails authentication is received, logged and dropped (None)."""
        auth = self.auth  # no key: fail before receiving anything
        st = self.MPI.Status()
        msg = self.comm.improbe(source, tag, st)
        if msg is None:
            return None
        buf = np.empty(st.Get_count(self.MPI.BYTE), np.uint8)
        src = st.Get_source()
        # non-blocking: a blocking receive of a large (rendezvous) message spins
        self.wait([msg.Irecv([buf, self.MPI.BYTE])], f"receiving a message from rank {src}",
                  active=True)
        if not auth.check(buf, src, st.Get_tag()):
            return None
        return decode(buf, f"rank {src}"), src

    def recv(self, source: int, tag: int, what: str) -> tuple[Message, int]:
        """Wait for the next message from ``source`` (or any) with ``tag``."""
        b = Backoff()
        deadline = time.monotonic() + self.timeout
        while True:
            got = self.poll(source, tag)
            if got is not None:
                return got
            if time.monotonic() > deadline:
                peer = "any rank" if source == self.MPI.ANY_SOURCE else f"rank {source}"
                raise ClusterError(f"rank {self.rank}: no message from {peer} for {what} "
                                   f"within {self.timeout:.0f} s (FLUID_HW_COMM_TIMEOUT); is "
                                   "that rank alive and running the matching program?")
            if self.pending:  # our own sends in flight need us to call MPI: stay awake
                self.reap()
                if self.pending:
                    b.reset()
            b.sleep()

    # -- collectives --------------------------------------------------------
    def allreduce_sum(self, buf: np.ndarray, what: str) -> None:
        """In-place sum of ``buf`` over every rank."""
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        self.wait([req], what)

    def bcast(self, buf: np.ndarray, root: int, what: str) -> None:
        self.wait([self.comm.Ibcast(buf, root=root)], what)

    def barrier(self, what: str) -> None:
        self.wait([self.comm.Ibarrier()], what)


_COMM: Comm | None = None


def get_comm() -> Comm:
    """The process-wide communicator (MPI_COMM_WORLD), started on first use."""
    global _COMM
    if _COMM is None:
        _COMM = Comm()
    return _COMM


def set_comm(comm: Comm | None) -> Comm | None:
    """Use ``comm`` from now on (e.g. a sub-communicator); returns the old one."""
    global _COMM
    old, _COMM = _COMM, comm
    return old


# -- the job's layout ---------------------------------------------------------

def endpoint_rank(endpoint: str, endpoints: Sequence[str]) -> int:
    """The MPI rank of a parameter server.

    ``"rank:N"`` names rank N; any other endpoint (``"host:port"``) is server
    number ``endpoints.index(endpoint)``, which runs on that rank: servers take
    the first ranks of the job, trainers the rest.
    """
    if endpoint.startswith("rank:"):
        try:
            return int(endpoint[5:])
        except ValueError:
            raise ClusterError(f"endpoint {endpoint!r}: expected 'rank:<number>'") from None
    try:
        return list(endpoints).index(endpoint)
    except ValueError:
        raise ClusterError(f"endpoint {endpoint!r} is not one of the parameter servers "
                           f"{list(endpoints)}") from None


def server_ranks(endpoints: Sequence[str]) -> list[int]:
    return [endpoint_rank(e, endpoints) for e in endpoints]


def trainer_ranks(endpoints: Sequence[str], trainers: int, world_size: int) -> list[int]:
    """Ranks of trainers 0..trainers-1: the ranks that are not servers, in order."""
    servers = set(server_ranks(endpoints))
    rest = [r for r in range(world_size) if r not in servers]
    if len(rest) < trainers:
        raise ClusterError(f"the job has {world_size} ranks: {len(servers)} parameter "
                           f"server(s) leave {len(rest)} for {trainers} trainer(s); start "
                           f"{len(servers) + trainers} ranks (mpiexec -n "
                           f"{len(servers) + trainers})")
    return rest[:trainers]
