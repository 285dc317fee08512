"""CPU kernels of the distributed ops (``fluid_hw/ir/ops/distributed.py``), over MPI.

Registered in the CPU kernel registry when the cluster back end is imported, so
the ordinary :class:`fluid_hw.Executor` runs trainer and server programs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.lod import LoDTensor
from ..cpu.context import KernelContext
from ..cpu.kernels import register_kernel
from . import checkpoint
from .comm import TAG_TO_SERVER, TAG_TO_TRAINER, Comm, endpoint_rank, get_comm, trainer_ranks
from .errors import ClusterError
from .pserver import ParameterServer, log
from .wire import Kind, encode


def _trainer_comm(ctx: KernelContext) -> Comm:
    """The communicator, after checking this rank is the trainer the op was built for."""
    comm = get_comm()
    if not ctx.attrs["endpoints"]:
        return comm
    tid = ctx.attrs["trainer_id"]
    ranks = _trainer_ranks(ctx, comm)
    if tid >= len(ranks) or ranks[tid] != comm.rank:
        where = ranks[tid] if tid < len(ranks) else "none"
        raise ClusterError(f"{ctx.op_type}: this program is trainer {tid}'s, which runs on rank "
                           f"{where}, but this is rank {comm.rank}; transpile with "
                           "trainer_id=ClusterRole.from_env().trainer_id")
    return comm


_RANKS: dict[tuple[Any, ...], list[int]] = {}


def _trainer_ranks(ctx: KernelContext, comm: Comm) -> list[int]:
    eps = tuple(ctx.attrs["endpoints"])
    key = (eps, comm.size)
    if key not in _RANKS:
        servers = len({endpoint_rank(e, eps) for e in eps})
        _RANKS[key] = trainer_ranks(eps, comm.size - servers, comm.size)
    return _RANKS[key]


def _dest(ctx: KernelContext, ep: str) -> int:
    return endpoint_rank(ep, ctx.attrs["endpoints"])


@register_kernel("send")
def send(ctx: KernelContext) -> None:
    """Posts the gradient blocks and returns: the sends complete while the trainer
    goes on (barrier, recv), like Fluid's asynchronous RPC."""
    comm = _trainer_comm(ctx)
    tid = ctx.attrs["trainer_id"]
    step = int(np.asarray(ctx.input("Step")).reshape(-1)[0]) if ctx.has_input("Step") else 0
    for i, (name, ep) in enumerate(zip(ctx.in_names["X"], ctx.attrs["epmap"])):
        comm.post(encode(Kind.GRAD, name, ctx.input("X", i), tid, step), _dest(ctx, ep),
                  TAG_TO_SERVER)


def _notify(ctx: KernelContext, kind: Kind) -> None:
    comm = _trainer_comm(ctx)
    tid = ctx.attrs["trainer_id"]
    for ep in ctx.attrs["endpoints"]:
        comm.post(encode(kind, "", None, tid, 0), _dest(ctx, ep), TAG_TO_SERVER)
    if kind == Kind.COMPLETE:
        comm.flush(f"trainer {tid} finishing")


@register_kernel("send_barrier")
def send_barrier(ctx: KernelContext) -> None:
    _notify(ctx, Kind.SEND_BARRIER)


@register_kernel("fetch_barrier")
def fetch_barrier(ctx: KernelContext) -> None:
    _notify(ctx, Kind.FETCH_BARRIER)


@register_kernel("send_complete")
def send_complete(ctx: KernelContext) -> None:
    _notify(ctx, Kind.COMPLETE)


@register_kernel("recv")
def recv(ctx: KernelContext) -> None:
    comm = _trainer_comm(ctx)
    tid = ctx.attrs["trainer_id"]
    names = ctx.out_names["Out"]
    dests = [_dest(ctx, ep) for ep in ctx.attrs["epmap"]]
    for n, d in zip(names, dests):
        comm.post(encode(Kind.GET, n, None, tid, 0), d, TAG_TO_SERVER)
    step = 0
    for i, (name, d) in enumerate(zip(names, dests)):  # one server's replies come in order
        msg, _ = comm.recv(d, TAG_TO_TRAINER, f"trainer {tid} fetching {name!r}")
        if msg.kind != Kind.PARAM or msg.name != name:
            raise ClusterError(f"trainer {tid} asked rank {d} for {name!r} and got "
                               f"{msg.kind.name} {msg.name!r}; the programs are out of step")
        step = msg.step
        ctx.set_output("Out", msg.array, i)
    comm.reap()  # every server has answered: our sends to it have arrived
    if ctx.has_output("Step"):
        ctx.set_output("Step", np.array([step], np.int64))


