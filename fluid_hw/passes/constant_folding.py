"""``constant_folding``: compute at compile time what depends only on constants.

Constants are the outputs of ``fill_constant`` and ``assign_value`` (never the
random creation ops) and, transitively, of every op all of whose inputs are
constants -- provided the op reads and writes no persistable variable (values
that may change at run time), has no side effect and holds no sub-block.  Such
ops are run once with ``ctx.executor``; each value that leaves the constant
part is then produced by a single ``assign_value`` op (float32 / int32 values up
to ``max_inline`` elements) or, otherwise, held in a new persistable variable
written into ``ctx.scope`` (skipped when there is no scope).  Sub-blocks untouched.
"""

from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.ops.tensor import ASSIGN_VALUE_ATTRS
from ..ir.program import Program
from ..ir.scope import Scope
from ._graph import (
    BlockGraph,
    OpSpec,
    add_param,
    has_side_effect,
    rebuild_block,
    remove_unused_vars,
)
from .base import Pass, PassContext, register_pass

#: ops with no inputs whose output is fixed by their attributes
CONSTANT_SOURCES = frozenset({"fill_constant", "assign_value"})


@register_pass
class ConstantFolding(Pass):
    name = "constant_folding"
    requires = ("executor",)

    def __init__(self, max_inline: int = 4096) -> None:
        self.max_inline = max_inline

    def run(self, program: Program, ctx: PassContext) -> bool:
        g = BlockGraph(program, ctx)
        gb = g.block
        const: set[str] = set()
        sources: list[int] = []
        folded: list[int] = []
        for i, op in enumerate(gb.ops):
            outs = op.output_arg_names
            if has_side_effect(op) or "seed" in op.all_attrs() or not outs:
                continue
            if any((v := g.var(n)) is None or v.persistable or len(g.producers.get(n, [])) != 1
                   for n in outs):
                continue
            ins = op.input_arg_names
            if not ins:
                if op.type in CONSTANT_SOURCES:
                    sources.append(i)
                    const |= set(outs)
            elif all(n in const for n in ins):
                folded.append(i)
                const |= set(outs)
        if not folded:
            return False
        fold_set = set(folded)
        # values leaving the constant part: read by a kept op, or program outputs
        boundary: list[str] = []
        for i in folded:
            for n in g.op(i).output_arg_names:
                readers = g.consumers.get(n, [])
                if any(r not in fold_set for r in readers) or n in g.protected:
                    boundary.append(n)
        values = self._evaluate(program, sorted(set(sources) | fold_set), boundary, ctx)
        replacement: dict[int, list[OpSpec]] = {}
        for n, val in zip(boundary, values):
            spec = self._producer(g, n, val, ctx)
            if spec is None:
                return False  # a value we cannot hold: leave the whole program alone
            replacement.setdefault(g.producers[n][0], []).append(spec)
        items: list = []
        for i, op in enumerate(gb.ops):
            if i in fold_set:
                items += replacement.get(i, [])
            else:
                items.append(op.desc)
        dropped = {n for i in folded for n in g.op(i).output_arg_names} - set(boundary)
        rebuild_block(gb, items)
        # sources now read by nobody go too
        g2 = BlockGraph(program, ctx)
        for i in range(len(gb.ops) - 1, -1, -1):
            op = gb.ops[i]
            if op.type in CONSTANT_SOURCES and all(g2.unused(n) for n in op.output_arg_names):
                dropped |= set(op.output_arg_names)
                gb._remove_op(i)
        remove_unused_vars(program, ctx, dropped)
        return True

    def _evaluate(self, program: Program, ops: list[int], fetch: list[str],
                  ctx: PassContext) -> list[np.ndarray]:
        mini = program.clone()
        mb = mini.global_block()
        keep = set(ops)
        for i in range(len(mb.ops) - 1, -1, -1):
            if i not in keep:
                mb._remove_op(i)
        assert ctx.executor is not None
        out = ctx.executor.run(mini, feed={}, fetch_list=fetch, scope=Scope())
        return [np.asarray(v) for v in out]

    def _producer(self, g: BlockGraph, name: str, val: np.ndarray,
                  ctx: PassContext) -> OpSpec | None:
        var = g.var(name)
        assert var is not None
        enum = dtypes.to_enum(val.dtype)
        if enum in ASSIGN_VALUE_ATTRS and val.size <= self.max_inline and var.lod_level == 0:
            key = ASSIGN_VALUE_ATTRS[enum]
            return OpSpec("assign_value", {}, {"Out": [name]},
                          {"shape": list(val.shape), "dtype": int(enum),
                           key: val.reshape(-1).tolist()})
        if ctx.scope is None:
            return None
        held = add_param(g.block, ctx.scope, f"{name}.folded", np.array(val, copy=True),
                         parameter=False)
        return OpSpec("assign", {"X": [held]}, {"Out": [name]}, {})
