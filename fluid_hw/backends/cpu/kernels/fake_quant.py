"""Kernels of the fake-quantise ops (the arithmetic is specified in ir/ops/fake_quant.py).

Scales are float32 values; the step ``float32(scale) / float32(levels)`` is formed
in float32 and X is divided by it in float64 and rounded half to even, the
computation the golden ``quantize`` op makes with the frozen scale, so a frozen
input quantiser reproduces these integers exactly.
"""

from __future__ import annotations

import numpy as np

from ....ir.ops.fake_quant import bias_grid, grid, quantize_values, statistic, step_of
from ..context import KernelContext
from . import Kernel, register_kernel


def _emit(ctx: KernelContext, x: np.ndarray, step: np.ndarray, dequant: bool) -> None:
    a = ctx.attrs
    q = quantize_values(x, step, a["bit_length"], a["kind"])
    out = q * np.asarray(step, np.float64) if dequant else q
    ctx.set_output("Out", out.astype(x.dtype), lod=ctx.input_lod("X") or None)


def _abs_max(dequant: bool) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x, a = ctx.input("X"), ctx.attrs
        scale = statistic(x, a["kind"])
        _emit(ctx, x, step_of(scale, a["bit_length"], a["kind"]), dequant)
        ctx.set_output("OutScale", scale.astype(x.dtype))

    return kernel


def _channel_axes(x: np.ndarray, axis: int) -> tuple[tuple[int, ...], list[int]]:
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return tuple(i for i in range(x.ndim) if i != axis), shape


def _channel_wise(dequant: bool) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        x, a = ctx.input("X"), ctx.attrs
        axes, shape = _channel_axes(x, a["quant_axis"])
        scale = statistic(x, a["kind"], axes)
        _emit(ctx, x, step_of(scale, a["bit_length"], a["kind"]).reshape(shape), dequant)
        ctx.set_output("OutScale", scale.astype(x.dtype))

    return kernel


def moving_scale(ctx: KernelContext) -> np.ndarray:
    """The moving-average op's scale (its state written in training), float32 [1]."""
    x, a = ctx.input("X"), ctx.attrs
    in_scale = ctx.input("InScale")
    if a["is_test"]:
        scale = np.asarray(in_scale, np.float32).reshape(1)
        for i, o in (("InAccum", "OutAccum"), ("InState", "OutState")):
            if ctx.has_input(i) and ctx.has_output(o):
                ctx.set_output(o, ctx.input(i))
    else:
        rate = np.float64(a["moving_rate"])
        cur = np.float64(statistic(x, "signed")[0])  # max|X|, every kind (module doc)
        if ctx.has_input("InAccum"):
            state = rate * np.float64(ctx.input("InState").reshape(-1)[0]) + 1.0
            accum = rate * np.float64(ctx.input("InAccum").reshape(-1)[0]) + cur
            scale = np.array([accum / state], np.float32)
            ctx.set_output("OutAccum", np.array([accum], in_scale.dtype))
            ctx.set_output("OutState", np.array([state], in_scale.dtype))
        else:
            prev = np.float64(in_scale.reshape(-1)[0])
            scale = np.array([rate * prev + (1.0 - rate) * cur], np.float32)
    ctx.set_output("OutScale", scale.astype(in_scale.dtype))
    return scale


def _moving_average(dequant: bool) -> Kernel:
    def kernel(ctx: KernelContext) -> None:
        a = ctx.attrs
        scale = moving_scale(ctx)
        _emit(ctx, ctx.input("X"), step_of(scale, a["bit_length"], a["kind"]), dequant)

    return kernel


for _dq, _pre in ((False, "fake_quantize"), (True, "fake_quantize_dequantize")):
    register_kernel(f"{_pre}_abs_max")(_abs_max(_dq))
    register_kernel(f"{_pre}_moving_average_abs_max")(_moving_average(_dq))
register_kernel("fake_channel_wise_quantize_abs_max")(_channel_wise(False))
register_kernel("fake_channel_wise_quantize_dequantize_abs_max")(_channel_wise(True))


@register_kernel("fake_dequantize_max_abs")
def fake_dequantize_max_abs(ctx: KernelContext) -> None:
    x = ctx.input("X")
    s = np.float64(ctx.input("Scale").reshape(-1)[0]) / np.float64(ctx.attrs["max_range"])
    ctx.set_output("Out", (x.astype(np.float64) * s).astype(x.dtype),
                   lod=ctx.input_lod("X") or None)


