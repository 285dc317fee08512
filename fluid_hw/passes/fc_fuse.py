"""``fc_fuse``: ``mul`` + ``elementwise_add`` [+ activation] -> one ``fc`` op.

Before::

    t0 = mul(X, W)                       # W 2-D, y_num_col_dims 1
    t1 = elementwise_add(t0, b)          # b [C], axis x_num_col_dims or -1
    y  = relu(t1)                        # optional: relu, sigmoid or tanh

After::

    y = fc(Input=X, W=W, Bias=b, in_num_col_dims=x_num_col_dims, activation_type="relu")

Only when ``t0`` (and ``t1`` when an activation follows) are temporaries read by
the next op alone.  Results are bit-identical (same float operations).
Sub-blocks untouched.
"""

from __future__ import annotations

from ..ir.ops.fused import FC_ACTIVATIONS
from ..ir.program import Program
from ._graph import BlockGraph, Match, OpSpec, fuse_matches
from .base import Pass, PassContext, register_pass


def match_fc(g: BlockGraph, i: int, activations: tuple[str, ...] = FC_ACTIVATIONS
             ) -> Match | None:
    """The ops (mul, add[, act]) starting at op ``i`` and the fc replacing them."""
    mul = g.op(i)
    if mul.type != "mul" or mul.attr("y_num_col_dims") != 1:
        return None
    w = g.var(mul.input("Y")[0])
    x = g.var(mul.input("X")[0])
    t0 = mul.output("Out")[0]
    if w is None or x is None or len(w.shape) != 2:
        return None
    j = g.only_consumer(t0)
    if j is None or not g.fusable_link(t0, j):
        return None
    add = g.op(j)
    k = mul.attr("x_num_col_dims")
    if add.type != "elementwise_add" or add.input("X") != [t0]:
        return None
    b = g.var(add.input("Y")[0])
    if b is None or list(b.shape) != [w.shape[1]] or w.shape[1] < 0 or \
            add.attr("axis") not in (-1, k):
        return None
    ops, out, act = [i, j], add.output("Out")[0], ""
    t1 = out
    a = g.only_consumer(t1)
    if a is not None and g.fusable_link(t1, a) and g.op(a).type in activations and \
            g.op(a).input("X") == [t1]:
        ops.append(a)
        act = g.op(a).type
        out = g.op(a).output("Out")[0]
    spec = OpSpec("fc", {"Input": [x.name], "W": [w.name], "Bias": [b.name]}, {"Out": [out]},
                  {"in_num_col_dims": k, "activation_type": act})
    return Match(ops, [spec])


@register_pass
class FcFuse(Pass):
    name = "fc_fuse"

    def __init__(self, activations: tuple[str, ...] = FC_ACTIVATIONS) -> None:
        #: the activations taken into the fc (see conv_elementwise_add_act_fuse)
        self.activations = tuple(activations)

    def run(self, program: Program, ctx: PassContext) -> bool:
        return fuse_matches(program, ctx, lambda g, i: match_fc(g, i, self.activations))
