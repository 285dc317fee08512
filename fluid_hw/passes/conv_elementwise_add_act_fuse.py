"""``conv_elementwise_add_act_fuse``: conv2d + bias add [+ activation] -> ``conv2d_fusion``.

Before::

    c = conv2d(X, W)                     # or depthwise_conv2d
    t = elementwise_add(c, b, axis=1)    # b [M]
    y = relu(t)                          # optional: relu, sigmoid or tanh

After::

    y = conv2d_fusion(Input=X, Filter=W, Bias=b, activation="relu")  # "identity" if none

Only when ``c`` (and ``t`` when an activation follows) are temporaries read by
the next op alone.  Bit-identical results.  Sub-blocks untouched.
"""

from __future__ import annotations

from ..ir.ops.fused import CONV_ACTIVATIONS
from ..ir.program import Program
from ._graph import BlockGraph, Match, OpSpec, attrs_of, fuse_matches
from .base import Pass, PassContext, register_pass

CONVS = ("conv2d", "depthwise_conv2d")


def match_conv_add_act(g: BlockGraph, i: int,
                       activations: tuple[str, ...] = CONV_ACTIVATIONS) -> Match | None:
    conv = g.op(i)
    if conv.type not in CONVS:
        return None
    c = conv.output("Output")[0]
    filt = g.var(conv.input("Filter")[0])
    j = g.only_consumer(c)
    if filt is None or j is None or not g.fusable_link(c, j):
        return None
    add = g.op(j)
    if add.type != "elementwise_add" or add.input("X") != [c] or add.attr("axis") != 1:
        return None
    b = g.var(add.input("Y")[0])
    if b is None or len(filt.shape) != 4 or list(b.shape) != [filt.shape[0]] or \
            filt.shape[0] < 0:
        return None
    ops, out, act = [i, j], add.output("Out")[0], "identity"
    a = g.only_consumer(out)
    if a is not None and g.fusable_link(out, a) and g.op(a).type in activations and \
            g.op(a).input("X") == [out]:
        ops.append(a)
        act = g.op(a).type
        out = g.op(a).output("Out")[0]
    attrs = {**attrs_of(conv), "activation": act}
    spec = OpSpec("conv2d_fusion", {"Input": conv.input("Input"), "Filter": [filt.name],
                                    "Bias": [b.name]}, {"Output": [out]}, attrs)
    return Match(ops, [spec])


@register_pass
class ConvElementwiseAddActFuse(Pass):
    name = "conv_elementwise_add_act_fuse"

    def __init__(self, activations: tuple[str, ...] = CONV_ACTIVATIONS) -> None:
        #: the activations taken into the fused op (the quantisation pass takes relu
        #: only: another activation becomes a table of its own, calibrated apart)
        self.activations = tuple(activations)

    def run(self, program: Program, ctx: PassContext) -> bool:
        return fuse_matches(program, ctx,
                            lambda g, i: match_conv_add_act(g, i, self.activations))
