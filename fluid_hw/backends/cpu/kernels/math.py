"""Matrix-product kernels."""

from __future__ import annotations

from ..context import KernelContext
from . import register_kernel


@register_kernel("mul")
def mul(ctx: KernelContext) -> None:
    (x, lod), y = ctx.input_with_lod("X"), ctx.input("Y")
    xk, yk = ctx.attrs["x_num_col_dims"], ctx.attrs["y_num_col_dims"]
    x2 = x if x.ndim == 2 and xk == 1 else x.reshape(-1 if x.size else 0, _prod(x.shape[xk:]))
    y2 = y if y.ndim == 2 and yk == 1 else y.reshape(_prod(y.shape[:yk]), -1)
    out = x2 @ y2
    if x.ndim != 2 or y.ndim != 2:
        out = out.reshape(x.shape[:xk] + y.shape[yk:])
    ctx.set_output("Out", out, lod=lod)


def _prod(dims: tuple[int, ...]) -> int:
    p = 1
    for d in dims:
        p *= d
    return p
