"""Kernels of ``ir/ops/onnx_extra.py``: erf, hard_sigmoid, hard_swish, where, expand,
cumsum, and their gradients."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..context import KernelContext
from . import Kernel, register_kernel

_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """erf element-wise, computed in float64 (``math.erf``) and rounded to X's dtype."""
    return np.asarray(_ERF(x.astype(np.float64)), np.float64).astype(x.dtype, copy=False)


def _hard_sigmoid(x: np.ndarray, a: dict) -> np.ndarray:
    t = x.dtype.type
    return np.clip(x * t(a["slope"]) + t(a["offset"]), t(0), t(1))


def _hard_swish(x: np.ndarray, a: dict) -> np.ndarray:
    t = x.dtype.type
    return x * np.clip(x + t(a["offset"]), t(0), t(a["threshold"])) / t(a["scale"])


_FWD = {"erf": lambda x, a: erf(x), "hard_sigmoid": _hard_sigmoid,
        "hard_swish": _hard_swish}


def _hard_sigmoid_grad(x: np.ndarray, d: np.ndarray, a: dict) -> np.ndarray:
    v = x * a["slope"] + a["offset"]
    return d * ((v > 0) & (v < 1)) * a["slope"]


def _hard_swish_grad(x: np.ndarray, d: np.ndarray, a: dict) -> np.ndarray:
    v = x + a["offset"]
    inner = (2 * x + a["offset"]) / a["scale"]
    return d * np.where(v <= 0, 0.0, np.where(v >= a["threshold"],
                                              a["threshold"] / a["scale"], inner))


_GRAD = {
    "erf_grad": lambda x, d, a: d * (2 / math.sqrt(math.pi)) * np.exp(-x * x),
    "hard_sigmoid_grad": _hard_sigmoid_grad,
    "hard_swish_grad": _hard_swish_grad,
}


def _make(fn: Callable[..., Any]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        ctx.set_output("Out", fn(ctx.input("X"), ctx.attrs))

    return kernel


def _make_grad(fn: Callable[..., Any]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        if ctx.has_output("X@GRAD"):
            d = ctx.input("Out@GRAD")
            ctx.set_output("X@GRAD", np.asarray(fn(ctx.input("X"), d, ctx.attrs))
                           .astype(d.dtype, copy=False))

    return kernel


for _t, _f in _FWD.items():
    register_kernel(_t)(_make(_f))
for _t, _g in _GRAD.items():
    register_kernel(_t)(_make_grad(_g))


def sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``g`` summed over the dims broadcasting added to ``shape``."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(k for k, d in enumerate(shape) if d == 1 and g.shape[k] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


@register_kernel("where")
def _where(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.where(ctx.input("Condition"), ctx.input("X"), ctx.input("Y")))


@register_kernel("where_grad")
def _where_grad(ctx: KernelContext) -> None:
    c, d = ctx.input("Condition"), ctx.input("Out@GRAD")
    zero = d.dtype.type(0)
    for slot, keep in (("X", c), ("Y", ~c)):
        if ctx.has_output(f"{slot}@GRAD"):
            g = np.where(np.broadcast_to(keep, d.shape), d, zero)
            ctx.set_output(f"{slot}@GRAD", sum_to(g, ctx.input(slot).shape).astype(d.dtype))


@register_kernel("expand")
def _expand(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.tile(ctx.input("X"), ctx.attrs["expand_times"]))


@register_kernel("expand_grad")
def _expand_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    t = ctx.attrs["expand_times"]
    split = [v for k, s in zip(t, x.shape) for v in (k, s)]
    g = d.reshape(split).sum(axis=tuple(range(0, 2 * x.ndim, 2)))
    ctx.set_output("X@GRAD", g.reshape(x.shape))


def cumsum(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        out = out - x
    return np.ascontiguousarray(np.flip(out, axis) if reverse else out)


@register_kernel("cumsum")
def _cumsum(ctx: KernelContext) -> None:
    x, a = ctx.input("X"), ctx.attrs
    if a["flatten"]:
        x = x.reshape(-1)
    ctx.set_output("Out", cumsum(x, a["axis"] % max(x.ndim, 1), a["exclusive"], a["reverse"]))


@register_kernel("cumsum_grad")
def _cumsum_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, d, a = ctx.input("X"), ctx.input("Out@GRAD"), ctx.attrs
    axis = 0 if a["flatten"] else a["axis"] % max(x.ndim, 1)
    g = cumsum(d, axis, a["exclusive"], not a["reverse"])
    ctx.set_output("X@GRAD", g.reshape(x.shape))
