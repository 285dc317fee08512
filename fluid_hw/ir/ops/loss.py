"""Losses and metrics: cross_entropy, softmax_with_cross_entropy, accuracy, top_k, arg_max."""

from __future__ import annotations

from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim
from .nn import attr_fail, check_float

INT64 = dtypes.VarType.INT64
INT32 = dtypes.VarType.INT32

#: Fluid's kIgnoreIndex
IGNORE_INDEX = -100


def _check_label(ctx: InferContext, x_slot: str, axis: int, soft: bool) -> None:
    """Label has X's shape, except a hard label has 1 along ``axis`` (the class axis)."""
    xs, ls = ctx.input_shape(x_slot), ctx.input_shape("Label")
    kind = "soft" if soft else "hard"
    ctx.check(len(xs) == len(ls), f"{x_slot} {xs} and Label {ls} must have the same rank")
    for i, (a, b) in enumerate(zip(xs, ls)):
        want = a if (soft or i != axis) else 1
        ctx.check(merge_dim(want, b) is not None,
                  f"Label {ls} does not fit {x_slot} {xs} for a {kind} label: dim {i} is {b}, "
                  f"expected {want}"
                  + ("" if soft or i != axis else " (one class id per row)"))
    if soft:
        ctx.check(ctx.input_dtype("Label") == ctx.input_dtype(x_slot),
                  f"a soft Label must have {x_slot}'s dtype "
                  f"{ctx.input_var(x_slot).dtype_name}, got {ctx.input_var('Label').dtype_name}")
    else:
        ctx.check(ctx.input_dtype("Label") == INT64,
                  f"a hard Label must be int64 class ids, got {ctx.input_var('Label').dtype_name}"
                  " (set soft_label=True for a probability Label)")


@define_op(
    "cross_entropy", [Slot("X", doc="probabilities [..., C]"),
                      Slot("Label", doc="int64 [..., 1], or [..., C] with soft_label")],
    [Slot("Y", doc="[..., 1]")],
    [Attr("soft_label", "bool", False),
     Attr("ignore_index", "int", IGNORE_INDEX, doc="hard labels equal to it give loss 0")],
    doc="""Y = -log(X[label]) (hard) or -sum_c Label_c * log(X_c) (soft), per row.

X holds probabilities, not logits.  log(0) counts as -1e20 (Fluid's
TolerableValue), so a zero probability gives a loss of 1e20, not inf.  A hard
label must be in [0, C) or equal ignore_index.""",
)
def _infer_cross_entropy(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) >= 1, "X must have at least one dimension (the classes)")
    check_float(ctx, "X")
    _check_label(ctx, "X", len(xs) - 1, ctx.attr("soft_label"))
    ctx.set_output("Y", [*xs[:-1], 1], ctx.input_dtype("X"),
                   lod_level=ctx.input_var("X").lod_level)


@define_op(
    "softmax_with_cross_entropy",
    [Slot("Logits"), Slot("Label", doc="int64, 1 along axis; or Logits' shape if soft")],
    [Slot("Softmax", doc="softmax(Logits) along axis"), Slot("Loss", doc="1 along axis")],
    [Attr("soft_label", "bool", False),
     Attr("ignore_index", "int", IGNORE_INDEX, doc="hard labels equal to it give loss 0"),
     Attr("numeric_stable_mode", "bool", True,
          doc="kept for Fluid compatibility: the loss is always computed stably"),
     Attr("axis", "int", -1, doc="the class axis")],
    doc="""Softmax = softmax(Logits); Loss = -log_softmax(Logits)[label] (hard) or
-sum_c Label_c * log_softmax(Logits)_c (soft), along ``axis``.

The loss comes from log_softmax = (x - max) - log(sum(exp(x - max))), so it is
finite however large the logits (Fluid's numerically stable mode).""",
)
def _infer_softmax_ce(ctx: InferContext) -> None:
    xs = ctx.input_shape("Logits")
    rank = len(xs)
    ax = ctx.attr("axis")
    if not -rank <= ax < rank:
        attr_fail(ctx, f"axis {ax} is out of range for Logits of rank {rank} {xs}")
    ax %= rank
    check_float(ctx, "Logits")
    _check_label(ctx, "Logits", ax, ctx.attr("soft_label"))
    lod = ctx.input_var("Logits").lod_level
    ctx.set_output("Softmax", xs, ctx.input_dtype("Logits"), lod_level=lod)
    ctx.set_output("Loss", [*xs[:ax], 1, *xs[ax + 1:]], ctx.input_dtype("Logits"), lod_level=lod)


