"""Converters of the ONNX ops real models need beyond the core table (issue 16):
Where, Expand, Tile, CumSum, ConstantOfShape, Range, TopK, LRN, Gelu,
InstanceNormalization, LayerNormalization, Resize and two-operand Einsum.

``_import_ops`` adds :data:`MORE` to its import table; ops that ONNX defines by a
function body and that no entry covers are expanded into their body by the importer
(``importer.function_body``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper

from ...ir import dtypes
from ._context import NodeCtx
from ._import_conv_transpose import conv_transpose
from ._import_index import eye_like, hardmax, one_hot, positions
from ._import_ops import OpImport, _cast, _enum, _norm, _squeeze_to_scalar
from ._import_scatter import gather_nd, scatter_elements, scatter_nd
from ._sizes import MAX_COMPUTED_BYTES, nbytes

F32 = np.dtype(np.float32)


def _float(ctx: NodeCtx, i: int = 0) -> np.dtype:
    dt = ctx.dtype(i)
    if dt.kind != "f":
        ctx.fail(f"input #{i} is {dt}; {ctx.op_type} takes float tensors here")
    return dt


def _scalar_var(ctx: NodeCtx, value: float, dt: np.dtype, hint: str) -> str:
    return ctx.param(np.array([value], dt), hint)


# -- selection, broadcasting, scans ------------------------------------------------------

def _where(ctx: NodeCtx) -> None:
    if ctx.dtype(0) != np.bool_:
        ctx.fail(f"condition (input #0) is {ctx.dtype(0)}; Where takes a bool condition")
    if ctx.dtype(1) != ctx.dtype(2):
        ctx.fail(f"X and Y have different types {ctx.dtype(1)} and {ctx.dtype(2)}")
    ctx.emit("where", {"Condition": ctx.var(0), "X": ctx.var(1), "Y": ctx.var(2)}, out=0)


def _tile_to(ctx: NodeCtx, x: str, rank: int, times: list[int]) -> None:
    """``x`` (rank ``rank``) tiled ``times`` (one entry per dim) into output 0."""
    if all(t == 1 for t in times):
        ctx.alias(0, x)
        return
    ctx.emit("expand", {"X": x}, {"expand_times": times}, out=0)


def _expand(ctx: NodeCtx) -> None:
    """ONNX Expand: numpy broadcasting of X to ``shape`` (either side may be 1) ->
    Paddle's ``expand`` (tiling) of the dims of size 1."""
    target = ctx.shape_values(1, "shape")
    x = ctx.var(0)
    dims = ctx.dims(0)
    lead = len(target) - len(dims)
    if lead > 0:
        x = ctx.emit("unsqueeze2", {"X": x}, {"axes": list(range(lead))})
        dims = [*[1] * lead, *dims]
    full = [1] * max(-lead, 0) + list(target)
    times = []
    for k, (d, t) in enumerate(zip(dims, full)):
        if t == 1 or t == d:
            times.append(1)
        elif d == 1 and isinstance(t, int):
            times.append(t)
        else:
            ctx.fail(f"cannot broadcast dim {k} of X ({d}) to {t} of shape {full}: needs "
                     "X's dim 1 and the target known at import time, or the two equal")
    if nbytes([abs(int(d)) if isinstance(d, int) else 1 for d in dims] + times,
              ctx.dtype(0)) > MAX_COMPUTED_BYTES * 4:
        ctx.fail(f"the expanded tensor of shape {full} is implausibly large")
    _tile_to(ctx, x, len(dims), times)


def _tile(ctx: NodeCtx) -> None:
    reps = ctx.ints(1, "repeats")
    if len(reps) != ctx.rank(0) or any(r < 0 for r in reps):
        ctx.fail(f"repeats {reps} must hold one value >= 0 per dim of X {ctx.shape(0)}")
    _tile_to(ctx, ctx.var(0), ctx.rank(0), reps)


def _cumsum(ctx: NodeCtx) -> None:
    """CumSum and CumProd: fluid's cumsum / cumprod."""
    axis = ctx.ints(1, "axis")
    if len(axis) != 1:
        ctx.fail(f"axis {axis} must be one value")
    if ctx.dtype(0).kind not in "fi":
        ctx.fail(f"X is {ctx.dtype(0)}; {ctx.op_type} of fluid-hw takes float and integer "
                 "tensors")
    ax = _norm(axis[0], ctx.rank(0), ctx)
    ctx.emit("cumprod" if ctx.op_type == "CumProd" else "cumsum", {"X": ctx.var(0)},
             {"axis": ax, "exclusive": bool(ctx.attr("exclusive", 0)),
              "reverse": bool(ctx.attr("reverse", 0))}, out=0)


