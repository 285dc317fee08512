"""``prune``: the inference program for a set of fetch targets.

Switches ops to test mode (``Program.clone(for_test=True)``: dropout, batch_norm),
keeps only the ops the targets need (so backward and optimizer ops go), and
drops feeds nothing reads.  A program that had feed/fetch ops gets them back for
the remaining feeds and the targets (cols renumbered in order).  Ops holding
sub-blocks are kept or dropped whole (``fluid_hw.ir.prune``); sub-blocks are
never edited.

Targets: ``ctx.fetch_names``, else the program's fetch ops.  Feeds:
``ctx.feed_names``, else the program's feed ops.
"""

from __future__ import annotations

from ..ir.program import Program, VarType
from ..ir.prune import prune as _prune_to
from ..ir.serialization import program_to_bytes
from ._graph import feed_targets, fetch_targets, op_access
from .base import Pass, PassContext, PassError, register_pass


@register_pass
class Prune(Pass):
    name = "prune"

    def apply(self, program: Program, ctx: PassContext | None = None) -> tuple[Program, bool]:
        ctx = ctx if ctx is not None else PassContext()
        targets = fetch_targets(program, ctx)
        if not targets:
            raise PassError("pass 'prune' needs fetch targets: PassContext(fetch_names=[...]) "
                            "or a program with fetch ops (io.save_inference_model makes one)")
        gb = program.global_block()
        missing = [t for t in targets if gb._find_var_recursive(t) is None]
        if missing:
            raise PassError(f"pass 'prune': fetch target(s) {missing} are not variables of the "
                            "program")
        feeds = feed_targets(program, ctx)
        had_io_ops = bool(program.get_feed_target_names() or program.get_fetch_target_names())
        out = _prune_to(program.clone(for_test=True), feeds, targets)
        ob = out.global_block()
        read: set[str] = set(targets)
        for op in ob.ops:
            read |= op_access(out, op)[0]
        kept_feeds = [f for f in feeds if f in read]
        for f in feeds:
            if f not in read and ob.has_var(f):
                ob._remove_var(f)
        if had_io_ops:
            out.add_feed_fetch_ops(kept_feeds, targets,
                                   _io_var_name(program, "feed", VarType.FEED_MINIBATCH),
                                   _io_var_name(program, "fetch", VarType.FETCH_LIST))
        return out, program_to_bytes(out) != program_to_bytes(program)


def _io_var_name(program: Program, default: str, kind: int) -> str:
    for v in program.global_block().vars.values():
        if v.type == kind:
            return v.name
    return default
