"""Kernels of ops that only the backward pass emits."""

from __future__ import annotations

import numpy as np

from ..context import KernelContext
from . import register_kernel


@register_kernel("fill_zeros_like")
def fill_zeros_like(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.zeros_like(ctx.input("X")))


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` down to ``shape`` (same rank, size-1 dims where ``g`` was broadcast)."""
    if g.shape == tuple(shape):
        return g
    axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)