def _gather_elements(ctx: NodeCtx) -> None:
    """out[.., j, ..] = data[.., indices[.., j, ..], ..] along ``axis``: indices compared
    (``equal``) with 0..n-1 on a new axis next to it, the data picked there (``where``)
    and the new axis summed away, so each output is its one picked element, exactly."""
    r = ctx.rank(0)
    if ctx.rank(1) != r:
        ctx.fail(f"indices of rank {ctx.rank(1)}; GatherElements needs the data's rank {r}")
    axis = _norm(int(ctx.attr("axis", 0)), r, ctx)
    ds, js = ctx.shape(0), ctx.shape(1)
    n = ds[axis]
    if n < 0:
        ctx.fail(f"data of shape {ds}: the gathered axis {axis} must be known at import time")
    if ctx.dtype(1).kind != "i":
        ctx.fail(f"indices are {ctx.dtype(1)}; GatherElements takes int32 or int64")
    if ctx.dtype(0).kind not in "fi":
        ctx.fail(f"data is {ctx.dtype(0)}; fluid-hw gathers float and integer tensors here")
    if nbytes([abs(d) for d in js] + [n], ctx.dtype(0)) > MAX_COMPUTED_BYTES:
        ctx.fail(f"indices {js} over an axis of {n}: the selection passes "
                 f"{MAX_COMPUTED_BYTES >> 20} MiB")
    data = ctx.var(0)
    # the data's other dims cut to the indices' (ONNX lets those be smaller)
    cut = [k for k in range(r) if k != axis and js[k] != ds[k]]
    if any(js[k] < 0 or ds[k] < 0 or js[k] > ds[k] for k in cut):
        ctx.fail(f"indices {js} and data {ds}: the dims other than axis {axis} must be equal "
                 "or known, with the indices' no larger")
    if cut:
        data = ctx.emit("slice", {"Input": data}, {"axes": cut, "starts": [0] * len(cut),
                                                   "ends": [js[k] for k in cut]})
    from ._import_ops import _wrap_negative

    i64 = np.dtype(np.int64)
    idx = _cast(ctx, ctx.var(1), ctx.dtype(1), i64)
    c = ctx.const(1)
    if c is None or (c < 0).any():
        idx = _wrap_negative(ctx, idx, n)
    _select_along(ctx, data, idx, axis, r, n)


def _select_along(ctx: NodeCtx, data: str, idx: str, axis: int, r: int, n: int) -> None:
    """Output 0 = data[.., idx[.., j, ..], ..] along ``axis`` (``idx``: int64 in [0, n),
    of rank ``r``, broadcasting into data's other dims): idx compared with 0..n-1 on a
    new axis after ``axis``, the data picked there and that axis summed away."""
    idx = ctx.emit("unsqueeze2", {"X": idx}, {"axes": [axis + 1]})
    hit = ctx.emit("equal", {"X": idx, "Y": positions(ctx, n, axis + 1, r + 1)},
                   {"axis": -1}, hint="hit")
    picked = ctx.emit("where", {"Condition": hit,
                                "X": ctx.emit("unsqueeze2", {"X": data}, {"axes": [axis]}),
                                "Y": ctx.param(np.zeros([1], ctx.dtype(0)), "zero")})
    ctx.emit("reduce_sum", {"X": picked}, {"dim": [axis + 1], "keep_dim": False}, out=0)


def _reverse_sequence(ctx: NodeCtx) -> None:
    """Each batch entry's first sequence_lens[b] steps reversed: step t reads step
    len_b - 1 - t where t < len_b, else itself (a selection along the time axis)."""
    xs = ctx.shape(0)
    r = len(xs)
    t_ax, b_ax = int(ctx.attr("time_axis", 0)), int(ctx.attr("batch_axis", 1))
    if r < 2 or {t_ax, b_ax} != {0, 1}:
        ctx.fail(f"time_axis {t_ax} and batch_axis {b_ax} must be 0 and 1 (in either order) "
                 f"of an input of rank >= 2, got rank {r}")
    t = xs[t_ax]
    if t < 0:
        ctx.fail(f"input of shape {xs}: the time axis must be known at import time")
    if nbytes([abs(d) for d in xs] + [t], ctx.dtype(0)) > MAX_COMPUTED_BYTES:
        ctx.fail(f"an input of shape {xs}: the selection passes {MAX_COMPUTED_BYTES >> 20} MiB")
    if ctx.dtype(0).kind not in "fi":
        ctx.fail(f"input of type {ctx.dtype(0)}; fluid-hw reverses float and integer tensors")
    i64 = np.dtype(np.int64)
    lens = _cast(ctx, ctx.var(1), ctx.dtype(1), i64)
    lens = ctx.emit("reshape2", {"X": lens}, {"shape": [1 if k != b_ax else -1
                                                       for k in range(r)]})
    steps = positions(ctx, t, t_ax, r)
    rev = ctx.emit("elementwise_sub", {"X": ctx.emit("scale", {"X": lens}, {"bias": -1.0}),
                                       "Y": steps}, {"axis": -1})
    inside = ctx.emit("less_than", {"X": steps, "Y": lens}, {"axis": -1})
    idx = ctx.emit("where", {"Condition": inside, "X": rev, "Y": steps}, hint="source")
    _select_along(ctx, ctx.var(0), idx, t_ax, r, t)


def _trilu(ctx: NodeCtx) -> None:
    """The upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims:
    ``where`` with a constant mask, zeros elsewhere."""
    xs = ctx.shape(0)
    if len(xs) < 2 or xs[-2] < 0 or xs[-1] < 0:
        ctx.fail(f"input of shape {xs}: Trilu needs rank >= 2 with the last two dims known "
                 "at import time")
    if 0 in xs:
        ctx.fail(f"an input of shape {xs} (an empty tensor) is not supported")
    k = ctx.ints(1, "k") if ctx.has(1) else [0]
    if len(k) != 1:
        ctx.fail(f"k {k} must be one value")
    n, m = xs[-2:]
    if nbytes([n, m], np.dtype(np.int64)) > MAX_COMPUTED_BYTES:
        ctx.fail(f"a mask of {n} x {m} passes the {MAX_COMPUTED_BYTES >> 20} MiB fluid-hw "
                 "makes at import time")
    diff = np.arange(m)[None, :] - np.arange(n)[:, None]
    mask = diff >= k[0] if int(ctx.attr("upper", 1)) else diff <= k[0]
    if mask.all():
        ctx.alias(0, ctx.var(0))
        return
    ctx.emit("where", {"Condition": ctx.param(mask, "mask"), "X": ctx.var(0),
                       "Y": ctx.param(np.zeros([1], ctx.dtype(0)), "zero")}, out=0)


