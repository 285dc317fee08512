"""Kernels of ``ir/ops/interp_more.py``: ``bilinear_interp`` and its gradient."""

from __future__ import annotations

import numpy as np

from ....ir.ops.interp_more import bilinear_weights
from ..context import KernelContext
from . import register_kernel
from .interp import out_size

Axis = tuple[np.ndarray, np.ndarray, np.ndarray]


def _axes(ctx: KernelContext, in_hw: tuple[int, ...], out_hw: tuple[int, ...] | None
          ) -> tuple[Axis, Axis]:
    a = ctx.attrs
    if out_hw is None:
        out_hw = out_size(ctx, in_hw)
    ac, mode = bool(a["align_corners"]), int(a["align_mode"])
    return (bilinear_weights(in_hw[0], out_hw[0], ac, mode),
            bilinear_weights(in_hw[1], out_hw[1], ac, mode))


@register_kernel("bilinear_interp")
def bilinear_interp(ctx: KernelContext) -> None:
    x = ctx.input("X")
    (y0, y1, ly), (x0, x1, lx) = _axes(ctx, x.shape[2:4], None)
    ly, lx = ly[:, None], lx[None, :]
    xd = x.astype(np.float64)
    out = ((1 - ly) * ((1 - lx) * xd[:, :, y0[:, None], x0] + lx * xd[:, :, y0[:, None], x1])
           + ly * ((1 - lx) * xd[:, :, y1[:, None], x0] + lx * xd[:, :, y1[:, None], x1]))
    ctx.set_output("Out", out.astype(x.dtype))


@register_kernel("bilinear_interp_grad")
def bilinear_interp_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    (y0, y1, ly), (x0, x1, lx) = _axes(ctx, x.shape[2:4], d.shape[2:4])
    dx = np.zeros(x.shape, np.float64)
    dd = d.astype(np.float64)
    for ys, wy in ((y0, 1 - ly), (y1, ly)):
        for xs, wx in ((x0, 1 - lx), (x1, lx)):
            w = wy[:, None] * wx[None, :]
            np.add.at(dx, (slice(None), slice(None), ys[:, None], xs[None, :]),  # type: ignore[arg-type]
                      dd * w)
    ctx.set_output("X@GRAD", dx.astype(d.dtype))
