"""``remove_identity``: ops that return their input unchanged go; their readers read the input.

Identities: ``dropout`` in test mode (upscale_in_train, or a drop probability of
0), ``scale`` by 1 with bias 0, ``assign`` (so assign chains collapse), ``cast`` to
the same dtype, ``transpose2`` with the identity permutation.  A test-mode
``dropout`` with downgrade_in_infer and p > 0 is ``scale(1 - p)`` and becomes one.

``Out = identity(X)`` is removed when ``Out`` is a plain temporary (one producer,
not persistable, not a feed/fetch target, not seen by a sub-block) and ``X`` is
not written again after the op.  Otherwise the op stays.  Sub-blocks untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.program import Operator, Program
from ._graph import BlockGraph, OpSpec, rebuild_block, remove_unused_vars, replace_reads
from .base import Pass, PassContext, register_pass

#: op type -> when it returns its X unchanged
IDENTITY_WHEN: dict[str, Callable[[Operator], bool]] = {
    "dropout": lambda op: op.attr("is_test") and (
        op.attr("dropout_implementation") == "upscale_in_train" or op.attr("dropout_prob") == 0),
    "scale": lambda op: op.attr("scale") == 1.0 and op.attr("bias") == 0.0,
    "assign": lambda op: True,
    "cast": lambda op: op.attr("in_dtype") == op.attr("out_dtype"),
    "transpose2": lambda op: list(op.attr("axis")) == list(range(len(op.attr("axis")))),
}


def identity_input(op: Operator) -> str | None:
    """The input ``op`` passes through unchanged, or None when it is not an identity."""
    when = IDENTITY_WHEN.get(op.type)
    return op.input("X")[0] if when is not None and when(op) else None


def remove_identity_at(g: BlockGraph, i: int, x: str) -> list[str]:
    """Remove op ``i`` (an identity of ``x``) if its outputs allow; returns the names it
    no longer writes (empty when the op stays)."""
    op = g.op(i)
    out = op.output("Out")[0]
    if not g.is_internal(out):
        return []
    if any(j > i for j in g.producers.get(x, [])):
        return []  # x is rewritten later: readers of out would see the new value
    others = [n for n in op.output_arg_names if n != out]
    if not all(g.unused(n) for n in others):
        return []  # e.g. a dropout Mask or XShape someone reads
    xv, ov = g.var(x), g.var(out)
    if xv is None or ov is None or xv.lod_level != ov.lod_level:
        return []
    replace_reads(g.block, out, x, i + 1)
    g.block._remove_op(i)
    return [out, *others]


def _downgrade_dropout(g: BlockGraph, op: Operator) -> OpSpec | None:
    """A test-mode downgrade_in_infer dropout as the scale(1 - p) it computes."""
    if op.type == "dropout" and op.attr("is_test") and \
            op.attr("dropout_implementation") == "downgrade_in_infer" and \
            op.attr("dropout_prob") > 0.0 and all(g.unused(n) for n in op.output("Mask")):
        return OpSpec("scale", {"X": op.input("X")}, {"Out": op.output("Out")},
                      {"scale": 1.0 - op.attr("dropout_prob"), "bias": 0.0})
    return None


@register_pass
class RemoveIdentity(Pass):
    name = "remove_identity"

    def run(self, program: Program, ctx: PassContext) -> bool:
        gb = program.global_block()
        g = BlockGraph(program, ctx)
        specs = [_downgrade_dropout(g, op) for op in gb.ops]
        dropped: list[str] = []
        if any(specs):
            dropped += [n for s, op in zip(specs, gb.ops) if s is not None
                        for n in op.output("Mask")]
            rebuild_block(gb, [s if s is not None else op.desc for s, op in zip(specs, gb.ops)])
        changed = bool(any(specs))
        i = 0
        while i < len(gb.ops):
            x = identity_input(gb.ops[i])
            gone = remove_identity_at(BlockGraph(program, ctx), i, x) if x is not None else []
            if gone:
                dropped += gone
                changed = True
                continue
            i += 1
        remove_unused_vars(program, ctx, dropped)
        return changed
