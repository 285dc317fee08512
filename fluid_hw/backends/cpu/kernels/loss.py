"""Kernels of the losses and metrics: cross entropies, accuracy, top_k, arg_max."""

from __future__ import annotations

import numpy as np

from ....ir import dtypes
from ..context import KernelContext
from . import register_kernel
from .activation import softmax

#: Fluid's TolerableValue: log(0) counts as -1e20 instead of -inf
_APPROX_INF = 1e20


def _tolerable_log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        lg = np.log(p)
    big = p.dtype.type(_APPROX_INF)
    return np.clip(lg, -big, big)


def _check_hard_label(label: np.ndarray, classes: int, ignore_index: int) -> np.ndarray:
    """Rows to ignore; raises when a label is neither a class nor ignore_index."""
    ignored = label == ignore_index
    bad = ~ignored & ((label < 0) | (label >= classes))
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise ValueError(f"Label[{i}] (flattened) is {int(label.reshape(-1)[i])}, not a class "
                         f"in [0, {classes}) nor ignore_index {ignore_index}")
    return ignored


def _pick(values: np.ndarray, label: np.ndarray, ignored: np.ndarray) -> np.ndarray:
    """values[..., label] for a label of shape [..., 1] (ignored rows read class 0)."""
    return np.take_along_axis(values, np.where(ignored, 0, label), axis=-1)


@register_kernel("cross_entropy")
def cross_entropy(ctx: KernelContext) -> None:
    x, label = ctx.input("X"), ctx.input("Label")
    zero = x.dtype.type(0)
    if ctx.attrs["soft_label"]:
        y = -(label * _tolerable_log(x)).sum(axis=-1, keepdims=True)
    else:
        ignored = _check_hard_label(label, x.shape[-1], ctx.attrs["ignore_index"])
        y = np.where(ignored, zero, -_tolerable_log(_pick(x, label, ignored)))
    ctx.set_output("Y", y.astype(x.dtype, copy=False), lod=ctx.input_lod("X") or None)


@register_kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(ctx: KernelContext) -> None:
    logits, label = ctx.input("Logits"), ctx.input("Label")
    a = ctx.attrs
    ax = a["axis"] % logits.ndim
    # class axis last; moved back at the end
    z = np.moveaxis(logits, ax, -1)
    lab = np.moveaxis(label, ax, -1)
    shifted = z - z.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    if a["soft_label"]:
        loss = -(lab * log_p).sum(axis=-1, keepdims=True)
    else:
        ignored = _check_hard_label(lab, z.shape[-1], a["ignore_index"])
        loss = np.where(ignored, logits.dtype.type(0), -_pick(log_p, lab, ignored))
    lod = ctx.input_lod("Logits") or None
    ctx.set_output("Softmax", softmax(logits, ax).astype(logits.dtype, copy=False), lod=lod)
    ctx.set_output("Loss", np.moveaxis(loss, -1, ax).astype(logits.dtype, copy=False), lod=lod)


@register_kernel("accuracy")
def accuracy(ctx: KernelContext) -> None:
    idx, label = ctx.input("Indices"), ctx.input("Label")
    total = idx.shape[0]
    correct = int((idx == label.reshape(total, 1)).any(axis=1).sum())
    ctx.set_output("Accuracy", np.array([correct / total if total else 0.0], np.float32))
    ctx.set_output("Correct", np.array([correct], np.int32))
    ctx.set_output("Total", np.array([total], np.int32))


@register_kernel("top_k")
def top_k(ctx: KernelContext) -> None:
    x = ctx.input("X")
    k = ctx.attrs["k"]
    d = x.shape[-1]
    if k > d:  # inference checks it when the last dimension is known at build time
        raise ValueError(f"k={k} is larger than the last dimension of X {list(x.shape)}")
    # descending and stable (lower index first among equals) without negating x:
    # a stable ascending sort of the reversed row, read backwards
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    idx = (d - 1 - order).astype(np.int64)
    lod = ctx.input_lod("X") or None
    ctx.set_output("Out", np.take_along_axis(x, idx, axis=-1), lod=lod)
    ctx.set_output("Indices", idx, lod=lod)


@register_kernel("arg_max")
def arg_max(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    dt = dtypes.to_numpy(dtypes.VarType.INT64 if a["dtype"] == -1 else a["dtype"])
    if a["flatten"]:
        out = np.argmax(x.reshape(-1)).reshape(1)
    else:
        out = np.argmax(x, axis=a["axis"] % x.ndim, keepdims=a["keepdims"])
        if out.ndim == 0:
            out = out.reshape(1)
    ctx.set_output("Out", out.astype(dt))


# -- gradients -------------------------------------------------------------------


@register_kernel("cross_entropy_grad")
def cross_entropy_grad(ctx: KernelContext) -> None:
    """hard: dX[label] = -dY / X[label], 0 elsewhere and on ignored rows;
    soft: dX = -dY * Label / X (0 where Label is 0)."""
    if not ctx.has_output("X@GRAD"):
        return
    x, label, dy = ctx.input("X"), ctx.input("Label"), ctx.input("Y@GRAD")
    zero = x.dtype.type(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ctx.attrs["soft_label"]:
            ratio = np.divide(label, x, out=np.zeros_like(x), where=label != 0)
            dx = -dy * ratio
        else:
            ignored = label == ctx.attrs["ignore_index"]
            idx = np.where(ignored, 0, label)
            g = np.where(ignored, zero, -dy / np.take_along_axis(x, idx, axis=-1))
            dx = np.zeros_like(x)
            np.put_along_axis(dx, idx, g, axis=-1)
    ctx.set_output("X@GRAD", dx.astype(x.dtype, copy=False))


@register_kernel("softmax_with_cross_entropy_grad")
def softmax_with_cross_entropy_grad(ctx: KernelContext) -> None:
    """dLogits = (Softmax - onehot(label)) * dLoss (0 on ignored rows); soft labels:
    (Softmax * sum(Label) - Label) * dLoss, i.e. Softmax - Label for normalised labels."""
    if not ctx.has_output("Logits@GRAD"):
        return
    sm, label, dloss = ctx.input("Softmax"), ctx.input("Label"), ctx.input("Loss@GRAD")
    a = ctx.attrs
    ax = a["axis"] % sm.ndim
    s = np.moveaxis(sm, ax, -1)
    lab = np.moveaxis(label, ax, -1)
    d = np.moveaxis(dloss, ax, -1)
    if a["soft_label"]:
        g = (s * lab.sum(axis=-1, keepdims=True) - lab) * d
    else:
        ignored = lab == a["ignore_index"]
        idx = np.where(ignored, 0, lab)
        g = np.array(s)  # a copy: the forward's Softmax stays untouched
        np.put_along_axis(g, idx, np.take_along_axis(g, idx, axis=-1) - sm.dtype.type(1),
                          axis=-1)
        g *= np.where(ignored, sm.dtype.type(0), d)
    out = np.ascontiguousarray(np.moveaxis(g, -1, ax), dtype=sm.dtype)
    ctx.set_output("Logits@GRAD", out)
