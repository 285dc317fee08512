"""The cluster's exposure: authenticated pserver messages, loopback-only single-host jobs.

The message tests run :class:`Comm` over an in-memory stand-in for mpi4py (no
MPI job); the socket test runs one small job through ``fluid-hw launch`` and
reads the listening sockets of its processes from ``/proc/net``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fluid_hw.backends.cluster import auth, comm
from fluid_hw.backends.cluster.auth import KEY_ENV, KEY_FILE_ENV, Authenticator, load_key
from fluid_hw.backends.cluster.errors import ClusterError, LaunchError
from fluid_hw.backends.cluster.launch import (
    LOOPBACK_ENV,
    LaunchSpec,
    find_mpiexec,
    is_gforker,
    job_env,
    mpiexec_command,
    secret_env,
)
from fluid_hw.backends.cluster.wire import TAG_BYTES, Kind, decode, encode

from .mpi_job import ROOT, Job, _tagged, leftovers, lines_until, start, stop

KEY = b"k" * 32


# -- an in-memory mpi4py: just what Comm uses ---------------------------------------------

class _Req:
    def Test(self):  # mpi4py's names
        return True


class _Status:
    def __init__(self):
        self.count = self.source = self.tag = -1

    def Get_count(self, _dt):
        return self.count

    def Get_source(self):
        return self.source

    def Get_tag(self):
        return self.tag


class _Probed:
    def __init__(self, data):
        self.data = data

    def Irecv(self, spec):
        spec[0][...] = np.frombuffer(self.data, np.uint8)
        return _Req()


class FakeMPI:
    BYTE = "byte"
    ANY_SOURCE = -1
    Status = _Status

    class Request:
        @staticmethod
        def Testall(reqs):
            return True


class FakeWorld:
    """Delivers bytes between ranks in order; ``wire`` is what is in flight."""

    def __init__(self, size):
        self.size = size
        self.wire: list[list] = []  # [src, dst, tag, bytes]

    def comm(self, rank):
        world = self

        class _C:
            def Get_rank(self):
                return rank

            def Get_size(self):
                return world.size

            def Isend(self, spec, dest, tag):
                world.wire.append([rank, dest, tag, bytes(spec[0])])
                return _Req()

            def improbe(self, source, tag, st):
                for i, (s, d, t, data) in enumerate(world.wire):
                    if d == rank and t == tag and source in (-1, s):
                        del world.wire[i]
                        st.count, st.source, st.tag = len(data), s, t
                        return _Probed(data)
                return None

        return _C()


@pytest.fixture
def fake_mpi(monkeypatch):
    monkeypatch.setattr(comm, "_mpi", lambda: FakeMPI)
    monkeypatch.setenv("FLUID_HW_COMM_TIMEOUT", "5")


def _pair(key_a=KEY, key_b=KEY, job="job-1"):
    w = FakeWorld(3)
    server = comm.Comm(w.comm(0), Authenticator(key_a, 0, job))
    trainer = comm.Comm(w.comm(1), Authenticator(key_b, 1, job))
    return w, server, trainer


def _grad(value=1.0):
    return encode(Kind.GRAD, "w@GRAD", np.full(8, value, np.float32), trainer_id=0, step=3)


def _flip(data, where):
    b = bytearray(data)
    b[where] ^= 0x01
    return bytes(b)


# -- tampered, forged, replayed messages are dropped and logged, never decoded -------------

@pytest.mark.parametrize(("what", "tamper"), [
    ("a payload byte", lambda d: _flip(d, len(d) - TAG_BYTES - 1)),
    ("the step in the header", lambda d: _flip(d, 12)),
    ("the tag", lambda d: _flip(d, len(d) - 1)),
    ("no tag at all", lambda d: d[:-TAG_BYTES] + bytes(TAG_BYTES)),
    ("a message cut short", lambda d: d[:20]),
])
def test_tampered_message_is_dropped_and_logged(fake_mpi, caplog, what, tamper):
    w, server, trainer = _pair()
    trainer.isend(_grad(), 0, comm.TAG_TO_SERVER)
    w.wire[0][3] = tamper(w.wire[0][3])
    with caplog.at_level(logging.WARNING, "fluid_hw.cluster"):
        assert server.poll(-1, comm.TAG_TO_SERVER) is None, what
    assert not w.wire  # received and discarded
    assert "rank 0: dropped a message from rank 1 (MPI tag 11)" in caplog.text
    # the next genuine message still gets through
    trainer.isend(_grad(2.0), 0, comm.TAG_TO_SERVER)
    msg, src = server.poll(-1, comm.TAG_TO_SERVER)
    assert src == 1 and msg.kind == Kind.GRAD and msg.array[0] == 2.0


def test_forged_replayed_reflected_and_foreign_messages_are_dropped(fake_mpi, caplog):
    w, server, trainer = _pair()
    caplog.set_level(logging.WARNING, "fluid_hw.cluster")
    # forged: a well-formed message from someone without the key
    w.wire.append([1, 0, comm.TAG_TO_SERVER, bytes(_grad(666.0))])
    assert server.poll(-1, comm.TAG_TO_SERVER) is None
    # replayed: a genuine message delivered twice
    trainer.isend(_grad(), 0, comm.TAG_TO_SERVER)
    w.wire.append(list(w.wire[0]))
    assert server.poll(-1, comm.TAG_TO_SERVER) is not None
    assert server.poll(-1, comm.TAG_TO_SERVER) is None
    assert "replayed" in caplog.text
    # reflected: sealed for rank 2, delivered to rank 0
    trainer.isend(_grad(), 2, comm.TAG_TO_SERVER)
    w.wire[0][1] = 0
    assert server.poll(-1, comm.TAG_TO_SERVER) is None
    # sealed on another MPI tag, or by a rank that is not the sender
    trainer.isend(_grad(), 0, comm.TAG_PEER)
    w.wire[0][2] = comm.TAG_TO_SERVER
    assert server.poll(-1, comm.TAG_TO_SERVER) is None
    trainer.isend(_grad(), 0, comm.TAG_TO_SERVER)
    w.wire[0][0] = 2
    assert server.poll(-1, comm.TAG_TO_SERVER) is None
    assert server.auth.dropped == {1: 4, 2: 1}


@pytest.mark.parametrize(("key", "job"), [(b"x" * 32, "job-1"), (KEY, "job-2")])
def test_other_key_or_other_job_is_dropped(fake_mpi, key, job):
    w = FakeWorld(2)
    server = comm.Comm(w.comm(0), Authenticator(KEY, 0, "job-1"))
    trainer = comm.Comm(w.comm(1), Authenticator(key, 1, job))
    trainer.isend(_grad(), 0, comm.TAG_TO_SERVER)
    assert server.poll(-1, comm.TAG_TO_SERVER) is None


def test_recv_waits_past_dropped_messages(fake_mpi):
    w, server, trainer = _pair()
    w.wire.append([1, 0, comm.TAG_TO_TRAINER, bytes(_grad(666.0))])  # forged
    trainer.isend(encode(Kind.PARAM, "w", np.ones(3, np.float32)), 0, comm.TAG_TO_TRAINER)
    msg, _ = server.recv(1, comm.TAG_TO_TRAINER, "a parameter")
    assert msg.kind == Kind.PARAM and msg.name == "w"


def test_dropping_logs_are_bounded(fake_mpi, caplog):
    w, server, _ = _pair()
    caplog.set_level(logging.WARNING, "fluid_hw.cluster")
    for _ in range(3 * auth.LOG_FIRST_DROPS):
        w.wire.append([1, 0, comm.TAG_TO_SERVER, bytes(_grad())])
        assert server.poll(-1, comm.TAG_TO_SERVER) is None
    assert len(caplog.records) == auth.LOG_FIRST_DROPS
    assert server.auth.dropped[1] == 3 * auth.LOG_FIRST_DROPS


def test_a_rank_without_a_key_refuses_to_talk(fake_mpi, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    c = comm.Comm(FakeWorld(2).comm(0))
    with pytest.raises(ClusterError, match=f"rank 0: no cluster key.*{KEY_FILE_ENV}"):
        c.isend(_grad(), 1, comm.TAG_TO_SERVER)
    with pytest.raises(ClusterError, match="no cluster key"):
        c.poll(-1, comm.TAG_TO_SERVER)


def test_sealed_messages_still_decode_in_place():
    a = Authenticator(KEY, 1, "j")
    buf = a.seal(_grad(5.0), 0, 11)
    assert Authenticator(KEY, 0, "j").check(buf, 1, 11)
    m = decode(buf)
    assert m.name == "w@GRAD" and m.step == 3 and np.shares_memory(m.array, buf)


# -- where the key comes from -----------------------------------------------------------

def test_key_precedence_and_file_checks(tmp_path):
    f = tmp_path / "cluster.key"
    f.write_text("  " + "f" * 40 + "\n")
    f.chmod(0o600)
    assert load_key({KEY_FILE_ENV: str(f)}) == b"f" * 40  # surrounding white space dropped
    assert load_key({KEY_ENV: "e" * 20, KEY_FILE_ENV: str(f)}) == b"e" * 20  # env first
    assert load_key({}) is None
    f.chmod(0o644)
    with pytest.raises(ClusterError, match="others can read the key; chmod 600"):
        load_key({KEY_FILE_ENV: str(f)})
    with pytest.raises(ClusterError, match="at least 16"):
        load_key({KEY_ENV: "short"})
    with pytest.raises(ClusterError, match="cannot open"):
        load_key({KEY_FILE_ENV: str(tmp_path / "missing")})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ClusterError, match="not a regular file"):  # and no hang
        load_key({KEY_FILE_ENV: str(fifo)})


def test_launcher_keys_and_command_lines(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    script = tmp_path / "s.py"
    script.write_text("")
    one = LaunchSpec(str(script))
    env = job_env(one, False, "j")
    assert {k: env[k] for k in LOOPBACK_ENV} == LOOPBACK_ENV and KEY_ENV not in env
    k1, k2 = secret_env(one)[KEY_ENV], secret_env(one)[KEY_ENV]
    assert len(k1) == 64 and k1 != k2  # fresh per launch
    cmd = mpiexec_command(one, env)
    assert k1 not in " ".join(cmd) and KEY_ENV not in " ".join(cmd)
    # multi-host: a key file, named (not its contents) on the command line
    many = LaunchSpec(str(script), hosts="n1,n2")
    with pytest.raises(LaunchError, match="--key-file"):
        many.check_key()
    key = tmp_path / "k"
    key.write_text("s" * 64)
    key.chmod(0o600)
    many.key_file = str(key)
    many.check_key()
    assert secret_env(many) == {}
    cmd = mpiexec_command(many, job_env(many, False, "j"))
    assert cmd[cmd.index(KEY_FILE_ENV) + 1] == str(key) and "s" * 64 not in " ".join(cmd)
    assert not is_gforker(cmd[0])
    monkeypatch.setenv(KEY_ENV, "e" * 32)
    with pytest.raises(LaunchError, match="unencrypted"):
        many.check()


# -- a single-host job listens on loopback only -------------------------------------------

def _listening(pids: set[int]) -> list[tuple[str, str]]:
    """(protocol, local address) of the TCP listeners and bound UDP sockets of ``pids``."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                t = os.readlink(fd)
            except OSError:
                continue
            if t.startswith("socket:["):
                inodes.add(t[8:-1])
    out = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            rows = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[9] in inodes and (f[3] == "0A" or proto.startswith("udp")):
                out.append((proto, f[1]))
    return out


