"""Kernels of ``ir/ops/beam_search.py``: a beam-search step and the backtracking
decoder (Paddle 1.5's rules, see the op docs)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..context import KernelContext
from . import register_kernel
from .lod_array import _array_in, _entries

Lod = list[list[int]]


def _two_levels(ctx: KernelContext, slot: str) -> Lod:
    _, lod = ctx.input_with_lod(slot)
    if not lod or len(lod) < 2:
        raise ValueError(f"{ctx.op_type}: {slot} {ctx.in_names[slot][0]!r} needs a two-level "
                         f"LoD (source -> prefixes -> rows), has {lod or 'none'}; feed the "
                         "first step's ids and scores with lod_level 2")
    return lod


def select(pre_ids: np.ndarray, pre_scores: np.ndarray, ids: np.ndarray | None,
           scores: np.ndarray, sources: list[int], beam_size: int, end_id: int,
           accumulated: bool) -> list[list[tuple[int, int, float]]]:
    """The items (prefix row, id, score) each prefix row keeps, best first per source."""
    keep: list[list[tuple[int, int, float]]] = [[] for _ in range(pre_ids.shape[0])]
    for b, e in itertools.pairwise(sources):
        cand: list[tuple[int, int, float]] = []
        for row in range(b, e):
            pid, pscore = int(pre_ids[row, 0]), float(pre_scores[row, 0])
            if pid == end_id:  # an ended prefix keeps itself only
                cand.append((row, end_id, pscore))
                continue
            for d in range(scores.shape[1]):
                i = int(ids[row, d]) if ids is not None else d
                s = float(scores[row, d])
                cand.append((row, i, s if accumulated else pscore + float(np.log(s))))
        best = sorted(cand, key=lambda c: -c[2])[:beam_size]  # stable: ties keep order
        # a source all of whose rows ended before and are kept as they are is done
        if best and all(i == end_id and int(pre_ids[r, 0]) == end_id for r, i, _ in best):
            continue
        for item in best:
            keep[item[0]].append(item)
    return keep


@register_kernel("beam_search")
def _beam_search(ctx: KernelContext) -> None:
    pre_ids = ctx.input("pre_ids").reshape(-1, 1)
    pre_scores = ctx.input("pre_scores").reshape(-1, 1)
    scores = ctx.input("scores")
    ids = ctx.input("ids") if ctx.has_input("ids") else None
    lod = _two_levels(ctx, "scores")
    level = ctx.attrs["level"]
    if level != 0:
        raise ValueError(f"beam_search: level {level} is not supported; the sources are LoD "
                         "level 0 (Paddle's default)")
    if scores.ndim != 2 or scores.shape[0] != pre_ids.shape[0] or \
            (ids is not None and ids.shape != scores.shape):
        raise ValueError(f"beam_search: scores {list(scores.shape)} (and ids) must have one "
                         f"row per prefix ({pre_ids.shape[0]} pre_ids)")
    sources = [lod[1][k] for k in lod[0]]  # level 0 in rows
    if sources[-1] != pre_ids.shape[0]:
        raise ValueError(f"beam_search: scores' LoD {lod} covers {sources[-1]} rows, "
                         f"pre_ids has {pre_ids.shape[0]}")
    keep = select(pre_ids, pre_scores, ids, scores, sources, ctx.attrs["beam_size"],
                  ctx.attrs["end_id"], ctx.attrs["is_accumulated"])
    items = [it for row in keep for it in row]
    low = [0, *itertools.accumulate(len(r) for r in keep)]
    out_lod = [list(sources), low]
    ctx.set_output("selected_ids", np.array([[i] for _, i, _ in items], np.int64)
                   .reshape(-1, 1), lod=out_lod)
    ctx.set_output("selected_scores", np.array([[s] for _, _, s in items], scores.dtype)
                   .reshape(-1, 1), lod=out_lod)
    ctx.set_output("parent_idx", np.array([r for r, _, _ in items], np.int32))


def backtrace(steps: list[tuple[np.ndarray, np.ndarray, Lod]], end_id: int
              ) -> list[list[tuple[list[int], list[float]]]]:
    """Each source's sentences (word ids, scores), best final score first."""
    n_src = len(steps[0][2][0]) - 1
    sentences: list[list[tuple[list[int], list[float]]]] = [[] for _ in range(n_src)]
    rows: list[list[int]] = [[] for _ in range(n_src)]  # each sentence's row at this step
    for ids, scores, lod in reversed(steps):
        src, pre = lod[0], lod[1]
        for s in range(n_src):
            if not rows[s]:  # the source's last step with selected rows: start there
                for prefix in range(src[s], src[s + 1]):
                    for r in range(pre[prefix], pre[prefix + 1]):
                        sentences[s].append(([int(ids[r])], [float(scores[r])]))
                        rows[s].append(prefix)
                continue
            for k, r in enumerate(rows[s]):
                words, sc = sentences[s][k]
                if int(ids[r]) != end_id or not words:  # one end token per sentence
                    words.append(int(ids[r]))
                    sc.append(float(scores[r]))
                # the prefix row r was selected from
                rows[s][k] = int(np.searchsorted(pre, r, side="right")) - 1
    for s in range(n_src):
        sentences[s] = [(w[::-1], c[::-1]) for w, c in sentences[s]]
        sentences[s].sort(key=lambda sent: -sent[1][-1])
    return sentences


@register_kernel("beam_search_decode")
def _beam_search_decode(ctx: KernelContext) -> None:
    steps: list[tuple[np.ndarray, np.ndarray, Lod]] = []
    id_entries = _entries(_array_in(ctx, "Ids"), ctx.in_names["Ids"][0])
    score_entries = _entries(_array_in(ctx, "Scores"), ctx.in_names["Scores"][0])
    if not id_entries or len(id_entries) != len(score_entries):
        raise ValueError(f"beam_search_decode: Ids has {len(id_entries)} steps, Scores "
                         f"{len(score_entries)}; both need the same number (> 0)")
    for t, ((ids, lod), (scores, _)) in enumerate(zip(id_entries, score_entries)):
        if len(lod) < 2:
            raise ValueError(f"beam_search_decode: step {t} of Ids has LoD {lod}; each step "
                             "needs beam_search's two-level LoD")
        steps.append((ids.reshape(-1), scores.reshape(-1), lod))
    sents = backtrace(steps, ctx.attrs["end_id"])
    words: list[int] = []
    sc: list[float] = []
    src_lod, sent_lod = [0], [0]
    for per_src in sents:
        for w, c in per_src:
            words += w
            sc += c
            sent_lod.append(sent_lod[-1] + len(w))
        src_lod.append(src_lod[-1] + len(per_src))
    dt: Any = score_entries[0][0].dtype
    lod_out = [src_lod, sent_lod]
    ctx.set_output("SentenceIds", np.array(words, np.int64).reshape(-1, 1), lod=lod_out)
    ctx.set_output("SentenceScores", np.array(sc, dt).reshape(-1, 1), lod=lod_out)
