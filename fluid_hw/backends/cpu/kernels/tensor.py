"""Tensor-manipulation kernels: cast, assign, reshape, transpose, concat, split,
slice, squeeze, unsqueeze, flatten.

Shape arithmetic comes from the op definitions (``ir/ops/tensor.py``), applied
to the run-time shapes.  Outputs that only rearrange X are numpy views of it;
no kernel writes into an input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....ir import dtypes
from ....ir.ops.tensor import (
    ASSIGN_VALUE_ATTRS,
    flatten_shape,
    reshape_shape,
    slice_bounds,
    slice_shape,
    split_sizes,
    squeeze_shape,
    unsqueeze_shape,
)
from ..context import KernelContext
from . import Kernel, register_kernel


def _set_xshape(ctx: KernelContext, x: np.ndarray) -> None:
    """XShape only records X's shape (dims [0, *X.shape]) for the backward pass."""
    ctx.set_output("XShape", np.empty((0, *x.shape), x.dtype))


@register_kernel("cast")
def cast(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    ctx.set_output("Out", x.astype(dtypes.to_numpy(ctx.attrs["out_dtype"])), lod=lod)


@register_kernel("assign")
def assign(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    ctx.set_output("Out", x.copy(), lod=lod)


@register_kernel("assign_value")
def assign_value(ctx: KernelContext) -> None:
    a = ctx.attrs
    values = a[ASSIGN_VALUE_ATTRS[a["dtype"]]]
    ctx.set_output("Out", np.array(values, dtypes.to_numpy(a["dtype"])).reshape(a["shape"]))


@register_kernel("reshape2")
def reshape2(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    out = x.reshape(reshape_shape(x.shape, ctx.attrs["shape"]))
    keep_lod = x.ndim > 0 and out.ndim > 0 and x.shape[0] == out.shape[0]
    ctx.set_output("Out", out, lod=lod if keep_lod else None)
    _set_xshape(ctx, x)


@register_kernel("transpose2")
def transpose2(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x.transpose(ctx.attrs["axis"]))
    _set_xshape(ctx, x)


@register_kernel("concat")
def concat(ctx: KernelContext) -> None:
    xs = ctx.inputs("X")
    axis = ctx.attrs["axis"] % xs[0].ndim
    lod = ctx.input_with_lod("X")[1] if axis != 0 else None
    ctx.set_output("Out", np.concatenate(xs, axis=axis), lod=lod)


@register_kernel("split")
def split(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    a = ctx.attrs
    axis = a["axis"] % x.ndim
    sizes = split_sizes(x.shape[axis], a["num"], a["sections"])
    pieces = np.split(x, np.cumsum(sizes[:-1]), axis=axis)
    for i, p in enumerate(pieces):
        ctx.set_output("Out", p, i, lod=lod if axis != 0 else None)


@register_kernel("slice")
def slice_(ctx: KernelContext) -> None:
    x = ctx.input("Input")
    a = ctx.attrs
    index = [slice(None)] * x.ndim
    for axis, start, end in zip(a["axes"], a["starts"], a["ends"]):
        axis %= x.ndim
        index[axis] = slice(*slice_bounds(x.shape[axis], start, end))
    out = x[tuple(index)]
    if a["decrease_axis"]:
        out = out.reshape(slice_shape(x.shape, a["axes"], a["starts"], a["ends"],
                                      a["decrease_axis"]))
    ctx.set_output("Out", out)


def _reshaping(shape_fn: Callable[[tuple[int, ...], dict], list[int]]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x = ctx.input("X")
        ctx.set_output("Out", x.reshape(shape_fn(x.shape, ctx.attrs)))
        _set_xshape(ctx, x)

    return kernel


register_kernel("squeeze2")(_reshaping(lambda s, a: squeeze_shape(s, a["axes"])))
register_kernel("unsqueeze2")(_reshaping(lambda s, a: unsqueeze_shape(s, a["axes"])))
register_kernel("flatten2")(_reshaping(lambda s, a: flatten_shape(s, a["axis"])))


# -- gradients ---------------------------------------------------------------------
# Grad kernels write the input's gradient (in its shape and dtype) only when asked
# for; outputs may be views of the incoming gradient, never written into.

@register_kernel("cast_grad")
def cast_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d = ctx.input("Out@GRAD")
        ctx.set_output("X@GRAD", d.astype(dtypes.to_numpy(ctx.attrs["in_dtype"]), copy=False))


@register_kernel("assign_grad")
def assign_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", ctx.input("Out@GRAD"))


def _x_dims(ctx: KernelContext) -> tuple[int, ...]:
    """X's shape, from XShape (dims [0, *X.dims])."""
    return ctx.input("XShape").shape[1:]


def _reshape_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", ctx.input("Out@GRAD").reshape(_x_dims(ctx)))


register_kernel("reshape2_grad", "squeeze2_grad", "unsqueeze2_grad",
                "flatten2_grad")(_reshape_grad)


@register_kernel("transpose2_grad")
def transpose2_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d = ctx.input("Out@GRAD")
        ctx.set_output("X@GRAD", d.transpose(np.argsort(ctx.attrs["axis"])))


@register_kernel("concat_grad")
def concat_grad(ctx: KernelContext) -> None:
    """Out@GRAD cut into X's pieces; only the wanted ones (not @EMPTY@) are written."""
    if not ctx.has_output("X@GRAD"):
        return
    xs = ctx.inputs("X")
    d = ctx.input("Out@GRAD")
    axis = ctx.attrs["axis"] % d.ndim
    bounds = np.cumsum([x.shape[axis] for x in xs[:-1]], dtype=np.int64)
    for i, piece in enumerate(np.split(d, bounds, axis=axis)):
        ctx.set_output("X@GRAD", piece, i)


@register_kernel("split_grad")
def split_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        ds = ctx.inputs("Out@GRAD")
        ctx.set_output("X@GRAD", np.concatenate(ds, axis=ctx.attrs["axis"] % ds[0].ndim))


@register_kernel("slice_grad")
def slice_grad(ctx: KernelContext) -> None:
    """Out@GRAD in the sliced window of a zero tensor of Input's shape."""
    if not ctx.has_output("Input@GRAD"):
        return
    x, d = ctx.input("Input"), ctx.input("Out@GRAD")
    a = ctx.attrs
    index = [slice(None)] * x.ndim
    for axis, start, end in zip(a["axes"], a["starts"], a["ends"]):
        axis %= x.ndim
        index[axis] = slice(*slice_bounds(x.shape[axis], start, end))
    g = np.zeros(x.shape, x.dtype)
    window = g[tuple(index)]
    window[...] = d.reshape(window.shape)  # decrease_axis dims come back as size 1
    ctx.set_output("Input@GRAD", g)
