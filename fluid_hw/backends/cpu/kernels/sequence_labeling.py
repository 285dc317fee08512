"""Kernels of ``ir/ops/sequence_labeling.py``: the linear-chain CRF (forward-backward
in log space, one sequence at a time), Viterbi decoding and chunk evaluation."""

from __future__ import annotations

import itertools

import numpy as np

from ....ir.ops.sequence_labeling import CHUNK_SCHEMES
from ..context import KernelContext
from . import register_kernel


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    m = a.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _offsets(ctx: KernelContext, slot: str) -> list[int]:
    _, lod = ctx.input_with_lod(slot)
    if not lod:
        raise ValueError(f"{ctx.op_type}: {slot} {ctx.in_names[slot][0]!r} has no LoD; feed "
                         "a LoDTensor of sequences")
    return lod[-1]


def _labels(ctx: KernelContext, n_rows: int, n_tags: int) -> np.ndarray:
    lab = ctx.input("Label").reshape(-1).astype(np.int64)
    if lab.size != n_rows:
        raise ValueError(f"{ctx.op_type}: Label has {lab.size} rows, Emission {n_rows}")
    if lab.size and (lab.min() < 0 or lab.max() >= n_tags):
        raise ValueError(f"{ctx.op_type}: Label values must be tag ids in [0, {n_tags}), got "
                         f"[{lab.min()}, {lab.max()}]")
    return lab


def _crf_sequence(x: np.ndarray, w: np.ndarray, lab: np.ndarray, want_grad: bool):
    """(nll, dx, dw) of one sequence: x [L, D] float64, w [D + 2, D], lab [L]."""
    start, end, trans = w[0], w[1], w[2:]
    L = x.shape[0]
    la = np.empty_like(x)
    la[0] = start + x[0]
    for t in range(1, L):
        la[t] = _lse(la[t - 1][:, None] + trans, 0) + x[t]
    log_z = float(_lse(la[-1] + end, 0))
    gold = start[lab[0]] + x[np.arange(L), lab].sum() + trans[lab[:-1], lab[1:]].sum() \
        + end[lab[-1]]
    nll = log_z - gold
    if not want_grad:
        return nll, None, None
    lb = np.empty_like(x)
    lb[-1] = end
    for t in range(L - 2, -1, -1):
        lb[t] = _lse(trans + (x[t + 1] + lb[t + 1])[None, :], 1)
    marg = np.exp(la + lb - log_z)
    dx = marg.copy()
    dx[np.arange(L), lab] -= 1
    dw = np.zeros_like(w)
    dw[0] = marg[0]
    dw[0, lab[0]] -= 1
    dw[1] = marg[-1]
    dw[1, lab[-1]] -= 1
    for t in range(1, L):
        dw[2:] += np.exp(la[t - 1][:, None] + trans + (x[t] + lb[t])[None, :] - log_z)
    np.add.at(dw[2:], (lab[:-1], lab[1:]), -1)
    return nll, dx, dw


@register_kernel("linear_chain_crf")
def _linear_chain_crf(ctx: KernelContext) -> None:
    x = ctx.input("Emission")
    w = ctx.input("Transition")
    offs = _offsets(ctx, "Emission")
    lab = _labels(ctx, x.shape[0], x.shape[1])
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    nll = np.zeros((len(offs) - 1, 1))
    alpha = np.zeros_like(xd)
    for s, (b, e) in enumerate(itertools.pairwise(offs)):
        if e > b:
            nll[s, 0] = _crf_sequence(xd[b:e], wd, lab[b:e], False)[0]
            # Alpha as Paddle keeps it: the forward variables, normalised per row
            a = np.exp(wd[0] + xd[b] - (wd[0] + xd[b]).max())
            alpha[b] = a / a.sum()
            for t in range(b + 1, e):
                a = (alpha[t - 1] @ np.exp(wd[2:])) * np.exp(xd[t] - xd[t].max())
                alpha[t] = a / a.sum()
    ctx.set_output("Alpha", alpha.astype(x.dtype))
    ctx.set_output("EmissionExps", np.exp(xd - xd.max(axis=1, keepdims=True)).astype(x.dtype))
    ctx.set_output("TransitionExps", np.exp(wd).astype(w.dtype))
    ctx.set_output("LogLikelihood", nll.astype(x.dtype))


@register_kernel("linear_chain_crf_grad")
def _linear_chain_crf_grad(ctx: KernelContext) -> None:
    x = ctx.input("Emission")
    w = ctx.input("Transition")
    offs = _offsets(ctx, "Emission")
    lab = _labels(ctx, x.shape[0], x.shape[1])
    d = ctx.input("LogLikelihood@GRAD").reshape(-1).astype(np.float64)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    dx, dw = np.zeros_like(xd), np.zeros_like(wd)
    for s, (b, e) in enumerate(itertools.pairwise(offs)):
        if e > b:
            _, gx, gw = _crf_sequence(xd[b:e], wd, lab[b:e], True)
            dx[b:e] = d[s] * gx
            dw += d[s] * gw
    if ctx.has_output("Emission@GRAD"):
        ctx.set_output("Emission@GRAD", dx.astype(x.dtype))
    if ctx.has_output("Transition@GRAD"):
        ctx.set_output("Transition@GRAD", dw.astype(w.dtype))


