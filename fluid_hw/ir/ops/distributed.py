"""Distributed-training ops: parameter-server RPC, collectives and checkpoints.

These are the ops :class:`fluid_hw.backends.cluster.DistributeTranspiler` writes
into trainer and parameter-server programs (Fluid's design).  Their kernels live
in the cluster back end (``fluid_hw/backends/cluster/kernels.py``, over MPI);
the definitions here are data only.

Endpoints are strings (``"host:port"`` or ``"rank:N"``); ``endpoints`` lists every
parameter server in order, so a kernel can turn an endpoint into an MPI rank.

Parameter-server mode, trainer side::

    split(grad) -> send(grad blocks) -> send_barrier
                -> recv(param blocks) -> fetch_barrier -> concat(param)

and the server side is one ``listen_and_serv`` op whose ``optimize_blocks`` are
run as gradients arrive.  Collective mode uses ``c_allreduce_sum`` (and
``c_broadcast`` at start-up).  Every op here moves data in or out of a process,
so none has a gradient (``no_grad("io", ...)``).
"""

from __future__ import annotations

from ..registry import Attr, InferContext, Slot, define_op

#: name of the int64 [1] variable holding the number of completed training steps
STEP_VAR_NAME = "@CLUSTER_STEP@"

_ENDPOINTS = Attr("endpoints", "strings", doc="every parameter server, in order")
_TRAINER_ID = Attr("trainer_id", "int", 0, doc="this trainer's index, 0..trainers-1")


def _check_epmap(ctx: InferContext, slot: str, inputs: bool) -> None:
    n = ctx.input_count(slot) if inputs else len(ctx.op.output(slot))
    epmap = ctx.attr("epmap")
    ctx.check(len(epmap) == n, f"epmap has {len(epmap)} endpoint(s) for {n} variable(s) in "
              f"{slot}; give one endpoint per variable")
    eps = set(ctx.attr("endpoints"))
    for ep in epmap:
        ctx.check(ep in eps, f"epmap endpoint {ep!r} is not one of endpoints "
                  f"{list(ctx.attr('endpoints'))}")


@define_op(
    "send", [Slot("X", duplicable=True), Slot("Step", dispensable=True)], [],
    [Attr("epmap", "strings", doc="the parameter server of each X"), _ENDPOINTS, _TRAINER_ID],
    doc="Send each X (a gradient block) to its parameter server epmap[i]; Step (the "
    "trainer's step count) travels in the message header.",
)
def _send(ctx: InferContext) -> None:
    _check_epmap(ctx, "X", inputs=True)


@define_op(
    "recv", [], [Slot("Out", duplicable=True), Slot("Step", dispensable=True)],
    [Attr("epmap", "strings", doc="the parameter server of each Out"), _ENDPOINTS, _TRAINER_ID],
    doc="Fetch each Out (a parameter block) from its parameter server epmap[i]; Step gets "
    "the server's step count (where a resumed job starts).",
)
def _recv(ctx: InferContext) -> None:
    _check_epmap(ctx, "Out", inputs=False)
    if ctx.has_output("Step"):
        ctx.set_output("Step", [1], "int64")


def _no_outputs(ctx: InferContext) -> None:
    ctx.check(len(ctx.attr("endpoints")) > 0, "endpoints is empty; list the parameter servers")


for _t, _what in (
    ("send_barrier", "this trainer has sent every gradient of the step"),
    ("fetch_barrier", "this trainer has fetched every parameter of the step"),
    ("send_complete", "this trainer has finished: the servers stop waiting for it"),
):
    define_op(_t, [], [], [_ENDPOINTS, _TRAINER_ID],
              doc=f"Tell every parameter server that {_what}.")(_no_outputs)


