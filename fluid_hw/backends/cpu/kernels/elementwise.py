"""elementwise_* kernels with Fluid's axis broadcasting."""

from __future__ import annotations

import numpy as np

from ....ir.ops.common import aligned_shape
from ..context import KernelContext
from . import register_kernel


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


_FUNCS = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": _int_div,
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
}


def _make(fn):  # type: ignore[no-untyped-def]
    def kernel(ctx: KernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        x, y = broadcast_pair(x, ctx.input("Y"), ctx.attrs["axis"])
        ctx.set_output("Out", fn(x, y), lod=lod)

    return kernel


for _t, _f in _FUNCS.items():
    register_kernel(_t)(_make(_f))
