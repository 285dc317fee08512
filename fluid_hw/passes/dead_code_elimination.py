"""``dead_code_elimination``: drop ops whose results nothing needs, then unused variables.

An op is live when it has a side effect (feed/fetch and I/O, holds a sub-block,
draws random numbers, changes persistable state) or writes a name a live op
reads or a fetch target.  Targets: ``ctx.fetch_names``, else the fetch ops;
when neither says, every variable no op reads counts as a target (so only
unused variable declarations go).  Sub-blocks are left untouched; what they read
counts as read by the op holding them.
"""

from __future__ import annotations

from ..ir.program import Program
from ._graph import (
    BlockGraph,
    fetch_targets,
    has_side_effect,
    op_access,
    protected_names,
    remove_unused_vars,
)
from .base import Pass, PassContext, register_pass


def leaf_names(program: Program) -> set[str]:
    """Non-persistable names some op of the global block writes and no op reads."""
    g = BlockGraph(program, PassContext())
    return {n for n in g.producers if not g.consumers.get(n)
            and not ((v := g.var(n)) is not None and v.persistable)}


@register_pass
class DeadCodeElimination(Pass):
    name = "dead_code_elimination"

    def run(self, program: Program, ctx: PassContext) -> bool:
        gb = program.global_block()
        targets = fetch_targets(program, ctx)
        needed = set(targets) if targets is not None else leaf_names(program)
        needed |= protected_names(program, ctx)
        dead: list[int] = []
        for i in range(len(gb.ops) - 1, -1, -1):
            op = gb.ops[i]
            reads, writes = op_access(program, op)
            if has_side_effect(op) or writes & needed:
                needed |= reads
            else:
                dead.append(i)
        for i in dead:  # descending
            gb._remove_op(i)
        removed = remove_unused_vars(program, ctx)
        return bool(dead or removed)
