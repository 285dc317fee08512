"""The parameter server's loop (the ``listen_and_serv`` kernel).

**Sync mode** alternates two phases, one round per training step:

* *receive*: store each trainer's gradient blocks (as ``<grad>.trainer_<t>``
  when there are several trainers) until every active trainer has sent
  ``send_barrier``; then run the learning-rate block and every optimize block
  (which sum the trainers' copies and scale by 1/trainers), count the round
  and maybe checkpoint;
* *serve*: answer ``GET`` requests with the updated blocks until every active
  trainer has sent ``fetch_barrier``.

A message that belongs to the other phase (a fast trainer's next gradients, a
request sent before the round is complete) is kept and handled when its phase
comes; MPI delivers one sender's messages in order, so nothing is reordered.
The job starts in the serve phase: trainers fetch their initial parameters.

**Async mode** has no phases: each gradient block is applied as it arrives (the
learning-rate block runs when the server's first block arrives) and each
``GET`` is answered at once.

Either loop ends when every trainer has sent ``send_complete``; a last
checkpoint is written then.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from ...ir import dtypes
from ...ir.lod import LoDTensor
from ...ir.program import VarType
from ...tools import logger
from . import checkpoint
from .comm import (
    TAG_PEER,
    TAG_TO_SERVER,
    TAG_TO_TRAINER,
    Comm,
    endpoint_rank,
    get_comm,
    server_ranks,
    trainer_ranks,
)
from .errors import ClusterError
from .wire import Kind, Message, encode

if TYPE_CHECKING:
    from ..cpu.context import KernelContext

log = logger("cluster")


class ParameterServer:
    def __init__(self, ctx: KernelContext, comm: Comm | None = None) -> None:
        a = ctx.attrs
        self.ctx = ctx
        self.scope = ctx.scope
        self.executor = ctx.executor
        if self.executor is None:
            raise ClusterError("listen_and_serv needs an Executor to run its optimize blocks")
        self.program = ctx.op.block.program
        self.endpoints: list[str] = list(a["endpoints"])
        self.endpoint: str = a["endpoint"]
        self.index = self.endpoints.index(self.endpoint)
        self.fanin: int = a["Fanin"]
        self.sync: bool = a["sync_mode"]
        self.comm = comm or get_comm()
        want = endpoint_rank(self.endpoint, self.endpoints)
        if self.comm.rank != want:
            raise ClusterError(f"the program of server {self.endpoint!r} runs on rank "
                               f"{self.comm.rank}, but that server is rank {want}; give each "
                               "rank the program of its own endpoint (ClusterRole.endpoint)")
        self.trainer_of = {r: t for t, r in enumerate(
            trainer_ranks(self.endpoints, self.fanin, self.comm.size))}
        self.blocks: dict[str, int] = {}
        for entry in a["grad_to_block_id"]:
            name, _, idx = entry.rpartition(":")
            self.blocks[name] = int(idx)
        self.first_grad = next(iter(self.blocks), None)
        self.params = set(a["param_names"])
        self.lr_block = a["lr_decay_block_id"]
        self.ckpt_dir: str = a["checkpoint_dir"]
        self.ckpt_every: int = a["checkpoint_every"]
        self.resume: bool = a["resume"]
        self.keep: int = a["checkpoint_keep"]
        self.active = set(range(self.fanin))
        self.round = 0
        self.trainer_steps = [0] * self.fanin
        self._last_ckpt = -1
        gb = self.program.global_block()
        self.state = [v.name for v in gb.vars.values()
                      if v.persistable and v.type == VarType.LOD_TENSOR]
        self.shapes = {v.name: tuple(v.shape) for v in gb.vars.values()}
        self.dtypes = {v.name: dtypes.to_numpy(v.dtype) for v in gb.vars.values()
                       if v.dtype in dtypes.TENSOR_DTYPES}

    # -- helpers ------------------------------------------------------------------
    def _who(self, src: int) -> int:
        t = self.trainer_of.get(src)
        if t is None:
            raise ClusterError(f"server {self.endpoint!r} got a message from rank {src}, which "
                               f"is not a trainer (trainers: ranks {sorted(self.trainer_of)})")
        return t

    def _value(self, name: str) -> np.ndarray:
        v = self.scope.find_value(name)
        if v is None:
            raise ClusterError(f"server {self.endpoint!r}: {name!r} has no value; run the "
                               "server's start-up program (get_startup_program) first")
        return np.asarray(v.data if isinstance(v, LoDTensor) else v)

    def _store_grad(self, msg: Message, t: int) -> None:
        if msg.name not in self.blocks:
            raise ClusterError(f"server {self.endpoint!r} got gradient block {msg.name!r} from "
                               f"trainer {t}, but holds {sorted(self.blocks)}; trainer and "
                               "server programs must come from the same transpile() settings")
        target = f"{msg.name}.trainer_{t}" if self.sync and self.fanin > 1 else msg.name
        want = self.shapes.get(target)
        assert msg.array is not None
        if want is not None and tuple(msg.array.shape) != want:
            raise ClusterError(f"server {self.endpoint!r}: gradient block {msg.name!r} from "
                               f"trainer {t} has shape {list(msg.array.shape)}, expected "
                               f"{list(want)}")
        self.scope.vars[target] = msg.array

    def _reply(self, msg: Message, src: int, t: int) -> None:
        if msg.name not in self.params:
            raise ClusterError(f"trainer {t} asked server {self.endpoint!r} for {msg.name!r}, "
                               f"which it does not hold (it holds {sorted(self.params)})")
        step = self.round if self.sync else self.trainer_steps[t]
        self.comm.post(encode(Kind.PARAM, msg.name, self._value(msg.name), -1, step), src,
                       TAG_TO_TRAINER)

    def _run_block(self, idx: int) -> None:
        self.executor.run_block(self.program.block(idx), self.scope)

    def _next(self) -> tuple[Message, int]:
        return self.comm.recv(self.comm.MPI.ANY_SOURCE, TAG_TO_SERVER,
                              f"server {self.endpoint!r} waiting for trainers")

    # -- checkpoints ----------------------------------------------------------------
    def _checkpoint(self, step: int) -> None:
        if not self.ckpt_dir or step == self._last_ckpt:
            return
        self.comm.flush(f"server {self.endpoint!r} replies")
        arrays = {n: self._value(n) for n in self.state}
        checkpoint.save(self.ckpt_dir, step, arrays, self.trainer_steps, self.keep)
        self._last_ckpt = step
        log.info("server %s: checkpoint at step %d", self.index, step)

    def _maybe_checkpoint(self) -> None:
        if self.ckpt_every > 0:
            step = self.round if self.sync else min(self.trainer_steps)
            if step > 0 and step % self.ckpt_every == 0:
                self._checkpoint(step)

    def _resume(self) -> None:
        """Agree with the other servers on the newest checkpoint all of them hold
        completely, and load it."""
        mine = checkpoint.steps(self.ckpt_dir)
        peers = [r for r in server_ranks(self.endpoints) if r != self.comm.rank]
        bufs = [encode(Kind.PEER_STEPS, "steps", np.asarray(mine, np.int64), -1, 0)
                for _ in peers]
        reqs = [self.comm.isend(b, r, TAG_PEER) for b, r in zip(bufs, peers)]
        common = set(mine)
        for r in peers:
            msg, _ = self.comm.recv(r, TAG_PEER, f"server {self.endpoint!r} agreeing on a "
                                                 "checkpoint")
            assert msg.array is not None
            common &= {int(s) for s in msg.array}
        self.comm.wait(reqs, "checkpoint agreement")
        if not common:
            log.info("server %s: no checkpoint common to all servers in %s; starting at step 0",
                     self.index, self.ckpt_dir)
            return
        step = max(common)
        arrays, ts = checkpoint.load(self.ckpt_dir, step)
        checkpoint.check_members(checkpoint.path_for(self.ckpt_dir, step), arrays, {
            n: (self.shapes.get(n) or None, self.dtypes.get(n)) for n in self.state})
        for n in self.state:
            self.scope.vars[n] = arrays[n]
        if len(ts) != self.fanin:
            raise ClusterError(f"{checkpoint.path_for(self.ckpt_dir, step)} was written for "
                               f"{len(ts)} trainer(s); this job has {self.fanin}")
        self.trainer_steps = ts
        self.round = step if self.sync else min(ts)
        self._last_ckpt = step
        log.info("server %s: resumed from checkpoint step %d", self.index, step)

    # -- loops -------------------------------------------------------------------
    def run(self) -> None:
        if self.resume and self.ckpt_dir:
            self._resume()
        elif self.ckpt_dir and checkpoint.clear(self.ckpt_dir):
            log.info("server %s: fresh start, removed the old checkpoints in %s", self.index,
                     self.ckpt_dir)
        if self.sync:
            self._run_sync()
        else:
            self._run_async()
        self.comm.flush(f"server {self.endpoint!r} replies")
        if self.ckpt_dir:
            self._checkpoint(self.round if self.sync else min(self.trainer_steps))

    def _complete(self, t: int) -> None:
        self.active.discard(t)

    def _run_async(self) -> None:
        while self.active:
            msg, src = self._next()
            t = self._who(src)
            if msg.kind == Kind.GRAD:
                self._store_grad(msg, t)
                if msg.name == self.first_grad and self.lr_block >= 0:
                    self._run_block(self.lr_block)
                self._run_block(self.blocks[msg.name])
                if msg.name == self.first_grad:
                    self.trainer_steps[t] = max(self.trainer_steps[t], msg.step + 1)
                    self._maybe_checkpoint()
            elif msg.kind == Kind.GET:
                self._reply(msg, src, t)
            elif msg.kind == Kind.COMPLETE:
                self._complete(t)
            # barriers carry nothing in async mode

    def _run_sync(self) -> None:
        serving = True  # trainers first fetch the initial parameters
        sent: set[int] = set()  # trainers done sending this round
        fetched: set[int] = set()  # trainers done fetching this round
        got: dict[int, set[str]] = {t: set() for t in range(self.fanin)}
        # messages that belong to a later phase, in arrival order; one trainer's
        # messages are always handled in the order it sent them
        later: deque[tuple[Message, int, int]] = deque()
        recv_kinds = (Kind.GRAD, Kind.SEND_BARRIER)
        serve_kinds = (Kind.GET, Kind.FETCH_BARRIER)

        def ready(msg: Message, t: int) -> bool:
            if msg.kind == Kind.COMPLETE:
                return True
            if serving:
                return msg.kind in serve_kinds and t not in fetched
            return msg.kind in recv_kinds and t not in sent

        while self.active:
            item = None
            blocked: set[int] = set()
            for i, (m, src, t) in enumerate(later):
                if t not in blocked and ready(m, t):
                    item = (m, src, t)
                    del later[i]
                    break
                blocked.add(t)
            if item is None:
                m, src = self._next()
                t = self._who(src)
                if any(lt == t for _, _, lt in later) or not ready(m, t):
                    later.append((m, src, t))
                    continue
                item = (m, src, t)
            msg, src, t = item
            if msg.kind == Kind.COMPLETE:
                self._complete(t)
            elif msg.kind == Kind.GRAD:
                self._store_grad(msg, t)
                got[t].add(msg.name)
            elif msg.kind == Kind.SEND_BARRIER:
                sent.add(t)
            elif msg.kind == Kind.GET:
                self._reply(msg, src, t)
            elif msg.kind == Kind.FETCH_BARRIER:
                fetched.add(t)
            if not self.active:
                break
            if not serving and self.active <= sent:
                self._optimize(got)
                sent.clear()
                serving = True
            elif serving and self.active <= fetched:
                fetched.clear()
                for g in got.values():
                    g.clear()
                serving = False

    def _optimize(self, got: dict[int, set[str]]) -> None:
        for t in sorted(self.active):
            missing = set(self.blocks) - got[t]
            if missing:
                raise ClusterError(f"server {self.endpoint!r}: trainer {t} sent send_barrier "
                                   f"without gradient blocks {sorted(missing)}")
        if self.fanin > 1:
            for t in range(self.fanin):  # a finished trainer contributes zeros
                if t not in self.active:
                    for g in self.blocks:
                        name = f"{g}.trainer_{t}"
                        self.scope.vars[name] = np.zeros(self.shapes[name], self.dtypes[name])
        if self.lr_block >= 0:
            self._run_block(self.lr_block)
        for idx in self.blocks.values():
            self._run_block(idx)
        self.round += 1
        self.trainer_steps = [self.round] * self.fanin
        self._maybe_checkpoint()
