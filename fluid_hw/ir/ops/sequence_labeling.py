"""Sequence labelling ops of Paddle 1.5 (issue 20): the linear-chain CRF
(``linear_chain_crf``: the cost, ``crf_decoding``: Viterbi) and ``chunk_eval``.

Emission is a LoD tensor [N, D] (one row of tag scores per token); Transition is
[D + 2, D]: row 0 the start weights, row 1 the end weights, rows 2.. the weight of
moving from tag i to tag j.  Labels and paths are int64 [N, 1] with the Emission's LoD.
"""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op

#: chunk scheme -> (tag types per chunk type, begin, inside, end, single); -1: none
CHUNK_SCHEMES: dict[str, tuple[int, int, int, int, int]] = {
    "IOB": (2, 0, 1, -1, -1),
    "IOE": (2, -1, 0, 1, -1),
    "IOBES": (4, 0, 1, 2, 3),
    "plain": (1, -1, -1, -1, -1),
}


def _check_emission(ctx: InferContext) -> tuple[list[int], list[int]]:
    e = ctx.input_var("Emission")
    ctx.check(e.lod_level > 0, f"Emission {e.name!r} has lod_level 0; {ctx.op.type} needs a "
              "batch of sequences (declare it with lod_level=1)")
    es, ts = list(e.shape), ctx.input_shape("Transition")
    ctx.check(len(es) == 2, f"Emission must be [N, D] (one row of tag scores per token), "
              f"got {es}")
    ctx.check(len(ts) == 2 and ts[1] == es[1] and ts[0] == es[1] + 2,
              f"Transition must be [D + 2, D] = [{es[1] + 2}, {es[1]}] for Emission {es}, "
              f"got {ts}")
    if ctx.has_input("Label"):
        ls = ctx.input_shape("Label")
        ctx.check(ctx.input_dtype("Label") == VarType.INT64,
                  "Label must be int64 tag ids")
        ctx.check(len(ls) == 2 and ls[1] == 1, f"Label must be [N, 1], got {ls}")
    return es, ts


@define_op("linear_chain_crf", ["Emission", "Transition", "Label"],
           [Slot("Alpha", intermediate=True), Slot("EmissionExps", intermediate=True),
            Slot("TransitionExps", intermediate=True), "LogLikelihood"],
           doc="LogLikelihood[s] = log Z_s - score(gold path of sequence s): the negative "
               "log-likelihood of each sequence's labels under the CRF (Paddle's name and "
               "sign: the cost to minimise).")
def _linear_chain_crf(ctx: InferContext) -> None:
    es, ts = _check_emission(ctx)
    dt = ctx.input_dtype("Emission")
    ctx.set_output("Alpha", es, dt)
    ctx.set_output("EmissionExps", es, dt)
    ctx.set_output("TransitionExps", ts, dt)
    ctx.set_output("LogLikelihood", [-1, 1], dt, lod_level=0)


@define_op("crf_decoding", ["Emission", "Transition", Slot("Label", dispensable=True)],
           ["ViterbiPath"],
           doc="ViterbiPath: the highest-scoring tag of each token (int64 [N, 1], the "
               "Emission's LoD); with Label, 1 where the path equals the label, else 0.")
def _crf_decoding(ctx: InferContext) -> None:
    es, _ = _check_emission(ctx)
    ctx.set_output("ViterbiPath", [es[0], 1], VarType.INT64,
                   lod_level=ctx.input_var("Emission").lod_level)


@define_op("chunk_eval", ["Inference", "Label"],
           ["Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
            "NumCorrectChunks"],
           [Attr("num_chunk_types", "int", min=1),
            Attr("chunk_scheme", "string", "IOB", allowed=tuple(CHUNK_SCHEMES)),
            Attr("excluded_chunk_types", "ints", [])],
           doc="Chunk precision, recall and F1 of tag sequences (tag = chunk type * tag "
               "types + position tag; the 'outside' tag is num_chunk_types * tag types).")
def _chunk_eval(ctx: InferContext) -> None:
    for slot in ("Inference", "Label"):
        v = ctx.input_var(slot)
        ctx.check(v.dtype == VarType.INT64, f"{slot} {v.name!r} must be int64 tag ids")
        ctx.check(v.lod_level > 0, f"{slot} {v.name!r} has lod_level 0; chunk_eval needs "
                  "a batch of tag sequences (lod_level=1)")
    for s in ("Precision", "Recall", "F1-Score"):
        ctx.set_output(s, [1], VarType.FP32)
    for s in ("NumInferChunks", "NumLabelChunks", "NumCorrectChunks"):
        ctx.set_output(s, [1], VarType.INT64)


def _declare() -> None:
    from ..grad import define_default_grad, no_grad

    define_default_grad("linear_chain_crf", uses=("Emission", "Transition", "Label"),
                        out_grads=["LogLikelihood"], in_grads=["Emission", "Transition"])
    no_grad("metric", "crf_decoding", "chunk_eval")


_declare()