def _constant_of_shape(ctx: NodeCtx) -> None:
    shape = ctx.ints(0, "shape")
    value = ctx.attr("value")
    arr = (onnx.numpy_helper.to_array(value).reshape(-1) if value is not None
           else np.zeros(1, F32))
    if arr.size != 1 or any(d < 0 for d in shape):
        ctx.fail(f"value must be one element and shape {shape} non-negative")
    if nbytes(shape, arr.dtype) > MAX_COMPUTED_BYTES:
        ctx.fail(f"a constant of shape {shape} passes the {MAX_COMPUTED_BYTES >> 20} MiB "
                 "fluid-hw makes at import time")
    ctx.bind(0, np.full(shape, arr[0], arr.dtype))


def _range(ctx: NodeCtx) -> None:
    start, limit, delta = (ctx.need_const(i, w) for i, w in
                           enumerate(("start", "limit", "delta")))
    dt = start.dtype
    s, lim, d = (v.reshape(-1)[0].item() for v in (start, limit, delta))
    if d == 0:
        ctx.fail("delta is 0")
    if not all(math.isfinite(v) for v in (s, lim, d)):
        ctx.fail(f"start {s}, limit {lim} and delta {d} must be finite")
    n = max(math.ceil((lim - s) / d), 0)
    if nbytes([n], dt) > MAX_COMPUTED_BYTES:
        ctx.fail(f"{n} elements pass the {MAX_COMPUTED_BYTES >> 20} MiB limit")
    ctx.bind(0, (np.arange(n, dtype=np.float64 if dt.kind == "f" else np.int64) * d + s)
             .astype(dt))


def _top_k(ctx: NodeCtx) -> None:
    k = ctx.ints(1, "K")
    rank = ctx.rank(0)
    if len(k) != 1 or k[0] < 1:
        ctx.fail(f"K {k}: fluid-hw's top_k takes one K >= 1")
    axis = _norm(int(ctx.attr("axis", -1)), rank, ctx)
    largest = bool(ctx.attr("largest", 1))
    dt = ctx.dtype(0)
    if not largest and dt.kind not in "fi":
        ctx.fail(f"largest=0 on {dt}: the k smallest are found on the negated input, which "
                 "needs a signed type")
    x = ctx.var(0)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    if axis != rank - 1:
        x = ctx.emit("transpose2", {"X": x}, {"axis": perm})
    if not largest:
        x = ctx.emit("scale", {"X": x}, {"scale": -1.0})
    vals, idx = ctx.new_var(None, "values"), ctx.new_var(None, "indices")
    ctx.emit_op("top_k", {"X": x}, {"Out": [vals], "Indices": [idx]}, {"k": k[0]})
    if not largest:
        vals = ctx.emit("scale", {"X": vals}, {"scale": -1.0})
    for j, v in ((0, vals), (1, idx)):
        if not ctx.wants(j):
            continue
        if axis != rank - 1:
            ctx.emit("transpose2", {"X": v}, {"axis": perm}, out=j)
        else:
            ctx.alias(j, v)


# -- normalization and activations --------------------------------------------------------

def _lrn(ctx: NodeCtx) -> None:
    """y = x / (bias + alpha / size * sum of x^2 over `size` channels) ^ beta; the sum is
    an average pooling of x^2 over the channels (count including the zero padding)."""
    _float(ctx)
    size = int(ctx.attr("size", 0))
    if size < 1:
        ctx.fail(f"attribute size={size} must be >= 1")
    shape = ctx.shape(0)
    if len(shape) < 3 or shape[1] < 0:
        ctx.fail(f"X of shape {shape}: LRN needs [N, C, ...] with C known")
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    x = ctx.var(0)
    sq = ctx.emit("square", {"X": x})
    grid = ctx.emit("reshape2", {"X": sq}, {"shape": [0, 1, shape[1], -1]})
    lo = (size - 1) // 2
    s = ctx.emit("pool2d", {"X": grid},
                 {"pooling_type": "avg", "ksize": [size, 1], "strides": [1, 1],
                  "paddings": [lo, size - 1 - lo, 0, 0], "exclusive": False})
    base = ctx.emit("scale", {"X": s}, {"scale": alpha, "bias": bias})
    p = _scalar_var(ctx, beta, ctx.dtype(0), "beta")
    den = ctx.emit("elementwise_pow", {"X": base, "Y": p}, {"axis": -1})
    den = ctx.emit("reshape2", {"X": den}, {"shape": [0, *shape[1:]]
                                            if all(d >= 0 for d in shape[1:])
                                            else [0, shape[1], *([-1] if len(shape) == 3
                                                                 else shape[2:])]})
    ctx.emit("elementwise_div", {"X": x, "Y": den}, {"axis": -1}, out=0)


def _normalize(ctx: NodeCtx, x: str, axes: list[int], eps: float, dt: np.dtype
               ) -> tuple[str, str, str]:
    """(x - mean) / sqrt(var + eps) over ``axes`` (kept): (normalized, mean, 1/std)."""
    mean = ctx.emit("reduce_mean", {"X": x}, {"dim": axes, "keep_dim": True}, hint="mean")
    d = ctx.emit("elementwise_sub", {"X": x, "Y": mean}, {"axis": -1}, hint="centered")
    var = ctx.emit("reduce_mean", {"X": ctx.emit("square", {"X": d})},
                   {"dim": axes, "keep_dim": True}, hint="var")
    inv = ctx.emit("reciprocal", {"X": ctx.emit("sqrt", {"X": ctx.emit(
        "scale", {"X": var}, {"bias": eps})})}, hint="inv_std")
    return ctx.emit("elementwise_mul", {"X": d, "Y": inv}, {"axis": -1}), mean, inv


