"""fluid op type -> the ONNX nodes it becomes: the export table.

One entry per fluid op type in :data:`EXPORTERS`: one made from each one-to-one
pair of :data:`._pairs.PAIRS`, and the op-specific exporters below.  An exporter
reads the op's inputs, outputs and attributes and appends nodes through an
:class:`~._context.ExportCtx`; the op's output variables keep their names as
ONNX tensor names.  Nodes use the forms of the export opset (13 and newer:
axes of Squeeze/Unsqueeze/ReduceSum/Split as inputs; ReduceMean/Max/Min/Prod take
them as inputs from 18).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...ir import dtypes
from ...ir.ops.common import aligned_shape
from ...ir.ops.nn import window_geometry
from ...ir.ops.tensor import split_sizes, unsqueeze_shape
from ._context import ExportCtx
from ._dtypes import NP_TO_ONNX, onnx_type_of
from ._pairs import PAIRS, Pair

if TYPE_CHECKING:
    from ...ir.program import Operator

ExportFn = Callable[[ExportCtx, "Operator"], None]


@dataclass(frozen=True)
class OpExport:
    """How one fluid op type is exported: the function and the ONNX ops it emits."""

    fn: ExportFn
    onnx: str  # for the docs


def _x(op: Operator, slot: str = "X") -> str:
    return op.input(slot)[0]


def _out(op: Operator, slot: str = "Out") -> str:
    return op.output(slot)[0]


def _scalar(ctx: ExportCtx, value: float, like: str, hint: str) -> str:
    """A rank-0 constant of ``like``'s dtype."""
    dt = ctx.np_dtype(like)
    return ctx.const(np.array(value).astype(dt), hint)


# -- element-wise -------------------------------------------------------------------

def _square(ctx: ExportCtx, op: Operator) -> None:
    ctx.node("Mul", [_x(op), _x(op)], [_out(op)])


def _aligned(ctx: ExportCtx, name: str, big_rank: int, axis: int) -> str:
    """``name`` reshaped so numpy broadcasting follows Fluid's ``axis`` rule."""
    shape = ctx.shape(name)
    target = aligned_shape(shape, big_rank, axis)
    trailing = big_rank - len(shape) - (axis if axis >= 0 else big_rank - len(shape))
    if trailing <= 0:
        return name  # right-aligned already: numpy broadcasting does the rest
    value = ctx.value(name)
    if value is not None:
        return ctx.const(value.reshape(target), f"{name}.aligned")
    axes = list(range(len(shape), len(shape) + trailing))
    return ctx.node("Unsqueeze", [name, ctx.ints(axes, f"{name}.axes")])


def _binary_node(ctx: ExportCtx, op: Operator, onnx_op: str, outputs: list[str] | None,
                 **attrs: Any) -> str:
    x, y = _x(op), _x(op, "Y")
    axis = op.attr("axis") if op.has_attr("axis") else -1
    xr, yr = len(ctx.shape(x)), len(ctx.shape(y))
    if axis != -1 and xr != yr:
        if xr > yr:
            y = _aligned(ctx, y, xr, axis)
        else:
            x = _aligned(ctx, x, yr, axis)
    return ctx.node(onnx_op, [x, y], outputs, **attrs)


def _from_pair(p: Pair) -> ExportFn:
    """The exporter of a one-to-one pair: inputs, output and attributes renamed."""

    def fn(ctx: ExportCtx, op: Operator) -> None:
        attrs = {a.onnx: a.convert(op.attr(a.fluid)) for a in p.attrs}
        if p.form == "binary":
            _binary_node(ctx, op, p.onnx, [_out(op)], **attrs)
        else:
            ins = op.input("X") if p.form == "variadic" else [_x(op)]
            ctx.node(p.onnx, ins, [_out(op)], **attrs)

    return fn


def _mod(ctx: ExportCtx, op: Operator) -> None:
    _binary_node(ctx, op, "Mod", [_out(op)], fmod=int(op.type == "elementwise_fmod"))


def _not_equal(ctx: ExportCtx, op: Operator) -> None:
    ctx.node("Not", [_binary_node(ctx, op, "Equal", None)], [_out(op)])


