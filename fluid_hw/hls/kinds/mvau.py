"""Kind ``mvau``: ``quantized_fc`` (+ ``requantize``) as a matrix-vector-activation unit.

The stage reads whatever order arrives: its weight columns are permuted to match
(``W[K, C]`` transposed to ``[C, K]``, then columns ``perm``; after an image stage
that is :func:`~fluid_hw.rtl.hwc_order`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import hwc_order
from fluid_hw.rtl.mvau import mvau_latency

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name
from ..stages import MVAUStage, mvau_times, queue_latency
from ._base import StageKind
from ._matrix import (
    check_weights,
    matrix_arrays,
    matrix_lut,
    matrix_memories,
    matrix_resources,
    requant_tail,
    stage_act_bits,
    stage_clamp,
    weight_layout,
)


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    op = b.ops[chain[k]]
    wname = op.input("W")[0]
    bname = (op.input("Bias") or [None])[0]
    name = b.unique(layer_name(wname, main_output(op)))
    wv = check_weights(b, op, name, wname)
    used, rq, out, relu, out_fmt, requantize = requant_tail(b, chain, k, name)
    kk, cc = (int(d) for d in wv.shape)
    n_in = int(np.prod(cur.shape))
    if n_in != kk:
        raise LoweringError(f"quantized_fc {name!r} reads {n_in} values per example "
                            f"but its weights {wname!r} are [{kk}, {cc}]")
    col_perm = np.asarray(cur.perm)
    ident = np.array_equal(col_perm, np.arange(kk))
    img = b.stages[-1].out_shape if b.stages else ()
    hwc = len(img) == 3 and int(np.prod(img)) == kk and \
        np.array_equal(col_perm, hwc_order(*img))
    layout = {"weights": "W [K, C] transposed to [C, K]",
              "columns": "identity" if ident else "hwc" if hwc else "permuted",
              **weight_layout(op)}
    st = LoweredStage(name, "mvau", op.type, used, cur.var, out, cur.shape, (cc,), cur.fmt,
                      out_fmt, np.arange(cc), {"weights": wname, "bias": bname, **rq},
                      layout, {}, relu, requantize, col_perm=col_perm, fold_dims=(kk, cc))
    return st, len(used)


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> MVAUStage:
    # W [K, C] transposed to [C, K], columns in the order the stream brings them
    arrays, mode = matrix_arrays(st, values, mode, lambda w: np.asarray(w).T[:, st.col_perm])
    return MVAUStage(st.name, st.mw, st.mh, pe=pe, simd=simd, relu=st.relu,
                     weights_mode=mode, requantize=st.requantize, clamp=stage_clamp(st),
                     weight_bits=int(st.layout.get("weight_bits", 8)),
                     act_bits=stage_act_bits(st), **arrays)


def _lat(s: Any) -> int:
    return mvau_latency(s.simd, s.requantize, pe=s.pe, sf=s.sf,
                        thresholds=s.thresholds is not None,
                        stream_input=getattr(s, "stream_input", False))


def _times(s: Any, t_in: np.ndarray) -> np.ndarray:
    """Output element times; in latency mode (``stream_input``) synapse fold ``j`` of the
    first neuron fold issues once beat ``j`` is in (``c_j = max(t_j + 1, c_{j-1} + 1)``),
    the other folds follow back to back, as with a whole vector issued from ``c_0``."""
    if not getattr(s, "stream_input", False):
        return mvau_times(float(t_in.max()), s.mh, s.pe, s.sf, _lat(s))
    beats = np.asarray(t_in, np.float64).reshape(s.sf, s.simd).max(axis=1)
    c = -1e18
    for t in beats:
        c = max(t + 1, c + 1)
    nf = np.arange(s.mh) // s.pe
    return c + nf * s.sf + _lat(s) + queue_latency()


KIND = StageKind(
    name="mvau", spec=MVAUStage, report_op="quantized_fc",
    matches=lambda program, op: op.type == "quantized_fc",
    lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: s.nf * s.sf,
    times=lambda s, lanes, t_in: _times(s, t_in),
    resources=lambda s, lanes: matrix_resources(s),
    memories=lambda s, lanes: matrix_memories(s),
    lut=lambda s, lanes, cal: matrix_lut(s, cal),
    shape=lambda s: {"mw": s.mw, "mh": s.mh},
    buffer=lambda s: s.in_len,
    doc="fully-connected layer + requantisation (PE x SIMD folding)",
)
