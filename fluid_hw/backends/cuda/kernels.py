"""How each op runs on a device, and the device kernels that are not the CPU's.

Every op of a program runs in one of three ways (:func:`placement`):

* ``"device"``: a kernel registered here (:func:`register_device_kernel`):
  generated CUDA kernels (softmax, softmax + cross-entropy, im2col for conv2d,
  pool2d), cuBLAS GEMMs through the array module, and array-module code where the
  CPU kernel cannot run on device arrays as it is written;
* ``"shared"``: the CPU kernel itself, run on device arrays (:data:`SHARED_OPS`).
  Its numpy calls reach CuPy through NumPy's ``__array_ufunc__`` /
  ``__array_function__`` protocols; the listed kernels use only ufuncs, array
  methods and dispatched functions (no array built from Python data, no
  ``np.asarray``, no host scalar read from a device value);
* ``"host"``: everything else: inputs copied to the host, the CPU kernel, outputs
  copied back.  Correct everywhere, and counted (``CUDAExecutor.host_ops``), so a
  program that should stay on the device can be checked to.

Elementwise ops and activations are not listed here: the planner
(:mod:`.plan`) turns them into generated chain kernels, fused or one op each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ExecutionError
from ...ir import dtypes
from ...ir.lod import LoDTensor
from ...ir.ops.math import reduce_axes, reduce_shape
from ...ir.ops.nn import window_geometry
from ...registries import register_once
from ..cpu.context import CHECK_KERNELS, KernelContext, lod_tensor
from ..cpu.kernels import get_kernel
from ..cpu.kernels.nn import pool_geometry
from .codegen import im2col_kernel, pool2d_kernel, softmax_kernel, softmax_xent_kernel

if TYPE_CHECKING:
    from ...ir.program import Operator
    from .runtime import DeviceRuntime

__all__ = ["SHARED_OPS", "DeviceKernelContext", "device_kernels", "placement",
           "register_device_kernel"]

DeviceKernel = Callable[["DeviceKernelContext"], None]
_DEVICE: dict[str, DeviceKernel] = {}


def register_device_kernel(*op_types: str) -> Callable[[DeviceKernel], DeviceKernel]:
    def deco(fn: DeviceKernel) -> DeviceKernel:
        for t in op_types:
            register_once(_DEVICE, t, fn, "device kernel for")
        return fn

    return deco


def device_kernels() -> dict[str, DeviceKernel]:
    return dict(_DEVICE)


_ACTIVATIONS = ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "leaky_relu",
                "floor", "ceil", "round", "sign", "cos", "sin", "square", "reciprocal")
_BINARIES = ("add", "sub", "mul", "div", "max", "min", "pow")

#: ops whose CPU kernel runs unchanged on device arrays (see the module doc)
SHARED_OPS: frozenset[str] = frozenset({
    *_ACTIVATIONS, *(f"{a}_grad" for a in _ACTIVATIONS), "softmax", "softmax_grad",
    *(f"elementwise_{b}" for b in _BINARIES), *(f"elementwise_{b}_grad" for b in _BINARIES),
    "mul", "mul_grad", "matmul", "matmul_grad", "scale", "scale_grad", "sum", "sum_grad",
    "mean", "reduce_sum_grad", "reduce_mean_grad", "reduce_max_grad", "fill_zeros_like",
    "batch_norm", "batch_norm_grad", "cast", "assign", "cross_entropy",
    "softmax_with_cross_entropy", "lookup_table", "sgd", "momentum", "adam",
})


def placement(op_type: str) -> str:
    """``"device"``, ``"shared"`` or ``"host"``: how ``op_type`` runs (module doc)."""
    if op_type in _DEVICE:
        return "device"
    if op_type in SHARED_OPS:
        return "shared"
    return "host"


def to_host_value(v: Any, rt: DeviceRuntime) -> Any:
    if isinstance(v, LoDTensor):
        return LoDTensor(rt.to_host(v.data), v.lod()) if v.data is not None else v
    if isinstance(v, list):
        return [to_host_value(x, rt) for x in v]
    if v is None or isinstance(v, (int, float, bool, str)):
        return v
    return rt.to_host(v)


def to_device_value(v: Any, rt: DeviceRuntime) -> Any:
    if isinstance(v, LoDTensor):
        return lod_tensor(rt.to_device(v.data), v.lod()) if v.data is not None else v
    if isinstance(v, list):
        return [to_device_value(x, rt) for x in v]
    if isinstance(v, np.ndarray):
        return rt.to_device(v)
    return v


class DeviceKernelContext(KernelContext):
    """A kernel context over a scope of device arrays.

    ``xp`` is the runtime's array module.  With ``on_host`` (a ``"host"`` op) the
    kernel reads host copies of its inputs; the executor uploads its outputs.
    """

    def __init__(self, op: Operator, index: int, executor: Any, runtime: DeviceRuntime,
                 on_host: bool = False) -> None:
        super().__init__(op, index, executor)
        self.runtime = runtime
        self.xp = runtime.xp
        self.on_host = on_host

    def _lookup(self, name: str) -> Any:
        v = super()._lookup(name)
        return to_host_value(v, self.runtime) if self.on_host else v

    def set_output(self, slot: str, value: Any, i: int = 0,
                   lod: list[list[int]] | None = None) -> None:
        names = self.out_names.get(slot)
        if not names or names[i] == "@EMPTY@":
            return
        if CHECK_KERNELS:
            self._check_output(names[i], value)
        # a sub-block op writing a variable of an outer block writes the outer scope
        scope = self.owner_scope(names[i]) if getattr(self, "_out_up", None) else self.scope
        scope.vars[names[i]] = lod_tensor(value, lod) if lod else value

    def _check_output(self, name: str, value: Any) -> None:
        info = self._out_info.get(name)
        shape_of = getattr(value, "shape", None)
        if info is None or shape_of is None or not hasattr(value, "dtype"):
            return
        dt, shape = info
        where = f"op {self.op_type} #{self.op_index}: output {name!r}"
        if dt is not None and np.dtype(value.dtype) != dt:
            raise ExecutionError(f"{where}: device kernel produced {value.dtype}, declared {dt}")
        if len(shape) != len(shape_of) or any(
                d != -1 and d != s for d, s in zip(shape, shape_of)):
            raise ExecutionError(f"{where}: device kernel produced shape {list(shape_of)}, "
                                 f"declared {list(shape)}")

    def cpu_kernel(self) -> Callable[[KernelContext], None]:
        return get_kernel(self.op_type)

    def launch(self, kernel: Any, n: int, *args: Any) -> None:
        self.runtime.launch(kernel, n, args)


def _f32(ctx: DeviceKernelContext, *arrays: Any) -> bool:
    return all(a.dtype == np.float32 for a in arrays)


def _contig(ctx: DeviceKernelContext, a: Any) -> Any:
    return ctx.xp.ascontiguousarray(a)


def _run_cpu_kernel(ctx: DeviceKernelContext, host: bool) -> None:
    """The CPU kernel, on device arrays (shared) or on host copies."""
    if host and not ctx.on_host:
        ctx.on_host = True
        try:
            ctx.cpu_kernel()(ctx)
        finally:
            ctx.on_host = False
        for names in ctx.out_names.values():
            for n in names:
                if n in ctx.scope.vars:
                    ctx.scope.vars[n] = to_device_value(ctx.scope.vars[n], ctx.runtime)
    else:
        ctx.cpu_kernel()(ctx)


# -- creation, reductions, metrics ----------------------------------------------------------


@register_device_kernel("fill_constant")
def fill_constant(ctx: DeviceKernelContext) -> None:
    a = ctx.attrs
    ctx.set_output("Out", ctx.xp.full(a["shape"], a["value"], dtype=dtypes.to_numpy(a["dtype"])))


@register_device_kernel("mean_grad")
def mean_grad(ctx: DeviceKernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    g = d.reshape(()).astype(x.dtype) / x.dtype.type(max(x.size, 1))
    out = ctx.xp.empty(x.shape, dtype=x.dtype)
    out[...] = g
    ctx.set_output("X@GRAD", out)


def _reduce(fn: str) -> DeviceKernel:
    def kernel(ctx: DeviceKernelContext) -> None:
        x, lod = ctx.input_with_lod("X")
        if x.dtype.kind != "f":
            _run_cpu_kernel(ctx, host=True)  # integer means truncate: the CPU's rule
            return
        a = ctx.attrs
        axes = reduce_axes(x.ndim, a["dim"], a["reduce_all"])
        acc = np.float32 if x.dtype == np.float16 else None
        if fn == "max":
            out = ctx.xp.max(x, axis=axes, keepdims=a["keep_dim"])
        else:
            out = getattr(ctx.xp, fn)(x, axis=axes, dtype=acc, keepdims=a["keep_dim"])
        shape = reduce_shape(x.shape, axes, a["keep_dim"])
        keep_lod = len(axes) < x.ndim and 0 not in axes
        ctx.set_output("Out", out.astype(x.dtype, copy=False).reshape(shape),
                       lod=lod if keep_lod else None)

    return kernel


for _n in ("sum", "mean", "max"):
    register_device_kernel(f"reduce_{_n}")(_reduce(_n))


@register_device_kernel("top_k")
def top_k(ctx: DeviceKernelContext) -> None:
    """k = 1 on the device (argmax: the first maximum, as the CPU's stable order);
    larger k on the host."""
    x = ctx.input("X")
    if ctx.attrs["k"] != 1 or x.shape[-1] < 1:
        _run_cpu_kernel(ctx, host=True)
        return
    idx = ctx.xp.argmax(x, axis=-1)[..., None].astype(np.int64)
    lod = ctx.input_lod("X") or None
    ctx.set_output("Out", ctx.xp.take_along_axis(x, idx, axis=-1), lod=lod)
    ctx.set_output("Indices", idx, lod=lod)


@register_device_kernel("accuracy")
def accuracy(ctx: DeviceKernelContext) -> None:
    xp = ctx.xp
    idx, label = ctx.input("Indices"), ctx.input("Label")
    total = idx.shape[0]
    correct = (idx == label.reshape(total, 1)).any(axis=1).sum()
    acc = correct.astype(np.float64) / total if total else xp.zeros((), np.float64)
    ctx.set_output("Accuracy", acc.astype(np.float32).reshape(1))
    ctx.set_output("Correct", correct.astype(np.int32).reshape(1))
    ctx.set_output("Total", xp.full((1,), total, dtype=np.int32))


# -- softmax and cross-entropy: generated row kernels -------------------------------------


def _rowwise(ctx: DeviceKernelContext, x: Any, axis: int) -> bool:
    return x.ndim >= 1 and axis % x.ndim == x.ndim - 1 and x.shape[-1] > 0 and _f32(ctx, x)


@register_device_kernel("softmax")
def softmax(ctx: DeviceKernelContext) -> None:
    x = ctx.input("X")
    if not _rowwise(ctx, x, ctx.attrs["axis"]):
        _run_cpu_kernel(ctx, host=False)
        return
    x = _contig(ctx, x)
    cols = x.shape[-1]
    rows = x.size // cols
    y = ctx.xp.empty_like(x)
    ctx.launch(softmax_kernel(), rows, x, y, rows, cols)
    ctx.set_output("Out", y)


def _check_labels(ctx: DeviceKernelContext, label: Any, classes: int, ignore: int) -> None:
    bad = (label != ignore) & ((label < 0) | (label >= classes))
    if bool(bad.any()):  # one device-to-host read of a flag
        i = int(ctx.xp.argmax(bad.reshape(-1)))
        raise ValueError(f"Label[{i}] (flattened) is {int(label.reshape(-1)[i])}, not a class "
                         f"in [0, {classes}) nor ignore_index {ignore}")


@register_device_kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(ctx: DeviceKernelContext) -> None:
    z, label = ctx.input("Logits"), ctx.input("Label")
    a = ctx.attrs
    if a["soft_label"] or not _rowwise(ctx, z, a["axis"]) or label.dtype != np.int64 or \
            label.shape[:-1] != z.shape[:-1]:
        _run_cpu_kernel(ctx, host=False)
        return
    z, label = _contig(ctx, z), _contig(ctx, label)
    cols = z.shape[-1]
    rows = z.size // cols
    _check_labels(ctx, label, cols, a["ignore_index"])
    sm = ctx.xp.empty_like(z)
    loss = ctx.xp.empty((*z.shape[:-1], 1), dtype=z.dtype)
    ctx.launch(softmax_xent_kernel(), rows, z, label, sm, loss, rows, cols, a["ignore_index"])
    lod = ctx.input_lod("Logits") or None
    ctx.set_output("Softmax", sm, lod=lod)
    ctx.set_output("Loss", loss, lod=lod)


@register_device_kernel("softmax_with_cross_entropy_grad")
def softmax_with_cross_entropy_grad(ctx: DeviceKernelContext) -> None:
    """Hard labels: (Softmax - onehot(label)) * dLoss, 0 on ignored rows (the CPU
    kernel's formula, written without an in-place scatter); soft labels: the CPU kernel."""
    if not ctx.has_output("Logits@GRAD"):
        return
    a = ctx.attrs
    if a["soft_label"]:
        _run_cpu_kernel(ctx, host=False)
        return
    xp = ctx.xp
    sm, label, d = ctx.input("Softmax"), ctx.input("Label"), ctx.input("Loss@GRAD")
    ax = a["axis"] % sm.ndim
    s = xp.moveaxis(sm, ax, -1)
    lab = xp.moveaxis(label, ax, -1)
    dd = xp.moveaxis(d, ax, -1)
    ignored = lab == a["ignore_index"]
    idx = xp.where(ignored, 0, lab)
    onehot = xp.arange(s.shape[-1]) == idx
    g = (s - onehot.astype(s.dtype)) * xp.where(ignored, sm.dtype.type(0), dd)
    ctx.set_output("Logits@GRAD", xp.ascontiguousarray(xp.moveaxis(g, -1, ax), dtype=sm.dtype))


# -- conv2d (im2col + GEMM) and pool2d --------------------------------------------------


def conv2d_forward(ctx: DeviceKernelContext, x: Any, w: Any) -> Any:
    """conv2d as the CPU kernel computes it: im2col (generated kernel) into
    [g, N*OH*OW, C/g*kh*kw], one batched GEMM with the filters, then NCHW."""
    xp = ctx.xp
    a = ctx.attrs
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    g = a["groups"]
    (oh, ow), pads, dil = window_geometry((h, wd), (kh, kw), a["strides"], a["paddings"],
                                          a["dilations"], a["padding_algorithm"])
    rows, width = n * oh * ow, cg * kh * kw
    cols = xp.empty((g, rows, width), dtype=x.dtype)
    x = _contig(ctx, x)
    (sh, sw), (dh, dw) = a["strides"], dil
    ctx.launch(im2col_kernel(), cols.size, x, cols, cols.size, n, c, h, wd, oh, ow, kh, kw,
               sh, sw, pads[0], pads[2], dh, dw, g)
    wmat = w.reshape(g, m // g, width).transpose(0, 2, 1)
    out = xp.matmul(cols, wmat)  # [g, N*OH*OW, M/g]: cuBLAS
    out = out.reshape(g, n, oh, ow, m // g).transpose(1, 0, 4, 2, 3).reshape(n, m, oh, ow)
    return xp.ascontiguousarray(out, dtype=x.dtype)


@register_device_kernel("conv2d", "depthwise_conv2d")
def conv2d(ctx: DeviceKernelContext) -> None:
    x, w = ctx.input("Input"), ctx.input("Filter")
    if not _f32(ctx, x, w) or x.ndim != 4:
        _run_cpu_kernel(ctx, host=True)
        return
    ctx.set_output("Output", conv2d_forward(ctx, x, w))


@register_device_kernel("pool2d")
def pool2d(ctx: DeviceKernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    is_max = a["pooling_type"] == "max"
    if a["adaptive"] or not _f32(ctx, x) or x.ndim != 4:
        _run_cpu_kernel(ctx, host=True)
        return
    if a["global_pooling"]:
        red = ctx.xp.max if is_max else ctx.xp.mean
        ctx.set_output("Out", red(x, axis=(2, 3), keepdims=True).astype(x.dtype, copy=False))
        return
    n, c, h, w = x.shape
    ksize, strides, (oh, ow), pads = pool_geometry((h, w), a)
    out = ctx.xp.empty((n, c, oh, ow), dtype=x.dtype)
    ctx.launch(pool2d_kernel(), out.size, _contig(ctx, x), out, out.size, h, w, oh, ow,
               ksize[0], ksize[1], strides[0], strides[1], pads[0], pads[2], int(is_max),
               int(bool(a["exclusive"])))
    ctx.set_output("Out", out)
