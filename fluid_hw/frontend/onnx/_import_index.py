"""ONNX ops that compare indices with a range (issue 16): OneHot and Hardmax (``equal``
against 0..depth-1 on a new axis, then ``where`` or ``cast``), and EyeLike (a constant
of the input's shape)."""

from __future__ import annotations

import numpy as np

from ._context import NodeCtx
from ._import_ops import _cast, _enum, _norm, _wrap_negative
from ._sizes import MAX_COMPUTED_BYTES, nbytes

I64 = np.dtype(np.int64)


def positions(ctx: NodeCtx, n: int, axis: int, rank: int) -> str:
    """0..n-1 along ``axis`` of a rank-``rank`` tensor of 1s elsewhere (int64)."""
    if nbytes([n], I64) > MAX_COMPUTED_BYTES:
        ctx.fail(f"an axis of {n} positions passes the {MAX_COMPUTED_BYTES >> 20} MiB "
                 "fluid-hw makes at import time")
    return ctx.param(np.arange(n, dtype=I64).reshape([1] * axis + [n] + [1] * (rank - axis - 1)),
                     "positions")


def one_hot(ctx: NodeCtx) -> None:
    """values[1] where the (wrapped) index equals the position on the new axis, else
    values[0]; indices outside [-depth, depth) match no position (all values[0])."""
    depth_v = ctx.need_const(1, "depth")
    if depth_v.size != 1:
        ctx.fail(f"depth of shape {list(depth_v.shape)} must be one value")
    d = float(depth_v.reshape(-1)[0])
    if not np.isfinite(d):
        ctx.fail(f"depth {d} must be a finite number")
    depth = int(d)
    if depth < 1:
        ctx.fail(f"depth {depth} must be >= 1")
    rank = ctx.rank(0) + 1
    axis = _norm(int(ctx.attr("axis", -1)), rank, ctx)
    xs = ctx.shape(0)
    if nbytes([abs(d) for d in xs] + [depth], ctx.dtype(2)) > MAX_COMPUTED_BYTES:
        ctx.fail(f"indices {xs} with depth {depth}: the output passes "
                 f"{MAX_COMPUTED_BYTES >> 20} MiB")
    if ctx.dtype(0).kind not in "iuf":
        ctx.fail(f"indices are {ctx.dtype(0)}; OneHot takes numeric indices")
    vals = ctx.const(2)
    if vals is not None and vals.size != 2:
        ctx.fail(f"values {vals.reshape(-1).tolist()} must be [off_value, on_value]")
    idx = ctx.var(0)
    if ctx.dtype(0).kind == "f":  # ONNX casts float indices to integers (toward zero)
        idx = ctx.emit("cast", {"X": idx}, {"in_dtype": _enum(ctx.dtype(0)),
                                            "out_dtype": _enum(I64)})
    else:
        idx = _cast(ctx, idx, ctx.dtype(0), I64)
    idx = _wrap_negative(ctx, idx, depth)
    idx = ctx.emit("unsqueeze2", {"X": idx}, {"axes": [axis]})
    hit = ctx.emit("equal", {"X": idx, "Y": positions(ctx, depth, axis, rank)},
                   {"axis": -1}, hint="hit")
    if vals is not None:
        off, on = (ctx.param(vals.reshape(-1)[k:k + 1].copy(), n)
                   for k, n in ((0, "off"), (1, "on")))
    else:
        off, on = (ctx.emit("slice", {"Input": ctx.var(2)},
                            {"axes": [0], "starts": [k], "ends": [k + 1]}, hint=n)
                   for k, n in ((0, "off"), (1, "on")))
    ctx.emit("where", {"Condition": hit, "X": on, "Y": off}, out=0)


def hardmax(ctx: NodeCtx) -> None:
    """1 at the first maximum along ``axis``, 0 elsewhere: ``arg_max`` compared with the
    positions."""
    dt = ctx.dtype(0)
    if dt.kind != "f":
        ctx.fail(f"input of type {dt}; Hardmax takes float tensors")
    xs = ctx.shape(0)
    rank = len(xs)
    axis = _norm(int(ctx.attr("axis", -1)), rank, ctx)
    if xs[axis] < 0:
        ctx.fail(f"input of shape {xs}: the axis {axis} must be known at import time")
    if ctx.opset < 13:  # the input flattened to 2-D from axis on
        ctx.fail("Hardmax before opset 13 (over the input flattened from axis) is not "
                 "supported; re-export with opset >= 13")
    first = ctx.emit("arg_max", {"X": ctx.var(0)},
                     {"axis": axis, "keepdims": True, "dtype": _enum(I64)}, hint="argmax")
    hit = ctx.emit("equal", {"X": first, "Y": positions(ctx, xs[axis], axis, rank)},
                   {"axis": -1}, hint="hit")
    ctx.emit("cast", {"X": hit}, {"in_dtype": _enum(np.dtype(bool)), "out_dtype": _enum(dt)},
             out=0)


def eye_like(ctx: NodeCtx) -> None:
    """Ones on the k-th diagonal of the input's (known) 2-D shape, as a constant."""
    xs = ctx.shape(0)
    if len(xs) != 2 or any(d < 0 for d in xs):
        ctx.fail(f"input of shape {xs}: EyeLike needs a 2-D shape known at import time")
    dtype = ctx.attr("dtype")
    if dtype is None:
        dt = ctx.dtype(0)
    else:
        from ._dtypes import np_dtype_of, onnx_type_name

        found = np_dtype_of(int(dtype))
        if found is None:
            ctx.fail(f"dtype {onnx_type_name(int(dtype))}, a type fluid-hw tensors cannot hold")
        dt = found
    if nbytes(xs, dt) > MAX_COMPUTED_BYTES:
        ctx.fail(f"a constant of shape {xs} passes {MAX_COMPUTED_BYTES >> 20} MiB")
    ctx.bind(0, np.eye(xs[0], xs[1], int(ctx.attr("k", 0)), dtype=dt))