def viterbi(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The highest-scoring tag path of one sequence (x [L, D], w [D + 2, D])."""
    L = x.shape[0]
    score = w[0] + x[0]
    back = np.zeros(x.shape, np.int64)
    for t in range(1, L):
        cand = score[:, None] + w[2:]
        back[t] = cand.argmax(axis=0)
        score = cand.max(axis=0) + x[t]
    path = np.empty(L, np.int64)
    path[-1] = int((score + w[1]).argmax())
    for t in range(L - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


@register_kernel("crf_decoding")
def _crf_decoding(ctx: KernelContext) -> None:
    x = ctx.input("Emission").astype(np.float64)
    w = ctx.input("Transition").astype(np.float64)
    _, lod = ctx.input_with_lod("Emission")
    offs = _offsets(ctx, "Emission")
    path = np.zeros(x.shape[0], np.int64)
    for b, e in itertools.pairwise(offs):
        if e > b:
            path[b:e] = viterbi(x[b:e], w)
    if ctx.has_input("Label"):
        path = (path == _labels(ctx, x.shape[0], x.shape[1])).astype(np.int64)
    ctx.set_output("ViterbiPath", path.reshape(-1, 1), lod=lod)


def chunks(tags: np.ndarray, num_chunk_types: int, scheme: str) -> set[tuple[int, int, int]]:
    """The chunks (begin, end, type) of one tag sequence, by ``scheme``'s rules."""
    n_tag, t_begin, t_inside, t_end, t_single = CHUNK_SCHEMES[scheme]
    other = num_chunk_types

    def ends(pt: int, ptype: int, tag: int, typ: int) -> bool:
        if ptype == other:
            return False
        if typ == other or typ != ptype:
            return True
        if pt in (t_begin, t_inside):
            return tag in (t_begin, t_single)
        return pt in (t_end, t_single)

    def begins(pt: int, ptype: int, tag: int, typ: int) -> bool:
        if ptype == other:
            return typ != other
        if typ == other:
            return False
        if typ != ptype or tag in (t_begin, t_single):
            return True
        if tag in (t_inside, t_end):
            return pt in (t_end, t_single)
        return False

    out: set[tuple[int, int, int]] = set()
    start, inside, tag, typ = 0, False, -1, other
    for i, v in enumerate(tags.tolist()):
        pt, ptype = tag, typ
        tag, typ = v % n_tag, v // n_tag
        if inside and ends(pt, ptype, tag, typ):
            out.add((start, i - 1, ptype))
            inside = False
        if begins(pt, ptype, tag, typ):
            start, inside = i, True
    if inside:
        out.add((start, len(tags) - 1, typ))
    return out


@register_kernel("chunk_eval")
def _chunk_eval(ctx: KernelContext) -> None:
    inf = ctx.input("Inference").reshape(-1)
    lab = ctx.input("Label").reshape(-1)
    offs = _offsets(ctx, "Label")
    n_types = ctx.attrs["num_chunk_types"]
    scheme = ctx.attrs["chunk_scheme"]
    top = n_types * CHUNK_SCHEMES[scheme][0]
    for slot, v in (("Inference", inf), ("Label", lab)):
        if v.size and (v.min() < 0 or v.max() > top):
            raise ValueError(f"chunk_eval: {slot} tags must be in [0, {top}] for "
                             f"{n_types} chunk types in scheme {scheme}, got "
                             f"[{v.min()}, {v.max()}]")
    if inf.size != lab.size:
        raise ValueError(f"chunk_eval: Inference has {inf.size} tags, Label {lab.size}")
    excluded = set(ctx.attrs["excluded_chunk_types"])
    n_inf = n_lab = n_cor = 0
    for b, e in itertools.pairwise(offs):
        ci = {c for c in chunks(inf[b:e], n_types, scheme) if c[2] not in excluded}
        cl = {c for c in chunks(lab[b:e], n_types, scheme) if c[2] not in excluded}
        n_inf, n_lab, n_cor = n_inf + len(ci), n_lab + len(cl), n_cor + len(ci & cl)
    p = n_cor / n_inf if n_inf else 0.0
    r = n_cor / n_lab if n_lab else 0.0
    f1 = 2 * p * r / (p + r) if n_cor else 0.0
    for s, val in (("Precision", p), ("Recall", r), ("F1-Score", f1)):
        ctx.set_output(s, np.array([val], np.float32))
    for s, n in (("NumInferChunks", n_inf), ("NumLabelChunks", n_lab),
                 ("NumCorrectChunks", n_cor)):
        ctx.set_output(s, np.array([n], np.int64))
