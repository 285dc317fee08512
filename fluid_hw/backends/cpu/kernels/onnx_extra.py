"""Kernels of ``ir/ops/onnx_extra.py``: erf, hard_sigmoid, hard_swish, where, expand,
cumsum, cumprod, reduce_min, reduce_prod, elementwise_mod / fmod, and their gradients."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.ops.math import reduce_axes, reduce_shape
from ..context import KernelContext
from . import Kernel, register_kernel
from .backward_ops import unbroadcast
from .elementwise import broadcast_pair
from .math import reduce_max_grad

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


def _numpy(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def run(x: np.ndarray, a: dict) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):  # NaN / inf off the domain
            return np.asarray(fn(x)).astype(x.dtype, copy=False)

    return run


_FWD.update({"tan": _numpy(np.tan), "sinh": _numpy(np.sinh), "cosh": _numpy(np.cosh),
             "asin": _numpy(np.arcsin), "acos": _numpy(np.arccos), "atan": _numpy(np.arctan),
             "asinh": _numpy(np.arcsinh), "acosh": _numpy(np.arccosh),
             "atanh": _numpy(np.arctanh)})


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
    "tan_grad": lambda x, d, a: d / np.square(np.cos(x)),
    "sinh_grad": lambda x, d, a: d * np.cosh(x),
    "cosh_grad": lambda x, d, a: d * np.sinh(x),
    "asin_grad": lambda x, d, a: d / np.sqrt(1 - x * x),
    "acos_grad": lambda x, d, a: -d / np.sqrt(1 - x * x),
    "atan_grad": lambda x, d, a: d / (1 + x * x),
    "asinh_grad": lambda x, d, a: d / np.sqrt(x * x + 1),
    "acosh_grad": lambda x, d, a: d / np.sqrt(x * x - 1),
    "atanh_grad": lambda x, d, a: d / (1 - x * x),
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


def _largest(dt: np.dtype) -> Any:
    return np.inf if dt.kind == "f" else True if dt.kind == "b" else np.iinfo(dt).max


def _reduce_min(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.min(x, axes, keepdims=keep, initial=_largest(x.dtype))


def _reduce_prod(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    # float16 multiplies in float32, as the sums of reduce_sum
    return np.prod(x, axes, keepdims=keep,
                   dtype=np.float32 if x.dtype == np.float16 else x.dtype)


def _make_reduce(fn: Callable[..., np.ndarray]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        a = ctx.attrs
        axes = reduce_axes(x.ndim, a["dim"], a["reduce_all"])
        out = np.asarray(fn(x, axes, a["keep_dim"])).astype(x.dtype, copy=False)
        keep_lod = len(axes) < x.ndim and 0 not in axes
        ctx.set_output("Out", out.reshape(reduce_shape(x.shape, axes, a["keep_dim"])),
                       lod=lod if keep_lod else None)

    return kernel


register_kernel("reduce_min")(_make_reduce(_reduce_min))
register_kernel("reduce_prod")(_make_reduce(_reduce_prod))
# every element equal to its minimum gets the whole gradient (ties: all of them)
register_kernel("reduce_min_grad")(reduce_max_grad)


@register_kernel("reduce_prod_grad")
def _reduce_prod_grad(ctx: KernelContext) -> None:
    """dX = dOut * (product of the other elements of X's window), computed without
    dividing so that zeros in X are exact."""
    if not ctx.has_output("X@GRAD"):
        return
    x, d, a = ctx.input("X"), ctx.input("Out@GRAD"), ctx.attrs
    axes = reduce_axes(x.ndim, a["dim"], a["reduce_all"])
    d = d.reshape(reduce_shape(x.shape, axes, True))
    # move the reduced axes to the end, flatten them: products of the others are
    # exclusive prefix products times exclusive suffix products
    rest = [k for k in range(x.ndim) if k not in axes]
    xt = np.transpose(x, rest + list(axes))
    flat = xt.reshape(*xt.shape[:len(rest)], -1)
    ones = np.ones_like(flat[..., :1])
    pre = np.cumprod(np.concatenate([ones, flat[..., :-1]], -1), -1)
    suf = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], -1), -1), -1)
    others = (pre * suf).reshape(xt.shape)
    inv = np.argsort(rest + list(axes))
    g = np.transpose(others, inv) * d
    ctx.set_output("X@GRAD", g.astype(x.dtype, copy=False))


def _mod(fn: Callable[..., np.ndarray]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        x, y = broadcast_pair(x, ctx.input("Y"), ctx.attrs["axis"])
        with np.errstate(divide="ignore", invalid="ignore"):  # integer y = 0 gives 0
            out = fn(x, y)
        ctx.set_output("Out", np.asarray(out).astype(x.dtype, copy=False), lod=lod)

    return kernel


def _mod_grad(quotient: Callable[..., np.ndarray]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x0, y0 = ctx.input("X"), ctx.input("Y")
        x, y = broadcast_pair(x0, y0, ctx.attrs["axis"])
        d = ctx.input("Out@GRAD")
        if ctx.has_output("X@GRAD"):
            g = np.broadcast_to(d, np.broadcast_shapes(x.shape, y.shape))
            ctx.set_output("X@GRAD", unbroadcast(g, x.shape).reshape(x0.shape)
                           .astype(x0.dtype, copy=False))
        if ctx.has_output("Y@GRAD"):
            g = -quotient(x / y) * d
            ctx.set_output("Y@GRAD", unbroadcast(g, y.shape).reshape(y0.shape)
                           .astype(y0.dtype, copy=False))

    return kernel


register_kernel("elementwise_mod")(_mod(np.mod))
register_kernel("elementwise_fmod")(_mod(np.fmod))
register_kernel("elementwise_mod_grad")(_mod_grad(np.floor))
register_kernel("elementwise_fmod_grad")(_mod_grad(np.trunc))


def _lanes_last(x: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(x, axis, -1)


def cumprod(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    v = _lanes_last(x, axis)
    if reverse:
        v = v[..., ::-1]
    out = np.cumprod(v, axis=-1, dtype=x.dtype)
    if exclusive:
        out = np.concatenate([np.ones_like(out[..., :1]), out[..., :-1]], axis=-1)
    if reverse:
        out = out[..., ::-1]
    return np.ascontiguousarray(np.moveaxis(out, -1, axis))


@register_kernel("cumprod")
def _cumprod(ctx: KernelContext) -> None:
    x, a = ctx.input("X"), ctx.attrs
    ctx.set_output("Out", cumprod(x, a["axis"] % max(x.ndim, 1), a["exclusive"], a["reverse"]))


@register_kernel("cumprod_grad")
def _cumprod_grad(ctx: KernelContext) -> None:
    """dX_j = (product of x before j) * S_j with S_j = g_j + x_(j+1) * S_(j+1), the sum
    over the outputs i >= j of g_i times the x between j and i: no division, so zeros
    in X are exact."""
    if not ctx.has_output("X@GRAD"):
        return
    x, d, a = ctx.input("X"), ctx.input("Out@GRAD"), ctx.attrs
    axis = a["axis"] % max(x.ndim, 1)
    v, g = _lanes_last(x, axis), _lanes_last(d, axis)
    if a["reverse"]:
        v, g = v[..., ::-1], g[..., ::-1]
    if a["exclusive"]:  # out_i = inclusive_(i-1): the inclusive product's gradient
        g = np.concatenate([g[..., 1:], np.zeros_like(g[..., :1])], axis=-1)
    n = v.shape[-1]
    s = np.zeros_like(g)
    if n:
        s[..., n - 1] = g[..., n - 1]
    for j in range(n - 2, -1, -1):
        s[..., j] = g[..., j] + v[..., j + 1] * s[..., j + 1]
    before = np.concatenate([np.ones_like(v[..., :1]), np.cumprod(v, axis=-1)[..., :-1]],
                            axis=-1)
    dx = before * s
    if a["reverse"]:
        dx = dx[..., ::-1]
    ctx.set_output("X@GRAD", np.ascontiguousarray(np.moveaxis(dx, -1, axis)).astype(x.dtype))
