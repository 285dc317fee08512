"""Assorted ops of Paddle 1.5 (issue 20): the sequence decoders' metrics
(``ctc_greedy_decoder``, ``edit_distance``), ``mean_iou``, ``elementwise_floordiv``,
batch-sized random tensors (``uniform_random_batch_size_like``,
``gaussian_random_batch_size_like``), ``sampling_id``, and the host ops ``print``
(``layers.Print``) and ``py_func`` (a Python function as an op)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op
from .elementwise import _infer as _elementwise_infer


@define_op("ctc_greedy_decoder", ["Input"], ["Output"],
           [Attr("blank", "int", min=0), Attr("merge_repeated", "bool", True)],
           doc="Output = each sequence's best class per step (argmax), repeats merged, blanks "
               "removed (int64 [M, 1], new LoD).")
def _ctc_greedy_decoder(ctx: InferContext) -> None:
    v = ctx.input_var("Input")
    ctx.check(v.lod_level > 0, f"Input {v.name!r} must be a LoD tensor of per-step class "
              "probabilities (lod_level 1)")
    ctx.set_output("Output", [-1, 1], VarType.INT64, lod_level=1)


@define_op("edit_distance", ["Hyps", "Refs"], ["Out", "SequenceNum"],
           [Attr("normalized", "bool", False),
            Attr("ignored_tokens", "ints", [], doc="ids dropped from both before comparing")],
           doc="Out[i] = the Levenshtein distance of hypothesis i to reference i (divided by "
               "the reference's length when normalized); SequenceNum = the number of pairs.")
def _edit_distance(ctx: InferContext) -> None:
    for s in ("Hyps", "Refs"):
        v = ctx.input_var(s)
        ctx.check(v.lod_level > 0, f"{s} {v.name!r} must be a LoD tensor of token ids")
    ctx.set_output("Out", [-1, 1], VarType.FP32, lod_level=0)
    ctx.set_output("SequenceNum", [1], VarType.INT64)


@define_op("mean_iou", ["Predictions", "Labels"], ["OutMeanIou", "OutWrong", "OutCorrect"],
           [Attr("num_classes", "int", min=1)],
           doc="Mean over the classes present of correct / (correct + wrong); OutWrong[c]: "
               "pixels wrongly predicted as c or wrongly not c; OutCorrect[c]: right ones.")
def _mean_iou(ctx: InferContext) -> None:
    for s in ("Predictions", "Labels"):
        ctx.check(ctx.input_dtype(s) in (VarType.INT32, VarType.INT64), f"{s} must be int")
    n = ctx.attr("num_classes")
    ctx.set_output("OutMeanIou", [1], VarType.FP32)
    ctx.set_output("OutWrong", [n], VarType.INT32)
    ctx.set_output("OutCorrect", [n], VarType.INT32)


define_op("elementwise_floordiv", ["X", "Y"], ["Out"],
          [Attr("axis", "int", -1, doc="where Y's dims start in X's; -1 aligns to the right")],
          doc="Out = floor(X / Y) (integers), Y broadcast into X from dim `axis`.")(
    _elementwise_infer)

_RANDOM_LIKE = [Attr("shape", "ints"), Attr("input_dim_idx", "int", 0, min=0),
                Attr("output_dim_idx", "int", 0, min=0), Attr("seed", "int", 0),
                Attr("dtype", "int", int(VarType.FP32))]


def _batch_size_like(ctx: InferContext) -> None:
    shape = list(ctx.attr("shape"))
    i, o = ctx.attr("input_dim_idx"), ctx.attr("output_dim_idx")
    ins = ctx.input_shape("Input")
    ctx.check(i < len(ins) and o < len(shape), f"input_dim_idx {i} / output_dim_idx {o} out "
              f"of range for Input {ins} / shape {shape}")
    shape[o] = ins[i]
    ctx.set_output("Out", shape, ctx.attr("dtype"))


define_op("uniform_random_batch_size_like", ["Input"], ["Out"],
          [*_RANDOM_LIKE, Attr("min", "float", -1.0), Attr("max", "float", 1.0)],
          doc="Out ~ U(min, max) of `shape` with dim output_dim_idx = Input's dim "
              "input_dim_idx.")(_batch_size_like)
define_op("gaussian_random_batch_size_like", ["Input"], ["Out"],
          [*_RANDOM_LIKE, Attr("mean", "float", 0.0), Attr("std", "float", 1.0, min=0.0)],
          doc="Out ~ N(mean, std^2) of `shape` with dim output_dim_idx = Input's dim "
              "input_dim_idx.")(_batch_size_like)


@define_op("sampling_id", ["X"], ["Out"],
           [Attr("min", "float", 0.0), Attr("max", "float", 1.0), Attr("seed", "int", 0)],
           doc="Out[i] = a class drawn from row i of X (probabilities): the first whose "
               "cumulative sum exceeds u ~ U(min, max).")
def _sampling_id(ctx: InferContext) -> None:
    s = ctx.input_shape("X")
    ctx.check(len(s) == 2, f"X must be [N, classes] probabilities, got {s}")
    ctx.set_output("Out", [s[0]], VarType.INT64)


@define_op("print", ["In"], ["Out"],
           [Attr("first_n", "int", -1), Attr("message", "string", ""),
            Attr("summarize", "int", -1), Attr("print_tensor_name", "bool", True),
            Attr("print_tensor_type", "bool", True), Attr("print_tensor_shape", "bool", True),
            Attr("print_tensor_lod", "bool", True),
            Attr("print_phase", "string", "both", allowed=("forward", "backward", "both"))],
           doc="Out = In, printed (the first `summarize` values; the first `first_n` runs).")
def _print(ctx: InferContext) -> None:
    ctx.share("In", "Out")


#: py_func's Python functions, by the id its ops carry (they live in this process only)
PY_FUNCS: list[Callable[..., Any]] = []


def register_py_func(fn: Callable[..., Any] | None) -> int:
    """Keep ``fn`` for py_func ops; returns its id (-1 for None)."""
    if fn is None:
        return -1
    PY_FUNCS.append(fn)
    return len(PY_FUNCS) - 1


@define_op("py_func", [Slot("X", duplicable=True, dispensable=True)],
           [Slot("Out", duplicable=True, dispensable=True)],
           [Attr("forward_callable_id", "int", min=0),
            Attr("backward_callable_id", "int", -1),
            Attr("backward_skip_vars", "strings", [])],
           doc="Out = the registered Python function forward_callable_id applied to X (numpy "
               "arrays in, numpy arrays out).")
def _py_func(ctx: InferContext) -> None:
    """Out variables are created by the layer with their shapes and dtypes."""


def _declare() -> None:
    from ..grad import define_default_grad, no_grad

    no_grad("metric", "ctc_greedy_decoder", "edit_distance", "mean_iou", "sampling_id")
    no_grad("integer", "elementwise_floordiv")
    no_grad("creation", "uniform_random_batch_size_like", "gaussian_random_batch_size_like")
    define_default_grad("print", uses=(), in_grads=["In"])
    define_default_grad("py_func", uses=("X", "Out"), in_grads=["X"])


_declare()