@define_op(
    "listen_and_serv", [Slot("X", duplicable=True, dispensable=True)], [],
    [Attr("endpoint", "string", doc="this server's endpoint"), _ENDPOINTS,
     Attr("Fanin", "int", 1, doc="number of trainers"),
     Attr("sync_mode", "bool", True, doc="wait for every trainer each step (else async)"),
     Attr("optimize_blocks", "blocks", [], doc="one update sub-block per parameter block"),
     Attr("grad_to_block_id", "strings", [],
          doc="'<gradient block>:<block index>' for each optimize block"),
     Attr("param_names", "strings", [], doc="parameter blocks trainers may fetch"),
     Attr("lr_decay_block_id", "int", -1, doc="learning-rate schedule sub-block, -1: none"),
     Attr("checkpoint_dir", "string", "", doc="write checkpoints here ('' = never)"),
     Attr("checkpoint_every", "int", 0, doc="checkpoint every this many steps (0 = at end)"),
     Attr("checkpoint_keep", "int", 2, doc="checkpoints kept"),
     Attr("resume", "bool", False, doc="start from the last complete checkpoint")],
    doc="The parameter server's loop: receive gradient blocks (X), run their optimize "
    "blocks (summed and averaged over trainers in sync mode), serve parameter blocks, "
    "checkpoint; returns when every trainer has sent send_complete.",
)
def _listen_and_serv(ctx: InferContext) -> None:
    n_blocks = len(ctx.attr("optimize_blocks"))
    n_map = len(ctx.attr("grad_to_block_id"))
    ctx.check(n_blocks == n_map, f"{n_blocks} optimize block(s) but {n_map} "
              "grad_to_block_id entries; they must pair up")
    ctx.check(ctx.attr("endpoint") in ctx.attr("endpoints"),
              f"endpoint {ctx.attr('endpoint')!r} is not one of {list(ctx.attr('endpoints'))}")
    ctx.check(ctx.attr("Fanin") >= 1, f"Fanin must be >= 1, got {ctx.attr('Fanin')}")


def _share_all(ctx: InferContext) -> None:
    ctx.check(ctx.input_count("X") == len(ctx.op.output("Out")),
              f"X has {ctx.input_count('X')} variable(s), Out {len(ctx.op.output('Out'))}; "
              "they must pair up")
    for i in range(ctx.input_count("X")):
        ctx.share("X", "Out", i)


define_op(
    "c_allreduce_sum", [Slot("X", duplicable=True)], [Slot("Out", duplicable=True)],
    doc="Out[i] = the sum of X[i] over every trainer (MPI Allreduce; the X of one dtype "
    "travel in one fused buffer).  Out is usually X.",
)(_share_all)

define_op(
    "c_broadcast", [Slot("X", duplicable=True)], [Slot("Out", duplicable=True)],
    [Attr("root", "int", 0, doc="rank whose values everybody gets")],
    doc="Out[i] = X[i] of rank `root` (MPI Bcast).  Out is usually X.",
)(_share_all)


@define_op(
    "checkpoint_save", [Slot("X", duplicable=True), "Step"], [],
    [Attr("checkpoint_dir", "string"), Attr("checkpoint_every", "int", 0,
                                            doc="save when Step is a multiple (0: always)"),
     Attr("root", "int", 0, doc="the one rank that writes"),
     Attr("keep", "int", 2, doc="checkpoints kept")],
    doc="On rank `root`, atomically write every X and Step to checkpoint_dir/step_<Step>.npz "
    "when Step is a multiple of checkpoint_every.",
)
def _checkpoint_save(ctx: InferContext) -> None:
    ctx.check(bool(ctx.attr("checkpoint_dir")), "checkpoint_dir is empty")


@define_op(
    "checkpoint_load", [], [Slot("Out", duplicable=True), "Step"],
    [Attr("checkpoint_dir", "string"), Attr("root", "int", 0, doc="the one rank that reads"),
     Attr("resume", "bool", True, doc="False: a fresh start, delete old checkpoints")],
    doc="On rank `root`, fill Out and Step from the newest complete checkpoint in "
    "checkpoint_dir (nothing when there is none); broadcast them after.  Without resume, "
    "remove the folder's old checkpoints instead (they belong to an earlier run).",
)
def _checkpoint_load(ctx: InferContext) -> None:
    ctx.set_output("Step", [1], "int64")


DISTRIBUTED_OPS = ("send", "recv", "send_barrier", "fetch_barrier", "send_complete",
                   "listen_and_serv", "c_allreduce_sum", "c_broadcast", "checkpoint_save",
                   "checkpoint_load")


def _declare_grads() -> None:
    from ..grad import no_grad

    no_grad("io", *DISTRIBUTED_OPS)


_declare_grads()
