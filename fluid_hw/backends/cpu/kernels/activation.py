"""Activation kernels (the specification of each activation's math)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..context import KernelContext
from . import Kernel, register_kernel


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # stable for large |x|: exp of a non-positive number only
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


_UNARY = {
    "relu": lambda x, a: np.maximum(x, x.dtype.type(0)),
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: np.tanh(x),
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "abs": lambda x, a: np.abs(x),
    "leaky_relu": lambda x, a: np.where(x > 0, x, x * x.dtype.type(a["alpha"])),
}


def _make(fn: Callable[..., Any]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        ctx.set_output("Out", fn(ctx.input("X"), ctx.attrs))

    return kernel


for _t, _f in _UNARY.items():
    register_kernel(_t)(_make(_f))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@register_kernel("softmax")
def _softmax(ctx: KernelContext) -> None:
    ctx.set_output("Out", softmax(ctx.input("X"), ctx.attrs["axis"]))


_MORE = {
    "floor": lambda x, a: np.floor(x),
    "ceil": lambda x, a: np.ceil(x),
    "round": lambda x, a: np.round(x),
    "sign": lambda x, a: np.sign(x),
    "cos": lambda x, a: np.cos(x),
    "sin": lambda x, a: np.sin(x),
    "square": lambda x, a: x * x,
    "reciprocal": lambda x, a: x.dtype.type(1) / x,
}
for _t, _f in _MORE.items():
    register_kernel(_t)(_make(_f))


# -- gradients: dX from dOut and the forward value each one needs -----------------
def _zero_grad(v: np.ndarray, d: np.ndarray, a: dict) -> np.ndarray:
    return np.zeros_like(d)


_GRAD_FROM_OUT = {
    "relu_grad": lambda o, d, a: d * (o > 0),
    "sigmoid_grad": lambda o, d, a: d * o * (o.dtype.type(1) - o),
    "tanh_grad": lambda o, d, a: d * (o.dtype.type(1) - o * o),
    "exp_grad": lambda o, d, a: d * o,
    "sqrt_grad": lambda o, d, a: d * o.dtype.type(0.5) / o,
    "reciprocal_grad": lambda o, d, a: -d * o * o,
    "softmax_grad": lambda o, d, a: o * (d - (d * o).sum(axis=a["axis"], keepdims=True)),
}
_GRAD_FROM_X = {
    "log_grad": lambda x, d, a: d / x,
    "abs_grad": lambda x, d, a: d * np.sign(x),
    "leaky_relu_grad": lambda x, d, a: np.where(x > 0, d, d * x.dtype.type(a["alpha"])),
    "cos_grad": lambda x, d, a: -d * np.sin(x),
    "sin_grad": lambda x, d, a: d * np.cos(x),
    "square_grad": lambda x, d, a: d * x.dtype.type(2) * x,
    "floor_grad": _zero_grad,
    "ceil_grad": _zero_grad,
    "round_grad": _zero_grad,
    "sign_grad": _zero_grad,
}


def _make_grad(fn: Callable[..., Any], slot: str) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        if ctx.has_output("X@GRAD"):
            g = fn(ctx.input(slot), ctx.input("Out@GRAD"), ctx.attrs)
            ctx.set_output("X@GRAD", g.astype(ctx.input("Out@GRAD").dtype, copy=False))

    return kernel


for _t, _g in _GRAD_FROM_OUT.items():
    register_kernel(_t)(_make_grad(_g, "Out"))
for _t, _g in _GRAD_FROM_X.items():
    register_kernel(_t)(_make_grad(_g, "X"))
