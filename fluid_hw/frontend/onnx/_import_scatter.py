"""ONNX ScatterElements and ScatterND (issue 16) as masks, and GatherND as a row lookup.

Scatter: each index is compared
(``equal``) with the positions it can address, the updates are picked there
(``where``) and reduced over the updates (``reduce_sum`` / ``reduce_prod`` /
``reduce_max`` / ``reduce_min``, by the node's ``reduction``), and the result replaces
(or is combined with) the data where some index hit.  Exact: each output cell is its
one update (reduction ``none``; duplicate indices, which ONNX leaves undefined, are
summed) or the reduction of its updates and the data.
"""

from __future__ import annotations

import math

import numpy as np

from ._context import NodeCtx
from ._import_index import positions
from ._import_ops import _cast, _enum, _norm, _squeeze_to_scalar, _wrap_negative
from ._sizes import MAX_COMPUTED_BYTES, nbytes

I64 = np.dtype(np.int64)
_REDUCE = {"none": "reduce_sum", "add": "reduce_sum", "mul": "reduce_prod",
           "max": "reduce_max", "min": "reduce_min"}


def _identity(reduction: str, dt: np.dtype) -> float:
    """What an update that did not hit contributes to the reduction."""
    if reduction == "mul":
        return 1.0
    if reduction in ("max", "min"):
        big = float(np.finfo(dt).max) if dt.kind == "f" else float(np.iinfo(dt).max)
        return -big if reduction == "max" else big
    return 0.0


def _reduction(ctx: NodeCtx) -> str:
    red = str(ctx.attr("reduction", "none"))
    if red not in _REDUCE:
        ctx.fail(f"attribute reduction={red!r}: must be none, add, mul, max or min")
    dt = ctx.dtype(0)
    if dt.kind not in "fi":
        ctx.fail(f"data is {dt}; fluid-hw scatters float and integer tensors")
    if ctx.dtype(2) != dt:
        ctx.fail(f"updates are {ctx.dtype(2)}, data is {dt}: they must have one type")
    if ctx.dtype(1).kind != "i":
        ctx.fail(f"indices are {ctx.dtype(1)}; they must be int32 or int64")
    return red


def _combine(ctx: NodeCtx, data: str, hit: str, upd: str, axis: int, red: str) -> str:
    """Reduce the picked updates over ``axis`` of ``hit`` (bool, the updates' axis) and
    merge them into ``data``; returns the new data."""
    dt = ctx.dtype(0)
    fill = ctx.param(np.array([_identity(red, dt)], dt), "fill")
    picked = ctx.emit("where", {"Condition": hit, "X": upd, "Y": fill}, hint="picked")
    got = ctx.emit(_REDUCE[red], {"X": picked}, {"dim": [axis], "keep_dim": False},
                   hint="scattered")
    if red == "add":
        return ctx.emit("elementwise_add", {"X": data, "Y": got}, {"axis": -1})
    if red == "mul":
        return ctx.emit("elementwise_mul", {"X": data, "Y": got}, {"axis": -1})
    covered = ctx.emit("reduce_max", {"X": ctx.emit("cast", {"X": hit}, {
        "in_dtype": _enum(np.dtype(bool)), "out_dtype": _enum(np.dtype(np.int32))})},
        {"dim": [axis], "keep_dim": False}, hint="covered")
    covered = ctx.emit("cast", {"X": covered}, {"in_dtype": _enum(np.dtype(np.int32)),
                                                "out_dtype": _enum(np.dtype(bool))})
    if red in ("max", "min"):
        got = ctx.emit(f"elementwise_{red}", {"X": data, "Y": got}, {"axis": -1})
    return ctx.emit("where", {"Condition": covered, "X": got, "Y": data})


def scatter_elements(ctx: NodeCtx) -> None:
    red = _reduction(ctx)
    r = ctx.rank(0)
    if ctx.rank(1) != r or ctx.shape(1) != ctx.shape(2):
        ctx.fail(f"indices {ctx.shape(1)} and updates {ctx.shape(2)} must have one shape of "
                 f"the data's rank {r}")
    axis = _norm(int(ctx.attr("axis", 0)), r, ctx)
    ds, js = ctx.shape(0), ctx.shape(1)
    n = ds[axis]
    if n < 0 or js[axis] < 0:
        ctx.fail(f"data {ds} and indices {js}: the scattered axis must be known at import "
                 "time")
    if any(js[k] != ds[k] for k in range(r) if k != axis):
        ctx.fail(f"indices {js} and data {ds} differ in a dim other than axis {axis}: "
                 "fluid-hw scatters whole lanes only")
    if nbytes([abs(d) for d in js] + [n], ctx.dtype(0)) > MAX_COMPUTED_BYTES:
        ctx.fail(f"indices {js} over an axis of {n}: the selection passes "
                 f"{MAX_COMPUTED_BYTES >> 20} MiB")
    idx = _wrap_negative(ctx, _cast(ctx, ctx.var(1), ctx.dtype(1), I64), n)
    # [.., J, 1, ..] against positions [1.., 1, n, 1..]: hit [.., J, n, ..]
    idx = ctx.emit("unsqueeze2", {"X": idx}, {"axes": [axis + 1]})
    hit = ctx.emit("equal", {"X": idx, "Y": positions(ctx, n, axis + 1, r + 1)},
                   {"axis": -1}, hint="hit")
    upd = ctx.emit("unsqueeze2", {"X": ctx.var(2)}, {"axes": [axis + 1]})
    out = _combine(ctx, ctx.var(0), hit, upd, axis, red)
    ctx.alias(0, out)