def batch_norm_training(ctx: NodeCtx) -> None:
    """BatchNormalization with training_mode=1 (opset 14 on): Y normalised with the
    batch's mean and biased variance over every dim but C, and the running statistics
    input * momentum + batch statistic * (1 - momentum) as outputs 1 and 2."""
    dt = _float(ctx)
    rank = ctx.rank(0)
    if rank < 2:
        ctx.fail(f"X of rank {rank}; BatchNormalization needs [N, C, ...]")
    axes = [0, *range(2, rank)]
    eps, mom = float(ctx.attr("epsilon", 1e-5)), float(ctx.attr("momentum", 0.9))
    x = ctx.var(0)
    mean = ctx.emit("reduce_mean", {"X": x}, {"dim": axes, "keep_dim": True}, hint="mean")
    d = ctx.emit("elementwise_sub", {"X": x, "Y": mean}, {"axis": -1}, hint="centered")
    var = ctx.emit("reduce_mean", {"X": ctx.emit("square", {"X": d})},
                   {"dim": axes, "keep_dim": True}, hint="var")
    inv = ctx.emit("reciprocal", {"X": ctx.emit("sqrt", {"X": ctx.emit(
        "scale", {"X": var}, {"bias": eps})})}, hint="inv_std")
    y = ctx.emit("elementwise_mul", {"X": d, "Y": inv}, {"axis": -1})
    y = ctx.emit("elementwise_mul", {"X": y, "Y": ctx.var(1)}, {"axis": 1})
    ctx.emit("elementwise_add", {"X": y, "Y": ctx.var(2)}, {"axis": 1}, out=0)
    for j, stat, i in ((1, mean, 3), (2, var, 4)):
        if not ctx.wants(j):
            continue
        if ctx.dtype(i) != dt:
            ctx.fail(f"input #{i} is {ctx.dtype(i)}, X is {dt}: training mode needs one type")
        flat = ctx.emit("reshape2", {"X": stat}, {"shape": [-1]})
        old = ctx.emit("scale", {"X": ctx.var(i)}, {"scale": mom})
        ctx.emit("elementwise_add", {"X": old, "Y": ctx.emit("scale", {"X": flat},
                                                              {"scale": 1.0 - mom})},
                 {"axis": -1}, out=j)


def dropout_training(ctx: NodeCtx, ratio: float) -> None:
    """Dropout with training_mode true: fluid's dropout (upscale_in_train: kept cells
    scaled by 1 / (1 - ratio)); ONNX's seed attribute becomes the op's fixed seed. The
    mask is random, so equal in distribution (not in values) to another runtime's."""
    _float(ctx)
    seed = ctx.attr("seed")
    out = ctx.new_var(0)
    mask = ctx.new_var(None, "mask")
    ctx.emit_op("dropout", {"X": ctx.var(0)}, {"Out": [out], "Mask": [mask]},
                {"dropout_prob": ratio, "is_test": False,
                 "dropout_implementation": "upscale_in_train",
                 "fix_seed": seed is not None, "seed": int(seed or 0) & 0x7FFFFFFF})
    if ctx.wants(1):
        ctx.emit("cast", {"X": mask}, {"in_dtype": _enum(np.dtype(np.uint8)),
                                       "out_dtype": _enum(np.dtype(bool))}, out=1)


def _lp_norm(ctx: NodeCtx) -> None:
    """x / ||x||_p along axis (p 1: sum of |x|; 2: sqrt of the sum of squares); 0 where
    the norm is 0."""
    _float(ctx)
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        ctx.fail(f"attribute p={p}: must be 1 or 2")
    axis = _norm(int(ctx.attr("axis", -1)), ctx.rank(0), ctx)
    x = ctx.var(0)
    part = ctx.emit("abs" if p == 1 else "square", {"X": x})
    norm = ctx.emit("reduce_sum", {"X": part}, {"dim": [axis], "keep_dim": True}, hint="norm")
    if p == 2:
        norm = ctx.emit("sqrt", {"X": norm})
    # a zero norm (all of x along axis zero) divides by 1 instead: 0, as ONNX's tests want
    dt = ctx.dtype(0)
    zero = ctx.emit("equal", {"X": norm, "Y": _scalar_var(ctx, 0.0, dt, "zero")}, {"axis": -1})
    norm = ctx.emit("where", {"Condition": zero, "X": _scalar_var(ctx, 1.0, dt, "one"),
                              "Y": norm}, hint="norm")
    ctx.emit("elementwise_div", {"X": x, "Y": norm}, {"axis": -1}, out=0)


def _lp_pool(ctx: NodeCtx) -> None:
    """(sum over the window of |x|^p)^(1/p), the pads adding nothing."""
    from ._import_ops import pool_window
    from ._import_pool import pool_taps

    dt = _float(ctx)
    n, kernel, strides, dil = pool_window(ctx, "LpPool")
    p = float(ctx.attr("p", 2))
    if p <= 0:
        ctx.fail(f"attribute p={p}: must be > 0")
    x = ctx.emit("abs", {"X": ctx.var(0)})
    if p == 2:
        x = ctx.emit("square", {"X": ctx.var(0)})
    elif p != 1:
        x = ctx.emit("elementwise_pow", {"X": x, "Y": _scalar_var(ctx, p, dt, "p")},
                     {"axis": -1})
    total = pool_taps(ctx, "sum", n, kernel, strides, dil, source=x, out=None)
    if p == 1:
        ctx.alias(0, total)
    elif p == 2:
        ctx.emit("sqrt", {"X": total}, out=0)
    else:
        ctx.emit("elementwise_pow", {"X": total, "Y": _scalar_var(ctx, 1 / p, dt, "inv_p")},
                 {"axis": -1}, out=0)


def _is_nan(ctx: NodeCtx) -> None:
    _float(ctx)
    ctx.emit("not_equal", {"X": ctx.var(0), "Y": ctx.var(0)}, {"axis": -1}, out=0)


