"""Kernels of ``ir/ops/tensor_more.py`` and their gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir import dtypes
from ..context import KernelContext
from . import Kernel, register_kernel


@register_kernel("shape")
def _shape(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.array(ctx.input("Input").shape, np.int32))


@register_kernel("arg_min")
def _arg_min(ctx: KernelContext) -> None:
    x = ctx.input("X")
    out = np.argmin(x, axis=ctx.attrs["axis"]).astype(np.int64)
    ctx.set_output("Out", out.reshape(out.shape or (1,)))


@register_kernel("argsort")
def _argsort(ctx: KernelContext) -> None:
    x = ctx.input("X")
    idx = np.argsort(x, axis=ctx.attrs["axis"], kind="stable")
    ctx.set_output("Out", np.take_along_axis(x, idx, ctx.attrs["axis"]))
    ctx.set_output("Indices", idx.astype(np.int64))


@register_kernel("argsort_grad")
def _argsort_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d, idx = ctx.input("Out@GRAD"), ctx.input("Indices")
        g = np.zeros_like(d)
        np.put_along_axis(g, idx, d, ctx.attrs["axis"])
        ctx.set_output("X@GRAD", g)


@register_kernel("reverse")
def _reverse(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.flip(ctx.input("X"), tuple(ctx.attrs["axis"])).copy())


@register_kernel("reverse_grad")
def _reverse_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", np.flip(ctx.input("Out@GRAD"),
                                         tuple(ctx.attrs["axis"])).copy())


_CHECKS = {
    "isfinite": lambda x: bool(np.isfinite(x).all()),
    "isinf": lambda x: bool(np.isinf(x).any()),
    "isnan": lambda x: bool(np.isnan(x).any()),
}


@register_kernel(*_CHECKS)
def _check_values(ctx: KernelContext) -> None:
    x = ctx.input("X")
    if x.dtype.kind != "f":  # integers are always finite, never inf or NaN
        ok = ctx.op_type == "isfinite"
    else:
        ok = _CHECKS[ctx.op_type](x)
    ctx.set_output("Out", np.array([ok]))


def _reduce_bool(fn: Callable[..., Any]) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x = ctx.input("X")
        a = ctx.attrs
        axis = None if a["reduce_all"] else tuple(d % x.ndim for d in a["dim"])
        out = np.asarray(fn(x, axis=axis, keepdims=a["keep_dim"]))
        ctx.set_output("Out", out.reshape(out.shape or (1,)))
    return kernel


register_kernel("reduce_all")(_reduce_bool(np.all))
register_kernel("reduce_any")(_reduce_bool(np.any))


@register_kernel("one_hot")
def _one_hot(ctx: KernelContext) -> None:
    x = ctx.input("X")
    depth = ctx.attrs["depth"]
    ids = x[..., 0].astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= depth):
        raise ValueError(f"one_hot: ids of X {ctx.in_names['X'][0]!r} must be in [0, {depth}),"
                         f" got [{ids.min()}, {ids.max()}]")
    out = np.zeros((*ids.shape, depth), dtypes.to_numpy(ctx.attrs["dtype"]))
    np.put_along_axis(out, ids[..., None], 1, -1)
    ctx.set_output("Out", out)


def _index(ctx: KernelContext, slot: str, rows: int) -> np.ndarray:
    i = ctx.input(slot).reshape(-1).astype(np.int64)
    if i.size and (i.min() < 0 or i.max() >= rows):
        raise ValueError(f"{ctx.op_type}: {slot} {ctx.in_names[slot][0]!r} must index the "
                         f"{rows} rows, got [{i.min()}, {i.max()}]")
    return i


@register_kernel("gather")
def _gather(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x[_index(ctx, "Index", x.shape[0])])


@register_kernel("gather_grad")
def _gather_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        x = ctx.input("X")
        g = np.zeros_like(x, dtype=ctx.input("Out@GRAD").dtype)
        np.add.at(g, _index(ctx, "Index", x.shape[0]), ctx.input("Out@GRAD"))
        ctx.set_output("X@GRAD", g)


@register_kernel("scatter")
def _scatter(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ids = _index(ctx, "Ids", x.shape[0])
    u = ctx.input("Updates")
    if u.shape[0] != ids.size:
        raise ValueError(f"scatter: {ids.size} Ids but {u.shape[0]} rows of Updates")
    out = x.copy()
    if ctx.attrs["overwrite"]:
        out[ids] = u
    else:
        out[np.unique(ids)] = 0  # Paddle's: the rows named are the sum of their updates
        np.add.at(out, ids, u)
    ctx.set_output("Out", out)


@register_kernel("scatter_grad")
def _scatter_grad(ctx: KernelContext) -> None:
    d = ctx.input("Out@GRAD")
    ids = _index(ctx, "Ids", d.shape[0])
    if ctx.has_output("X@GRAD"):
        g = d.copy()
        g[ids] = 0  # replaced rows (overwrite) / rows rebuilt from Updates (add)
        ctx.set_output("X@GRAD", g)
    if ctx.has_output("Updates@GRAD"):
        if ctx.attrs["overwrite"]:
            # with repeated ids the last update wins: only it gets the gradient
            last = {int(r): k for k, r in enumerate(ids)}
            gu = np.zeros((ids.size, *d.shape[1:]), d.dtype)
            for r, k in last.items():
                gu[k] = d[r]
        else:
            gu = d[ids]
        ctx.set_output("Updates@GRAD", gu)


@register_kernel("diag")
def _diag(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.diag(ctx.input("Diagonal")))


@register_kernel("diag_grad")
def _diag_grad(ctx: KernelContext) -> None:
    if ctx.has_output("Diagonal@GRAD"):
        ctx.set_output("Diagonal@GRAD", np.diagonal(ctx.input("Out@GRAD")).copy())


def _choice(ctx: KernelContext, n: int, rows: int) -> np.ndarray:
    ids = ctx.input("Ids").reshape(-1).astype(np.int64)
    if ids.size != rows or (ids.size and (ids.min() < 0 or ids.max() >= n)):
        raise ValueError(f"multiplex: Ids must pick one of the {n} candidates for each of the "
                         f"{rows} rows, got {ids.tolist()}")
    return ids


@register_kernel("multiplex")
def _multiplex(ctx: KernelContext) -> None:
    xs = np.stack(ctx.inputs("X"))
    ids = _choice(ctx, xs.shape[0], xs.shape[1])
    ctx.set_output("Out", xs[ids, np.arange(xs.shape[1])])


@register_kernel("multiplex_grad")
def _multiplex_grad(ctx: KernelContext) -> None:
    xs = ctx.inputs("X")
    d = ctx.input("Out@GRAD")
    ids = _choice(ctx, len(xs), d.shape[0])
    grads = []
    for k in range(len(xs)):
        g = np.zeros_like(d)
        g[ids == k] = d[ids == k]
        grads.append(g)
    ctx.set_outputs("X@GRAD", grads)
