"""``auc`` (the area under the ROC curve from bucketed statistics kept between runs)
and ``load`` (one variable's value from a ``.npy`` file) of Paddle 1.5 (issue 20)."""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, define_op


@define_op("auc", ["Predict", "Label", "StatPos", "StatNeg"],
           ["AUC", "StatPosOut", "StatNegOut"],
           [Attr("curve", "string", "ROC", allowed=("ROC",)),
            Attr("num_thresholds", "int", 4095, min=1)],
           doc="Each example's positive-class probability (Predict[:, -1]) counted into "
               "bucket int(p * num_thresholds) of StatPos (label 1) or StatNeg; AUC = the "
               "trapezoidal area under the ROC curve of the counts so far.")
def _auc(ctx: InferContext) -> None:
    ps = ctx.input_shape("Predict")
    ctx.check(len(ps) == 2, f"Predict must be [N, classes] probabilities, got {ps}")
    n = ctx.attr("num_thresholds") + 1
    for s in ("StatPos", "StatNeg"):
        ctx.check(ctx.input_shape(s) == [n], f"{s} must be [num_thresholds + 1] = [{n}], got "
                  f"{ctx.input_shape(s)}")
    ctx.set_output("AUC", [1], VarType.FP64)
    ctx.share("StatPos", "StatPosOut")
    ctx.share("StatNeg", "StatNegOut")


@define_op("load", [], ["Out"],
           [Attr("file_path", "string"), Attr("load_as_fp16", "bool", False)],
           doc="Out = the array in file_path (a .npy file, as io.save_vars writes), checked "
               "against Out's declared shape and dtype (float16 with load_as_fp16).")
def _load(ctx: InferContext) -> None:
    """Out keeps its declaration."""


def _declare() -> None:
    from ..grad import no_grad

    no_grad("metric", "auc")
    no_grad("io", "load")


_declare()
