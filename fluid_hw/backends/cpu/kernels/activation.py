"""Activation kernels (the specification of each activation's math)."""

from __future__ import annotations

import numpy as np

from ..context import KernelContext
from . import register_kernel


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


def _make(fn):  # type: ignore[no-untyped-def]
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
