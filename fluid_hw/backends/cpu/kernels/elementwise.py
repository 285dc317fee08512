"""elementwise_* kernels with Fluid's axis broadcasting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.ops.common import aligned_shape
from ..context import KernelContext
from . import Kernel, register_kernel
from .backward_ops import unbroadcast


def broadcast_pair(x: np.ndarray, y: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Reshape the lower-rank operand so numpy broadcasting follows Fluid's axis rule."""
    if x.ndim == y.ndim:
        return x, y
    if x.ndim > y.ndim:
        return x, y.reshape(aligned_shape(y.shape, x.ndim, axis))
    return x.reshape(aligned_shape(x.shape, y.ndim, axis)), y


def _int_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # Fluid divides integers truncating toward zero (C semantics)
    return (np.trunc(x / y)).astype(x.dtype) if x.dtype.kind in "iu" else x / y


_FUNCS: dict[str, Callable[..., Any]] = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": _int_div,
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
}


def _make(fn: Callable[..., Any]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        x, y = broadcast_pair(x, ctx.input("Y"), ctx.attrs["axis"])
        ctx.set_output("Out", fn(x, y), lod=lod)

    return kernel


for _t, _f in _FUNCS.items():
    register_kernel(_t)(_make(_f))


# -- gradients ----------------------------------------------------------------
def _operand_grads(name: str, x: np.ndarray, y: np.ndarray, out: np.ndarray | None,
                   d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """dX, dY in the broadcast (output) shape; x, y already aligned."""
    if name == "add":
        return d, d
    if name == "sub":
        return d, -d
    if name == "mul":
        return d * y, d * x
    if name == "div":
        return d / y, -d * x / (y * y)
    if name == "max":
        return d * (x > y), d * (x <= y)
    if name == "min":
        return d * (x < y), d * (x >= y)
    if name == "pow":
        assert out is not None
        return d * y * np.power(x, y - 1), d * out * np.log(x)
    raise AssertionError(name)


def _make_grad(name: str) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x0, y0 = ctx.input("X"), ctx.input("Y")
        x, y = broadcast_pair(x0, y0, ctx.attrs["axis"])
        out = ctx.input("Out") if ctx.has_input("Out") else None
        d = ctx.input("Out@GRAD")
        dx, dy = _operand_grads(name, x, y, out, d)
        if ctx.has_output("X@GRAD"):
            ctx.set_output("X@GRAD", unbroadcast(np.broadcast_to(dx, d.shape), x.shape)
                           .reshape(x0.shape).astype(x0.dtype, copy=False))
        if ctx.has_output("Y@GRAD"):
            ctx.set_output("Y@GRAD", unbroadcast(np.broadcast_to(dy, d.shape), y.shape)
                           .reshape(y0.shape).astype(y0.dtype, copy=False))

    return kernel


for _n in ("add", "sub", "mul", "div", "max", "min", "pow"):
    register_kernel(f"elementwise_{_n}_grad")(_make_grad(_n))
