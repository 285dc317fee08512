"""Parameter-update ops: sgd, momentum, adam, rmsprop (Fluid 1.x formulas).

Each op reads a parameter, its gradient, a one-element learning rate and its
accumulators, and writes the updated values to the ``*Out`` slots (which, in
programs built by the optimizers, name the same variables as the inputs).
Every ``*Out`` shares the shape and dtype of its input.  The formulas are the
CPU kernels' (``backends/cpu/kernels/optimizer.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .. import dtypes
from ..grad import no_grad
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim


def _same_shape(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(merge_dim(x, y) is not None for x, y in zip(a, b))


def _check_update(ctx: InferContext, like_param: Sequence[str] = ("Grad",)) -> None:
    """Param is float; each slot in ``like_param`` has Param's shape and dtype;
    LearningRate holds one float element."""
    p = ctx.input_var("Param")
    ctx.check(dtypes.is_float(p.dtype),
              f"Param {p.name!r} must be a float tensor, got {p.dtype_name}")
    for slot in like_param:
        if not ctx.has_input(slot):
            continue
        v = ctx.input_var(slot)
        ctx.check(_same_shape(v.shape, p.shape),
                  f"{slot} {v.name!r} has shape {list(v.shape)}, Param {p.name!r} has "
                  f"{list(p.shape)}; they must be equal")
        ctx.check(v.dtype == p.dtype, f"{slot} {v.name!r} is {v.dtype_name}, Param {p.name!r} "
                  f"is {p.dtype_name}; they must have the same dtype")
    lr = ctx.input_var("LearningRate")
    ctx.check(all(d in (1, -1) for d in lr.shape) and math.prod(lr.shape) in (1, -1),
              f"LearningRate {lr.name!r} must hold one element, has shape {list(lr.shape)}")
    ctx.check(dtypes.is_float(lr.dtype),
              f"LearningRate {lr.name!r} must be a float tensor, got {lr.dtype_name}")


def _check_scalar(ctx: InferContext, slot: str) -> None:
    v = ctx.input_var(slot)
    ctx.check(math.prod(v.shape) in (1, -1),
              f"{slot} {v.name!r} must hold one element, has shape {list(v.shape)}")


@define_op(
    "sgd", ["Param", "Grad", "LearningRate"], ["ParamOut"],
    doc="ParamOut = Param - LearningRate * Grad.",
)
def _sgd(ctx: InferContext) -> None:
    _check_update(ctx)
    ctx.share("Param", "ParamOut")


@define_op(
    "momentum", ["Param", "Grad", "Velocity", "LearningRate"], ["ParamOut", "VelocityOut"],
    [Attr("mu", "float", doc="momentum factor"),
     Attr("use_nesterov", "bool", False, doc="Nesterov accelerated gradient")],
    doc="VelocityOut = mu * Velocity + Grad; ParamOut = Param - LearningRate * VelocityOut, "
    "or with use_nesterov Param - (Grad + mu * VelocityOut) * LearningRate.",
)
def _momentum(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "Velocity"))
    ctx.share("Param", "ParamOut")
    ctx.share("Velocity", "VelocityOut")


@define_op(
    "adam",
    ["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow"],
    ["ParamOut", "Moment1Out", "Moment2Out", Slot("Beta1PowOut", dispensable=True),
     Slot("Beta2PowOut", dispensable=True)],
    [Attr("beta1", "float", 0.9), Attr("beta2", "float", 0.999),
     Attr("epsilon", "float", 1e-8)],
    doc="Moment1Out = beta1*m1 + (1-beta1)*g; Moment2Out = beta2*m2 + (1-beta2)*g^2; "
    "lr_t = lr*sqrt(1-Beta2Pow)/(1-Beta1Pow); ParamOut = Param - lr_t*Moment1Out/"
    "(sqrt(Moment2Out) + epsilon*sqrt(1-Beta2Pow)); Beta{1,2}PowOut = Beta{1,2}Pow*beta{1,2}.",
)
def _adam(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "Moment1", "Moment2"))
    _check_scalar(ctx, "Beta1Pow")
    _check_scalar(ctx, "Beta2Pow")
    ctx.share("Param", "ParamOut")
    ctx.share("Moment1", "Moment1Out")
    ctx.share("Moment2", "Moment2Out")
    ctx.share("Beta1Pow", "Beta1PowOut")
    ctx.share("Beta2Pow", "Beta2PowOut")


@define_op(
    "rmsprop",
    ["Param", "MeanSquare", "Grad", "Moment", "LearningRate",
     Slot("MeanGrad", dispensable=True, doc="needed when centered")],
    ["ParamOut", "MomentOut", "MeanSquareOut", Slot("MeanGradOut", dispensable=True)],
    [Attr("epsilon", "float", 1e-10), Attr("decay", "float", 0.9),
     Attr("momentum", "float", 0.0), Attr("centered", "bool", False)],
    doc="MeanSquareOut = decay*ms + (1-decay)*g^2; MomentOut = momentum*mom + lr*g/"
    "sqrt(MeanSquareOut + epsilon) (centered: MeanGradOut = decay*mg + (1-decay)*g and "
    "sqrt(MeanSquareOut - MeanGradOut^2 + epsilon)); ParamOut = Param - MomentOut.",
)
def _rmsprop(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "MeanSquare", "Moment", "MeanGrad"))
    if ctx.attr("centered"):
        ctx.check(ctx.has_input("MeanGrad") and ctx.has_output("MeanGradOut"),
                  "centered=True needs the MeanGrad input and the MeanGradOut output")
    ctx.share("Param", "ParamOut")
    ctx.share("Moment", "MomentOut")
    ctx.share("MeanSquare", "MeanSquareOut")
    if ctx.has_input("MeanGrad"):
        ctx.share("MeanGrad", "MeanGradOut")


OPTIMIZER_OPS = ("sgd", "momentum", "adam", "rmsprop")

no_grad("optimize", *OPTIMIZER_OPS)
