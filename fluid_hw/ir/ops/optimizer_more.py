"""More parameter-update ops of Fluid 1.5 (issue 20): ``adagrad``, ``decayed_adagrad``,
``adamax``, ``adadelta``, ``ftrl`` and ``lars_momentum``, with Paddle's slots,
attributes and formulas (the CPU kernels' in ``backends/cpu/kernels/optimizer_more.py``).
Every ``*Out`` shares its input's shape and dtype."""

from __future__ import annotations

from ..grad import no_grad
from ..registry import Attr, InferContext, Slot, define_op
from .optimizer import _check_scalar, _check_update


def _outs(ctx: InferContext, pairs: dict[str, str]) -> None:
    for i, o in pairs.items():
        ctx.share(i, o)


@define_op("adagrad", ["Param", "Grad", "Moment", "LearningRate"], ["ParamOut", "MomentOut"],
           [Attr("epsilon", "float", 1e-6, min=0.0)],
           doc="MomentOut = Moment + g^2; ParamOut = Param - lr * g / (sqrt(MomentOut) + "
               "epsilon).")
def _adagrad(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "Moment"))
    _outs(ctx, {"Param": "ParamOut", "Moment": "MomentOut"})


@define_op("decayed_adagrad", ["Param", "Grad", "Moment", "LearningRate"],
           ["ParamOut", "MomentOut"],
           [Attr("decay", "float", 0.95, min=0.0, max=1.0), Attr("epsilon", "float", 1e-6)],
           doc="MomentOut = decay * Moment + (1 - decay) * g^2; ParamOut = Param - lr * g / "
               "(sqrt(MomentOut) + epsilon).")
def _decayed_adagrad(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "Moment"))
    _outs(ctx, {"Param": "ParamOut", "Moment": "MomentOut"})


@define_op("adamax", ["Param", "Grad", "LearningRate", "Moment", "InfNorm", "Beta1Pow"],
           ["ParamOut", "MomentOut", "InfNormOut", Slot("Beta1PowOut", dispensable=True)],
           [Attr("beta1", "float", 0.9), Attr("beta2", "float", 0.999),
            Attr("epsilon", "float", 1e-8)],
           doc="MomentOut = beta1 * m + (1 - beta1) * g; InfNormOut = max(beta2 * u + "
               "epsilon, |g|); ParamOut = Param - lr / (1 - Beta1Pow) * MomentOut / InfNormOut;"
               " Beta1PowOut = Beta1Pow * beta1.")
def _adamax(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "Moment", "InfNorm"))
    _check_scalar(ctx, "Beta1Pow")
    _outs(ctx, {"Param": "ParamOut", "Moment": "MomentOut", "InfNorm": "InfNormOut",
                "Beta1Pow": "Beta1PowOut"})


@define_op("adadelta", ["Param", "Grad", "AvgSquaredGrad", "AvgSquaredUpdate"],
           ["ParamOut", "AvgSquaredGradOut", "AvgSquaredUpdateOut"],
           [Attr("rho", "float", 0.95, min=0.0, max=1.0), Attr("epsilon", "float", 1e-6)],
           doc="E[g^2] = rho E[g^2] + (1 - rho) g^2; update = -sqrt((E[dx^2] + eps) / "
               "(E[g^2] + eps)) g; E[dx^2] = rho E[dx^2] + (1 - rho) update^2; ParamOut = "
               "Param + update (no learning rate, as Paddle's).")
def _adadelta(ctx: InferContext) -> None:
    p = ctx.input_var("Param")
    for s in ("Grad", "AvgSquaredGrad", "AvgSquaredUpdate"):
        v = ctx.input_var(s)
        ctx.check(list(v.shape) == list(p.shape) and v.dtype == p.dtype,
                  f"{s} {v.name!r} must have Param {p.name!r}'s shape {list(p.shape)} and dtype")
    _outs(ctx, {"Param": "ParamOut", "AvgSquaredGrad": "AvgSquaredGradOut",
                "AvgSquaredUpdate": "AvgSquaredUpdateOut"})


@define_op("ftrl", ["Param", "SquaredAccumulator", "LinearAccumulator", "Grad", "LearningRate"],
           ["ParamOut", "SquaredAccumOut", "LinearAccumOut"],
           [Attr("l1", "float", 0.0, min=0.0), Attr("l2", "float", 0.0, min=0.0),
            Attr("lr_power", "float", -0.5, max=0.0)],
           doc="FTRL-proximal: n' = n + g^2; z' = z + g - (n'^-p - n^-p) / lr * Param; "
               "ParamOut = (l1 sign(z') - z') / (n'^-p / lr + 2 l2) where |z'| > l1, else 0 "
               "(p = lr_power).")
def _ftrl(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "SquaredAccumulator", "LinearAccumulator"))
    _outs(ctx, {"Param": "ParamOut", "SquaredAccumulator": "SquaredAccumOut",
                "LinearAccumulator": "LinearAccumOut"})


@define_op("lars_momentum", ["Param", "Grad", "Velocity", "LearningRate"],
           ["ParamOut", "VelocityOut"],
           [Attr("mu", "float"), Attr("lars_coeff", "float", 0.001),
            Attr("lars_weight_decay", "float", 0.0005)],
           doc="local_lr = lr * lars_coeff * |Param| / (|g| + lars_weight_decay * |Param|) "
               "(lr when a norm is 0); VelocityOut = mu * v + local_lr * (g + "
               "lars_weight_decay * Param); ParamOut = Param - VelocityOut.")
def _lars_momentum(ctx: InferContext) -> None:
    _check_update(ctx, ("Grad", "Velocity"))
    _outs(ctx, {"Param": "ParamOut", "Velocity": "VelocityOut"})


OPTIMIZER_MORE_OPS = ("adagrad", "decayed_adagrad", "adamax", "adadelta", "ftrl",
                      "lars_momentum")
no_grad("optimize", *OPTIMIZER_MORE_OPS)


#: average_accumulates moves sum_1 into sum_2 every this many updates (Paddle's)
MAX_NUM_ACCUMULATES = 16384


@define_op("average_accumulates",
           ["param", "in_sum_1", "in_sum_2", "in_sum_3", "in_num_accumulates",
            "in_old_num_accumulates", "in_num_updates"],
           ["out_sum_1", "out_sum_2", "out_sum_3", "out_num_accumulates",
            "out_old_num_accumulates", "out_num_updates"],
           [Attr("average_window", "float", 0.0, min=0.0),
            Attr("max_average_window", "int", 10000, min=1),
            Attr("min_average_window", "int", 10000, min=1)],
           doc="ModelAverage's running sums (Paddle's average_accumulates): sum_1 += param; "
               "every 16384 updates sum_2 += sum_1, sum_1 = 0; when the window is long enough "
               "(num_accumulates >= min_average_window and >= min(max_average_window, "
               "num_updates * average_window)) sum_3 = sum_1 + sum_2 (before this update), "
               "sum_1 = sum_2 = 0 and the count restarts.")
def _average_accumulates(ctx: InferContext) -> None:
    p = ctx.input_var("param")
    for i in (1, 2, 3):
        v = ctx.input_var(f"in_sum_{i}")
        ctx.check(list(v.shape) == list(p.shape), f"in_sum_{i} must have param's shape")
        ctx.share(f"in_sum_{i}", f"out_sum_{i}")
    for s in ("num_accumulates", "old_num_accumulates", "num_updates"):
        _check_scalar(ctx, f"in_{s}")
        ctx.share(f"in_{s}", f"out_{s}")


no_grad("optimize", "average_accumulates")