# -- straight-through gradients (ir/ops/fake_quant.py) ---------------------------------


def _grad_step(ctx: KernelContext, op_type: str, x: np.ndarray) -> np.ndarray:
    """The step broadcast against X (per channel for the channel-wise forms)."""
    a = ctx.attrs
    step = step_of(ctx.input("OutScale"), a["bit_length"], a["kind"])
    if "channel_wise" in op_type:
        return step.reshape(_channel_axes(x, a["quant_axis"])[1])
    return step.reshape(1)


def _ste(op_type: str) -> Kernel:
    dequant = "dequantize" in op_type
    moving = "moving_average" in op_type

    def kernel(ctx: KernelContext) -> None:
        if not ctx.has_output("X@GRAD"):
            return
        x, d = ctx.input("X"), ctx.input("Out@GRAD")
        a = ctx.attrs
        step = _grad_step(ctx, op_type, x).astype(np.float64)
        g = d.astype(np.float64)
        if not dequant:
            with np.errstate(divide="ignore", invalid="ignore"):
                g = np.where(step > 0, g / np.where(step > 0, step, 1.0), 0.0)
        if moving and a["ste_clip"]:
            lo, hi, _ = grid(a["bit_length"], a["kind"])
            x64 = x.astype(np.float64)
            g = np.where((x64 >= lo * step) & (x64 <= hi * step), g, 0.0)
        ctx.set_output("X@GRAD", g.astype(d.dtype))

    return kernel


for _t in ("fake_quantize_abs_max", "fake_quantize_dequantize_abs_max",
           "fake_channel_wise_quantize_abs_max", "fake_channel_wise_quantize_dequantize_abs_max",
           "fake_quantize_moving_average_abs_max",
           "fake_quantize_dequantize_moving_average_abs_max"):
    register_kernel(f"{_t}_grad")(_ste(_t))


@register_kernel("fake_dequantize_max_abs_grad")
def fake_dequantize_max_abs_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d = ctx.input("Out@GRAD")
        s = np.float64(ctx.input("Scale").reshape(-1)[0]) / np.float64(ctx.attrs["max_range"])
        ctx.set_output("X@GRAD", (d.astype(np.float64) * s).astype(d.dtype))


@register_kernel("fake_quantize_dequantize_bias")
def fake_quantize_dequantize_bias(ctx: KernelContext) -> None:
    b, a = ctx.input("X"), ctx.attrs
    k, acc = bias_grid(b, ctx.input("InScale"), ctx.input("WeightScale"), a["in_bit_length"],
                       a["in_kind"], a["weight_bit_length"], a["weight_kind"], a["half_step"])
    out = np.where(acc > 0, (k + (0.5 if a["half_step"] else 0.0)) * acc, b)
    ctx.set_output("Out", out.astype(b.dtype))


@register_kernel("fake_quantize_dequantize_bias_grad")
def fake_quantize_dequantize_bias_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", ctx.input("Out@GRAD"))


def _channel_dequant_factor(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    """Scales[0][c] / max_range_0 (* Scales[1][0] / max_range_1), float64, against X."""
    a = ctx.attrs
    scales = ctx.inputs("Scales")
    shape = [1] * x.ndim
    shape[a["quant_axis"]] = x.shape[a["quant_axis"]]
    f = np.asarray(scales[0], np.float64).reshape(shape) / np.float64(
        2 ** (a["quant_bits"][0] - 1) - 1)
    if len(scales) > 1:
        f = f * np.float64(np.asarray(scales[1]).reshape(-1)[0]) / np.float64(
            2 ** (a["quant_bits"][1] - 1) - 1)
    return f


@register_kernel("fake_channel_wise_dequantize_max_abs")
def fake_channel_wise_dequantize_max_abs(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", (x.astype(np.float64) * _channel_dequant_factor(ctx, x))
                   .astype(x.dtype), lod=ctx.input_lod("X") or None)


@register_kernel("fake_channel_wise_dequantize_max_abs_grad")
def fake_channel_wise_dequantize_max_abs_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        d = ctx.input("Out@GRAD")
        ctx.set_output("X@GRAD", (d.astype(np.float64) * _channel_dequant_factor(ctx, d))
                       .astype(d.dtype))
