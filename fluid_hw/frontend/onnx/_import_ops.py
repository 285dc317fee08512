"""ONNX op type -> how its node becomes fluid ops: the import table.

One entry per ONNX op type in :data:`IMPORTERS`: one made from each one-to-one pair
of :data:`._pairs.PAIRS` (unless the pair says otherwise), and the op-specific
converters below.  A converter reads the node through a
:class:`~._context.NodeCtx` and appends fluid ops with ``ctx.emit``;
when the node uses a feature fluid-hw lacks it calls ``ctx.fail(reason)`` and the
importer lists the node.  Attribute defaults and version differences follow the
ONNX operator specification for opsets 11 and newer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.registry import has_op
from ._context import NodeCtx
from ._dtypes import np_dtype_of, onnx_type_name
from ._pairs import PAIRS, Pair
from ._sizes import MAX_COMPUTED_BYTES, nbytes

Converter = Callable[[NodeCtx], None]

_I32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class OpImport:
    """How one ONNX op type is imported: the converter and the fluid ops it emits."""

    fn: Converter
    fluid: str  # for the docs: the fluid op(s) it becomes
    #: inputs whose values fluid-hw needs at import time (they become attributes)
    const_inputs: tuple[int, ...] = ()


def _clamp32(v: int) -> int:
    return min(max(int(v), _I32[0]), _I32[1])


def _norm(axis: int, rank: int, ctx: NodeCtx, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def _enum(dt: np.dtype) -> int:
    return dtypes.to_enum(dt)


def _f32_exact(v: float) -> bool:
    """``v`` survives a float attribute (stored as float32) unchanged."""
    return math.isinf(v) or float(np.float32(v)) == v


def _cast(ctx: NodeCtx, var: str, src: np.dtype, dst: np.dtype) -> str:
    if src == dst:
        return var
    return ctx.emit("cast", {"X": var}, {"in_dtype": _enum(src), "out_dtype": _enum(dst)})


def _squeeze_to_scalar(ctx: NodeCtx, var: str, out: int) -> str:
    """Fluid gives [1] where ONNX gives a rank-0 tensor: reshape to []."""
    return ctx.emit("reshape2", {"X": var}, {"shape": []}, out=out)


def _from_pair(p: Pair) -> Converter:
    """The converter of a one-to-one pair: inputs, output and attributes renamed."""

    def conv(ctx: NodeCtx) -> None:
        ins: dict[str, Any]
        if p.form == "variadic":
            ins = {"X": [ctx.var(i) for i in range(ctx.count()) if ctx.has(i)]}
        elif p.form == "binary":
            ins = {"X": ctx.var(0), "Y": ctx.var(1)}
        else:
            ins = {"X": ctx.var(0)}
        attrs = {**p.fixed, **{a.fluid: a.convert(ctx.attr(a.onnx, a.default))
                               for a in p.attrs}}
        ctx.emit(p.fluid, ins, attrs, out=0)

    return conv


# -- element-wise ----------------------------------------------------------------------

def _neg(ctx: NodeCtx) -> None:
    ctx.emit("scale", {"X": ctx.var(0)}, {"scale": -1.0}, out=0)


def _scalar_const(ctx: NodeCtx, i: int, other: int) -> float | None:
    """Input ``i`` as a Python float when it is a one-element float32 constant that
    broadcasts into input ``other`` without changing its shape."""
    c = ctx.const(i)
    if c is None or c.size != 1 or c.dtype != np.float32 or ctx.const(other) is not None:
        return None
    if ctx.dtype(other) != np.float32 or c.ndim > ctx.rank(other):
        return None
    return float(c.reshape(()))


#: scalar-constant forms of the binary ops: (scale, bias) of ``scale`` for X op c, c op X
_AS_SCALE: dict[str, tuple[Callable[[float], tuple[float, float]],
                           Callable[[float], tuple[float, float]]]] = {
    "elementwise_add": (lambda c: (1.0, c), lambda c: (1.0, c)),
    "elementwise_sub": (lambda c: (1.0, -c), lambda c: (-1.0, c)),
    "elementwise_mul": (lambda c: (c, 0.0), lambda c: (c, 0.0)),
}


def _binary(fluid: str) -> Converter:
    """Numpy broadcasting is Fluid's rule with axis -1.  A float32 scalar constant
    operand of add/sub/mul becomes a ``scale`` op."""

    def conv(ctx: NodeCtx) -> None:
        forms = _AS_SCALE.get(fluid)
        if forms is not None:
            for i, other, form in ((1, 0, forms[0]), (0, 1, forms[1])):
                c = _scalar_const(ctx, i, other)
                if c is not None:
                    s, b = form(c)
                    ctx.emit("scale", {"X": ctx.var(other)}, {"scale": s, "bias": b}, out=0)
                    return
        if ctx.dtype(0) != ctx.dtype(1):
            ctx.fail(f"operands have different types {ctx.dtype(0)} and {ctx.dtype(1)}")
        for i, other in ((1, 0), (0, 1)) if fluid in _COMMUTATIVE else ((1, 0),):
            arr = _channel_const(ctx, i, other)
            if arr is not None:  # Fluid's per-channel form: a [C] operand along axis 1
                y = ctx.param(arr, "channel", i)
                ctx.emit(fluid, {"X": ctx.var(other), "Y": y}, {"axis": 1}, out=0)
                return
        ctx.emit(fluid, {"X": ctx.var(0), "Y": ctx.var(1)}, {"axis": -1}, out=0)

    return conv


_COMMUTATIVE = ("elementwise_add", "elementwise_mul", "elementwise_max", "elementwise_min")


def _channel_const(ctx: NodeCtx, i: int, other: int) -> np.ndarray | None:
    """Input ``i`` as a ``[C]`` array when it is a constant of shape ``[1, C, 1, ...]``
    (or ``[C, 1, ...]``) broadcasting along axis 1 of a non-constant input ``other`` of
    rank >= 3 -- an exported per-channel bias or scale: as Fluid writes it, the
    convolution fusion passes recognise it."""
    c = ctx.const(i)
    if c is None or ctx.const(other) is not None or c.ndim < 2:
        return None
    rank = ctx.rank(other)
    if rank < 3 or c.ndim > rank:
        return None
    full = (1,) * (rank - c.ndim) + tuple(c.shape)
    if full[0] != 1 or any(d != 1 for d in full[2:]) or full[1] < 2:
        return None
    return np.ascontiguousarray(c.reshape(-1))


def _pow(ctx: NodeCtx) -> None:
    x = ctx.var(0)
    xt = ctx.dtype(0)
    c = ctx.const(1)
    y = ctx.param(c.astype(xt), "exponent") if c is not None and c.dtype != xt else None
    if y is None:
        y = _cast(ctx, ctx.var(1), ctx.dtype(1), xt)
    ctx.emit("elementwise_pow", {"X": x, "Y": y}, {"axis": -1}, out=0)


def _variadic(fluid: str, mean: bool = False) -> Converter:
    """Max/Min/Sum/Mean of any number of inputs: a chain of binary ops."""

    def conv(ctx: NodeCtx) -> None:
        names = [ctx.var(i) for i in range(ctx.count()) if ctx.has(i)]
        if not names:
            ctx.fail(f"every input is omitted (empty names {list(ctx.node.input)}); "
                     f"{ctx.op_type} needs at least one input tensor")
        if len(names) == 1 and not mean:
            ctx.alias(0, names[0])
            return
        acc = names[0]
        for k, n in enumerate(names[1:], 1):
            last = k == len(names) - 1 and not mean
            acc = ctx.emit(fluid, {"X": acc, "Y": n}, {"axis": -1}, out=0 if last else None)
        if mean:
            ctx.emit("scale", {"X": acc}, {"scale": 1.0 / len(names)}, out=0)

    return conv


def _softmax(fluid: str) -> Converter:
    """Opset >= 13: along one axis.  Before: X flattened to 2-D at ``axis`` (default 1)."""

    def conv(ctx: NodeCtx) -> None:
        x = ctx.var(0)
        rank = ctx.rank(0)
        if ctx.opset >= 13:
            axis = _norm(ctx.attr("axis", -1), rank, ctx)
            ctx.emit(fluid, {"X": x}, {"axis": axis}, out=0)
            return
        axis = _norm(ctx.attr("axis", 1), rank, ctx)
        if axis == rank - 1:
            ctx.emit(fluid, {"X": x}, {"axis": -1}, out=0)
            return
        shape = ctx.shape(0)
        if sum(d < 0 for d in shape) > 1 or any(d < 0 for d in shape[axis:]):
            ctx.fail(f"opset {ctx.opset} {ctx.op_type} flattens X at axis {axis}; that needs "
                     f"the dims from axis {axis} on known, X has shape {shape}")
        flat = ctx.emit("flatten2", {"X": x}, {"axis": axis})
        y = ctx.emit(fluid, {"X": flat}, {"axis": -1})
        ctx.emit("reshape2", {"X": y}, {"shape": shape}, out=0)

    return conv


def _clip(ctx: NodeCtx) -> None:
    x = ctx.var(0)
    dt = ctx.dtype(0)
    bounds: list[float | None] = []
    for i in (1, 2):
        if not ctx.has(i):
            bounds.append(None)
            continue
        c = ctx.const(i)
        bounds.append(float(c.reshape(())) if c is not None and c.size == 1 else math.nan)
    lo, hi = bounds
    exact = all(b is None or (not math.isnan(b) and _f32_exact(b)) for b in bounds)
    if exact:
        ctx.emit("clip", {"X": x}, {"min": -math.inf if lo is None else lo,
                                    "max": math.inf if hi is None else hi}, out=0)
        return
    # bounds computed by the graph, or not exact as float attributes: max then min
    out = x
    for i, fluid in ((1, "elementwise_max"), (2, "elementwise_min")):
        if ctx.has(i):
            b = _cast(ctx, ctx.var(i), ctx.dtype(i), dt)
            last = i == 2 or not ctx.has(2)
            out = ctx.emit(fluid, {"X": out, "Y": b}, {"axis": -1}, out=0 if last else None)
    if out == x:
        ctx.alias(0, x)


# -- matrix products ----------------------------------------------------------------------

def _gemm(ctx: NodeCtx) -> None:
    """Y = alpha * A' B' + beta * C.  A constant B becomes a ``mul`` weight (transposed
    and scaled at import, as Fluid's fc); otherwise ``matmul``."""
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    ta, tb = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    for i, what in ((0, "A"), (1, "B")):
        if ctx.rank(i) != 2:
            ctx.fail(f"{what} (input #{i}) has shape {ctx.shape(i)}; Gemm multiplies 2-D "
                     "matrices (use MatMul for other ranks)")
    types = [str(ctx.dtype(i)) for i in range(3) if ctx.has(i)]
    if len(set(types)) > 1:
        ctx.fail(f"A, B, C have types {types}; Gemm needs one type for all")
    if ctx.dtype(0).kind != "f" and not (alpha.is_integer() and beta.is_integer()):
        ctx.fail(f"alpha={alpha}, beta={beta} on {ctx.dtype(0)} matrices: integer Gemm "
                 "needs integral alpha and beta")
    a = ctx.var(0)
    b = ctx.const(1)
    use_c = ctx.has(2) and beta != 0.0
    out = 0 if not use_c else None
    if b is not None:
        if tb or alpha != 1.0:
            w = b.T if tb else b
            if alpha != 1.0:
                w = (w * w.dtype.type(alpha)).astype(w.dtype)
            wv = ctx.param(np.ascontiguousarray(w), "T" if tb else "scaled", source=1)
        else:
            wv = ctx.var(1)
        if ta:
            a = ctx.emit("transpose2", {"X": a}, {"axis": [1, 0]})
        y = ctx.emit("mul", {"X": a, "Y": wv}, out=out)
    else:
        y = ctx.emit("matmul", {"X": a, "Y": ctx.var(1)},
                     {"transpose_X": ta, "transpose_Y": tb, "alpha": alpha}, out=out)
    if not use_c:
        return
    c = ctx.const(2)
    if c is not None:
        cv = ctx.param((c * c.dtype.type(beta)).astype(c.dtype), "scaled", source=2) \
            if beta != 1.0 else ctx.var(2)
    else:
        cv = ctx.var(2) if beta == 1.0 else ctx.emit("scale", {"X": ctx.var(2)},
                                                      {"scale": beta})
    ctx.emit("elementwise_add", {"X": y, "Y": cv}, {"axis": -1}, out=0)


def _batch_dims_ok(xs: Sequence[int], ys: Sequence[int]) -> bool:
    """Fluid's matmul batches like numpy's when the batch dims agree or one side has none."""
    xb, yb = list(xs[:-2]), list(ys[:-2])
    if not xb or not yb:
        return True
    return len(xb) == len(yb) and all(a == b or a < 0 or b < 0 for a, b in zip(xb, yb))


def _broadcast_batch(ctx: NodeCtx, xs: list[int], ys: list[int]) -> tuple[str, str]:
    """Both operands tiled (``expand``) to numpy's broadcast of their batch dims, which
    fluid's matmul needs equal."""
    n = max(len(xs), len(ys)) - 2
    xb, yb = [1] * (n - len(xs) + 2) + xs[:-2], [1] * (n - len(ys) + 2) + ys[:-2]
    if any(d < 0 for d in xb + yb):
        ctx.fail(f"batch dims of {xs} and {ys} differ and are not all known at import time; "
                 "fluid-hw's matmul needs equal batch dims or one operand of rank <= 2")
    if any(p != q and 1 not in (p, q) for p, q in zip(xb, yb)):
        ctx.fail(f"batch dims of {xs} and {ys} do not broadcast")
    target = [max(p, q) for p, q in zip(xb, yb)]
    outs = []
    for i, (shape, batch) in enumerate(((xs, xb), (ys, yb))):
        v = ctx.var(i)
        lead = n + 2 - len(shape)
        if lead:
            v = ctx.emit("unsqueeze2", {"X": v}, {"axes": list(range(lead))})
        times = [t // d for t, d in zip(target, batch)]
        if any(t != 1 for t in times):
            v = ctx.emit("expand", {"X": v}, {"expand_times": [*times, 1, 1]})
        outs.append(v)
    return outs[0], outs[1]


def _matmul(ctx: NodeCtx) -> None:
    b = ctx.const(1)
    xs, ys = ctx.shape(0), ctx.shape(1)
    if b is not None and b.ndim == 2 and len(xs) >= 2:
        ctx.emit("mul", {"X": ctx.var(0), "Y": ctx.var(1)}, {"x_num_col_dims": len(xs) - 1},
                 out=0)
        return
    a, b_var = ctx.var(0), ctx.var(1)
    if not _batch_dims_ok(xs, ys):
        a, b_var = _broadcast_batch(ctx, xs, ys)
    scalar = len(xs) == 1 and len(ys) == 1
    y = ctx.emit("matmul", {"X": a, "Y": b_var}, out=None if scalar else 0)
    if scalar:
        _squeeze_to_scalar(ctx, y, 0)


# -- convolution and pooling --------------------------------------------------------------

def _spatial(ctx: NodeCtx, what: str) -> int:
    rank = ctx.rank(0)
    if rank not in (3, 4):
        ctx.fail(f"{what} over {rank - 2} spatial dims; fluid-hw has 1-D (as 2-D) and 2-D "
                 f"{what} only")
    return rank - 2


def _ints_attr(ctx: NodeCtx, name: str, n: int, default: int) -> list[int]:
    v = ctx.attr(name)
    out = [default] * n if v is None or len(v) == 0 else [int(x) for x in v]
    if len(out) != n:
        ctx.fail(f"attribute {name} {out} needs {n} values")
    return out


def pool_window(ctx: NodeCtx, what: str) -> tuple[int, list[int], list[int], list[int]]:
    """A pooling node's spatial rank and its kernel_shape, strides and dilations (each
    entry >= 1); ``what`` names the node kind in the rank error."""
    rank = ctx.rank(0)
    if rank < 3:
        ctx.fail(f"input of rank {rank}; {what} needs [N, C, spatial...]")
    n = rank - 2
    kernel = _ints_attr(ctx, "kernel_shape", n, 0)
    strides = _ints_attr(ctx, "strides", n, 1)
    dilations = _ints_attr(ctx, "dilations", n, 1)
    for name, vals in (("kernel_shape", kernel), ("strides", strides),
                       ("dilations", dilations)):
        if any(v < 1 for v in vals):
            ctx.fail(f"attribute {name}={vals}: every entry must be >= 1")
    return n, kernel, strides, dilations


def _explicit_pads(ctx: NodeCtx, in_hw: Sequence[int], kernel: Sequence[int],
                   strides: Sequence[int], dilations: Sequence[int], n: int
                   ) -> tuple[list[int] | None, str]:
    """ONNX pads/auto_pad -> fluid paddings [top, bottom, left, right] (2-D) or [b, e]
    (1-D) and a padding_algorithm; None paddings mean fluid's SAME."""
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto == "VALID":
        return [0] * (2 * n), "EXPLICIT"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        if any(d < 0 for d in in_hw):
            if auto == "SAME_UPPER" and all(d == 1 for d in dilations):
                return None, "SAME"
            ctx.fail(f"auto_pad {auto} with dilations {list(dilations)} needs the input's "
                     f"spatial size known, got {list(in_hw)}")
        pads = []
        for size, k, s, d in zip(in_hw, kernel, strides, dilations):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return [p for pair in pads for p in pair], "EXPLICIT"
    if auto not in ("NOTSET", ""):
        ctx.fail(f"auto_pad {auto!r} is not a valid value")
    p = _ints_attr(ctx, "pads", 2 * n, 0)
    if any(v < 0 for v in p):
        ctx.fail(f"negative pads {p}")
    return [v for i in range(n) for v in (p[i], p[n + i])], "EXPLICIT"


def _to_2d(ctx: NodeCtx, x: str, n: int) -> str:
    """A 1-D [N, C, L] input as [N, C, 1, L]."""
    return x if n == 2 else ctx.emit("unsqueeze2", {"X": x}, {"axes": [2]})


def _pairs_2d(vals: list[int], n: int, pad_value: int) -> list[int]:
    """Per-axis values of a 1-D window op for its 2-D form (a leading axis of size 1);
    paddings come as [begin, end] per axis."""
    if n == 2:
        return vals
    return [pad_value] * (len(vals) // n) + vals


def _finish_2d(ctx: NodeCtx, y: str, n: int, out: int | None = 0) -> str:
    if n == 2:
        if out is not None:
            ctx.alias(out, y)
        return y
    return ctx.emit("squeeze2", {"X": y}, {"axes": [2]}, out=out)


def _conv(ctx: NodeCtx) -> None:
    n = _spatial(ctx, "convolution")
    xs = ctx.shape(0)
    w = ctx.const(1)
    ws = ctx.shape(1)
    if len(ws) != n + 2:
        ctx.fail(f"weight of shape {ws} does not fit a {n}-D convolution")
    kernel = ws[2:]
    ks = ctx.attr("kernel_shape")
    if ks and [int(k) for k in ks] != list(kernel) and all(k > 0 for k in kernel):
        ctx.fail(f"kernel_shape {list(ks)} disagrees with the weight's shape {ws}")
    strides = _ints_attr(ctx, "strides", n, 1)
    dil = _ints_attr(ctx, "dilations", n, 1)
    pads, algo = _explicit_pads(ctx, xs[2:], kernel, strides, dil, n)
    if w is not None:
        wv = ctx.param(w.reshape(*w.shape[:2], 1, *w.shape[2:]), "2d", source=1) if n == 1 \
            else ctx.var(1)
    else:
        wv = _to_2d(ctx, ctx.var(1), n)
    attrs: dict[str, Any] = {
        "strides": _pairs_2d(strides, n, 1), "dilations": _pairs_2d(dil, n, 1),
        "groups": int(ctx.attr("group", 1)), "padding_algorithm": algo,
        "paddings": [0, 0] if pads is None else _pairs_2d(pads, n, 0),
    }
    if pads is None and n == 1:
        attrs["paddings"] = [0, 0]
    has_bias = ctx.has(2)
    y = ctx.emit("conv2d", {"Input": _to_2d(ctx, ctx.var(0), n), "Filter": wv}, attrs,
                 out=0 if n == 2 and not has_bias else None, slot="Output")
    if has_bias:
        y = ctx.emit("elementwise_add", {"X": y, "Y": ctx.var(2)}, {"axis": 1},
                     out=0 if n == 2 else None)
    if n == 1:
        _finish_2d(ctx, y, n)


def _onnx_pool_out(size: int, k: int, s: int, pb: int, pe: int, ceil: bool) -> int:
    """ONNX's (and onnxruntime's) pooled extent: with ceil_mode the last window must
    start inside the input or its begin padding."""
    room = size + pb + pe - k
    if not ceil:
        return room // s + 1
    out = -(-room // s) + 1
    if (out - 1) * s >= size + pb:
        out -= 1
    return out


def _pool(kind: str) -> Converter:
    def conv(ctx: NodeCtx) -> None:
        n, kernel, strides, dilations = pool_window(ctx, "pooling")
        if n > 2 or any(d != 1 for d in dilations) or ctx.wants(1):
            # 3-D windows, dilations, MaxPool's Indices: window taps
            from ._import_pool import pool_taps

            pool_taps(ctx, kind, n, kernel, strides, dilations)
            return
        src = ctx.dtype(0)
        # 8/16-bit integers are exact in float32: max-pool them there
        wrap = src.kind in "iu" and src.itemsize <= 2 and kind == "max"
        if src.kind != "f" and not wrap:
            ctx.fail(f"{kind} pooling of {src} tensors; fluid-hw's pool2d takes floats")
        xs = ctx.shape(0)
        pads, algo = _explicit_pads(ctx, xs[2:], kernel, strides, [1] * n, n)
        ceil = bool(ctx.attr("ceil_mode", 0))
        exclusive = not bool(ctx.attr("count_include_pad", 0))
        fluid_ceil = False
        if pads is not None and ceil:
            if any(d < 0 for d in xs[2:]):
                fluid_ceil = True  # run-time size: fluid's rule (no last-window drop)
            else:
                # extend the end padding so floor mode gives ONNX's ceil-mode size
                for i in range(n):
                    size, k, s = xs[2 + i], kernel[i], strides[i]
                    want = _onnx_pool_out(size, k, s, pads[2 * i], pads[2 * i + 1], True)
                    extra = max((want - 1) * s + k - (size + pads[2 * i] + pads[2 * i + 1]), 0)
                    if extra and kind == "avg" and not exclusive:
                        ctx.fail("ceil_mode with count_include_pad: the window over the edge "
                                 "would count cells onnxruntime leaves out")
                    pads[2 * i + 1] += extra
        attrs = {"pooling_type": kind, "ksize": _pairs_2d(kernel, n, 1),
                 "strides": _pairs_2d(strides, n, 1),
                 "paddings": [0, 0] if pads is None else _pairs_2d(pads, n, 0),
                 "padding_algorithm": algo, "ceil_mode": fluid_ceil, "exclusive": exclusive}
        x = _cast(ctx, ctx.var(0), src, np.dtype(np.float32)) if wrap else ctx.var(0)
        y = ctx.emit("pool2d", {"X": _to_2d(ctx, x, n)}, attrs,
                     out=0 if n == 2 and not wrap else None)
        y = _finish_2d(ctx, y, n, out=0 if n == 1 and not wrap else None)
        if wrap:
            ctx.emit("cast", {"X": y}, {"in_dtype": _enum(np.dtype(np.float32)),
                                        "out_dtype": _enum(src)}, out=0)

    return conv


def _global_pool(kind: str) -> Converter:
    def conv(ctx: NodeCtx) -> None:
        rank = ctx.rank(0)
        if rank < 3:
            ctx.fail(f"input of rank {rank}; global pooling needs [N, C, ...]")
        if rank == 4 and ctx.dtype(0).kind == "f":
            ctx.emit("pool2d", {"X": ctx.var(0)},
                     {"pooling_type": kind, "ksize": [1, 1], "global_pooling": True}, out=0)
            return
        red = "reduce_max" if kind == "max" else "reduce_mean"
        ctx.emit(red, {"X": ctx.var(0)}, {"dim": list(range(2, rank)), "keep_dim": True},
                 out=0)

    return conv


def _batch_norm(ctx: NodeCtx) -> None:
    if ctx.attr("training_mode", 0):
        from ._import_more import batch_norm_training

        batch_norm_training(ctx)
        return
    if any(ctx.wants(j) for j in range(1, ctx.out_count())):
        ctx.fail("the running-mean / saved-statistics outputs without training_mode (opsets "
                 "before 14) are not supported; export the model for inference or with "
                 "opset >= 14")
    eps = float(ctx.attr("epsilon", 1e-5))
    var_in = ctx.var(4)
    if eps > 1e-3:
        # fluid caps epsilon at 1e-3: fold the excess into a constant variance
        v = ctx.const(4)
        if v is not None:
            var_in = ctx.param((v.astype(np.float64) + (eps - 1e-5)).astype(v.dtype), "eps",
                               source=4)
        else:
            var_in = ctx.emit("scale", {"X": var_in}, {"bias": eps - 1e-5}, hint="eps")
        eps = 1e-5
    y = ctx.new_var(0)
    mean = ctx.var(3)
    ctx.emit_op("batch_norm",
                {"X": ctx.var(0), "Scale": ctx.var(1), "Bias": ctx.var(2), "Mean": mean,
                 "Variance": var_in},
                {"Y": [y], "MeanOut": [mean], "VarianceOut": [var_in]},
                {"epsilon": eps, "momentum": float(ctx.attr("momentum", 0.9)), "is_test": True})


# -- shapes ---------------------------------------------------------------------------

def _flatten(ctx: NodeCtx) -> None:
    rank = ctx.rank(0)
    axis = ctx.attr("axis", 1)
    if not -rank <= axis <= rank:
        ctx.fail(f"axis {axis} out of range for rank {rank}")
    ctx.emit("flatten2", {"X": ctx.var(0)}, {"axis": axis % rank if axis < 0 else axis}, out=0)


def _reshape(ctx: NodeCtx) -> None:
    target = ctx.shape_values(1, "shape")
    dims = ctx.dims(0)
    if ctx.attr("allowzero", 0) and 0 in target:
        ctx.fail("allowzero=1 with a 0 in the shape (an empty tensor) is not supported")
    out: list[int] = []
    for k, t in enumerate(target):
        if isinstance(t, str):
            out.append(0 if k < len(dims) and dims[k] == t else -1)
        else:
            out.append(int(t))
    if out.count(-1) > 1:
        ctx.fail(f"shape {target} has more than one dim unknown at import time")
    ctx.emit("reshape2", {"X": ctx.var(0)}, {"shape": out}, out=0)


def _transpose(ctx: NodeCtx) -> None:
    rank = ctx.rank(0)
    perm = ctx.attr("perm") or list(range(rank))[::-1]
    ctx.emit("transpose2", {"X": ctx.var(0)}, {"axis": [int(p) for p in perm]}, out=0)


def _split(ctx: NodeCtx) -> None:
    rank = ctx.rank(0)
    axis = _norm(int(ctx.attr("axis", 0)), rank, ctx)
    n = ctx.out_count()
    dim = ctx.shape(0)[axis]
    if ctx.opset >= 13 and ctx.has(1):
        sizes = ctx.ints(1, "split")
    elif ctx.opset < 13 and ctx.attr("split"):
        sizes = [int(v) for v in ctx.attr("split")]
    elif ctx.attr("num_outputs") is not None and dim >= 0:
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    else:
        sizes = []
    if any(s < 0 for s in sizes):
        ctx.fail(f"split sizes {sizes} must be >= 0")
    outs = [ctx.new_var(j) if ctx.wants(j) else ctx.new_var(None, f"unused{j}")
            for j in range(n)]
    attrs: dict[str, Any] = {"axis": axis}
    if sizes:
        attrs["sections"] = sizes
    else:
        attrs["num"] = n
    ctx.emit_op("split", {"X": ctx.var(0)}, {"Out": outs}, attrs)


def _slice(ctx: NodeCtx) -> None:
    starts, ends = ctx.ints(1, "starts"), ctx.ints(2, "ends")
    axes = ctx.ints(3, "axes") if ctx.has(3) else list(range(len(starts)))
    steps = ctx.ints(4, "steps") if ctx.has(4) else [1] * len(starts)
    x = ctx.var(0)
    rank = ctx.rank(0)
    axes = [_norm(a, rank, ctx, "axes entry") for a in axes]
    s32, e32 = [_clamp32(v) for v in starts], [_clamp32(v) for v in ends]
    if all(s == 1 for s in steps):
        ctx.emit("slice", {"Input": x}, {"axes": axes, "starts": s32, "ends": e32}, out=0)
    else:
        ctx.emit("strided_slice", {"Input": x},
                 {"axes": axes, "starts": s32, "ends": e32,
                  "strides": [_clamp32(s) for s in steps]}, out=0)


def _axes(ctx: NodeCtx, since_input: int) -> list[int] | None:
    """Axes from the attribute (before opset ``since_input``) or input #1."""
    if ctx.opset >= since_input:
        return ctx.ints(1, "axes") if ctx.has(1) else None
    v = ctx.attr("axes")
    return None if v is None else [int(a) for a in v]


def _squeeze(ctx: NodeCtx) -> None:
    axes = _axes(ctx, 13) or []
    rank = ctx.rank(0)
    axes = [_norm(a, rank, ctx, "axes entry") for a in axes]
    ctx.emit("squeeze2", {"X": ctx.var(0)}, {"axes": axes}, out=0)


def _unsqueeze(ctx: NodeCtx) -> None:
    axes = _axes(ctx, 13)
    if not axes:
        ctx.fail("axes are required")
    r = ctx.rank(0) + len(axes)
    norm = sorted(_norm(a, r, ctx, "axes entry") for a in axes)
    if len(set(norm)) != len(norm):
        ctx.fail(f"axes {axes} repeat an axis")
    ctx.emit("unsqueeze2", {"X": ctx.var(0)}, {"axes": norm}, out=0)


def _identity(ctx: NodeCtx) -> None:
    ctx.alias(0, ctx.var(0))


def _dropout(ctx: NodeCtx) -> None:
    for i, what in ((1, "ratio"), (2, "training_mode")):
        c = ctx.const(i) if ctx.has(i) else None
        if c is not None and c.size != 1:
            ctx.fail(f"{what} (input #{i}) has shape {list(c.shape)}; it must be a scalar")
    training = ctx.const(2) if ctx.has(2) else None
    if ctx.has(2) and (training is None or bool(training.reshape(-1)[0])):
        ratio = ctx.const(1) if ctx.has(1) else np.array(0.5)
        if training is None or ratio is None:
            ctx.need_const(*((2, "training_mode") if training is None else (1, "ratio")))
        assert ratio is not None
        r = float(ratio.reshape(()))
        if not 0.0 <= r < 1.0:
            ctx.fail(f"ratio {r} must be in [0, 1)")
        if r != 0.0:
            from ._import_more import dropout_training

            dropout_training(ctx, r)
            return
    x = ctx.var(0)
    ctx.alias(0, x)
    if ctx.wants(1):
        shape = ctx.shape(0)
        if any(d < 0 for d in shape):
            ctx.fail(f"the mask output needs X's shape known, got {shape}")
        ctx.emit("fill_constant", {}, {"shape": shape, "dtype": _enum(np.dtype(bool)),
                                       "value": 1.0}, out=1)


def _cast_op(ctx: NodeCtx) -> None:
    to = int(ctx.attr("to"))
    dst = np_dtype_of(to)
    if dst is None:
        ctx.fail(f"cast to {onnx_type_name(to)}, a type fluid-hw tensors cannot hold")
    src = ctx.dtype(0)
    x = ctx.var(0)
    if src == dst:
        ctx.alias(0, x)
        return
    ctx.emit("cast", {"X": x}, {"in_dtype": _enum(src), "out_dtype": _enum(dst)}, out=0)


def _pad(ctx: NodeCtx) -> None:
    rank = ctx.rank(0)
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        ctx.fail(f"mode {mode!r} is not supported")
    pads = ctx.ints(1, "pads")
    axes = ctx.ints(3, "axes") if ctx.has(3) else list(range(rank))
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} need 2 values per axis of {axes}")
    pairs = [0] * (2 * rank)
    for i, a in enumerate(axes):
        a = _norm(a, rank, ctx, "axes entry")
        pairs[2 * a], pairs[2 * a + 1] = pads[i], pads[len(axes) + i]
    value = 0.0
    if ctx.has(2):
        c = ctx.need_const(2, "constant_value")
        value = float(c.reshape(-1)[0]) if c.size else 0.0
        if not _f32_exact(value) and ctx.dtype(0) != np.float32:
            ctx.fail(f"constant_value {value} is not exact as a float32 attribute")
    ctx.emit("pad", {"X": ctx.var(0)}, {"paddings": pairs, "mode": mode, "pad_value": value},
             out=0)


def _reduce(fluid: str, since_input: int) -> Converter:
    """ReduceSum takes axes as an input from opset 13, ReduceMean/Max from 18."""

    def conv(ctx: NodeCtx) -> None:
        axes = _axes(ctx, since_input) or []
        keep = bool(ctx.attr("keepdims", 1))
        x = ctx.var(0)
        rank = ctx.rank(0)
        if not axes and ctx.attr("noop_with_empty_axes", 0):
            ctx.alias(0, x)
            return
        dims = sorted({_norm(a, rank, ctx, "axes entry") for a in axes}) if axes else []
        everything = not dims or len(dims) == rank
        shape = ctx.shape(0)
        if fluid == "reduce_max" and any(shape[d] == 0 for d in (dims or range(rank))):
            # the max over nothing is ONNX's identity (-inf, the lowest integer, False),
            # a constant when the output's shape is known here
            out_shape = [1 if k in (dims or range(rank)) else d for k, d in enumerate(shape)
                         if keep or k not in (dims or range(rank))]
            if any(d < 0 for d in out_shape):
                ctx.fail(f"reducing an empty axis of {shape} with run-time dims")
            dt = ctx.dtype(0)
            low = -np.inf if dt.kind == "f" else False if dt.kind == "b" else np.iinfo(dt).min
            ctx.bind(0, np.full(out_shape, low, dt))
            return
        attrs = {"dim": dims or [0], "keep_dim": keep, "reduce_all": not dims}
        y = ctx.emit(fluid, {"X": x}, attrs, out=None if everything and not keep else 0)
        if everything and not keep:
            _squeeze_to_scalar(ctx, y, 0)

    return conv


def _wrap_negative(ctx: NodeCtx, ids: str, size: int) -> str:
    """ids + size where ids < 0 (ONNX's negative indices), computed at run time."""
    if size < 0 or size > 2**24:
        ctx.fail("indices computed at run time need the gathered axis' size known (and "
                 "below 2**24) to wrap negative indices")
    zero = ctx.param(np.zeros((), np.int64), "zero")
    neg = ctx.emit("less_than", {"X": ids, "Y": zero}, {"axis": -1}, hint="negative")
    neg = _cast(ctx, neg, np.dtype(bool), np.dtype(np.int64))
    shift = ctx.emit("scale", {"X": neg}, {"scale": float(size)}, hint="shift")
    return ctx.emit("elementwise_add", {"X": ids, "Y": shift}, {"axis": -1}, hint="wrapped")


def _gather(ctx: NodeCtx) -> None:
    """As fluid's embedding lookup: the gathered axis of the data becomes the rows of a
    [V, rest] table (transposed and flattened first when needed), looked up by the
    indices (as int64 [..., 1]) and reshaped/transposed back."""
    rank = ctx.rank(0)
    axis = _norm(int(ctx.attr("axis", 0)), rank, ctx)
    ds = ctx.shape(0)
    rest = ds[:axis] + ds[axis + 1:]
    if any(d < 0 for d in rest):
        ctx.fail(f"data of shape {ds}: all dims but the gathered axis must be known")
    idx_const = ctx.const(1)
    if idx_const is not None:
        v = ds[axis]
        if idx_const.dtype.kind not in "iu":
            ctx.fail(f"indices (input #1) are {idx_const.dtype}; they must be int32 or int64")
        if v < 0 and (idx_const < 0).any():
            ctx.fail("negative indices into an axis of unknown size")
        if v >= 0 and ((idx_const < -v) | (idx_const >= v)).any():
            ctx.fail(f"an index in {idx_const.reshape(-1)[:8].tolist()} is out of range for "
                     f"axis {axis} of size {v}")
        idx_const = np.where(idx_const < 0, idx_const + v, idx_const).astype(np.int64)
        ids = ctx.param(idx_const.reshape(*idx_const.shape, 1), "ids")
        idx_shape = list(idx_const.shape)
    else:
        idx_shape = ctx.shape(1)
        ids = _cast(ctx, ctx.var(1), ctx.dtype(1), np.dtype(np.int64))
        ids = _wrap_negative(ctx, ids, ds[axis])
        ids = ctx.emit("unsqueeze2", {"X": ids}, {"axes": [len(idx_shape)]})
    width = int(np.prod(rest)) if rest else 1
    data = ctx.const(0)
    perm = [axis, *[i for i in range(rank) if i != axis]]
    if data is not None:
        table = ctx.param(np.ascontiguousarray(np.transpose(data, perm).reshape(-1, width)),
                          "table", source=0) if axis != 0 or rank != 2 else ctx.var(0)
    else:
        t = ctx.var(0)
        if axis != 0:
            t = ctx.emit("transpose2", {"X": t}, {"axis": perm})
        table = t if rank == 2 and axis == 0 else ctx.emit("reshape2", {"X": t},
                                                            {"shape": [-1, width]})
    rows = ctx.emit("lookup_table", {"W": table, "Ids": ids})
    moved = [*idx_shape, *rest]  # gathered dims first
    final = axis == 0
    if tuple(moved) != ctx.imp.block.var(rows).shape:
        if sum(d < 0 for d in moved) > 1:
            ctx.fail(f"indices of shape {idx_shape} with more than one unknown dim")
        rows = ctx.emit("reshape2", {"X": rows}, {"shape": moved}, out=0 if final else None)
    elif final:
        ctx.alias(0, rows)
    if not final:
        k = len(idx_shape)
        back = [*range(k, k + axis), *range(k), *range(k + axis, len(moved))]
        ctx.emit("transpose2", {"X": rows}, {"axis": back}, out=0)


def _order_reversed(ctx: NodeCtx) -> str:
    """Input 0 mapped so that its order is reversed, exactly: -x (floats) or -1 - x
    (signed integers: no overflow; uint8 widened to int32 first), for ArgMin."""
    dt = ctx.dtype(0)
    x = ctx.var(0)
    if dt == np.uint8:
        dt, x = np.dtype(np.int32), _cast(ctx, x, dt, np.dtype(np.int32))
    if dt.kind not in "fi":
        ctx.fail(f"input of type {dt}; ArgMin takes float and integer tensors here")
    return ctx.emit("scale", {"X": x}, {"scale": -1.0, "bias": 0.0 if dt.kind == "f" else -1.0},
                    hint="reversed")


def _arg_max(ctx: NodeCtx) -> None:
    """ArgMax, and ArgMin as the ArgMax of the input in reversed order."""
    rank = ctx.rank(0)
    axis = _norm(int(ctx.attr("axis", 0)), rank, ctx)
    keep = bool(ctx.attr("keepdims", 1))
    x = _order_reversed(ctx) if ctx.op_type == "ArgMin" else ctx.var(0)
    last = bool(ctx.attr("select_last_index", 0))
    scalar = rank == 1 and not keep
    attrs = {"axis": axis, "keepdims": keep, "dtype": _enum(np.dtype(np.int64))}
    if not last:
        y = ctx.emit("arg_max", {"X": x}, attrs, out=None if scalar else 0)
    else:
        dim = ctx.shape(0)[axis]
        if dim < 0 or dim > 2**24:
            ctx.fail("select_last_index needs the axis size known (and below 2**24)")
        rev = ctx.emit("strided_slice", {"Input": x},
                       {"axes": [axis], "starts": [-1], "ends": [_I32[0]], "strides": [-1]})
        first = ctx.emit("arg_max", {"X": rev}, attrs)
        y = ctx.emit("scale", {"X": first}, {"scale": -1.0, "bias": float(dim - 1)},
                     out=None if scalar else 0)
    if scalar:
        _squeeze_to_scalar(ctx, y, 0)


# -- recurrent layers ------------------------------------------------------------------------

#: ONNX activation name -> fluid activation name, for LSTM/GRU
_RNN_ACTS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}


@dataclass(frozen=True)
class _Rnn:
    """How an ONNX recurrent op maps onto a fluid whole-sequence recurrence."""

    fluid: str  # "lstm" / "gru"
    gates: int  # gates per hidden unit
    order: tuple[int, ...]  # ONNX gate blocks in fluid's gate order
    default_acts: tuple[str, ...]


# ONNX LSTM gates are [i, o, f, c], fluid's lstm wants [c, i, f, o]; ONNX GRU gates are
# [z, r, h], fluid's gru [update, reset, candidate] is the same order
_LSTM = _Rnn("lstm", 4, (3, 0, 2, 1), ("Sigmoid", "Tanh", "Tanh"))
_GRU = _Rnn("gru", 3, (0, 1, 2), ("Sigmoid", "Tanh"))
# ONNX RNN (Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb)) is a GRU whose update gate is held at 0
# and reset gate at 1 (see _simple_as_gru)
_SIMPLE = _Rnn("gru", 1, (0,), ("Tanh",))
#: pre-activation of the held gates: sigmoid(-1e4) is exactly 0 and sigmoid(1e4) exactly
#: 1 in float16/32/64 (exp overflows / underflows)
_HELD = 1e4


def _simple_as_gru(w: np.ndarray, r: np.ndarray, bias: np.ndarray, acts: list[str],
                   h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """ONNX RNN weights as ONNX GRU weights ([z, r, h] gates) computing the same: z's and
    r's weights are zero and their biases -1e4 / +1e4, so Ht = (1 - 0) * h~ + 0 * Ht-1
    with h~ = f(Xt Wh^T + (1 * Ht-1) Rh^T + Wbh + Rbh), exactly."""
    dirs = w.shape[0]

    def gates(a: np.ndarray) -> np.ndarray:
        z = np.zeros_like(a)
        return np.concatenate([z, z, a], axis=1)

    held = np.concatenate([np.full((dirs, h), -_HELD), np.full((dirs, h), _HELD)], 1)
    zeros = np.zeros((dirs, 2 * h))
    b = np.concatenate([held, bias[:, :h], zeros, bias[:, h:]], axis=1).astype(w.dtype)
    return gates(w), gates(r), b, [a for f in acts for a in ("Sigmoid", f)]


def _gate_blocks(a: np.ndarray, rnn: _Rnn, h: int) -> np.ndarray:
    """Rows [k*h:(k+1)*h] of ``a`` (one gate each) reordered into fluid's gate order."""
    return np.concatenate([a[k * h:(k + 1) * h] for k in rnn.order], axis=0)


def _lengths(ctx: NodeCtx, xb: str, shape: list[int]) -> str:
    """int64 [B] sequence lengths: sequence_lens, or every sequence the full length."""
    if ctx.has(4):
        return _cast(ctx, ctx.var(4), ctx.dtype(4), np.dtype(np.int64))
    b, s = shape[0], shape[1]
    if b >= 0 and s >= 0 and nbytes([b], np.int64) <= MAX_COMPUTED_BYTES:
        return ctx.param(np.full([b], s, np.int64), "lengths")
    # a run-time batch: count the steps of each sequence
    first = ctx.emit("slice", {"Input": xb}, {"axes": [2], "starts": [0], "ends": [1],
                                              "decrease_axis": [2]}, hint="step")
    ones = ctx.emit("scale", {"X": ctx.emit("fill_zeros_like", {"X": first})},
                    {"scale": 0.0, "bias": 1.0}, hint="ones")
    count = ctx.emit("reduce_sum", {"X": ones}, {"dim": [1]}, hint="count")
    return _cast(ctx, count, ctx.dtype(0), np.dtype(np.int64))


def _state(ctx: NodeCtx, i: int, d: int, hint: str) -> str | None:
    """Direction ``d`` of an initial-state input [dirs, B, H] as [B, H]."""
    if not ctx.has(i):
        return None
    c = ctx.const(i)
    if c is not None:
        return ctx.param(np.ascontiguousarray(c[d]), f"{hint}{d}")
    return ctx.emit("slice", {"Input": ctx.var(i)}, {"axes": [0], "starts": [d],
                                                    "ends": [d + 1], "decrease_axis": [0]},
                    hint=f"{hint}{d}")


def _check_rnn_shape(ctx: NodeCtx, what: str, i: int, a: np.ndarray, want: list[int],
                     dtype: np.dtype) -> None:
    if list(a.shape) != want:
        ctx.fail(f"{what} (input #{i}) has shape {list(a.shape)}, expected {want} for "
                 f"hidden_size {ctx.attr('hidden_size')} and direction "
                 f"{ctx.attr('direction', 'forward')!r}")
    if a.dtype != dtype or dtype.kind != "f":
        ctx.fail(f"{what} (input #{i}) is {a.dtype}; W, R, B and P must all be of the same "
                 f"float type (W is {dtype})")


def _check_rnn_weights(ctx: NodeCtx, rnn: _Rnn, h: int, dirs: int, w: np.ndarray,
                       r: np.ndarray) -> None:
    """hidden_size and the weights' shapes agree; checked before anything is allocated
    from hidden_size (which a malformed model can set to anything)."""
    g = rnn.gates
    if h <= 0:
        ctx.fail(f"attribute hidden_size={h}: must be a positive number of hidden units "
                 f"(W's rows / {g})")
    if w.ndim != 3 or w.shape[0] != dirs or w.shape[1] != g * h:
        fix = (f"; set hidden_size={w.shape[1] // g}" if w.ndim == 3 and w.shape[1] % g == 0
               and w.shape[1] else "")
        ctx.fail(f"W (input #1) of shape {list(w.shape)} does not fit hidden_size {h} and "
                 f"{dirs} direction(s): expected [{dirs}, {g} * {h}, input_size]{fix}")
    _check_rnn_shape(ctx, "W", 1, w, [dirs, g * h, w.shape[2]], w.dtype)
    _check_rnn_shape(ctx, "R", 2, r, [dirs, g * h, h], w.dtype)


def _recurrent(ctx: NodeCtx) -> None:
    """ONNX LSTM/GRU -> fluid's lstm/gru over a LoD tensor: the padded input and
    ``sequence_lens`` become one LoD tensor (``sequence_unpad``), the input projection
    one ``mul``, each direction one variable-length recurrence (no padding inside),
    and the outputs are padded back (``sequence_pad``, zeros past each length) and
    pooled (last step) for Y_h / Y_c."""
    simple = ctx.op_type == "RNN"
    rnn = _LSTM if ctx.op_type == "LSTM" else _GRU
    declared = _SIMPLE if simple else rnn  # the gates of the ONNX op's weights
    if not has_op(rnn.fluid):
        ctx.fail(f"{ctx.op_type} maps onto fluid-hw's {rnn.fluid} op, which this build lacks")
    h = int(ctx.attr("hidden_size", 0))
    direction = ctx.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        ctx.fail(f"attribute direction={direction!r}: must be forward, reverse or "
                 "bidirectional")
    dirs = 2 if direction == "bidirectional" else 1
    if ctx.attr("clip") is not None:
        ctx.fail("the clip attribute (cell clipping) is not supported")
    if ctx.attr("input_forget", 0):
        ctx.fail("input_forget (coupled input and forget gates) is not supported")
    if ctx.attr("activation_alpha") or ctx.attr("activation_beta"):
        ctx.fail("activations with alpha/beta parameters are not supported")
    if rnn is _GRU and ctx.attr("linear_before_reset", 0):
        ctx.fail("linear_before_reset=1 (the reset gate applied after the recurrent "
                 "product, PyTorch's GRU) is not supported by fluid-hw's gru")
    acts = list(ctx.attr("activations") or declared.default_acts * dirs)
    if any(a not in _RNN_ACTS for a in acts):
        ctx.fail(f"activations {acts}: supported are {sorted(_RNN_ACTS)}")
    if len(acts) != len(declared.default_acts) * dirs:
        ctx.fail(f"activations {acts}: {ctx.op_type} needs {len(declared.default_acts)} per "
                 f"direction, {len(declared.default_acts) * dirs} in all")
    w = ctx.need_const(1, "W")
    r = ctx.need_const(2, "R")
    _check_rnn_weights(ctx, declared, h, dirs, w, r)
    bias = ctx.need_const(3, "B") if ctx.has(3) \
        else np.zeros((dirs, 2 * declared.gates * h), w.dtype)
    _check_rnn_shape(ctx, "B", 3, bias, [dirs, 2 * declared.gates * h], w.dtype)
    if simple:
        w, r, bias, acts = _simple_as_gru(w, r, bias, acts, h)
    peep = ctx.need_const(7, "P") if rnn is _LSTM and ctx.has(7) else None
    if peep is not None:
        _check_rnn_shape(ctx, "P", 7, peep, [dirs, 3 * h], w.dtype)
    layout = int(ctx.attr("layout", 0))
    if layout not in (0, 1):
        ctx.fail(f"attribute layout={layout}: must be 0 (sequence-major) or 1 (batch-major)")
    x = ctx.var(0)
    xs = ctx.shape(0)
    if len(xs) != 3 or xs[2] not in (-1, w.shape[2]):
        ctx.fail(f"X of shape {xs} does not fit W of shape {list(w.shape)}: X must be "
                 f"[seq_length, batch_size, {w.shape[2]}] (layout 0) or [batch_size, "
                 f"seq_length, {w.shape[2]}] (layout 1)")
    xb = x if layout == 1 else ctx.emit("transpose2", {"X": x}, {"axis": [1, 0, 2]})
    shape = xs if layout == 1 else [xs[k] for k in (1, 0, 2)]
    if ctx.has(4) and shape[1] < 0:
        ctx.fail("with sequence_lens the sequence length (dim of X) must be known, so the "
                 "outputs can be padded to it")
    seq = ctx.emit("sequence_unpad", {"X": xb, "Length": _lengths(ctx, xb, shape)},
                   hint="sequences")  # [T, I], LoD: one sequence per batch entry
    zero = ctx.param(np.zeros((), w.dtype), "zero")
    ys, yhs, ycs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        proj = ctx.param(np.ascontiguousarray(_gate_blocks(w[d], rnn, h).T), f"W{d}", 1)
        x_proj = ctx.emit("mul", {"X": seq, "Y": proj}, hint=f"proj{d}")
        weight = ctx.param(np.ascontiguousarray(_gate_blocks(r[d], rnn, h).T), f"R{d}", 2)
        b = _gate_blocks(bias[d][:rnn.gates * h] + bias[d][rnn.gates * h:], rnn, h)
        f_act, *rest = (_RNN_ACTS[a] for a in acts[d * len(rnn.default_acts):
                                                    (d + 1) * len(rnn.default_acts)])
        ins: dict[str, Any] = {"Input": x_proj, "Weight": weight}
        hidden = ctx.new_var(None, f"hidden{d}")
        outs: dict[str, list[str]] = {"Hidden": [hidden]}
        if rnn is _LSTM:
            attrs: dict[str, Any] = {"is_reverse": reverse, "gate_activation": f_act,
                                     "candidate_activation": rest[0],
                                     "cell_activation": rest[1],
                                     "use_peepholes": peep is not None}
            if peep is not None:  # ONNX P is [i, o, f]; fluid appends W_ic, W_fc, W_oc
                p = peep[d]
                b = np.concatenate([b, p[:h], p[2 * h:], p[h:2 * h]])
            cell = ctx.new_var(None, f"cell{d}")
            outs["Cell"] = [cell]
            for slot, i in (("H0", 5), ("C0", 6)):
                st = _state(ctx, i, d, slot)
                if st is not None:
                    ins[slot] = st
        else:
            attrs = {"is_reverse": reverse, "gate_activation": f_act, "activation": rest[0],
                     "origin_mode": True}
            st = _state(ctx, 5, d, "H0")
            if st is not None:
                ins["H0"] = st
        ins["Bias"] = ctx.param(b.reshape(1, -1).astype(w.dtype), f"B{d}", 3 if ctx.has(3)
                                else None)
        ctx.emit_op(rnn.fluid, ins, outs, attrs)
        last = "FIRST" if reverse else "LAST"
        pad_out, pad_len = ctx.new_var(None, f"y{d}"), ctx.new_var(None, f"len{d}")
        ctx.emit_op("sequence_pad", {"X": hidden, "PadValue": zero},
                    {"Out": [pad_out], "Length": [pad_len]}, {"padded_length": shape[1]})
        ys.append(pad_out)  # [B, S, H]
        yhs.append(ctx.emit("sequence_pool", {"X": hidden}, {"pooltype": last},
                            hint=f"yh{d}"))
        if rnn is _LSTM:
            ycs.append(ctx.emit("sequence_pool", {"X": outs["Cell"][0]}, {"pooltype": last},
                                hint=f"yc{d}"))
    # Y: [S, dirs, B, H] (layout 0) or [B, S, dirs, H]; Y_h, Y_c: [dirs, B, H] or [B, dirs, H]
    if ctx.wants(0):
        y = _stack(ctx, ys, 2, None)
        if layout == 0:
            ctx.emit("transpose2", {"X": y}, {"axis": [1, 2, 0, 3]}, out=0)
        else:
            ctx.alias(0, y)
    for j, states in ((1, yhs), (2, ycs)):
        if ctx.wants(j):
            _stack(ctx, states, 0 if layout == 0 else 1, j)


def _stack(ctx: NodeCtx, parts: list[str], axis: int, out: int | None) -> str:
    """The parts with a new axis ``axis``, joined along it."""
    ups = [ctx.emit("unsqueeze2", {"X": p}, {"axes": [axis]}) for p in parts]
    if len(ups) == 1:
        if out is not None:
            ctx.alias(out, ups[0])
        return ups[0]
    return ctx.emit("concat", {"X": ups}, {"axis": axis}, out=out)


#: the converters that do more than rename (ops whose inputs are all constant are
#: folded instead)
_SPECIAL: dict[str, OpImport] = {
    # element-wise
    "Neg": OpImport(_neg, "scale(-1)"),
    "Softmax": OpImport(_softmax("softmax"), "softmax"),
    "LogSoftmax": OpImport(_softmax("log_softmax"), "log_softmax"),
    "Clip": OpImport(_clip, "clip, or elementwise_max/min"),
    "Add": OpImport(_binary("elementwise_add"), "elementwise_add, or scale"),
    "Sub": OpImport(_binary("elementwise_sub"), "elementwise_sub, or scale"),
    "Mul": OpImport(_binary("elementwise_mul"), "elementwise_mul, or scale"),
    "Div": OpImport(_binary("elementwise_div"), "elementwise_div"),
    "Pow": OpImport(_pow, "elementwise_pow"),
    "Max": OpImport(_variadic("elementwise_max"), "elementwise_max"),
    "Min": OpImport(_variadic("elementwise_min"), "elementwise_min"),
    "Sum": OpImport(_variadic("elementwise_add"), "elementwise_add"),
    "Mean": OpImport(_variadic("elementwise_add", mean=True), "elementwise_add, scale"),
    # matrix products
    "Gemm": OpImport(_gemm, "mul (constant B) or matmul, elementwise_add"),
    "MatMul": OpImport(_matmul, "mul (constant 2-D B) or matmul (expand)"),
    # convolution, pooling, normalization
    "Conv": OpImport(_conv, "conv2d (1-D through unsqueeze2/squeeze2), elementwise_add"),
    "MaxPool": OpImport(_pool("max"), "pool2d, or taps: strided_slice, elementwise_max "
                        "(Indices: equal, where)"),
    "AveragePool": OpImport(_pool("avg"), "pool2d, or taps: strided_slice, sum, "
                            "elementwise_div"),
    "GlobalAveragePool": OpImport(_global_pool("avg"), "pool2d (global), or reduce_mean"),
    "GlobalMaxPool": OpImport(_global_pool("max"), "pool2d (global), or reduce_max"),
    "BatchNormalization": OpImport(_batch_norm, "batch_norm (is_test); training_mode: "
                                   "reduce_mean, elementwise ops, sqrt, reciprocal"),
    "Dropout": OpImport(_dropout, "none (inference); training_mode: dropout", (1, 2)),
    # shapes and data movement
    "Flatten": OpImport(_flatten, "flatten2"),
    "Reshape": OpImport(_reshape, "reshape2", (1,)),
    "Transpose": OpImport(_transpose, "transpose2"),
    "Split": OpImport(_split, "split", (1,)),
    "Slice": OpImport(_slice, "slice, or strided_slice", (1, 2, 3, 4)),
    "Squeeze": OpImport(_squeeze, "squeeze2", (1,)),
    "Unsqueeze": OpImport(_unsqueeze, "unsqueeze2", (1,)),
    "Identity": OpImport(_identity, "none"),
    "Cast": OpImport(_cast_op, "cast"),
    "Pad": OpImport(_pad, "pad", (1, 2, 3)),
    "Gather": OpImport(_gather, "lookup_table"),
    # reductions
    "ReduceMean": OpImport(_reduce("reduce_mean", 18), "reduce_mean", (1,)),
    "ReduceSum": OpImport(_reduce("reduce_sum", 13), "reduce_sum", (1,)),
    "ReduceMax": OpImport(_reduce("reduce_max", 18), "reduce_max", (1,)),
    "ReduceMin": OpImport(_reduce("reduce_min", 18), "reduce_min", (1,)),
    "ReduceProd": OpImport(_reduce("reduce_prod", 18), "reduce_prod", (1,)),
    "ArgMax": OpImport(_arg_max, "arg_max"),
    "ArgMin": OpImport(_arg_max, "scale (order reversed), arg_max"),
    # recurrent
    "LSTM": OpImport(_recurrent, "sequence_unpad, mul, lstm, sequence_pad/pool",
                     (1, 2, 3, 7)),
    "GRU": OpImport(_recurrent, "sequence_unpad, mul, gru, sequence_pad/pool", (1, 2, 3)),
    "RNN": OpImport(_recurrent, "sequence_unpad, mul, gru (gates held), sequence_pad/pool",
                    (1, 2, 3)),
}

#: ONNX op type -> converter
IMPORTERS: dict[str, OpImport] = {
    **{p.onnx: OpImport(_from_pair(p), p.fluid) for p in PAIRS if p.imports},
    **_SPECIAL,
}

from ._import_more import MORE  # noqa: E402  (it uses the helpers above)

IMPORTERS.update(MORE)

from ._import_quant import QUANT  # noqa: E402

IMPORTERS.update(QUANT)
