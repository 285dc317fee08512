"""Kernels of ``ir/ops/lod_meta.py``: ``lod_reset`` and ``is_empty``."""

from __future__ import annotations

import itertools

import numpy as np

from ..context import KernelContext
from . import register_kernel


@register_kernel("lod_reset")
def _lod_reset(ctx: KernelContext) -> None:
    x = ctx.input("X")
    if ctx.has_input("Y"):
        y, ylod = ctx.input_with_lod("Y")
        lod = ylod if ylod else [[int(v) for v in np.asarray(y).reshape(-1)]]
    else:
        lod = [list(ctx.attrs["target_lod"])]
    last = lod[-1]
    if not last or last[0] != 0 or last[-1] != x.shape[0] or \
            any(a > b for a, b in itertools.pairwise(last)):
        raise ValueError(f"lod_reset: the new LoD {lod} must be offsets from 0 to the "
                         f"{x.shape[0]} rows of X {ctx.in_names['X'][0]!r}")
    ctx.set_output("Out", x, lod=lod)


@register_kernel("lod_reset_grad")
def _lod_reset_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", ctx.input("Out@GRAD"))


@register_kernel("is_empty")
def _is_empty(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.array([ctx.input("X").size == 0]))