def _scale(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    s, b = float(op.attr("scale")), float(op.attr("bias"))
    steps: list[tuple[str, float]] = []
    if op.attr("bias_after_scale"):
        steps = [("Mul", s), ("Add", b)]
    else:
        steps = [("Add", b), ("Mul", s)]
    steps = [(o, v) for o, v in steps if (o == "Mul" and v != 1.0) or (o == "Add" and v != 0.0)]
    if not steps:
        ctx.node("Identity", [x], [out])
        return
    cur = x
    for k, (onnx_op, v) in enumerate(steps):
        last = k == len(steps) - 1
        cur = ctx.node(onnx_op, [cur, _scalar(ctx, v, x, f"{out}.{onnx_op.lower()}")],
                       [out] if last else None)


def _clip(ctx: ExportCtx, op: Operator) -> None:
    x = _x(op)
    dt = ctx.np_dtype(x)

    def bound(v: float, hint: str) -> str:
        if dt.kind in "iu":
            info = np.iinfo(dt)
            v = info.max if v == math.inf else info.min if v == -math.inf else v
            v = min(max(int(v), info.min), info.max)
        return ctx.const(np.array(v).astype(dt), hint)

    ctx.node("Clip", [x, bound(op.attr("min"), f"{_out(op)}.min"),
                      bound(op.attr("max"), f"{_out(op)}.max")], [_out(op)])


# -- matrix products ----------------------------------------------------------------

def _mul(ctx: ExportCtx, op: Operator) -> None:
    """Out = flatten(X, k) @ flatten(Y, ky), reshaped to X.dims[:k] + Y.dims[ky:]."""
    x, y = _x(op), _x(op, "Y")
    k, ky = op.attr("x_num_col_dims"), op.attr("y_num_col_dims")
    xs, ys = ctx.shape(x), ctx.shape(y)
    if len(ys) != 2 or ky != 1:
        value = ctx.value(y)
        if value is None:
            ctx.fail(f"Y of shape {ys} with y_num_col_dims={ky} is not a parameter to reshape")
        y = ctx.const(value.reshape(math.prod(ys[:ky]), -1), f"{y}.2d")
    out = _out(op)
    if len(xs) == k + 1 and len(ys) == ky + 1:
        ctx.node("MatMul", [x, y], [out])
        return
    tail = xs[k:]
    if any(d < 0 for d in tail):
        ctx.fail(f"X of shape {xs}: the dims flattened into columns must be known")
    flat = ctx.node("Reshape", [x, ctx.ints([0] * k + [math.prod(tail)], f"{out}.xshape")])
    if len(ys) == ky + 1:
        ctx.node("MatMul", [flat, y], [out])
        return
    prod = ctx.node("MatMul", [flat, y])
    ctx.node("Reshape", [prod, ctx.ints([0] * k + list(ys[ky:]), f"{out}.shape")], [out])


def _matmul(ctx: ExportCtx, op: Operator) -> None:
    x, y, out = _x(op), _x(op, "Y"), _out(op)
    operands = []
    for name, flag in ((x, "transpose_X"), (y, "transpose_Y")):
        rank = len(ctx.shape(name))
        if op.attr(flag) and rank >= 2:
            perm = [*range(rank - 2), rank - 1, rank - 2]
            name = ctx.node("Transpose", [name], perm=perm)
        operands.append(name)
    alpha = float(op.attr("alpha"))
    both_1d = len(ctx.shape(x)) == 1 and len(ctx.shape(y)) == 1
    last = alpha == 1.0 and not both_1d
    cur = ctx.node("MatMul", operands, [out] if last else None)
    if alpha != 1.0:
        cur = ctx.node("Mul", [cur, _scalar(ctx, alpha, x, f"{out}.alpha")],
                       None if both_1d else [out])
    if both_1d:  # Fluid gives [1] where numpy gives a scalar
        ctx.node("Reshape", [cur, ctx.ints([1], f"{out}.shape")], [out])


# -- convolution and pooling ----------------------------------------------------------

def _onnx_pads(paddings: list[int]) -> list[int]:
    """Fluid [pad_h, pad_w] or [top, bottom, left, right] -> ONNX [t, l, b, r]."""
    p = list(paddings)
    if len(p) == 2:
        p = [p[0], p[0], p[1], p[1]]
    return [p[0], p[2], p[1], p[3]]


def _conv(ctx: ExportCtx, op: Operator) -> None:
    x, w = _x(op, "Input"), _x(op, "Filter")
    attrs: dict[str, Any] = {"strides": list(op.attr("strides")), "group": int(op.attr("groups")),
                             "kernel_shape": list(ctx.shape(w)[2:])}
    algo = op.attr("padding_algorithm")
    if algo == "SAME":  # Fluid's SAME ignores the dilation
        attrs["auto_pad"] = "SAME_UPPER"
        attrs["dilations"] = [1, 1]
    else:
        attrs["dilations"] = list(op.attr("dilations"))
        attrs["pads"] = [0, 0, 0, 0] if algo == "VALID" else _onnx_pads(op.attr("paddings"))
    ctx.node("Conv", [x, w], [_out(op, "Output")], **attrs)


def _pool(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    is_max = op.attr("pooling_type") == "max"
    xs = ctx.shape(x)
    ksize = list(op.attr("ksize"))
    if op.attr("global_pooling") or (op.attr("adaptive") and ksize == [1, 1]):
        ctx.node("GlobalMaxPool" if is_max else "GlobalAveragePool", [x], [out])
        return
    strides = list(op.attr("strides"))
    algo = op.attr("padding_algorithm")
    pads = [0, 0, 0, 0] if algo != "EXPLICIT" else _onnx_pads(op.attr("paddings"))
    if op.attr("adaptive"):
        hw = xs[2:]
        if any(d < 0 for d in hw) or any(d % k for d, k in zip(hw, ksize)):
            ctx.fail(f"adaptive pooling to {ksize} of X {xs}: only sizes that divide evenly "
                     "(known at export time) map onto ONNX pooling")
        strides = [d // k for d, k in zip(hw, ksize)]
        ksize, pads, algo = list(strides), [0, 0, 0, 0], "EXPLICIT"
    attrs: dict[str, Any] = {"kernel_shape": ksize, "strides": strides}
    if algo == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = pads
    ceil = bool(op.attr("ceil_mode"))
    if ceil:
        if any(d < 0 for d in xs[2:]) or algo != "EXPLICIT":
            ctx.fail("ceil_mode needs the input size known and explicit paddings")
        fluid_out, _, _ = window_geometry(xs[2:], ksize, strides, op.attr("paddings"),
                                          ceil_mode=True)
        floor_out, _, _ = window_geometry(xs[2:], ksize, strides, op.attr("paddings"))
        if fluid_out != floor_out:
            # the window over the edge: ONNX drops it when it starts in the end padding
            for i in range(2):
                if (fluid_out[i] - 1) * strides[i] >= xs[2 + i] + pads[i]:
                    ctx.fail("ceil_mode: the last window starts in the padding; ONNX drops it")
            if not is_max and not op.attr("exclusive"):
                ctx.fail("ceil_mode with exclusive=False: ONNX does not count the cells over "
                         "the edge")
            attrs["ceil_mode"] = 1
    if not is_max:
        attrs["count_include_pad"] = 0 if op.attr("exclusive") else 1
    ctx.node("MaxPool" if is_max else "AveragePool", [x], [out], **attrs)


def _batch_norm(ctx: ExportCtx, op: Operator) -> None:
    if not (op.attr("is_test") or op.attr("use_global_stats")):
        ctx.fail("training-mode batch_norm (batch statistics)")
    if op.attr("data_layout") == "NHWC":
        ctx.fail("NHWC layout; ONNX BatchNormalization is channels-first")
    ins = [_x(op), _x(op, "Scale"), _x(op, "Bias"), _x(op, "Mean"), _x(op, "Variance")]
    ctx.node("BatchNormalization", ins, [_out(op, "Y")], epsilon=float(op.attr("epsilon")),
             momentum=float(op.attr("momentum")))


def _dropout(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    if op.attr("dropout_implementation") == "upscale_in_train":
        ctx.node("Identity", [x], [out])
    else:
        ctx.node("Mul", [x, _scalar(ctx, 1.0 - op.attr("dropout_prob"), x, f"{out}.keep")],
                 [out])


# -- shapes -------------------------------------------------------------------------

def _reshape(ctx: ExportCtx, op: Operator) -> None:
    out = _out(op)
    ctx.node("Reshape", [_x(op), ctx.ints(op.attr("shape"), f"{out}.shape")], [out])


def _squeeze(ctx: ExportCtx, op: Operator) -> None:
    out = _out(op)
    axes = list(op.attr("axes"))
    ins = [_x(op)] + ([ctx.ints(axes, f"{out}.axes")] if axes else [])
    ctx.node("Squeeze", ins, [out])


def _unsqueeze(ctx: ExportCtx, op: Operator) -> None:
    """Fluid inserts one axis at a time; ONNX takes the final positions."""
    out = _out(op)
    rank = len(ctx.shape(_x(op)))
    marks = unsqueeze_shape([0] * rank, op.attr("axes"))  # 1 where a dim was inserted
    axes = [i for i, d in enumerate(marks) if d == 1]
    ctx.node("Unsqueeze", [_x(op), ctx.ints(axes, f"{out}.axes")], [out])


def _split(ctx: ExportCtx, op: Operator) -> None:
    x = _x(op)
    outs = op.output("Out")
    xs = ctx.shape(x)
    axis = op.attr("axis") % len(xs)
    sizes = split_sizes(xs[axis], op.attr("num"), op.attr("sections"), len(outs))
    ins = [x]
    if op.attr("sections"):
        if any(s < 0 for s in sizes):
            ctx.fail(f"sections {op.attr('sections')} with an unknown size along axis {axis}")
        ins.append(ctx.ints(sizes, f"{outs[0]}.split"))
    ctx.node("Split", ins, outs, axis=axis)


def _slice(ctx: ExportCtx, op: Operator) -> None:
    out = _out(op)
    dec = list(op.attr("decrease_axis")) if op.type == "slice" else []
    ins = [_x(op, "Input"), ctx.ints(op.attr("starts"), f"{out}.starts"),
           ctx.ints(op.attr("ends"), f"{out}.ends"), ctx.ints(op.attr("axes"), f"{out}.axes")]
    if op.type == "strided_slice":
        ins.append(ctx.ints(op.attr("strides"), f"{out}.steps"))
    cut = ctx.node("Slice", ins, None if dec else [out])
    if dec:
        rank = len(ctx.shape(_x(op, "Input")))
        if len(dec) == rank:  # Fluid keeps [1]
            ctx.node("Reshape", [cut, ctx.ints([1], f"{out}.shape")], [out])
        else:
            ctx.node("Squeeze", [cut, ctx.ints(dec, f"{out}.decrease")], [out])


def _cast(ctx: ExportCtx, op: Operator) -> None:
    to = onnx_type_of(dtypes.to_numpy(op.attr("out_dtype")))
    ctx.node("Cast", [_x(op)], [_out(op)], to=to)


def _pad(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    p = list(op.attr("paddings"))
    pads = p[0::2] + p[1::2]
    ins = [x, ctx.ints(pads, f"{out}.pads")]
    mode = op.attr("mode")
    if mode == "constant":
        ins.append(_scalar(ctx, op.attr("pad_value"), x, f"{out}.value"))
    elif mode == "wrap":
        ctx.needs(19, "Pad mode 'wrap'")
    ctx.node("Pad", ins, [out], mode=mode)


# -- reductions, lookups ----------------------------------------------------------------

def _reduce(onnx_op: str, since_input: int) -> ExportFn:
    def fn(ctx: ExportCtx, op: Operator) -> None:
        x, out = _x(op), _out(op)
        rank = len(ctx.shape(x))
        keep = bool(op.attr("keep_dim"))
        everything = op.attr("reduce_all") or not op.attr("dim") or \
            len({d % rank for d in op.attr("dim")}) == rank
        axes = [] if everything else sorted({d % rank for d in op.attr("dim")})
        # a type the ONNX op does not take at this opset (bool, 8/16-bit ints for
        # ReduceSum...): reduce in int32, which holds their values exactly, and cast back
        et = onnx_type_of(ctx.np_dtype(x))
        wide = et is not None and not ctx.allows(onnx_op, et) and \
            et in _WIDENS and ctx.allows(onnx_op, _INT32)
        if wide:
            x = ctx.node("Cast", [x], to=_INT32)
        ins = [x]
        attrs: dict[str, Any] = {"keepdims": int(keep)}
        if axes:
            if ctx.opset >= since_input:
                ins.append(ctx.ints(axes, f"{out}.axes"))
            else:
                attrs["axes"] = axes
        scalar = everything and not keep  # Fluid gives [1]
        cur = ctx.node(onnx_op, ins, None if scalar or wide else [out], **attrs)
        if scalar:
            cur = ctx.node("Reshape", [cur, ctx.ints([1], f"{out}.shape")],
                           None if wide else [out])
        if wide:
            ctx.node("Cast", [cur], [out], to=et)

    return fn


_INT32 = NP_TO_ONNX[np.dtype(np.int32)]
#: element types a reduction may widen to int32 when ONNX does not take them
_WIDENS = {onnx_type_of(np.dtype(t)) for t in (np.bool_, np.int8, np.int16, np.uint8)}


def _mean(ctx: ExportCtx, op: Operator) -> None:
    out = _out(op)
    cur = ctx.node("ReduceMean", [_x(op)], keepdims=0)
    ctx.node("Reshape", [cur, ctx.ints([1], f"{out}.shape")], [out])


def _lookup_table(ctx: ExportCtx, op: Operator) -> None:
    if op.attr("padding_idx") != -1:
        ctx.fail("padding_idx (rows coming out as zeros) has no ONNX Gather equivalent")
    out = _out(op)
    ids = _x(op, "Ids")
    rank = len(ctx.shape(ids))
    flat = ctx.node("Squeeze", [ids, ctx.ints([rank - 1], f"{out}.ids_axes")])
    ctx.node("Gather", [_x(op, "W"), flat], [out], axis=0)


def _arg_max(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    rank = len(ctx.shape(x))
    keep = bool(op.attr("keepdims"))
    int32 = op.attr("dtype") == int(dtypes.VarType.INT32)
    if op.attr("flatten"):
        x = ctx.node("Reshape", [x, ctx.ints([-1], f"{out}.flat")])
        axis, keep, rank = 0, False, 1
    else:
        axis = op.attr("axis") % rank
    fix = rank == 1 and not keep  # Fluid gives [1] where ONNX gives a scalar
    cur = ctx.node("ArgMax", [x], None if fix or int32 else [out], axis=axis,
                   keepdims=int(keep))
    if fix:
        cur = ctx.node("Reshape", [cur, ctx.ints([1], f"{out}.shape")],
                       None if int32 else [out])
    if int32:
        ctx.node("Cast", [cur], [out], to=onnx_type_of(np.dtype(np.int32)))


def _fill_constant(ctx: ExportCtx, op: Operator) -> None:
    dt = dtypes.to_numpy(op.attr("dtype"))
    value = np.full([int(d) for d in op.attr("shape")], op.attr("value"), dtype=dt)
    ctx.node("Identity", [ctx.const(value, f"{_out(op)}.value")], [_out(op)])


def _hard_swish(ctx: ExportCtx, op: Operator) -> None:
    got = (op.attr("threshold"), op.attr("scale"), op.attr("offset"))
    if got != (6.0, 6.0, 3.0):
        ctx.fail(f"hard_swish with threshold, scale, offset {got}: ONNX HardSwish is "
                 "the (6, 6, 3) form only")
    ctx.node("HardSwish", [_x(op)], [_out(op)])


def _where(ctx: ExportCtx, op: Operator) -> None:
    ctx.node("Where", [_x(op, "Condition"), _x(op), _x(op, "Y")], [_out(op)])


def _expand(ctx: ExportCtx, op: Operator) -> None:
    out = _out(op)
    ctx.node("Tile", [_x(op), ctx.ints(op.attr("expand_times"), f"{out}.repeats")], [out])


def _cumsum(ctx: ExportCtx, op: Operator) -> None:
    x, out = _x(op), _out(op)
    axis = op.attr("axis")
    if op.attr("flatten"):
        x = ctx.node("Reshape", [x, ctx.ints([-1], f"{out}.flat")])
        axis = 0
    ctx.node("CumSum", [x, ctx.ints([axis], f"{out}.axis")], [out],
             exclusive=int(op.attr("exclusive")), reverse=int(op.attr("reverse")))


def _cumprod(ctx: ExportCtx, op: Operator) -> None:
    ctx.needs(26, "CumProd")
    out = _out(op)
    ctx.node("CumProd", [_x(op), ctx.ints([op.attr("axis")], f"{out}.axis")], [out],
             exclusive=int(op.attr("exclusive")), reverse=int(op.attr("reverse")))


def _top_k(ctx: ExportCtx, op: Operator) -> None:
    out, idx = _out(op), _out(op, "Indices")
    ctx.node("TopK", [_x(op), ctx.ints([op.attr("k")], f"{out}.k")], [out, idx], axis=-1)


def _nearest_interp(ctx: ExportCtx, op: Operator) -> None:
    """Output k reads input floor(k * in / out) (``asymmetric`` + ``floor``) or, with
    align_corners, round-half-up(k (in-1)/(out-1)) (``align_corners`` +
    ``round_prefer_ceil``)."""
    x, out = _x(op), _out(op)
    if op.input("OutSize"):
        ctx.fail("nearest_interp with a run-time OutSize is not exported")
    xs, ys = ctx.shape(x), ctx.shape(out)
    if len(ys) != 4 or any(d < 0 for d in ys[2:]):
        ctx.fail(f"nearest_interp to a size not known at export time ({ys})")
    ac = bool(op.attr("align_corners"))
    attrs: dict[str, Any] = {}
    if any(d < 0 for d in xs[:2]):  # a run-time batch: resize H and W only
        whole = all(i > 0 and o % i == 0 for i, o in zip(xs[2:], ys[2:]))
        if ctx.opset < 18 and whole and not ac:  # integer factors: exact as scales
            scales = np.array([1, 1, ys[2] // xs[2], ys[3] // xs[3]], np.float32)
            ctx.node("Resize", [x, "", ctx.const(scales, f"{out}.scales")], [out],
                     mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor")
            return
        ctx.needs(18, "nearest_interp of a tensor with run-time batch or channels (Resize "
                  "axes)")
        sizes, attrs["axes"] = ctx.ints(ys[2:], f"{out}.sizes"), [2, 3]
    else:
        sizes = ctx.ints(xs[:2] + ys[2:], f"{out}.sizes")
    ctx.node("Resize", [x, "", "", sizes], [out], mode="nearest",
             coordinate_transformation_mode="align_corners" if ac else "asymmetric",
             nearest_mode="round_prefer_ceil" if ac else "floor", **attrs)


#: the exporters that do more than rename: several nodes, attributes computed from
#: shapes, checks of what ONNX cannot express
_SPECIAL: dict[str, OpExport] = {
    "hard_swish": OpExport(_hard_swish, "HardSwish"),
    "where": OpExport(_where, "Where"),
    "expand": OpExport(_expand, "Tile"),
    "cumsum": OpExport(_cumsum, "CumSum"),
    "cumprod": OpExport(_cumprod, "CumProd"),
    "top_k": OpExport(_top_k, "TopK"),
    "nearest_interp": OpExport(_nearest_interp, "Resize (nearest)"),
    "square": OpExport(_square, "Mul"),
    "clip": OpExport(_clip, "Clip"),
    "scale": OpExport(_scale, "Mul, Add"),
    "not_equal": OpExport(_not_equal, "Equal, Not"),
    "mul": OpExport(_mul, "MatMul (with Reshape)"),
    "matmul": OpExport(_matmul, "MatMul (with Transpose, Mul)"),
    "conv2d": OpExport(_conv, "Conv"),
    "depthwise_conv2d": OpExport(_conv, "Conv (group)"),
    "pool2d": OpExport(_pool, "MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool"),
    "batch_norm": OpExport(_batch_norm, "BatchNormalization"),
    "dropout": OpExport(_dropout, "Mul or Identity"),
    "reshape2": OpExport(_reshape, "Reshape"),
    "squeeze2": OpExport(_squeeze, "Squeeze"),
    "unsqueeze2": OpExport(_unsqueeze, "Unsqueeze"),
    "split": OpExport(_split, "Split"),
    "slice": OpExport(_slice, "Slice (with Squeeze)"),
    "strided_slice": OpExport(_slice, "Slice"),
    "cast": OpExport(_cast, "Cast"),
    "pad": OpExport(_pad, "Pad"),
    "reduce_sum": OpExport(_reduce("ReduceSum", 13), "ReduceSum"),
    "reduce_mean": OpExport(_reduce("ReduceMean", 18), "ReduceMean"),
    "reduce_max": OpExport(_reduce("ReduceMax", 18), "ReduceMax"),
    "reduce_min": OpExport(_reduce("ReduceMin", 18), "ReduceMin"),
    "elementwise_mod": OpExport(_mod, "Mod"),
    "elementwise_fmod": OpExport(_mod, "Mod (fmod=1)"),
    "reduce_prod": OpExport(_reduce("ReduceProd", 18), "ReduceProd"),
    "mean": OpExport(_mean, "ReduceMean"),
    "lookup_table": OpExport(_lookup_table, "Squeeze, Gather"),
    "arg_max": OpExport(_arg_max, "ArgMax"),
    "fill_constant": OpExport(_fill_constant, "Identity of a constant"),
}

#: fluid op type -> exporter
EXPORTERS: dict[str, OpExport] = {
    **{p.fluid: OpExport(_from_pair(p), p.onnx) for p in PAIRS},
    **_SPECIAL,
}

from ._export_quant import QUANT_EXPORTS  # noqa: E402  (it uses the helpers above)

EXPORTERS.update(QUANT_EXPORTS)
