"""ONNX ConvTranspose (issue 16) as a direct convolution: the input with ``stride - 1``
zeros inserted between its cells (``unsqueeze2``, ``pad``, ``reshape2``), padded by
``(kernel - 1) * dilation - pad`` (cropped where that is negative, ``slice``) and
convolved (``conv2d``, stride 1, the same dilations and groups) with the weight's
channels swapped per group and its window flipped: the textbook identity, exact up
to the order of the float sums.  1-D and 2-D; the weight must be known at import time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._context import NodeCtx
from ._import_ops import _finish_2d, _ints_attr, _to_2d


def _pads(ctx: NodeCtx, xs: list[int], k_eff: list[int], strides: list[int],
          out_pad: list[int]) -> list[tuple[int, int]]:
    """(begin, end) padding of each spatial axis, from pads, auto_pad or output_shape."""
    n = len(xs)
    auto = ctx.attr("auto_pad", "NOTSET")
    out_shape = ctx.attr("output_shape")
    if auto not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        ctx.fail(f"auto_pad {auto!r} is not a valid value")
    if out_shape or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [int(v) for v in out_shape][-n:] if out_shape else \
            [d * s for d, s in zip(xs, strides)]
        if len(want) != n:
            ctx.fail(f"output_shape {list(out_shape)} needs {n} spatial values")
        pads = []
        for d, s, k, op, w in zip(xs, strides, k_eff, out_pad, want):
            # negative when output_shape asks for more: negative pads grow the output
            total = s * (d - 1) + op + k - w
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return pads
    if auto == "VALID":
        return [(0, 0)] * n
    p = _ints_attr(ctx, "pads", 2 * n, 0)
    if any(v < 0 for v in p):
        ctx.fail(f"negative pads {p}")
    return [(p[i], p[n + i]) for i in range(n)]


def conv_transpose(ctx: NodeCtx) -> None:
    rank = ctx.rank(0)
    if rank not in (3, 4):
        ctx.fail(f"input of rank {rank}: fluid-hw has 1-D (as 2-D) and 2-D transposed "
                 "convolution only")
    n = rank - 2
    xs = ctx.shape(0)
    if ctx.dtype(0).kind != "f":
        ctx.fail(f"X is {ctx.dtype(0)}; ConvTranspose takes float tensors")
    w = ctx.need_const(1, "W")
    g = int(ctx.attr("group", 1))
    if w.ndim != n + 2 or g < 1 or w.shape[0] % g or (xs[1] >= 0 and xs[1] != w.shape[0]):
        ctx.fail(f"W of shape {list(w.shape)} does not fit X {xs} and group {g}: expected "
                 f"[C_in, C_out / group, kernel...] with C_in divisible by group")
    if w.dtype != ctx.dtype(0):
        ctx.fail(f"W is {w.dtype}, X is {ctx.dtype(0)}: they must have one type")
    if any(d < 0 for d in xs[2:]):
        ctx.fail(f"X of shape {xs}: the spatial dims must be known at import time")
    kernel = list(w.shape[2:])
    ks = ctx.attr("kernel_shape")
    if ks and [int(k) for k in ks] != kernel:
        ctx.fail(f"kernel_shape {list(ks)} disagrees with W's shape {list(w.shape)}")
    strides = _ints_attr(ctx, "strides", n, 1)
    dil = _ints_attr(ctx, "dilations", n, 1)
    out_pad = _ints_attr(ctx, "output_padding", n, 0)
    for name, vals, lo in (("strides", strides, 1), ("dilations", dil, 1),
                           ("output_padding", out_pad, 0)):
        if any(v < lo for v in vals):
            ctx.fail(f"attribute {name}={vals}: every entry must be >= {lo}")
    if any(op >= max(s, d) for op, s, d in zip(out_pad, strides, dil)):
        ctx.fail(f"output_padding {out_pad} must be smaller than the stride or the dilation")
    k_eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    pads = _pads(ctx, xs[2:], k_eff, strides, out_pad)
    # the direct convolution's weight [C_out, C_in / g, k...], window flipped
    c_in, c_out_g = w.shape[0], w.shape[1]
    wc = w.reshape(g, c_in // g, c_out_g, *kernel).swapaxes(1, 2)
    wc = np.flip(wc.reshape(g * c_out_g, c_in // g, *kernel), axis=tuple(range(2, 2 + n)))
    if n == 1:
        wc = wc[:, :, None, :]
    weight = ctx.param(np.ascontiguousarray(wc), "direct", source=1)
    x = _to_2d(ctx, ctx.var(0), n)
    sp = ([1] if n == 1 else []) + list(xs[2:])
    st = ([1] if n == 1 else []) + strides
    if any(s > 1 for s in st):
        # [N, C, H, W] -> [N, C, H, 1, W, 1] -> zeros after each cell -> [N, C, H*sh, W*sw]
        x = ctx.emit("unsqueeze2", {"X": x}, {"axes": [3, 5]})
        x = ctx.emit("pad", {"X": x}, {"paddings": [0, 0, 0, 0, 0, 0, 0, st[0] - 1, 0, 0,
                                                    0, st[1] - 1],
                                       "mode": "constant", "pad_value": 0.0}, hint="zeros")
        x = ctx.emit("reshape2", {"X": x}, {"shape": [0, 0, sp[0] * st[0], sp[1] * st[1]]})
    full = [(d - 1) * s + 1 for d, s in zip(sp, st)]  # the cells up to the last input one
    around = ([(0, 0)] if n == 1 else []) + [
        (k - 1 - pb, k - 1 - pe + op) for k, (pb, pe), op in zip(k_eff, pads, out_pad)]
    starts = [max(0, -b) for b, _ in around]
    ends = [f - max(0, -e) for f, (_, e) in zip(full, around)]
    if any(e <= s for s, e in zip(starts, ends)):
        ctx.fail(f"pads {pads} crop the whole output")
    if starts != [0, 0] or ends != [d * s for d, s in zip(sp, st)]:
        x = ctx.emit("slice", {"Input": x}, {"axes": [2, 3], "starts": starts, "ends": ends})
    attrs: dict[str, Any] = {
        "strides": [1, 1], "dilations": ([1] if n == 1 else []) + dil, "groups": g,
        "paddings": [v for b, e in around for v in (max(0, b), max(0, e))],
    }
    has_bias = ctx.has(2)
    y = ctx.emit("conv2d", {"Input": x, "Filter": weight}, attrs,
                 out=0 if n == 2 and not has_bias else None, slot="Output")
    if has_bias:
        y = ctx.emit("elementwise_add", {"X": y, "Y": ctx.var(2)}, {"axis": 1},
                     out=0 if n == 2 else None)
    if n == 1:
        _finish_2d(ctx, y, n)