def _loopback(hex_addr: str) -> bool:
    ip = hex_addr.split(":")[0]
    if len(ip) == 8:  # IPv4, little-endian bytes: 127.x.x.x ends in 7F
        return ip[6:] == "7F"
    return ip == "0" * 31 + "1" or (ip[:24] == "0000000000000000FFFF0000" and ip[30:] == "7F")


_HOLD_SCRIPT = """\
import sys, time
from pathlib import Path
import numpy as np
from fluid_hw.backends.cluster import ClusterRole
from fluid_hw.backends.cluster.comm import get_comm
from fluid_hw.backends.cluster.wire import Kind, encode
ClusterRole.from_env()
c = get_comm()
if c.rank == 0:  # one message, so every transport is set up
    c.recv(1, 11, "hello")
else:
    c.wait([c.isend(encode(Kind.GRAD, "x", np.ones(50000, np.float32)), 0, 11)], "hello")
c.barrier("ready")
if c.rank == 0:
    Path(sys.argv[1]).touch()
deadline = time.time() + 60
while not Path(sys.argv[2]).exists() and time.time() < deadline:
    time.sleep(0.05)
c.barrier("done")
"""


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net")
def test_single_host_job_listens_on_loopback_only(workdir):
    pytest.importorskip("mpi4py")
    try:
        mpiexec = find_mpiexec(single_host=True)
    except LaunchError as e:
        pytest.skip(str(e))
    if not is_gforker(mpiexec):
        pytest.skip(f"no mpiexec.gforker beside {mpiexec}: hydra's port listens on 0.0.0.0 "
                    "(docs/cluster.md, 'Security')")
    script = workdir / "hold.py"
    script.write_text(_HOLD_SCRIPT)
    ready, done = workdir / "ready", workdir / "done"
    p, tag = start(["--pservers", "1", "--trainers", "1", "--timeout", "90",
                    "--checkpoint-dir", str(workdir / "ck"), str(script), str(ready), str(done)])
    t0 = time.time()
    try:
        while not ready.exists() and p.poll() is None and time.time() - t0 < 60:
            time.sleep(0.05)
        assert ready.exists(), "the job did not get ready"
        pids = set(_tagged(tag))
        socks = _listening(pids)
        done.touch()
        out = "".join(lines_until(p, time.time() + 60))
        p.wait(timeout=30)
    finally:
        stop(p, tag)
    assert p.returncode == 0, out
    exposed = [(proto, a) for proto, a in socks if not _loopback(a)]
    assert exposed == [], f"listening beyond loopback: {exposed} (all: {socks})\n{out}"
    assert leftovers(Job(0, out, tag, t0)) == []


def test_print_commands_name_the_key_file_not_the_key(tmp_path):
    key = tmp_path / "k"
    key.write_text("q" * 64)
    key.chmod(0o600)
    r = subprocess.run([sys.executable, "-m", "fluid_hw.cli.main", "launch", "--hosts", "n1,n2",
                        "--key-file", str(key), "--print-commands",
                        str(ROOT / "examples" / "train_digits_dist.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != KEY_ENV})
    assert r.returncode == 0, r.stderr
    assert f"{KEY_FILE_ENV} {key}" in r.stdout and f"{KEY_FILE_ENV}={key}" in r.stdout
    assert "q" * 64 not in r.stdout
