"""``fuse_elewise_act``: an elementwise op and an activation -> ``fused_elemwise_activation``.

Two shapes are fused (Fluid's functor-list convention):

* ``t = binary(X, Y); y = unary(t)`` -> ``functor_list = [unary, binary]``
  (``Out = unary(binary(X, Y))``);
* ``u = unary(Y0); y = binary(X, u)`` -> ``functor_list = [binary, unary]``
  (``Out = binary(X, unary(Y0))``); when ``u`` is the X operand of a commutative
  binary (add, mul, max, min) of two same-rank operands, the operands swap.

binary: elementwise_{add,sub,mul,max,min}; unary: relu, sigmoid, tanh, and
``scale`` with bias 0.  The link ``t`` / ``u`` must be a temporary that only the
second op reads.  Run after fc_fuse and the conv fusions, which claim their
patterns first.  Bit-identical results.  Sub-blocks untouched.
"""

from __future__ import annotations

from ..ir.ops.fused import BINARY_FUNCTORS, UNARY_FUNCTORS
from ..ir.program import Operator, Program
from ._graph import BlockGraph, Match, OpSpec, fuse_matches
from .base import Pass, PassContext, register_pass

COMMUTATIVE = ("elementwise_add", "elementwise_mul", "elementwise_max", "elementwise_min")


def _unary_ok(op: Operator) -> bool:
    if op.type not in UNARY_FUNCTORS:
        return False
    return op.type != "scale" or op.attr("bias") == 0.0


def _scale_of(op: Operator) -> float:
    return float(op.attr("scale")) if op.type == "scale" else 0.0


def match_elewise_act(g: BlockGraph, i: int) -> Match | None:
    first = g.op(i)
    if first.type in BINARY_FUNCTORS:
        t = first.output("Out")[0]
        j = g.only_consumer(t)
        if j is None or not g.fusable_link(t, j):
            return None
        act = g.op(j)
        if not _unary_ok(act) or act.input("X") != [t]:
            return None
        spec = OpSpec("fused_elemwise_activation",
                      {"X": first.input("X"), "Y": first.input("Y")}, {"Out": act.output("Out")},
                      {"functor_list": [act.type, first.type], "axis": first.attr("axis"),
                       "scale": _scale_of(act)})
        return Match([i, j], [spec])
    if _unary_ok(first):
        u = first.output("Out")[0]
        j = g.only_consumer(u)
        if j is None or not g.fusable_link(u, j):
            return None
        binary = g.op(j)
        if binary.type not in BINARY_FUNCTORS:
            return None
        x, y = binary.input("X")[0], binary.input("Y")[0]
        if x == y:
            return None
        if y == u:
            other = x
        elif binary.type in COMMUTATIVE and _same_rank(g, x, y):
            other = y
        else:
            return None
        spec = OpSpec("fused_elemwise_activation",
                      {"X": [other], "Y": first.input("X")}, {"Out": binary.output("Out")},
                      {"functor_list": [binary.type, first.type],
                       "axis": binary.attr("axis"), "scale": _scale_of(first)})
        return Match([i, j], [spec])
    return None


def _same_rank(g: BlockGraph, a: str, b: str) -> bool:
    va, vb = g.var(a), g.var(b)
    return va is not None and vb is not None and len(va.shape) == len(vb.shape)


@register_pass
class FuseElewiseAct(Pass):
    name = "fuse_elewise_act"

    def run(self, program: Program, ctx: PassContext) -> bool:
        return fuse_matches(program, ctx, match_elewise_act)
