"""Kernels of the activations in ``ir/ops/activation_more.py`` and their gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..context import KernelContext
from . import Kernel, register_kernel
from .activation import _sigmoid


def _softplus(x: np.ndarray) -> np.ndarray:
    # log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _inside(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (x > lo) & (x < hi)


F = Callable[[np.ndarray, dict[str, Any]], np.ndarray]

FORWARD: dict[str, F] = {
    "elu": lambda x, a: _elu(x, a["alpha"]),
    "relu6": lambda x, a: np.clip(x, 0, a["threshold"]),
    "selu": lambda x, a: a["scale"] * _elu(x, a["alpha"]),
    "swish": lambda x, a: x * _sigmoid(a["beta"] * x),
    "brelu": lambda x, a: np.clip(x, a["t_min"], a["t_max"]),
    "soft_relu": lambda x, a: np.log1p(np.exp(np.clip(x, -a["threshold"], a["threshold"]))),
    "softplus": lambda x, a: _softplus(x),
    "softsign": lambda x, a: x / (1 + np.abs(x)),
    "logsigmoid": lambda x, a: -_softplus(-x),
    "rsqrt": lambda x, a: 1 / np.sqrt(x),
    "stanh": lambda x, a: a["scale_b"] * np.tanh(a["scale_a"] * x),
    "tanh_shrink": lambda x, a: x - np.tanh(x),
    "softshrink": lambda x, a: np.where(x > a["lambda"], x - a["lambda"],
                                        np.where(x < -a["lambda"], x + a["lambda"], 0)),
    "hard_shrink": lambda x, a: np.where(np.abs(x) > a["threshold"], x, 0),
    "thresholded_relu": lambda x, a: np.where(x > a["threshold"], x, 0),
    "pow": lambda x, a: np.power(x, a["factor"]),
}

G = Callable[[np.ndarray, np.ndarray, dict[str, Any]], np.ndarray]

#: dX from (X, dOut, attrs) -- or from (Out, dOut, attrs) for rsqrt
BACKWARD: dict[str, G] = {
    "elu": lambda x, d, a: d * np.where(x > 0, 1, a["alpha"] * np.exp(np.minimum(x, 0))),
    "relu6": lambda x, d, a: d * _inside(x, 0, a["threshold"]),
    "selu": lambda x, d, a: d * a["scale"] * np.where(x > 0, 1,
                                                      a["alpha"] * np.exp(np.minimum(x, 0))),
    "swish": lambda x, d, a: d * _swish_slope(x, a["beta"]),
    "brelu": lambda x, d, a: d * _inside(x, a["t_min"], a["t_max"]),
    "soft_relu": lambda x, d, a: d * _sigmoid(x) * _inside(x, -a["threshold"],
                                                           a["threshold"]),
    "softplus": lambda x, d, a: d * _sigmoid(x),
    "softsign": lambda x, d, a: d / np.square(1 + np.abs(x)),
    "logsigmoid": lambda x, d, a: d * _sigmoid(-x),
    "rsqrt": lambda o, d, a: d * -0.5 * o * o * o,
    "stanh": lambda x, d, a: d * a["scale_a"] * a["scale_b"]
    * (1 - np.square(np.tanh(a["scale_a"] * x))),
    "tanh_shrink": lambda x, d, a: d * np.square(np.tanh(x)),
    "softshrink": lambda x, d, a: d * (np.abs(x) > a["lambda"]),
    "hard_shrink": lambda x, d, a: d * (np.abs(x) > a["threshold"]),
    "thresholded_relu": lambda x, d, a: d * (x > a["threshold"]),
    "pow": lambda x, d, a: d * a["factor"] * np.power(x, a["factor"] - 1),
}


def _swish_slope(x: np.ndarray, beta: float) -> np.ndarray:
    s = _sigmoid(beta * x)
    return s + beta * x * s * (1 - s)


def _forward(fn: F) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x = ctx.input("X")
        ctx.set_output("Out", np.asarray(fn(x, ctx.attrs)).astype(x.dtype, copy=False))

    return kernel


def _backward(fn: G, slot: str) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        if ctx.has_output("X@GRAD"):
            d = ctx.input("Out@GRAD")
            ctx.set_output("X@GRAD", np.asarray(fn(ctx.input(slot), d, ctx.attrs))
                           .astype(d.dtype, copy=False))

    return kernel


for _t, _f in FORWARD.items():
    register_kernel(_t)(_forward(_f))
    register_kernel(f"{_t}_grad")(_backward(BACKWARD[_t], "Out" if _t == "rsqrt" else "X"))


def _alpha_like(x: np.ndarray, alpha: np.ndarray, mode: str) -> np.ndarray:
    """Alpha broadcast against X for prelu's mode."""
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        return alpha.reshape((1, -1) + (1,) * (x.ndim - 2))
    return alpha.reshape((1, *x.shape[1:]))


@register_kernel("prelu")
def _prelu(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = _alpha_like(x, ctx.input("Alpha"), ctx.attrs["mode"])
    ctx.set_output("Out", np.where(x > 0, x, a * x).astype(x.dtype, copy=False))


@register_kernel("prelu_grad")
def _prelu_grad(ctx: KernelContext) -> None:
    x, alpha, d = ctx.input("X"), ctx.input("Alpha"), ctx.input("Out@GRAD")
    mode = ctx.attrs["mode"]
    a = _alpha_like(x, alpha, mode)
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", np.where(x > 0, d, a * d).astype(d.dtype, copy=False))
    if ctx.has_output("Alpha@GRAD"):
        g = np.where(x > 0, 0, x * d)
        if mode == "all":
            ga = np.asarray(g.sum())
        elif mode == "channel":
            ga = g.sum(axis=tuple(i for i in range(g.ndim) if i != 1))
        else:
            ga = g.sum(axis=0)
        ctx.set_output("Alpha@GRAD", ga.reshape(alpha.shape).astype(d.dtype, copy=False))
