"""Beam search of Paddle 1.5 (issue 20): ``beam_search`` (one step: the best
``beam_size`` continuations of each source sentence's prefixes) and
``beam_search_decode`` (the sentences, backtracked through the steps' arrays).

A step's ids and scores carry a two-level LoD: level 0 maps each source sentence to
its prefixes (the previous step's selected rows), level 1 maps each prefix to the rows
selected from it.  A prefix that already ended (its id is ``end_id``) keeps one
candidate, itself, with its score; a source whose every selected row ended twice in a
row is pruned (it selects nothing, so ``is_empty`` can end the decoding loop).
"""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op


@define_op("beam_search",
           ["pre_ids", "pre_scores", Slot("ids", dispensable=True), "scores"],
           ["selected_ids", "selected_scores", Slot("parent_idx", dispensable=True)],
           [Attr("level", "int", 0, min=0), Attr("beam_size", "int", min=1),
            Attr("end_id", "int"), Attr("is_accumulated", "bool", True)],
           doc="One beam-search step over candidates `ids` (row i: continuations of prefix "
               "i) scored by `scores` (accumulated, or probabilities when not "
               "is_accumulated: then pre_score + log(score)).")
def _beam_search(ctx: InferContext) -> None:
    ps = ctx.input_shape("pre_ids")
    ss = ctx.input_shape("scores")
    ctx.check(ctx.input_dtype("pre_ids") == VarType.INT64, "pre_ids must be int64")
    ctx.check(len(ss) == 2, f"scores must be [prefixes, candidates], got {ss}")
    if ctx.has_input("ids"):
        ctx.check(ctx.input_shape("ids") == ss or -1 in ctx.input_shape("ids") or -1 in ss,
                  f"ids {ctx.input_shape('ids')} and scores {ss} must have one shape")
        ctx.check(ctx.input_dtype("ids") == VarType.INT64, "ids must be int64")
    ctx.check(len(ps) == 2 and ps[1] == 1, f"pre_ids must be [prefixes, 1], got {ps}")
    ctx.set_output("selected_ids", [-1, 1], VarType.INT64, lod_level=2)
    ctx.set_output("selected_scores", [-1, 1], ctx.input_dtype("scores"), lod_level=2)
    ctx.set_output("parent_idx", [-1], VarType.INT32)


@define_op("beam_search_decode", ["Ids", "Scores"], ["SentenceIds", "SentenceScores"],
           [Attr("beam_size", "int", min=1), Attr("end_id", "int")],
           doc="The finished sentences of each source (best score first), backtracked "
               "through the arrays of the steps' selected ids and scores; two-level LoD: "
               "source -> sentences -> words.")
def _beam_search_decode(ctx: InferContext) -> None:
    for slot in ("Ids", "Scores"):
        v = ctx.input_var(slot)
        ctx.check(v.type == VarType.LOD_TENSOR_ARRAY,
                  f"{slot} {v.name!r} must be the LOD_TENSOR_ARRAY of the steps' selected "
                  f"{slot.lower()}, is {v.type_name}")
    ctx.set_output("SentenceIds", [-1, 1], VarType.INT64, lod_level=2)
    ctx.set_output("SentenceScores", [-1, 1], ctx.input_dtype("Scores"), lod_level=2)


def _declare() -> None:
    from ..grad import no_grad

    no_grad("metric", "beam_search", "beam_search_decode")


_declare()
