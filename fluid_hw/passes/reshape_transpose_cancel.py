"""``reshape_transpose_cancel``: back-to-back reshapes and transposes become one op, or none.

* ``transpose2(p)`` then ``transpose2(q)``: one ``transpose2`` with the composed
  permutation ``p[q[i]]``, or nothing when that is the identity;
* ``reshape2`` then ``reshape2``: one ``reshape2`` to the second's shape (its 0
  entries resolved against the middle shape), or nothing when the result has the
  input's shape;
* a ``reshape2`` whose declared output shape is its input's (at most one unknown
  dim, in the same place): removed.

Only when the middle value (and XShape) is a temporary nothing else reads.  LoD
inputs are left alone (reshape may drop LoD).  Sub-blocks untouched.
"""

from __future__ import annotations

from ..ir.program import Operator, Program
from ._graph import BlockGraph, OpSpec, attrs_of, rebuild_block, remove_unused_vars, replace_reads
from .base import Pass, PassContext, register_pass


def _same_shape(a: list[int], b: list[int]) -> bool:
    """Declared shapes that are equal at run time too: equal, with at most one -1."""
    return a == b and a.count(-1) <= 1


def _xshape_unused(g: BlockGraph, op: Operator) -> bool:
    return all(g.unused(n) for n in op.output("XShape"))


def _rewrite(g: BlockGraph, i: int, j: int, spec: OpSpec | None) -> list[str]:
    """Ops i and j (j reads i's Out) become ``spec`` (or nothing: j's Out readers read
    i's X).  Returns the names no longer written."""
    a, b = g.op(i), g.op(j)
    x, mid, out = a.input("X")[0], a.output("Out")[0], b.output("Out")[0]
    gone = [mid, *a.output("XShape"), *b.output("XShape")]
    items: list = []
    for k, op in enumerate(g.block.ops):
        if k == i:
            continue
        if k == j:
            if spec is not None:
                items.append(spec)
            continue
        items.append(op.desc)
    rebuild_block(g.block, items)
    if spec is None:
        gone.append(out)
        replace_reads(g.block, out, x)
    return gone


def _pair(g: BlockGraph, i: int) -> tuple[int, Operator, Operator] | None:
    a = g.op(i)
    mid = a.output("Out")[0]
    j = g.only_consumer(mid)
    if j is None or not g.fusable_link(mid, j) or not _xshape_unused(g, a):
        return None
    b = g.op(j)
    if b.type != a.type or b.input("X") != [mid] or not _xshape_unused(g, b):
        return None
    return j, a, b


def _try(g: BlockGraph, i: int) -> list[str]:
    a = g.op(i)
    if a.type not in ("transpose2", "reshape2"):
        return []
    x = a.input("X")[0]
    xv = g.var(x)
    if xv is None or xv.lod_level:
        return []
    if a.type == "reshape2":
        out = a.output("Out")[0]
        ov = g.var(out)
        if ov is not None and _same_shape(list(xv.shape), list(ov.shape)) and \
                g.is_internal(out) and _xshape_unused(g, a) and \
                not any(k > i for k in g.producers.get(x, [])):
            gone = [out, *a.output("XShape")]
            replace_reads(g.block, out, x, i + 1)
            g.block._remove_op(i)
            return gone
    found = _pair(g, i)
    if found is None:
        return []
    j, a, b = found
    final = b.output("Out")[0]
    fv = g.var(final)
    if fv is None or any(k > i for k in g.producers.get(x, [])):
        return []  # x is rewritten later: the merged op at j would read the new value
    if a.type == "transpose2":
        p, q = list(a.attr("axis")), list(b.attr("axis"))
        composed = [p[k] for k in q]
        if composed == list(range(len(composed))):
            if not g.is_internal(final):
                return []
            return _rewrite(g, i, j, None)
        spec = OpSpec("transpose2", {"X": [x]}, {"Out": [final]},
                      {**attrs_of(b), "axis": composed})
        return _rewrite(g, i, j, spec)
    if _same_shape(list(xv.shape), list(fv.shape)) and g.is_internal(final):
        return _rewrite(g, i, j, None)
    mid_shape = list(g.var(a.output("Out")[0]).shape)  # type: ignore[union-attr]
    target = list(b.attr("shape"))
    for k, s in enumerate(target):
        if s == 0:
            if k >= len(mid_shape) or mid_shape[k] < 0:
                if not (k < len(xv.shape) and a.attr("shape")[k:k + 1] == [0]):
                    return []  # copies an unknown middle dim that is not X's own dim k
                continue  # reshape(X, [.., 0 at k, ..]) copies X's dim k: keep the 0
            target[k] = mid_shape[k]
    spec = OpSpec("reshape2", {"X": [x]}, {"Out": [final]}, {**attrs_of(b), "shape": target})
    return _rewrite(g, i, j, spec)


@register_pass
class ReshapeTransposeCancel(Pass):
    name = "reshape_transpose_cancel"

    def run(self, program: Program, ctx: PassContext) -> bool:
        gb = program.global_block()
        dropped: list[str] = []
        i = 0
        while i < len(gb.ops):
            gone = _try(BlockGraph(program, ctx), i)
            if gone:
                dropped += gone
                i = 0  # a merge may enable one with an earlier op
                continue
            i += 1
        remove_unused_vars(program, ctx, dropped)
        return bool(dropped)
