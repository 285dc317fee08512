"""Kernels of ``ir/ops/optimizer_more.py`` (Paddle 1.5's formulas; the arithmetic runs
in the parameter's dtype, inputs are never changed in place)."""

from __future__ import annotations

import numpy as np

from ..context import KernelContext
from . import register_kernel
from .optimizer import _first, _lr


@register_kernel("adagrad")
def adagrad(ctx: KernelContext) -> None:
    p, g, m = ctx.input("Param"), ctx.input("Grad"), ctx.input("Moment")
    m_out = m + g * g
    eps = p.dtype.type(ctx.attrs["epsilon"])
    ctx.set_output("ParamOut", p - _lr(ctx, p.dtype) * g / (np.sqrt(m_out) + eps))
    ctx.set_output("MomentOut", m_out)


@register_kernel("decayed_adagrad")
def decayed_adagrad(ctx: KernelContext) -> None:
    p, g, m = ctx.input("Param"), ctx.input("Grad"), ctx.input("Moment")
    t = p.dtype.type
    d = t(ctx.attrs["decay"])
    m_out = d * m + (t(1) - d) * g * g
    ctx.set_output("ParamOut", p - _lr(ctx, p.dtype) * g
                   / (np.sqrt(m_out) + t(ctx.attrs["epsilon"])))
    ctx.set_output("MomentOut", m_out)


@register_kernel("adamax")
def adamax(ctx: KernelContext) -> None:
    p, g = ctx.input("Param"), ctx.input("Grad")
    m, u, b1p = ctx.input("Moment"), ctx.input("InfNorm"), ctx.input("Beta1Pow")
    t = p.dtype.type
    b1, b2, eps = t(ctx.attrs["beta1"]), t(ctx.attrs["beta2"]), t(ctx.attrs["epsilon"])
    m_out = b1 * m + (t(1) - b1) * g
    u_out = np.maximum(b2 * u + eps, np.abs(g))
    lr_t = _lr(ctx, p.dtype) / (t(1) - _first(b1p, p.dtype))
    ctx.set_output("ParamOut", p - lr_t * m_out / u_out)
    ctx.set_output("MomentOut", m_out)
    ctx.set_output("InfNormOut", u_out)
    ctx.set_output("Beta1PowOut", (b1p * b1).astype(b1p.dtype))


@register_kernel("adadelta")
def adadelta(ctx: KernelContext) -> None:
    p, g = ctx.input("Param"), ctx.input("Grad")
    asg, asu = ctx.input("AvgSquaredGrad"), ctx.input("AvgSquaredUpdate")
    t = p.dtype.type
    rho, eps = t(ctx.attrs["rho"]), t(ctx.attrs["epsilon"])
    asg_out = rho * asg + (t(1) - rho) * g * g
    update = -np.sqrt((asu + eps) / (asg_out + eps)) * g
    ctx.set_output("AvgSquaredUpdateOut", rho * asu + (t(1) - rho) * update * update)
    ctx.set_output("AvgSquaredGradOut", asg_out)
    ctx.set_output("ParamOut", p + update)


@register_kernel("ftrl")
def ftrl(ctx: KernelContext) -> None:
    p, g = ctx.input("Param"), ctx.input("Grad")
    n, z = ctx.input("SquaredAccumulator"), ctx.input("LinearAccumulator")
    t = p.dtype.type
    lr = _lr(ctx, p.dtype)
    l1, l2, power = t(ctx.attrs["l1"]), t(ctx.attrs["l2"]), ctx.attrs["lr_power"]
    n_out = n + g * g
    if power == -0.5:
        sig = (np.sqrt(n_out) - np.sqrt(n)) / lr
        y = np.sqrt(n_out) / lr + t(2) * l2
    else:
        sig = (n_out ** t(-power) - n ** t(-power)) / lr
        y = n_out ** t(-power) / lr + t(2) * l2
    z_out = z + g - sig * p
    x = l1 * np.sign(z_out) - z_out
    ctx.set_output("ParamOut", np.where(np.abs(z_out) > l1, x / y, t(0)).astype(p.dtype))
    ctx.set_output("SquaredAccumOut", n_out)
    ctx.set_output("LinearAccumOut", z_out)


@register_kernel("lars_momentum")
def lars_momentum(ctx: KernelContext) -> None:
    p, g, v = ctx.input("Param"), ctx.input("Grad"), ctx.input("Velocity")
    t = p.dtype.type
    lr = _lr(ctx, p.dtype)
    mu, coeff, wd = (t(ctx.attrs[k]) for k in ("mu", "lars_coeff", "lars_weight_decay"))
    pn, gn = np.sqrt((p * p).sum()), np.sqrt((g * g).sum())
    local = lr * coeff * pn / (gn + wd * pn) if pn > 0 and gn > 0 else lr
    v_out = mu * v + local * (g + wd * p)
    ctx.set_output("ParamOut", p - v_out)
    ctx.set_output("VelocityOut", v_out.astype(p.dtype))


@register_kernel("average_accumulates")
def average_accumulates(ctx: KernelContext) -> None:
    from ....ir.ops.optimizer_more import MAX_NUM_ACCUMULATES

    p = ctx.input("param")
    s1, s2, s3 = (ctx.input(f"in_sum_{i}") for i in (1, 2, 3))
    n_acc = int(ctx.input("in_num_accumulates").reshape(-1)[0]) + 1
    n_old = int(ctx.input("in_old_num_accumulates").reshape(-1)[0])
    n_upd = int(ctx.input("in_num_updates").reshape(-1)[0]) + 1
    a = ctx.attrs
    o1, o2, o3 = s1 + p, s2.copy(), s3.copy()
    if n_upd % MAX_NUM_ACCUMULATES == 0:
        o2 = s2 + s1
        o1 = np.zeros_like(s1)
    if n_acc >= a["min_average_window"] and \
            n_acc >= min(a["max_average_window"], n_upd * a["average_window"]):
        o3 = s1 + s2
        o1, o2 = np.zeros_like(s1), np.zeros_like(s2)
        n_old, n_acc = n_acc, 0
    for i, v in ((1, o1), (2, o2), (3, o3)):
        ctx.set_output(f"out_sum_{i}", v.astype(p.dtype))
    for s, v in (("num_accumulates", n_acc), ("old_num_accumulates", n_old),
                 ("num_updates", n_upd)):
        ctx.set_output(f"out_{s}", np.array([v], ctx.output_dtype(f"out_{s}")))
