"""Image resizing kernels: ``nearest_interp`` and its gradient.

The output size and the source indices come from the op definition
(``ir/ops/interp.py``), so kernel, shape inference and the FPGA lowering agree.  The
forward kernel only copies elements: any dtype, integers exactly.
"""

from __future__ import annotations

import numpy as np

from ....errors import ShapeError
from ....ir.ops.interp import interp_out_size, nearest_index
from ..context import KernelContext
from . import register_kernel


def out_size(ctx: KernelContext, in_hw: tuple[int, ...]) -> tuple[int, int]:
    """A resize op's output height and width: from OutSize, else the attributes."""
    a = ctx.attrs
    if ctx.has_input("OutSize"):
        size = np.asarray(ctx.input("OutSize")).reshape(-1)
        if size.size != 2 or int(size.min()) < 1:
            raise ShapeError(f"OutSize must hold two sizes >= 1, got {size.tolist()}")
        return (int(size[0]), int(size[1]))
    return (interp_out_size(in_hw[0], a["out_h"], a["scale"]),
            interp_out_size(in_hw[1], a["out_w"], a["scale"]))


def _indices(ctx: KernelContext, in_hw: tuple[int, int], out_hw: tuple[int, int] | None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Source rows and columns (``out_hw`` None: from OutSize or the attributes)."""
    if out_hw is None:
        out_hw = out_size(ctx, in_hw)
    ac = bool(ctx.attrs["align_corners"])
    return nearest_index(in_hw[0], out_hw[0], ac), nearest_index(in_hw[1], out_hw[1], ac)


@register_kernel("nearest_interp")
def nearest_interp(ctx: KernelContext) -> None:
    x = ctx.input("X")
    rows, cols = _indices(ctx, x.shape[2:4], None)
    ctx.set_output("Out", x[:, :, rows[:, None], cols[None, :]])


@register_kernel("nearest_interp_grad")
def nearest_interp_grad(ctx: KernelContext) -> None:
    """Each output cell's gradient added to the input cell it copied."""
    if not ctx.has_output("X@GRAD"):
        return
    x, dout = ctx.input("X"), ctx.input("Out@GRAD")
    rows, cols = _indices(ctx, x.shape[2:4], dout.shape[2:4])
    dx = np.zeros(x.shape, dout.dtype)
    np.add.at(dx, (slice(None), slice(None), rows[:, None], cols[None, :]),  # type: ignore[arg-type]
              dout)  # numpy's stubs refuse slices in the index
    ctx.set_output("X@GRAD", dx)
