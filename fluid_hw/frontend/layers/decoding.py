"""Beam-search layers of Paddle 1.5 (issue 20): ``beam_search`` and
``beam_search_decode`` (the machine_translation book chapter's decoder)."""

from __future__ import annotations

from ...ir.dtypes import VarType
from ...ir.program import Variable
from ..layer_helper import LayerHelper

__all__ = ["beam_search", "beam_search_decode"]


def beam_search(pre_ids: Variable, pre_scores: Variable, ids: Variable | None,
                scores: Variable, beam_size: int, end_id: int, level: int = 0,
                is_accumulated: bool = True, name: str | None = None,
                return_parent_idx: bool = False) -> tuple[Variable, ...]:
    """One step of beam search: of each source sentence's prefixes (``pre_ids``,
    ``pre_scores``: one row each, two-level LoD) and their candidates (``ids``,
    ``scores``: one row of candidates per prefix; ids None: the column index is the
    id), keep the ``beam_size`` best.  Returns ``(selected_ids, selected_scores)``,
    plus ``parent_idx`` (each selected row's prefix row) with ``return_parent_idx``."""
    if beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be >= 1, got {beam_size}")
    helper = LayerHelper("beam_search", name=name)
    sel_ids = helper.create_variable_for_type_inference("int64")
    sel_scores = helper.create_variable_for_type_inference(scores.dtype)
    parent = helper.create_variable_for_type_inference("int32")
    ins = {"pre_ids": pre_ids, "pre_scores": pre_scores, "scores": scores}
    if ids is not None:
        ins["ids"] = ids
    helper.append_op("beam_search", ins,
                     {"selected_ids": sel_ids, "selected_scores": sel_scores,
                      "parent_idx": parent},
                     {"level": int(level), "beam_size": int(beam_size), "end_id": int(end_id),
                      "is_accumulated": bool(is_accumulated)})
    return (sel_ids, sel_scores, parent) if return_parent_idx else (sel_ids, sel_scores)


def beam_search_decode(ids: Variable, scores: Variable, beam_size: int, end_id: int,
                       name: str | None = None) -> tuple[Variable, Variable]:
    """The sentences of a finished beam search: ``ids`` and ``scores`` are the tensor
    arrays of each step's selected ids and scores.  Returns ``(sentence_ids,
    sentence_scores)``, two-level LoD (source -> sentences, best first -> words)."""
    for what, v in (("ids", ids), ("scores", scores)):
        if v.type != VarType.LOD_TENSOR_ARRAY:
            raise TypeError(f"beam_search_decode: {what} {v.name!r} must be the tensor array "
                            f"(layers.create_array) the steps' selected {what} were written "
                            f"to, is {v.type_name}")
    helper = LayerHelper("beam_search_decode", name=name)
    sent_ids = helper.create_variable_for_type_inference("int64")
    sent_scores = helper.create_variable_for_type_inference(scores.dtype)
    helper.append_op("beam_search_decode", {"Ids": ids, "Scores": scores},
                     {"SentenceIds": sent_ids, "SentenceScores": sent_scores},
                     {"beam_size": int(beam_size), "end_id": int(end_id)})
    return sent_ids, sent_scores