def _is_inf(ctx: NodeCtx) -> None:
    dt = _float(ctx)
    pos, neg = bool(ctx.attr("detect_positive", 1)), bool(ctx.attr("detect_negative", 1))
    x = ctx.var(0)
    if pos and neg:
        x = ctx.emit("abs", {"X": x})
    # detecting neither: equal to NaN, which nothing is
    inf = _scalar_var(ctx, math.nan if not (pos or neg) else -math.inf if neg and not pos
                      else math.inf, dt, "inf")
    ctx.emit("equal", {"X": x, "Y": inf}, {"axis": -1}, out=0)


def _mod(ctx: NodeCtx) -> None:
    """Mod (the divisor's sign) or, with fmod=1, fmod (the dividend's sign)."""
    from ._import_ops import _binary

    fmod = int(ctx.attr("fmod", 0))
    if fmod not in (0, 1):
        ctx.fail(f"attribute fmod={fmod}: must be 0 or 1")
    _binary("elementwise_fmod" if fmod else "elementwise_mod")(ctx)


def _instance_norm(ctx: NodeCtx) -> None:
    dt = _float(ctx)
    rank = ctx.rank(0)
    if rank < 3:
        ctx.fail(f"X of rank {rank}; InstanceNormalization needs [N, C, ...]")
    y, _, _ = _normalize(ctx, ctx.var(0), list(range(2, rank)),
                         float(ctx.attr("epsilon", 1e-5)), dt)
    y = ctx.emit("elementwise_mul", {"X": y, "Y": ctx.var(1)}, {"axis": 1})
    ctx.emit("elementwise_add", {"X": y, "Y": ctx.var(2)}, {"axis": 1}, out=0)


def _layer_norm(ctx: NodeCtx) -> None:
    dt = _float(ctx)
    rank = ctx.rank(0)
    axis = _norm(int(ctx.attr("axis", -1)), rank, ctx)
    x = ctx.var(0)
    stash = int(ctx.attr("stash_type", 1))
    work = F32 if stash == 1 and dt.itemsize < 4 else dt
    xw = _cast(ctx, x, dt, work)
    y, mean, inv = _normalize(ctx, xw, list(range(axis, rank)),
                              float(ctx.attr("epsilon", 1e-5)), work)
    y = _cast(ctx, y, work, dt)
    has_b = ctx.has(2)
    y = ctx.emit("elementwise_mul", {"X": y, "Y": ctx.var(1)}, {"axis": -1},
                 out=None if has_b else 0)
    if has_b:
        ctx.emit("elementwise_add", {"X": y, "Y": ctx.var(2)}, {"axis": -1}, out=0)
    for j, v in ((1, mean), (2, inv)):
        if ctx.wants(j):
            ctx.alias(j, v)


def _hard_swish(ctx: NodeCtx) -> None:
    """ONNX HardSwish is fluid's hard_swish with its defaults (threshold 6, scale 6,
    offset 3); its exporter checks them, so it is no one-to-one pair."""
    ctx.emit("hard_swish", {"X": ctx.var(0)}, out=0)


def _gelu(ctx: NodeCtx) -> None:
    _float(ctx)
    x = ctx.var(0)
    approx = ctx.attr("approximate", "none")
    if approx == "none":
        e = ctx.emit("erf", {"X": ctx.emit("scale", {"X": x}, {"scale": 1 / math.sqrt(2)})})
    elif approx == "tanh":
        cube = ctx.emit("elementwise_mul", {"X": ctx.emit("square", {"X": x}), "Y": x},
                        {"axis": -1})
        inner = ctx.emit("elementwise_add", {"X": x, "Y": ctx.emit(
            "scale", {"X": cube}, {"scale": 0.044715})}, {"axis": -1})
        e = ctx.emit("tanh", {"X": ctx.emit("scale", {"X": inner},
                                           {"scale": math.sqrt(2 / math.pi)})})
    else:
        ctx.fail(f"attribute approximate={approx!r}: must be 'none' or 'tanh'")
    half = ctx.emit("scale", {"X": e}, {"scale": 0.5, "bias": 0.5})
    ctx.emit("elementwise_mul", {"X": x, "Y": half}, {"axis": -1}, out=0)


# -- Resize ------------------------------------------------------------------------------

_RESIZE_DEFAULTS = {"mode": "nearest", "nearest_mode": "round_prefer_floor",
                    "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75,
                    "exclude_outside": 0, "extrapolation_value": 0.0, "antialias": 0,
                    "keep_aspect_ratio_policy": "stretch"}


