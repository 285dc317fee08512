"""Parameter-update kernels (Fluid 1.x formulas; see ``ir/ops/optimizer.py``).

Inputs are never changed in place: every result is a new array written to its
``*Out`` slot, so a fetched or fed array is never modified behind its owner.
The arithmetic runs in the parameter's dtype.

Written against ``ctx.xp`` (numpy here, CuPy on the CUDA back end, which runs
these kernels on device arrays): the learning rate and the beta powers are read
as one-element arrays cast to the parameter's dtype, never as host scalars, so a
GPU run reads nothing back to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import KernelContext
from . import register_kernel


def _first(a: Any, dt: np.dtype) -> Any:
    """``a``'s first element in dtype ``dt``: a numpy scalar on the host, a 0-d array
    on a device (no device-to-host read)."""
    return a.reshape(-1)[0].astype(dt)


def _lr(ctx: KernelContext, dt: np.dtype) -> Any:
    return _first(ctx.input("LearningRate"), dt)


@register_kernel("sgd")
def sgd(ctx: KernelContext) -> None:
    p = ctx.input("Param")
    ctx.set_output("ParamOut", p - _lr(ctx, p.dtype) * ctx.input("Grad"))


@register_kernel("momentum")
def momentum(ctx: KernelContext) -> None:
    p, g, v = ctx.input("Param"), ctx.input("Grad"), ctx.input("Velocity")
    t = p.dtype.type
    lr, mu = _lr(ctx, p.dtype), t(ctx.attrs["mu"])
    v_out = mu * v + g
    if ctx.attrs["use_nesterov"]:
        p_out = p - (g + mu * v_out) * lr
    else:
        p_out = p - lr * v_out
    ctx.set_output("ParamOut", p_out)
    ctx.set_output("VelocityOut", v_out)


@register_kernel("adam")
def adam(ctx: KernelContext) -> None:
    xp = ctx.xp
    p, g = ctx.input("Param"), ctx.input("Grad")
    m1, m2 = ctx.input("Moment1"), ctx.input("Moment2")
    b1p, b2p = ctx.input("Beta1Pow"), ctx.input("Beta2Pow")
    t = p.dtype.type
    b1, b2, eps = t(ctx.attrs["beta1"]), t(ctx.attrs["beta2"]), t(ctx.attrs["epsilon"])
    one = t(1)
    b1p_s, b2p_s = _first(b1p, p.dtype), _first(b2p, p.dtype)
    lr = _lr(ctx, p.dtype)
    m1_out = b1 * m1 + (one - b1) * g
    m2_out = b2 * m2 + (one - b2) * g * g
    lr_t = lr * xp.sqrt(one - b2p_s) / (one - b1p_s)
    p_out = p - lr_t * (m1_out / (xp.sqrt(m2_out) + eps * xp.sqrt(one - b2p_s)))
    ctx.set_output("ParamOut", p_out.astype(p.dtype, copy=False))
    ctx.set_output("Moment1Out", m1_out)
    ctx.set_output("Moment2Out", m2_out)
    ctx.set_output("Beta1PowOut", b1p * b1p.dtype.type(ctx.attrs["beta1"]))
    ctx.set_output("Beta2PowOut", b2p * b2p.dtype.type(ctx.attrs["beta2"]))


@register_kernel("rmsprop")
def rmsprop(ctx: KernelContext) -> None:
    xp = ctx.xp
    p, g = ctx.input("Param"), ctx.input("Grad")
    ms, mom = ctx.input("MeanSquare"), ctx.input("Moment")
    t = p.dtype.type
    a = ctx.attrs
    eps, decay, mu = t(a["epsilon"]), t(a["decay"]), t(a["momentum"])
    one = t(1)
    lr = _lr(ctx, p.dtype)
    ms_out = decay * ms + (one - decay) * g * g
    if a["centered"]:
        mg_out = decay * ctx.input("MeanGrad") + (one - decay) * g
        mom_out = mu * mom + lr * g / xp.sqrt(ms_out - mg_out * mg_out + eps)
        ctx.set_output("MeanGradOut", mg_out)
    else:
        mom_out = mu * mom + lr * g / xp.sqrt(ms_out + eps)
        if ctx.has_input("MeanGrad"):
            ctx.set_output("MeanGradOut", ctx.input("MeanGrad").copy())
    ctx.set_output("ParamOut", p - mom_out)
    ctx.set_output("MomentOut", mom_out)
    ctx.set_output("MeanSquareOut", ms_out)
