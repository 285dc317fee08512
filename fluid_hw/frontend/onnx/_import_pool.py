"""ONNX MaxPool / AveragePool beyond fluid's ``pool2d`` (issue 16): 3-D windows,
dilations and MaxPool's ``Indices`` output, as window taps.

A window of ``k1 x ... x kn`` cells is ``k1 * ... * kn`` taps; tap ``t`` of every
output cell is one strided slice of the padded input, so the pooled tensor is the
element-wise max (``elementwise_max``) or the sum (``sum``) of the tap slices, the
latter divided by each window's cell count, a constant computed here.  ``Indices``
(the flat index of each window's first maximum) is chosen tap by tap with
``equal`` and ``where`` from per-tap index constants.  The spatial dims must be
known at import time; the window may hold at most :data:`MAX_TAPS` cells.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._context import NodeCtx
from ._import_ops import _cast, _enum, _explicit_pads, _onnx_pool_out
from ._sizes import MAX_COMPUTED_BYTES, nbytes

#: the largest window imported as taps (one slice op per cell)
MAX_TAPS = 512


def _axis_geometry(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil: bool
                   ) -> tuple[int, int]:
    """(output extent, end padding that makes the last window whole) of one axis."""
    span = (k - 1) * d + 1
    out = _onnx_pool_out(size, span, s, pb, pe, ceil)
    return out, max(pe, (out - 1) * s + span - size - pb)


def _counts(size: int, out: int, k: int, s: int, d: int, pb: int, pe: int,
            include_pad: bool) -> np.ndarray:
    """Cells each window of one axis averages over: real cells, or cells inside the
    input and its declared pads (count_include_pad)."""
    pos = np.arange(out)[:, None] * s - pb + np.arange(k)[None, :] * d
    lo, hi = (-pb, size + pe) if include_pad else (0, size)
    return ((pos >= lo) & (pos < hi)).sum(axis=1)


def pool_taps(ctx: NodeCtx, kind: str, n: int, kernel: list[int], strides: list[int],
              dilations: list[int], source: str | None = None, out: int | None = 0) -> str:
    """ONNX MaxPool (``kind`` "max", with Indices when wanted) or AveragePool ("avg";
    "sum": the window sums) over ``n`` spatial dims, as taps: of input 0, or of
    ``source`` (a variable of input 0's shape and type), into output ``out``."""
    src = ctx.dtype(0)
    wrap = src.kind in "iu" and src.itemsize <= 2 and kind == "max"
    if src.kind != "f" and not wrap:
        ctx.fail(f"{kind} pooling of {src} tensors; fluid-hw pools floats")
    xs = ctx.shape(0)
    spatial = xs[2:]
    if any(d < 0 for d in spatial):
        ctx.fail(f"input of shape {xs}: 3-D, dilated or index-returning pooling needs the "
                 "spatial dims known at import time")
    taps = math.prod(kernel)
    if taps > MAX_TAPS:
        ctx.fail(f"a window of {kernel} ({taps} cells) passes the {MAX_TAPS} cells fluid-hw "
                 "imports as taps")
    pads, _ = _explicit_pads(ctx, spatial, kernel, strides, dilations, n)
    assert pads is not None  # spatial dims are known: SAME is made explicit
    ceil = bool(ctx.attr("ceil_mode", 0))
    geo = [_axis_geometry(spatial[i], kernel[i], strides[i], dilations[i], pads[2 * i],
                          pads[2 * i + 1], ceil) for i in range(n)]
    size = [g[0] for g in geo]
    if any(o < 1 for o in size):
        ctx.fail(f"the window {kernel} (dilations {dilations}) does not fit the input "
                 f"{spatial} with pads {pads}")
    # the constants made here: a cell count per output cell, an index per tap and cell
    if nbytes(size, np.dtype(np.int64)) * (taps if ctx.wants(1) else 1) > MAX_COMPUTED_BYTES:
        ctx.fail(f"an output of {size} cells per channel makes constants beyond the "
                 f"{MAX_COMPUTED_BYTES >> 20} MiB fluid-hw makes at import time")
    x = source or ctx.var(0)
    x = _cast(ctx, x, src, np.dtype(np.float32)) if wrap else x
    work = np.dtype(np.float32) if wrap else src
    paddings = [0, 0, 0, 0] + [v for i in range(n) for v in (pads[2 * i], geo[i][1])]
    if any(paddings):
        x = ctx.emit("pad", {"X": x}, {"paddings": paddings, "mode": "constant",
                                       "pad_value": -math.inf if kind == "max" else 0.0},
                     hint="padded")
    slices = []
    for t in itertools.product(*(range(k) for k in kernel)):
        starts = [t[i] * dilations[i] for i in range(n)]
        ends = [starts[i] + (size[i] - 1) * strides[i] + 1 for i in range(n)]
        attrs = {"axes": list(range(2, 2 + n)), "starts": starts, "ends": ends}
        if any(s != 1 for s in strides):
            slices.append(ctx.emit("strided_slice", {"Input": x},
                                   {**attrs, "strides": list(strides)}, hint="tap"))
        else:
            slices.append(ctx.emit("slice", {"Input": x}, attrs, hint="tap"))
    if kind == "sum":
        if len(slices) == 1:
            if out is not None:
                ctx.alias(out, slices[0])
            return slices[0]
        return ctx.emit("sum", {"X": slices}, out=out)
    if kind == "avg":
        total = ctx.emit("sum", {"X": slices}) if len(slices) > 1 else slices[0]
        include = bool(ctx.attr("count_include_pad", 0))
        count = np.ones([1], np.int64)
        for i in range(n):
            c = _counts(spatial[i], size[i], kernel[i], strides[i], dilations[i],
                        pads[2 * i], pads[2 * i + 1], include)
            count = np.multiply.outer(count, c) if i else c
        div = ctx.param(np.maximum(count, 1).astype(work), "window_cells")
        return ctx.emit("elementwise_div", {"X": total, "Y": div}, {"axis": 2}, out=out)
    y = slices[0]
    for s in slices[1:]:
        y = ctx.emit("elementwise_max", {"X": y, "Y": s}, {"axis": -1}, hint="max")
    if ctx.wants(1):
        _indices(ctx, y, slices, spatial, size, kernel, strides, dilations, pads)
    if wrap:
        return ctx.emit("cast", {"X": y}, {"in_dtype": _enum(work), "out_dtype": _enum(src)},
                        out=out)
    if out is not None:
        ctx.alias(out, y)
    return y


def _indices(ctx: NodeCtx, y: str, slices: list[str], spatial: list[int], out: list[int],
             kernel: list[int], strides: list[int], dilations: list[int],
             pads: list[int]) -> None:
    """MaxPool's Indices: per output cell the flat index into X (N, C and the spatial
    dims, row-major; storage_order=1: the spatial dims column-major) of the first tap,
    in window order, that equals the maximum."""
    xs = ctx.shape(0)
    if xs[0] < 0 or xs[1] < 0:
        ctx.fail(f"input of shape {xs}: the Indices output needs N and C known at import "
                 "time")
    order = int(ctx.attr("storage_order", 0))
    if order not in (0, 1):
        ctx.fail(f"attribute storage_order={order} must be 0 or 1")
    n = len(spatial)
    dims = spatial if order == 0 else spatial[::-1]
    step = [int(v) for v in np.cumprod([1, *dims[::-1]])[:-1][::-1]]
    if order == 1:
        step = step[::-1]
    grids = np.meshgrid(*(np.arange(o) for o in out), indexing="ij")
    taps = list(itertools.product(*(range(k) for k in kernel)))
    idx: str | None = None
    for t, s in zip(reversed(taps), reversed(slices)):
        pos = [grids[i] * strides[i] - pads[2 * i] + t[i] * dilations[i] for i in range(n)]
        flat = sum(np.clip(p, 0, spatial[i] - 1) * step[i] for i, p in enumerate(pos))
        here = ctx.param(np.asarray(flat, np.int64), "tap_index")
        if idx is None:
            idx = here
            continue
        hit = ctx.emit("equal", {"X": s, "Y": y}, {"axis": -1}, hint="is_max")
        idx = ctx.emit("where", {"Condition": hit, "X": here, "Y": idx}, hint="index")
    assert idx is not None
    plane = math.prod(spatial)
    base = (np.arange(xs[0] * xs[1], dtype=np.int64) * plane).reshape(xs[0], xs[1],
                                                                     *[1] * n)
    # base [N, C, 1...] + idx ([out...] or [N, C, out...]): 1s broadcast on either side
    ctx.emit("elementwise_add", {"X": ctx.param(base, "channel_offset"), "Y": idx},
             {"axis": -1}, out=1)