@register_kernel("listen_and_serv")
def listen_and_serv(ctx: KernelContext) -> None:
    ParameterServer(ctx).run()


# -- collectives ------------------------------------------------------------------

def _fused(ctx: KernelContext, fn: Any) -> None:
    """Apply ``fn(buffer)`` to the X of each dtype packed into one buffer; write Out."""
    xs = ctx.inputs("X")
    groups: dict[np.dtype, list[int]] = {}
    for i, x in enumerate(xs):
        groups.setdefault(np.asarray(x).dtype, []).append(i)
    for dt, idx in groups.items():
        flat = np.concatenate([np.asarray(xs[i], dt).reshape(-1) for i in idx]) if idx else \
            np.empty(0, dt)
        fn(flat)
        off = 0
        for i in idx:
            n = int(np.asarray(xs[i]).size)
            ctx.set_output("Out", flat[off:off + n].reshape(np.shape(xs[i])), i)
            off += n


@register_kernel("c_allreduce_sum")
def c_allreduce_sum(ctx: KernelContext) -> None:
    comm = get_comm()
    _fused(ctx, lambda buf: comm.allreduce_sum(buf, f"rank {comm.rank}: allreduce of "
                                                    f"{len(ctx.in_names['X'])} gradient(s)"))


@register_kernel("c_broadcast")
def c_broadcast(ctx: KernelContext) -> None:
    comm = get_comm()
    root = ctx.attrs["root"]
    if not 0 <= root < comm.size:
        raise ClusterError(f"c_broadcast: root {root} is not a rank of this {comm.size}-rank "
                           "job")
    _fused(ctx, lambda buf: comm.bcast(buf, root, f"rank {comm.rank}: broadcast from {root}"))


@register_kernel("checkpoint_save")
def checkpoint_save(ctx: KernelContext) -> None:
    comm = get_comm()
    if comm.rank != ctx.attrs["root"]:
        return
    step = int(np.asarray(ctx.input("Step")).reshape(-1)[0])
    every = ctx.attrs["checkpoint_every"]
    if every > 0 and (step <= 0 or step % every):
        return
    if checkpoint.latest(ctx.attrs["checkpoint_dir"]) == step:
        return  # the final save right after a periodic one
    arrays = {}
    for i, n in enumerate(ctx.in_names["X"]):
        v = ctx.input_value("X", i)
        arrays[n] = np.asarray(v.data if isinstance(v, LoDTensor) else v)
    checkpoint.save(ctx.attrs["checkpoint_dir"], step, arrays, [step] * comm.size,
                    ctx.attrs["keep"])
    log.info("trainer 0: checkpoint at step %d", step)


@register_kernel("checkpoint_load")
def checkpoint_load(ctx: KernelContext) -> None:
    comm = get_comm()
    if comm.rank != ctx.attrs["root"]:
        return
    d = ctx.attrs["checkpoint_dir"]
    if not ctx.attrs["resume"]:
        if checkpoint.clear(d):
            log.info("trainer 0: fresh start, removed the old checkpoints in %s", d)
        return
    step = checkpoint.latest(d)
    if step is None:
        log.info("trainer 0: no checkpoint in %s; starting at step 0", d)
        return
    arrays, _ = checkpoint.load(d, step)
    names = ctx.out_names["Out"]
    expected: dict[str, tuple[tuple[int, ...] | None, np.dtype | None]] = {}
    for n in names:
        var = ctx.op.block._find_var_recursive(n)
        expected[n] = (None, None) if var is None else (
            tuple(var.shape),
            dtypes.to_numpy(var.dtype) if var.dtype in dtypes.TENSOR_DTYPES else None)
    checkpoint.check_members(checkpoint.path_for(d, step), arrays, expected)
    for i, n in enumerate(names):
        ctx.set_output("Out", arrays[n], i)
    ctx.set_output("Step", np.array([step], np.int64))
    log.info("trainer 0: resumed from checkpoint step %d", step)
