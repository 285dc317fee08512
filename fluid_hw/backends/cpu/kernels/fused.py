"""Kernels of the fused float ops (fc, conv2d_fusion, fused_elemwise_activation).

Each runs the float operations of its unfused chain in the same order, with the
same numpy calls as the unfused kernels (mul, conv2d, elementwise_*, the
activations), so fused and unfused programs give identical bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.ops.fused import functor_form
from ..context import KernelContext
from . import register_kernel
from .activation import _GRAD_FROM_OUT, _UNARY
from .backward_ops import unbroadcast
from .elementwise import _FUNCS as _BINARY
from .elementwise import _operand_grads, broadcast_pair
from .nn import _conv_cols, conv2d_grad

Array = np.ndarray


def _activate(name: str, x: Array) -> Array:
    """The activation kernels' own math ('' and 'identity' leave x as it is)."""
    return x if name in ("", "identity") else _UNARY[name](x, {})


def _activation_grad(name: str, out: Array, dout: Array) -> Array:
    """d(pre-activation) from the activation's output and dOut."""
    if name in ("", "identity"):
        return dout
    return _GRAD_FROM_OUT[f"{name}_grad"](out, dout, {}).astype(dout.dtype, copy=False)


def _rows(x: Array, k: int) -> Array:
    """``mul``'s matrix view of x: dims [:k] into rows."""
    return x if x.ndim == 2 and k == 1 else x.reshape(-1 if x.size else 0,
                                                      int(np.prod(x.shape[k:])))


# -- fc ------------------------------------------------------------------------------

@register_kernel("fc")
def fc(ctx: KernelContext) -> None:
    (x, lod), w = ctx.input_with_lod("Input"), ctx.input("W")
    k = ctx.attrs["in_num_col_dims"]
    out = _rows(x, k) @ w
    if ctx.has_input("Bias"):
        out = out + ctx.input("Bias").reshape(1, -1)
    out = _activate(ctx.attrs["activation_type"], out)
    if x.ndim != 2:
        out = out.reshape(*x.shape[:k], w.shape[1])
    ctx.set_output("Out", out, lod=lod)


@register_kernel("fc_grad")
def fc_grad(ctx: KernelContext) -> None:
    x, w = ctx.input("Input"), ctx.input("W")
    k = ctx.attrs["in_num_col_dims"]
    out, dout = ctx.input("Out"), ctx.input("Out@GRAD")
    c = w.shape[1]
    dpre = _activation_grad(ctx.attrs["activation_type"], out, dout).reshape(-1, c)
    if ctx.has_output("Input@GRAD"):
        ctx.set_output("Input@GRAD", (dpre @ w.T).reshape(x.shape).astype(x.dtype, copy=False))
    if ctx.has_output("W@GRAD"):
        ctx.set_output("W@GRAD", (_rows(x, k).T @ dpre).astype(w.dtype, copy=False))
    if ctx.has_output("Bias@GRAD"):
        b = ctx.input("Bias")
        ctx.set_output("Bias@GRAD", dpre.sum(axis=0).reshape(b.shape).astype(b.dtype))


# -- conv2d_fusion ----------------------------------------------------------------------

