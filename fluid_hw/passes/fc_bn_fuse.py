"""``fc_bn_fuse``: fold a test-mode ``batch_norm`` into the fully connected layer before it.

Before (the layers API's fc, or the ``fc`` op that ``fc_fuse`` makes of it)::

    t = mul(X, W)                        # W [K, C], y_num_col_dims 1
    [t = elementwise_add(t0, b0)]        # an optional bias [C], axis -1 or x_num_col_dims
    y = batch_norm(t, gamma, beta, mean, var)   # is_test / use_global_stats

    t = fc(X, W[, b0])                   # activation_type "" only
    y = batch_norm(t, ...)

After (``a = gamma / sqrt(var + epsilon)``, computed in float64)::

    t = mul(X, W')                       # W'[:, c] = W[:, c] * a[c]
    y = elementwise_add(t, b', axis=k)   # b' = (b0 - mean) * a + beta  (b0 = 0 if none)

    y = fc(X, W', b')                    # the fc form stays one fc op

The batch norm must normalise the fc's output features, its last axis: an
``NCHW`` / ``AnyLayout`` batch norm over a 2-D [N, C] output (``x_num_col_dims``
1) or an ``NHWC`` one over any rank.  Not folded: a training-mode batch norm, an
fc whose output (or bias sum) another op also reads, an fc with a fused
activation (the batch norm then follows the activation), and an fc of several
inputs (``sum`` of products).  Run it before ``fc_fuse``, which then fuses the
mul + add with an activation after the batch norm.

Like ``conv_bn_fuse`` it rewrites parameter values: it needs ``ctx.scope``; W' and
b' are new persistable variables (``<W>.bn_fused``, ``<beta>.bn_fused``) written
into that scope, nothing there is overwritten.  Outputs agree with the unfused
program up to float32 rounding.  Sub-blocks untouched.
"""

from __future__ import annotations

import numpy as np

from ..ir.program import Operator, Program
from ._graph import BlockGraph, Match, OpSpec, attrs_of, fresh_name, fuse_matches
from .base import ParamStore, Pass, PassContext, get_value, register_pass
from .conv_bn_fuse import _written_back


def _bn_after(g: BlockGraph, name: str, ctx: PassContext, rank: int) -> int | None:
    """The test-mode batch_norm that alone reads ``name`` (a rank-``rank`` fc output)
    over its last axis, with constant statistics; its op index."""
    j = g.only_consumer(name)
    if j is None or not g.fusable_link(name, j):
        return None
    bn = g.op(j)
    if bn.type != "batch_norm" or bn.input("X") != [name] or \
            not (bn.attr("is_test") or bn.attr("use_global_stats")):
        return None
    layout = bn.attr("data_layout")
    if not (layout == "NHWC" or (layout in ("NCHW", "AnyLayout") and rank == 2)):
        return None
    store = ctx.scope
    params = [bn.input(s)[0] for s in ("Scale", "Bias", "Mean", "Variance")]
    if not all(g.is_constant_param(p, store) or
               (_written_back(bn, p) and g.producers.get(p) == [j]) for p in params):
        return None
    return j


def _fold(w: np.ndarray, b0: np.ndarray | None, bn: Operator,
          store: ParamStore) -> tuple[np.ndarray, np.ndarray] | None:
    """(W', b') for weights ``w`` [K, C], bias ``b0`` and the batch norm's values."""
    vals = [get_value(store, bn.input(s)[0]) for s in ("Scale", "Bias", "Mean", "Variance")]
    if any(v is None for v in vals):
        return None
    gamma, beta, mean, var = (np.asarray(v, np.float64).reshape(-1) for v in vals)
    c = w.shape[1]
    if gamma.shape[0] != c or (b0 is not None and b0.size != c):
        return None
    a = gamma / np.sqrt(var + bn.attr("epsilon"))
    bias = np.zeros(c) if b0 is None else np.asarray(b0, np.float64).reshape(-1)
    new_w = (w.astype(np.float64) * a.reshape(1, -1)).astype(w.dtype)
    new_b = ((bias - mean) * a + beta).astype(w.dtype)
    return new_w, new_b


def _match(g: BlockGraph, i: int, ctx: PassContext) -> Match | None:
    op = g.op(i)
    store = ctx.scope
    if op.type == "mul":
        if op.attr("y_num_col_dims") != 1:
            return None
        w_name, x_in, k = op.input("Y")[0], op.input("X"), op.attr("x_num_col_dims")
        out = op.output("Out")[0]
    elif op.type == "fc":
        if op.attr("activation_type") not in ("", "identity"):
            return None
        w_name, x_in, k = op.input("W")[0], op.input("Input"), op.attr("in_num_col_dims")
        out = op.output("Out")[0]
    else:
        return None
    wv = g.var(w_name)
    if wv is None or len(wv.shape) != 2 or not g.is_constant_param(w_name, store):
        return None
    ops = [i]
    b0_name = op.input("Bias")[0] if op.type == "fc" and op.input("Bias") else None
    t = out
    if op.type == "mul":
        j = g.only_consumer(t)
        if j is None or not g.fusable_link(t, j):
            return None
        add = g.op(j)
        if add.type == "elementwise_add" and add.input("X") == [t] and \
                add.attr("axis") in (-1, k):
            b0_name = add.input("Y")[0]
            bv = g.var(b0_name)
            if bv is None or len(bv.shape) != 1:
                return None
            ops.append(j)
            t = add.output("Out")[0]
    if b0_name is not None and not g.is_constant_param(b0_name, store):
        return None
    j = _bn_after(g, t, ctx, k + 1)
    if j is None:
        return None
    ops.append(j)
    bn = g.op(j)
    assert store is not None
    w = get_value(store, w_name)
    b0 = None if b0_name is None else get_value(store, b0_name)
    if w is None or w.ndim != 2 or (b0_name is not None and b0 is None):
        return None
    folded = _fold(w, b0, bn, store)
    if folded is None:
        return None
    new_w, new_b = folded
    beta_name = bn.input("Bias")[0]
    w_new = fresh_name(g.block, f"{w_name}.bn_fused", store, new_w)
    b_new = fresh_name(g.block, f"{beta_name}.bn_fused", store, new_b)
    y = bn.output("Y")[0]
    if op.type == "fc":
        specs = [OpSpec("fc", {"Input": x_in, "W": [w_new], "Bias": [b_new]}, {"Out": [y]},
                        attrs_of(op))]
    else:
        specs = [OpSpec("mul", {"X": x_in, "Y": [w_new]}, {"Out": [out]}, attrs_of(op)),
                 OpSpec("elementwise_add", {"X": [out], "Y": [b_new]}, {"Out": [y]},
                        {"axis": k})]
    return Match(ops, specs, [(w_new, new_w, g.var(w_name)),
                              (b_new, new_b, g.var(beta_name))])


@register_pass
class FcBnFuse(Pass):
    name = "fc_bn_fuse"
    requires = ("scope",)

    def run(self, program: Program, ctx: PassContext) -> bool:
        return fuse_matches(program, ctx, lambda g, i: _match(g, i, ctx))