def scatter_nd(ctx: NodeCtx) -> None:
    """The first k dims of the data flattened into one of P positions and each index
    tuple into its linear position: a ScatterElements over that axis, reshaped back."""
    red = _reduction(ctx)
    ds, js, us = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if any(d < 0 for d in ds + js + us) or not js:
        ctx.fail(f"data {ds}, indices {js}, updates {us}: ScatterND needs every shape known "
                 "at import time")
    k = js[-1]
    if not 1 <= k <= len(ds) or us != js[:-1] + ds[k:]:
        ctx.fail(f"data {ds}, indices {js}, updates {us} do not fit: updates must be "
                 f"indices.shape[:-1] + data.shape[k:] with k = {k} <= the data's rank")
    p, m, rest = math.prod(ds[:k]), math.prod(js[:-1]), math.prod(ds[k:])
    if nbytes([m, p, rest], ctx.dtype(0)) > MAX_COMPUTED_BYTES:
        ctx.fail(f"{m} index tuples over {p} positions of {rest} elements: the selection "
                 f"passes {MAX_COMPUTED_BYTES >> 20} MiB")
    idx = _cast(ctx, ctx.var(1), ctx.dtype(1), I64)
    dims = np.array(ds[:k], I64)
    neg = ctx.emit("less_than", {"X": idx, "Y": ctx.param(np.zeros([1], I64), "zero")},
                   {"axis": -1})
    shift = ctx.emit("elementwise_mul", {"X": _cast(ctx, neg, np.dtype(bool), I64),
                                         "Y": ctx.param(dims, "dims")}, {"axis": -1})
    idx = ctx.emit("elementwise_add", {"X": idx, "Y": shift}, {"axis": -1}, hint="wrapped")
    strides = np.array([math.prod(ds[i + 1:k]) for i in range(k)], I64)
    lin = ctx.emit("reduce_sum", {"X": ctx.emit("elementwise_mul", {
        "X": idx, "Y": ctx.param(strides, "strides")}, {"axis": -1})},
        {"dim": [len(js) - 1], "keep_dim": False}, hint="linear")
    lin = ctx.emit("reshape2", {"X": lin}, {"shape": [m, 1, 1]})
    hit = ctx.emit("equal", {"X": lin, "Y": positions(ctx, p, 1, 3)}, {"axis": -1},
                   hint="hit")  # [M, P, 1]
    upd = ctx.emit("reshape2", {"X": ctx.var(2)}, {"shape": [m, 1, rest]})
    data = ctx.emit("reshape2", {"X": ctx.var(0)}, {"shape": [p, rest]})
    out = _combine(ctx, data, hit, upd, 0, red)
    ctx.emit("reshape2", {"X": out}, {"shape": ds}, out=0)


def gather_nd(ctx: NodeCtx) -> None:
    """The data as a table of B * P rows (B: the batch dims, P: the indexed dims) and
    each index tuple as its row (batch position * P + the tuple's linear position,
    negative entries wrapped), looked up (``lookup_table``) and reshaped."""
    ds, js = ctx.shape(0), ctx.shape(1)
    b = int(ctx.attr("batch_dims", 0))
    if any(d < 0 for d in ds + js) or not js:
        ctx.fail(f"data {ds} and indices {js}: GatherND needs both shapes known at import "
                 "time")
    k = js[-1]
    if not 0 <= b < len(js) or b + k > len(ds) or k < 1 or js[:b] != ds[:b]:
        ctx.fail(f"data {ds}, indices {js} and batch_dims {b} do not fit: the first "
                 f"batch_dims dims must agree and batch_dims + {k} <= the data's rank")
    if ctx.dtype(1).kind != "i":
        ctx.fail(f"indices are {ctx.dtype(1)}; they must be int32 or int64")
    nb, p, rest = math.prod(ds[:b]), math.prod(ds[b:b + k]), math.prod(ds[b + k:])
    tuples = js[:-1]
    if nbytes([*tuples, 2], I64) > MAX_COMPUTED_BYTES:
        ctx.fail(f"indices {js} pass the {MAX_COMPUTED_BYTES >> 20} MiB fluid-hw makes at "
                 "import time")
    idx = _cast(ctx, ctx.var(1), ctx.dtype(1), I64)
    dims = np.array(ds[b:b + k], I64)
    neg = ctx.emit("less_than", {"X": idx, "Y": ctx.param(np.zeros([1], I64), "zero")},
                   {"axis": -1})
    shift = ctx.emit("elementwise_mul", {"X": _cast(ctx, neg, np.dtype(bool), I64),
                                         "Y": ctx.param(dims, "dims")}, {"axis": -1})
    idx = ctx.emit("elementwise_add", {"X": idx, "Y": shift}, {"axis": -1}, hint="wrapped")
    strides = np.array([math.prod(ds[b + i + 1:b + k]) for i in range(k)], I64)
    lin = ctx.emit("reduce_sum", {"X": ctx.emit("elementwise_mul", {
        "X": idx, "Y": ctx.param(strides, "strides")}, {"axis": -1})},
        {"dim": [len(js) - 1], "keep_dim": True}, hint="linear")  # [tuples..., 1]
    if b:
        batch = np.arange(nb, dtype=I64).reshape(*ds[:b], *[1] * (len(tuples) - b), 1) * p
        lin = ctx.emit("elementwise_add", {"X": lin, "Y": ctx.param(batch, "batch_rows")},
                       {"axis": -1})
    table = ctx.emit("reshape2", {"X": ctx.var(0)}, {"shape": [nb * p, rest]})
    rows = ctx.emit("lookup_table", {"W": table, "Ids": lin})
    shape = [*tuples, *ds[b + k:]]
    y = ctx.emit("reshape2", {"X": rows}, {"shape": shape or [1]}, out=0 if shape else None)
    if not shape:  # one tuple addressing one element: a scalar
        _squeeze_to_scalar(ctx, y, 0)