@register_kernel("conv2d_fusion")
def conv2d_fusion(ctx: KernelContext) -> None:
    """conv2d's im2col product (the conv2d kernel's exact calls), + Bias, activation."""
    x, w = ctx.input("Input"), ctx.input("Filter")
    n = x.shape[0]
    m, cg, kh, kw = w.shape
    g = ctx.attrs["groups"]
    cols, (oh, ow), _, _ = _conv_cols(x, w, ctx.attrs)
    out = np.matmul(cols, w.reshape(g, m // g, cg * kh * kw).transpose(0, 2, 1))
    out = out.reshape(g, n, oh, ow, m // g).transpose(1, 0, 4, 2, 3).reshape(n, m, oh, ow)
    out = np.ascontiguousarray(out, dtype=x.dtype)
    if ctx.has_input("Bias"):
        out = out + ctx.input("Bias").reshape(1, m, 1, 1)
    ctx.set_output("Output", _activate(ctx.attrs["activation"], out))


class _ConvGradView:
    """What conv2d_grad reads, for a conv2d_fusion_grad op: Output@GRAD is replaced by
    the gradient before the bias and the activation; the rest passes through."""

    def __init__(self, ctx: KernelContext, dpre: Array) -> None:
        self._ctx = ctx
        self._dpre = dpre
        self.attrs = ctx.attrs

    def input(self, slot: str) -> Array:
        return self._dpre if slot == "Output@GRAD" else self._ctx.input(slot)

    def has_output(self, slot: str) -> bool:
        return self._ctx.has_output(slot)

    def set_output(self, slot: str, value: Any) -> None:
        self._ctx.set_output(slot, value)


@register_kernel("conv2d_fusion_grad")
def conv2d_fusion_grad(ctx: KernelContext) -> None:
    dpre = _activation_grad(ctx.attrs["activation"], ctx.input("Output"),
                            ctx.input("Output@GRAD"))
    if ctx.has_output("Bias@GRAD"):
        b = ctx.input("Bias")
        ctx.set_output("Bias@GRAD", dpre.sum(axis=(0, 2, 3)).reshape(b.shape).astype(b.dtype))
    conv2d_grad(_ConvGradView(ctx, dpre))  # type: ignore[arg-type]


# -- fused_elemwise_activation -------------------------------------------------------------

def _unary(name: str, x: Array, scale: float) -> Array:
    if name == "scale":
        return x * x.dtype.type(scale)
    return _UNARY[name](x, {})


def _unary_grad(name: str, x: Array, out: Array, d: Array, scale: float) -> Array:
    if name == "scale":
        return d * d.dtype.type(scale)
    return _GRAD_FROM_OUT[f"{name}_grad"](out, d, {}).astype(d.dtype, copy=False)


def _binary(name: str) -> Callable[[Array, Array], Array]:
    return _BINARY[name]


@register_kernel("fused_elemwise_activation")
def fused_elemwise_activation(ctx: KernelContext) -> None:
    a = ctx.attrs
    f0, f1 = a["functor_list"]
    (x, lod), y = ctx.input_with_lod("X"), ctx.input("Y")
    if functor_form([f0, f1]) == "binary_of_unary":
        inter = _unary(f1, y, a["scale"])
        xb, ib = broadcast_pair(x, inter, a["axis"])
        out = _binary(f0)(xb, ib)
    else:
        xb, yb = broadcast_pair(x, y, a["axis"])
        inter = _binary(f1)(xb, yb)
        out = _unary(f0, inter, a["scale"])
    big_lod = lod if x.ndim >= y.ndim else None
    ctx.set_output("Out", out, lod=big_lod)
    if a["save_intermediate_out"]:
        ctx.set_output("IntermediateOut", inter)


@register_kernel("fused_elemwise_activation_grad")
def fused_elemwise_activation_grad(ctx: KernelContext) -> None:
    """Recompute the inner functor from X and Y, then chain the two derivatives."""
    a = ctx.attrs
    f0, f1 = a["functor_list"]
    x0, y0 = ctx.input("X"), ctx.input("Y")
    d = ctx.input("Out@GRAD")
    if functor_form([f0, f1]) == "binary_of_unary":
        inter0 = _unary(f1, y0, a["scale"])
        x, inter = broadcast_pair(x0, inter0, a["axis"])
        out = _binary(f0)(x, inter)
        dx, dinter = _operand_grads(f0.removeprefix("elementwise_"), x, inter, out, d)
        dinter = unbroadcast(np.broadcast_to(dinter, d.shape), inter.shape).reshape(y0.shape)
        dy = _unary_grad(f1, y0, inter0, dinter, a["scale"])
        dx = unbroadcast(np.broadcast_to(dx, d.shape), x.shape)
    else:
        x, y = broadcast_pair(x0, y0, a["axis"])
        inter = _binary(f1)(x, y)
        dinter = _unary_grad(f0, inter, _unary(f0, inter, a["scale"]), d, a["scale"])
        dx, dy = _operand_grads(f1.removeprefix("elementwise_"), x, y, None, dinter)
        dx = unbroadcast(np.broadcast_to(dx, d.shape), x.shape)
        dy = unbroadcast(np.broadcast_to(dy, d.shape), y.shape)
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", dx.reshape(x0.shape).astype(x0.dtype, copy=False))
    if ctx.has_output("Y@GRAD"):
        ctx.set_output("Y@GRAD", dy.reshape(y0.shape).astype(y0.dtype, copy=False))