@define_op(
    "accuracy",
    [Slot("Out", doc="top-k values [N, k]"), Slot("Indices", doc="int64 top-k classes [N, k]"),
     Slot("Label", doc="int64 [N, 1]")],
    [Slot("Accuracy", doc="float32 [1]"), Slot("Correct", doc="int32 [1]"),
     Slot("Total", doc="int32 [1]")],
    doc="Correct = number of rows whose Label is among its k Indices; Total = N; "
    "Accuracy = Correct / Total (0 for an empty batch).",
)
def _infer_accuracy(ctx: InferContext) -> None:
    vs, ids, ls = ctx.input_shape("Out"), ctx.input_shape("Indices"), ctx.input_shape("Label")
    ctx.check(len(ids) == 2, f"Indices must be [N, k], got {ids}")
    ctx.check(ctx.input_dtype("Indices") == INT64,
              f"Indices must be int64, got {ctx.input_var('Indices').dtype_name}")
    ctx.check(ctx.input_dtype("Label") == INT64,
              f"Label must be int64, got {ctx.input_var('Label').dtype_name}")
    ctx.check(len(ls) == 2 and merge_dim(ls[1], 1) is not None,
              f"Label must be [N, 1], got {ls}")
    ctx.check(merge_dim(ids[0], ls[0]) is not None,
              f"Indices {ids} and Label {ls} have different batch sizes")
    ctx.check(len(vs) == 2 and all(merge_dim(a, b) is not None for a, b in zip(vs, ids)),
              f"Out {vs} must have the shape of Indices {ids}")
    ctx.set_output("Accuracy", [1], "float32")
    ctx.set_output("Correct", [1], "int32")
    ctx.set_output("Total", [1], "int32")


@define_op(
    "top_k", ["X"], [Slot("Out", doc="[..., k] largest values"),
                     Slot("Indices", doc="int64 [..., k] their positions")],
    [Attr("k", "int", 1, min=1)],
    doc="The k largest entries along the last axis, sorted descending; equal values "
    "keep their order (the lower index first).",
)
def _infer_top_k(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    k = ctx.attr("k")
    ctx.check(len(xs) >= 1, "X must have at least one dimension")
    if k < 1:
        attr_fail(ctx, f"k must be >= 1, got {k}")
    ctx.check(xs[-1] == -1 or k <= xs[-1],
              f"k={k} is larger than the last dimension of X {xs}")
    lod = ctx.input_var("X").lod_level
    ctx.set_output("Out", [*xs[:-1], k], ctx.input_dtype("X"), lod_level=lod)
    ctx.set_output("Indices", [*xs[:-1], k], INT64, lod_level=lod)


@define_op(
    "arg_max", ["X"], [Slot("Out", doc="int64 (or int32, see dtype) indices")],
    [Attr("axis", "long", doc="the axis to reduce; negative counts from the end"),
     Attr("keepdims", "bool", False),
     Attr("flatten", "bool", False, doc="reduce over all elements; Out is [1]"),
     Attr("dtype", "int", INT64, allowed=(-1, INT32, INT64),
          doc="VarType of Out: 3 INT64 (default; -1 also means INT64) or 2 INT32")],
    doc="Out = index of the largest value along axis (the first one among equals).  "
    "A result that would have rank 0 (1-D X, no keepdims) has shape [1].",
)
def _infer_arg_max(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    rank = len(xs)
    dt = INT64 if ctx.attr("dtype") == -1 else ctx.attr("dtype")
    if ctx.attr("flatten"):
        ctx.set_output("Out", [1], dt)
        return
    ax = ctx.attr("axis")
    if not -rank <= ax < rank:
        attr_fail(ctx, f"axis {ax} is out of range for X of rank {rank} {xs}")
    ax %= rank
    out = [*xs[:ax], *([1] if ctx.attr("keepdims") else []), *xs[ax + 1:]]
    ctx.set_output("Out", out or [1], dt)


# -- gradients -----------------------------------------------------------------


def _declare_grads() -> None:
    """X / Logits get a gradient; Label never does (not even a soft one, as in
    Fluid).  softmax_with_cross_entropy differentiates Loss
    only (Fluid's convention): a gradient reaching its Softmax output is not
    propagated, so take a separate softmax op when both are needed."""
    from ..grad import define_default_grad, no_grad

    define_default_grad("cross_entropy", uses=("X", "Label"), out_grads=("Y",),
                        in_grads=("X",))
    define_default_grad("softmax_with_cross_entropy", uses=("Label", "Softmax"),
                        out_grads=("Loss",), in_grads=("Logits",))
    no_grad("metric", "accuracy", "top_k", "arg_max")


_declare_grads()