def _resize_sizes(ctx: NodeCtx, xs: list[int]) -> tuple[list[float], list[int],
                                                          list[float] | None]:
    """Per-axis scale factors, output sizes and roi ([starts..., ends...]) as ONNX's
    reference implementation computes them."""
    r = len(xs)
    axes = [_norm(a, r, ctx, "axes entry") for a in (ctx.attr("axes") or range(r))]
    roi = ctx.const(1) if ctx.has(1) else None
    scales = ctx.const(2) if ctx.has(2) else None
    sizes = ctx.const(3) if ctx.has(3) else None
    for i, (v, what) in enumerate(((roi, "roi"), (scales, "scales"), (sizes, "sizes")), 1):
        if ctx.has(i) and v is None:
            ctx.need_const(i, what)
    roi_l = [float(v) for v in roi.reshape(-1)] if roi is not None and roi.size else None
    if roi_l is not None and not all(math.isfinite(v) for v in roi_l):
        ctx.fail(f"roi {roi_l} must be finite")
    sc = [float(v) for v in scales.reshape(-1)] if scales is not None and scales.size else None
    sz = [int(v) for v in sizes.reshape(-1)] if sizes is not None and sizes.size else None
    if (sc is None) == (sz is None):
        ctx.fail("exactly one of scales and sizes must be given")
    n = len(axes)
    for what, vals in (("scales", sc), ("sizes", sz)):
        if vals is not None and len(vals) != n:
            ctx.fail(f"{what} {vals} needs {n} values (one per axis {axes})")
    resized = axes if sc is None else [a for i, a in enumerate(axes) if sc[i] != 1.0]
    if any(xs[a] < 0 for a in resized):
        ctx.fail(f"X of shape {xs}: the resized dims must be known at import time")
    full_roi = None
    if roi_l is not None:
        if len(roi_l) != 2 * n:
            ctx.fail(f"roi {roi_l} needs {2 * n} values")
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = roi_l[i], roi_l[n + i]
    if sz is not None:
        out = list(xs)
        for i, a in enumerate(axes):
            out[a] = sz[i]
        if any(v < 0 for v in out):
            ctx.fail(f"sizes {sz} must be >= 0")
        factors = [out[k] / xs[k] if xs[k] else 1.0 for k in range(r)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                ctx.fail(f"keep_aspect_ratio_policy={policy!r} is not a valid value")
            pick = min if policy == "not_larger" else max
            s = pick(factors[a] for a in axes)
            factors = [s if k in axes else 1.0 for k in range(r)]
            out = [int(s * xs[k] + 0.5) if k in axes else xs[k] for k in range(r)]
        return factors, out, full_roi
    assert sc is not None
    factors = [1.0] * r
    for i, a in enumerate(axes):
        factors[a] = sc[i]
    if not all(0 < f < math.inf for f in factors):  # NaN fails too
        ctx.fail(f"scales {sc} must be finite and > 0")
    out = [int(f * d) if d >= 0 else -1 for f, d in zip(factors, xs)]
    return factors, out, full_roi


def _resize_coeffs(ctx: NodeCtx) -> Any:
    from onnx.reference.ops import op_resize as ref

    a = {k: ctx.attr(k, v) for k, v in _RESIZE_DEFAULTS.items()}
    mode = a["mode"]
    if mode == "nearest":
        if a["antialias"]:
            ctx.fail("antialias=1 with mode 'nearest' is not defined")
        nm = a["nearest_mode"]
        if nm not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            ctx.fail(f"attribute nearest_mode={nm!r} is not a valid value")
        return lambda x, s: ref._nearest_coeffs(x, mode=nm)
    if mode == "linear":
        return ref._linear_coeffs_antialias if a["antialias"] else ref._linear_coeffs
    if mode == "cubic":
        fn = ref._cubic_coeffs_antialias if a["antialias"] else ref._cubic_coeffs
        cc = float(a["cubic_coeff_a"])
        return lambda x, s: fn(x, s, A=cc)
    ctx.fail(f"attribute mode={mode!r}: must be nearest, linear or cubic")


_CTM = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")


def _axis_map(ctx: NodeCtx, coeffs: Any, n: int, m: int, scale: float,
              roi: list[float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Resizing one axis of size n to m is ``y = x @ M + b``: M [n, m] and b [m] from
    ONNX's reference implementation applied to the identity (and to zeros, for the
    extrapolation value of tf_crop_and_resize)."""
    from onnx.reference.ops import op_resize as ref

    kw = {"roi": roi, "extrapolation_value": float(ctx.attr("extrapolation_value", 0.0)),
          "coordinate_transformation_mode": ctx.attr("coordinate_transformation_mode",
                                                     "half_pixel"),
          "exclude_outside": bool(ctx.attr("exclude_outside", 0))}
    try:
        b = ref._interpolate_1d_along_axis(np.zeros((1, n)), 1, scale, m, coeffs, **kw)[0]
        kw["extrapolation_value"] = 0.0
        mat = ref._interpolate_1d_along_axis(np.eye(n), 1, scale, m, coeffs, **kw)
    except Exception as e:  # an attribute combination the reference rejects
        ctx.fail(f"ONNX's reference resize rejects the attributes ({e})")
    return mat, b


def _nearest_pattern(mat: np.ndarray) -> np.ndarray | None:
    """The input index each output copies, when ``mat`` is a selection."""
    if not (np.isin(mat, (0.0, 1.0)).all() and (mat.sum(axis=0) == 1).all()):
        return None
    return mat.argmax(axis=0)


def _resize(ctx: NodeCtx) -> None:
    from ...ir.ops.interp import nearest_index

    x = ctx.var(0)
    xs = ctx.shape(0)
    dt = ctx.dtype(0)
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if ctm not in _CTM:
        ctx.fail(f"attribute coordinate_transformation_mode={ctm!r} is not a valid value")
    factors, out, roi = _resize_sizes(ctx, xs)
    if nbytes([abs(d) for d in out], dt) > MAX_COMPUTED_BYTES * 4:
        ctx.fail(f"the output of shape {out} is implausibly large")
    if any(d == 0 for d in out):
        ctx.fail(f"an output of shape {out} (an empty tensor) is not supported")
    coeffs = _resize_coeffs(ctx)
    maps = {}
    for a, (n, m, s) in enumerate(zip(xs, out, factors)):
        r = None if roi is None else [roi[a], roi[a + len(xs)]]
        if math.isclose(s, 1.0) and m == n and (r is None or (math.isclose(r[0], 0.0) and
                                                              math.isclose(r[1], 1.0))):
            continue
        if n * m > MAX_COMPUTED_BYTES // 8:
            ctx.fail(f"resizing axis {a} from {n} to {m}: the interpolation matrix is too "
                     "large")
        maps[a] = _axis_map(ctx, coeffs, n, m, s, r)
    if not maps:
        ctx.alias(0, x)
        return
    picks = {a: p for a, (mat, b) in maps.items()
             if not b.any() and (p := _nearest_pattern(mat)) is not None}
    # a nearest resize of H and W that fluid's nearest_interp computes: one op the FPGA
    # lowering takes (integer factors: its upsample stage)
    if len(xs) == 4 and set(maps) <= {2, 3} and all(picks.get(a) is not None for a in maps):
        for ac in (False, True):
            if all(np.array_equal(picks[a], nearest_index(xs[a], out[a], ac)) for a in maps):
                ctx.emit("nearest_interp", {"X": x},
                         {"out_h": out[2], "out_w": out[3], "align_corners": ac}, out=0)
                return
    if dt.kind != "f" and not all(picks.get(a) is not None for a in maps):
        ctx.fail(f"{ctx.attr('mode', 'nearest')} resize of a {dt} tensor: fluid-hw "
                 "interpolates float tensors (integer tensors: mode 'nearest' only)")
    rank = len(xs)
    cur = x
    last_axis = max(maps)
    for a, (mat, b) in sorted(maps.items()):
        final = a == last_axis
        perm = list(range(rank))
        perm[a], perm[-1] = perm[-1], perm[a]
        t = cur if a == rank - 1 else ctx.emit("transpose2", {"X": cur}, {"axis": perm})
        w = ctx.param(mat.astype(dt), f"resize{a}")
        y = ctx.emit("mul", {"X": t, "Y": w}, {"x_num_col_dims": rank - 1},
                     out=0 if final and a == rank - 1 and not b.any() else None)
        if b.any():
            y = ctx.emit("elementwise_add", {"X": y, "Y": ctx.param(b.astype(dt),
                                                                    f"extrapolate{a}")},
                         {"axis": -1}, out=0 if final and a == rank - 1 else None)
        if a != rank - 1:
            y = ctx.emit("transpose2", {"X": y}, {"axis": perm}, out=0 if final else None)
        cur = y


# -- Einsum ---------------------------------------------------------------------------------

def _einsum_terms(ctx: NodeCtx, eq: str) -> tuple[list[str], str]:
    """The operands' letters and the output's, with each ellipsis spelled out as upper-case
    letters (right-aligned: the last dims an ellipsis covers share letters across the
    operands) and an implicit output made explicit."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != ctx.count():
        ctx.fail(f"equation {eq!r} has {len(terms)} operand(s), the node {ctx.count()} "
                 "input(s)")
    if len(terms) not in (1, 2):
        ctx.fail(f"equation {eq!r}: fluid-hw takes one or two operands")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    width = 0
    for k, t in enumerate(terms):
        if t.count("...") > 1 or ("..." not in t and len(t) != ctx.rank(k)) or \
                len(t.replace("...", "")) > ctx.rank(k):
            ctx.fail(f"equation {eq!r}: operand {k} {t!r} does not match its rank "
                     f"{ctx.rank(k)}")
        if "..." in t:
            width = max(width, ctx.rank(k) - len(t.replace("...", "")))
    if width > len(spare):
        ctx.fail(f"equation {eq!r}: an ellipsis over {width} dims")
    ell = "".join(spare[:width])
    out = []
    for k, t in enumerate(terms):
        n = ctx.rank(k) - len(t.replace("...", ""))
        out.append(t.replace("...", ell[width - n:]))
    if not arrow:  # implicit output: the ellipsis, then the letters used once, sorted
        once = sorted(c for c in set(lhs) - {",", "."} if lhs.count(c) == 1)
        rhs = ell + "".join(once)
    else:
        if rhs.count("...") > 1:
            ctx.fail(f"equation {eq!r}: bad output")
        rhs = rhs.replace("...", ell)
    return out, rhs


def _einsum_diagonal(ctx: NodeCtx, v: str, term: str, shape: list[int]
                     ) -> tuple[str, str, list[int]]:
    """An operand whose term repeats a letter, reduced to that letter's diagonal: cells
    off it zeroed (``where`` with an eye mask) and the second axis summed away."""
    while True:
        dup = next((c for c in term if term.count(c) > 1), None)
        if dup is None:
            return v, term, shape
        p = term.index(dup)
        q = term.index(dup, p + 1)
        n = shape[p]
        if n < 0 or shape[q] != n:
            ctx.fail(f"the dims {shape[p]} and {shape[q]} of letter {dup!r} (a diagonal) must "
                     "be equal and known at import time")
        if nbytes([n, n], np.dtype(bool)) > MAX_COMPUTED_BYTES:
            ctx.fail(f"a diagonal of {n} x {n} is implausibly large")
        mask = np.eye(n, dtype=bool).reshape([n if k in (p, q) else 1
                                              for k in range(len(shape))])
        zero = ctx.param(np.zeros([1], dtypes.to_numpy(ctx.imp.block.var(v).dtype)), "zero")
        v = ctx.emit("where", {"Condition": ctx.param(mask, "eye"), "X": v, "Y": zero})
        v = ctx.emit("reduce_sum", {"X": v}, {"dim": [q], "keep_dim": False}, hint="diagonal")
        term = term[:q] + term[q + 1:]
        shape = shape[:q] + shape[q + 1:]


def _einsum(ctx: NodeCtx) -> None:
    """One or two operands: an ellipsis spelled out as letters, repeated letters (a
    diagonal) reduced first; then transposes, sums (reduce_sum) and one batched
    matmul."""
    eq = str(ctx.attr("equation", "")).replace(" ", "")
    terms, rhs = _einsum_terms(ctx, eq)
    if len(set(rhs)) != len(rhs) or not set(rhs) <= set("".join(terms)):
        ctx.fail(f"equation {eq!r}: bad output {rhs!r}")
    vs, shapes = [], []
    for k, t in enumerate(terms):
        v, t2, sh = _einsum_diagonal(ctx, ctx.var(k), t, ctx.shape(k))
        vs.append(v)
        shapes.append(sh)
        terms[k] = t2

    def reduce_only(i: int, keep: str) -> tuple[str, str]:
        t = terms[i]
        drop = [k for k, c in enumerate(t) if c not in keep]
        v = vs[i]
        if drop:
            v = ctx.emit("reduce_sum", {"X": v}, {"dim": drop, "keep_dim": False})
        return v, "".join(c for c in t if c in keep)

    def permute(v: str, have: str, want: str, out: int | None) -> str:
        if have == want:
            if out is not None:
                ctx.alias(out, v)
            return v
        return ctx.emit("transpose2", {"X": v}, {"axis": [have.index(c) for c in want]},
                        out=out)

    if len(terms) == 1:
        v, have = reduce_only(0, rhs)
        if not have:
            _squeeze_to_scalar(ctx, v, 0)
            return
        permute(v, have, rhs, 0)
        return
    a, b = terms
    if ctx.dtype(0) != ctx.dtype(1) or ctx.dtype(0).kind != "f":
        ctx.fail(f"operands are {ctx.dtype(0)} and {ctx.dtype(1)}; fluid-hw's Einsum takes "
                 "two float tensors of one type")
    batch = "".join(c for c in a if c in b and c in rhs)
    contract = "".join(c for c in a if c in b and c not in rhs)
    va, ha = reduce_only(0, b + rhs)
    vb, hb = reduce_only(1, a + rhs)
    m = "".join(c for c in ha if c not in b)
    n = "".join(c for c in hb if c not in a)
    sz: dict[str, int] = {}
    for i, h in ((0, ha), (1, hb)):
        for c in h:
            d = shapes[i][terms[i].index(c)]
            if c in sz and d != sz[c]:
                ctx.fail(f"equation {eq!r}: letter {c!r} is {sz[c]} in one operand and {d} in "
                         "the other (fluid-hw does not broadcast them)")
            sz.setdefault(c, d)
    if any(sz[c] < 0 for c in m + n + contract) or sum(sz[c] < 0 for c in batch) > 1:
        ctx.fail(f"equation {eq!r}: the non-batch dims must be known at import time")

    # A -> [batch..., M, K], B -> [batch..., K, N]
    def grouped(v: str, have: str, order: list[str]) -> str:
        v = permute(v, have, "".join(order), None)
        dims = [sz[c] if sz[c] >= 0 else -1 for c in batch]
        prod = [math.prod(sz[c] for c in g) if g else 1 for g in order[1:]]
        return ctx.emit("reshape2", {"X": v}, {"shape": [*dims, *prod]})

    am = grouped(va, ha, [batch, m, contract])
    bm = grouped(vb, hb, [batch, contract, n])
    y = ctx.emit("matmul", {"X": am, "Y": bm})
    have = batch + m + n
    y = ctx.emit("reshape2", {"X": y},
                 {"shape": [sz[c] if sz[c] >= 0 else -1 for c in have]})
    if not rhs:
        _squeeze_to_scalar(ctx, y, 0)
        return
    permute(y, have, rhs, 0)


#: the import table's entries of this module
MORE: dict[str, OpImport] = {
    "Where": OpImport(_where, "where"),
    "Expand": OpImport(_expand, "expand (unsqueeze2)", (1,)),
    "Tile": OpImport(_tile, "expand", (1,)),
    "GatherElements": OpImport(_gather_elements, "equal, where, reduce_sum (unsqueeze2)"),
    "Trilu": OpImport(_trilu, "where (a constant mask)", (1,)),
    "ReverseSequence": OpImport(_reverse_sequence, "less_than, where, equal, reduce_sum "
                                "(elementwise ops)"),
    "OneHot": OpImport(one_hot, "equal, where (unsqueeze2)", (1,)),
    "Hardmax": OpImport(hardmax, "arg_max, equal, cast"),
    "EyeLike": OpImport(eye_like, "none (a constant)"),
    "LpNormalization": OpImport(_lp_norm, "abs or square, reduce_sum, sqrt, elementwise_div"),
    "LpPool": OpImport(_lp_pool, "abs/square/elementwise_pow, taps (strided_slice, sum), "
                       "sqrt/elementwise_pow"),
    "IsNaN": OpImport(_is_nan, "not_equal"),
    "IsInf": OpImport(_is_inf, "abs, equal"),
    "Mod": OpImport(_mod, "elementwise_mod, or elementwise_fmod (fmod=1)"),
    "ScatterElements": OpImport(scatter_elements, "equal, where, reduce_* (unsqueeze2), "
                                "where / elementwise ops"),
    "GatherND": OpImport(gather_nd, "lookup_table of the linear positions (elementwise ops, "
                         "reduce_sum, reshape2)"),
    "ScatterND": OpImport(scatter_nd, "equal, where, reduce_* (reshape2), where / "
                          "elementwise ops"),
    "ConvTranspose": OpImport(conv_transpose, "conv2d of the zero-inserted input "
                              "(unsqueeze2, pad, reshape2, slice)", (1,)),
    "CumSum": OpImport(_cumsum, "cumsum", (1,)),
    "CumProd": OpImport(_cumsum, "cumprod", (1,)),
    "ConstantOfShape": OpImport(_constant_of_shape, "none (a constant)", (0,)),
    "Range": OpImport(_range, "none (a constant)", (0, 1, 2)),
    "TopK": OpImport(_top_k, "top_k (transpose2, scale)", (1,)),
    "LRN": OpImport(_lrn, "square, pool2d, scale, elementwise_pow/div"),
    "HardSwish": OpImport(_hard_swish, "hard_swish"),
    "Gelu": OpImport(_gelu, "erf or tanh, scale, elementwise_mul"),
    "InstanceNormalization": OpImport(_instance_norm,
                                      "reduce_mean, elementwise ops, sqrt, reciprocal"),
    "LayerNormalization": OpImport(_layer_norm,
                                   "reduce_mean, elementwise ops, sqrt, reciprocal"),
    "Resize": OpImport(_resize, "nearest_interp, or mul per axis (transpose2)",
                       (1, 2, 3)),
    "Einsum": OpImport(_einsum, "transpose2, reduce_sum, reshape2, matmul"),
}

