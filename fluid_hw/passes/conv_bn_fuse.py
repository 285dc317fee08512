"""``conv_bn_fuse``: fold a test-mode ``batch_norm`` into the convolution before it.

Before::

    c = conv2d(X, W)                     # or depthwise_conv2d
    [c = elementwise_add(c0, b0, axis=1)]  # an optional conv bias
    y = batch_norm(c, gamma, beta, mean, var)   # is_test / use_global_stats, NCHW

After (``a = gamma / sqrt(var + epsilon)``, computed in float64)::

    c = conv2d(X, W')                    # W'[m] = W[m] * a[m]
    y = elementwise_add(c, b', axis=1)   # b' = (b0 - mean) * a + beta  (b0 = 0 if none)

This rewrites parameter values: it needs ``ctx.scope`` (a Scope or dict of arrays)
holding W, gamma, beta, mean, var (and b0).  W' and b' are new persistable
variables (``<W>.bn_fused``, ``<beta>.bn_fused``) written into that same scope;
nothing there is overwritten, so the input program keeps working with it.
Outputs agree with the unfused program up to float32 rounding (~1e-6 relative).
Sub-blocks untouched.
"""

from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir.program import Operator, Program, Variable
from ._graph import BlockGraph, Match, OpSpec, attrs_of, fresh_name, fuse_matches
from .base import Pass, PassContext, get_value, register_pass

CONVS = ("conv2d", "depthwise_conv2d")


def _match(g: BlockGraph, i: int, ctx: PassContext) -> Match | None:
    conv = g.op(i)
    store = ctx.scope
    if conv.type not in CONVS or conv.attr("data_format") not in ("NCHW", "AnyLayout"):
        return None
    w_name = conv.input("Filter")[0]
    if not g.is_constant_param(w_name, store):
        return None
    c = conv.output("Output")[0]
    j = g.only_consumer(c)
    if j is None or not g.fusable_link(c, j):
        return None
    ops = [i]
    b0_name = None
    nxt = g.op(j)
    if nxt.type == "elementwise_add" and nxt.input("X") == [c] and nxt.attr("axis") == 1:
        b0_name = nxt.input("Y")[0]
        b0v = g.var(b0_name)
        if b0v is None or len(b0v.shape) != 1 or not g.is_constant_param(b0_name, store):
            return None
        ops.append(j)
        c = nxt.output("Out")[0]
        j = g.only_consumer(c)
        if j is None or not g.fusable_link(c, j):
            return None
        nxt = g.op(j)
    bn = nxt
    if bn.type != "batch_norm" or bn.input("X") != [c] or \
            not (bn.attr("is_test") or bn.attr("use_global_stats")) or \
            bn.attr("data_layout") not in ("NCHW", "AnyLayout"):
        return None
    params = [bn.input(s)[0] for s in ("Scale", "Bias", "Mean", "Variance")]
    if not all(g.is_constant_param(p, store) or
               (_written_back(bn, p) and g.producers.get(p) == [j]) for p in params):
        return None
    ops.append(j)
    assert store is not None
    w = get_value(store, w_name)
    vals = [v for p in params if (v := get_value(store, p)) is not None]
    if w is None or len(vals) < len(params) or (
            b0_name is not None and get_value(store, b0_name) is None):
        return None
    b0 = None if b0_name is None else get_value(store, b0_name)
    if not _foldable(w, g.var(w_name), [*vals, *([b0] if b0 is not None else [])]):
        return None
    gamma, beta, mean, var = (np.asarray(v, np.float64) for v in vals)
    denom = var + bn.attr("epsilon")
    if not np.all(denom > 0):
        return None  # a zero or negative variance: nothing finite to fold
    a = gamma / np.sqrt(denom)
    if not np.all(np.isfinite(a)):
        return None
    b0 = np.zeros_like(a) if b0 is None else np.asarray(b0, np.float64)
    new_w = (w.astype(np.float64) * a.reshape(-1, 1, 1, 1)).astype(w.dtype)
    new_b = ((b0 - mean) * a + beta).astype(w.dtype)
    w_new = fresh_name(g.block, f"{w_name}.bn_fused", store, new_w)
    b_new = fresh_name(g.block, f"{params[1]}.bn_fused", store, new_b)
    conv_out = conv.output("Output")[0]
    y = bn.output("Y")[0]
    specs = [
        OpSpec(conv.type, {"Input": conv.input("Input"), "Filter": [w_new]},
               {"Output": [conv_out]}, attrs_of(conv)),
        OpSpec("elementwise_add", {"X": [conv_out], "Y": [b_new]}, {"Out": [y]}, {"axis": 1}),
    ]
    return Match(ops, specs, [(w_new, new_w, g.var(w_name)), (b_new, new_b, g.var(params[1]))])


def _foldable(w: np.ndarray, w_var: Variable | None, vectors: list[np.ndarray]) -> bool:
    """The values can be folded: a 4-D float filter of the dtype its variable declares,
    and per-output-channel vectors of its length (a program the verifier accepts may
    declare or hold anything else; the pass then leaves it as it is)."""
    if w.ndim != 4 or w.dtype.kind != "f" or w_var is None or \
            w_var.dtype not in dtypes.TENSOR_DTYPES or dtypes.to_numpy(w_var.dtype) != w.dtype:
        return False
    return all(v.shape == (w.shape[0],) and v.dtype.kind in "fiu" for v in vectors)


def _written_back(bn: Operator, name: str) -> bool:
    """Mean / Variance that a test-mode batch_norm writes back unchanged (MeanOut...)."""
    return name in bn.output("MeanOut") + bn.output("VarianceOut")


@register_pass
class ConvBnFuse(Pass):
    name = "conv_bn_fuse"
    requires = ("scope",)

    def run(self, program: Program, ctx: PassContext) -> bool:
        return fuse_matches(program, ctx, lambda g, i: _match(g, i, ctx))
