"""Sequence labelling layers of Paddle 1.5 (issue 20): ``linear_chain_crf``,
``crf_decoding`` and ``chunk_eval`` (the label_semantic_roles book chapter's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ...ir.program import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["linear_chain_crf", "crf_decoding", "chunk_eval"]


def _tags(input: Variable, layer: str) -> int:
    shape = list(input.shape)
    if len(shape) != 2 or shape[1] <= 0:
        raise ShapeError(f"{layer}: input {input.name!r} must be [N, num_tags] emission "
                         f"scores with a known num_tags, got shape {shape}")
    return shape[1]


def linear_chain_crf(input: Variable, label: Variable, param_attr: Any = None) -> Variable:
    """The CRF cost of each sequence: ``log Z - score(label path)`` ([num_seqs, 1]).

    ``input``: emission scores [N, num_tags] (lod_level 1); ``label``: int64 [N, 1].
    Creates the transition parameter [num_tags + 2, num_tags] (``param_attr``; name it
    to share it with :func:`crf_decoding`)."""
    size = _tags(input, "linear_chain_crf")
    helper = LayerHelper("linear_chain_crf")
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    transition = helper.create_parameter(attr, [size + 2, size], input.dtype_name)
    outs = {s: helper.create_variable_for_type_inference(input.dtype)
            for s in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    helper.append_op("linear_chain_crf",
                     {"Emission": input, "Transition": transition, "Label": label}, outs)
    return outs["LogLikelihood"]


def crf_decoding(input: Variable, param_attr: Any, label: Variable | None = None) -> Variable:
    """The Viterbi tag path of each sequence (int64 [N, 1]) under the transition
    parameter named by ``param_attr`` (created by :func:`linear_chain_crf`); with
    ``label``, 1 where the path is right and 0 where not."""
    size = _tags(input, "crf_decoding")
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    helper = LayerHelper("crf_decoding")
    gb = helper.main_program.global_block()
    if not attr.name or not gb.has_var(attr.name):
        raise ValueError(f"crf_decoding: param_attr must name the transition parameter of a "
                         f"linear_chain_crf layer built before it (got name {attr.name!r}); "
                         "pass the same ParamAttr(name=...) to both")
    transition = gb.var(attr.name)
    if list(transition.shape) != [size + 2, size]:
        raise ShapeError(f"crf_decoding: parameter {attr.name!r} has shape "
                         f"{list(transition.shape)}, {size} tags need {[size + 2, size]}")
    path = helper.create_variable_for_type_inference("int64")
    ins: dict[str, Any] = {"Emission": input, "Transition": transition}
    if label is not None:
        ins["Label"] = label
    helper.append_op("crf_decoding", ins, {"ViterbiPath": path})
    return path


def chunk_eval(input: Variable, label: Variable, chunk_scheme: str, num_chunk_types: int,
               excluded_chunk_types: Sequence[int] | None = None) -> tuple[Variable, ...]:
    """Chunk precision, recall, F1 and the inferred / labelled / correct chunk counts of
    the tag sequences ``input`` against ``label`` (int64, lod_level 1), in
    ``chunk_scheme`` ("IOB", "IOE", "IOBES" or "plain")."""
    helper = LayerHelper("chunk_eval")
    outs = {s: helper.create_variable_for_type_inference("float32")
            for s in ("Precision", "Recall", "F1-Score")}
    outs.update({s: helper.create_variable_for_type_inference("int64")
                 for s in ("NumInferChunks", "NumLabelChunks", "NumCorrectChunks")})
    helper.append_op("chunk_eval", {"Inference": input, "Label": label}, outs,
                     {"num_chunk_types": int(num_chunk_types), "chunk_scheme": chunk_scheme,
                      "excluded_chunk_types": [int(t) for t in excluded_chunk_types or []]})
    return (outs["Precision"], outs["Recall"], outs["F1-Score"], outs["NumInferChunks"],
            outs["NumLabelChunks"], outs["NumCorrectChunks"])
