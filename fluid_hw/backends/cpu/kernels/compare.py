"""Comparison, logical and ``increment`` kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..context import KernelContext
from . import Kernel, register_kernel
from .elementwise import broadcast_pair

_COMPARE = {
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _make(fn: Callable[..., Any]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        x, y = broadcast_pair(x, ctx.input("Y"), ctx.attrs.get("axis", -1))
        ctx.set_output("Out", np.asarray(fn(x, y), dtype=np.bool_), lod=lod)

    return kernel


for _t, _f in _COMPARE.items():
    register_kernel(_t)(_make(_f))


@register_kernel("logical_not")
def logical_not(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    ctx.set_output("Out", np.logical_not(x), lod=lod)


@register_kernel("increment")
def increment(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x + x.dtype.type(ctx.attrs["step"]))
