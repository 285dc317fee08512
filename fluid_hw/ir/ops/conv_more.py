"""Convolutions and pooling Paddle 1.5 has beyond fluid-hw's 2-D ones (issue 20):
``conv3d``, ``conv2d_transpose``, ``conv3d_transpose`` and ``pool3d`` (NC + spatial
layout).  Filters: conv [M, C/groups, k...]; transposed conv [C, M/groups, k...].
Output extents: conv ``(in + 2 pad - (dil (k - 1) + 1)) / stride + 1`` (floor);
transposed ``(in - 1) stride - 2 pad + dil (k - 1) + 1`` (or ``output_size``, which may
add up to stride - 1); pool as pool2d (``ceil_mode`` rounds up)."""

from __future__ import annotations

from collections.abc import Callable

from ..registry import Attr, InferContext, define_op


def conv_out(i: int, k: int, s: int, p: int, d: int) -> int:
    return -1 if i < 0 else (i + 2 * p - (d * (k - 1) + 1)) // s + 1


def convt_out(i: int, k: int, s: int, p: int, d: int) -> int:
    return -1 if i < 0 else (i - 1) * s - 2 * p + d * (k - 1) + 1


def pool_out(i: int, k: int, s: int, p: int, ceil: bool) -> int:
    if i < 0:
        return -1
    return (i + 2 * p - k + (s - 1 if ceil else 0)) // s + 1


def _ints(ctx: InferContext, name: str, n: int, lo: int) -> list[int]:
    v = list(ctx.attr(name))
    ctx.check(len(v) == n and all(x >= lo for x in v),
              f"attribute {name} must be {n} ints >= {lo}, got {v}")
    return v


def _conv_attrs(nd: int, transpose: bool) -> list[Attr]:
    out = [Attr("strides", "ints", [1] * nd), Attr("paddings", "ints", [0] * nd),
           Attr("dilations", "ints", [1] * nd), Attr("groups", "int", 1, min=1),
           Attr("use_cudnn", "bool", False), Attr("data_format", "string", "AnyLayout")]
    if transpose:
        out.append(Attr("output_size", "ints", []))
    return out


def _infer(ctx: InferContext, nd: int, transpose: bool) -> None:
    xs, ws = ctx.input_shape("Input"), ctx.input_shape("Filter")
    ctx.check(len(xs) == nd + 2 and len(ws) == nd + 2,
              f"Input and Filter must be {nd + 2}-D, got {xs} and {ws}")
    ctx.check(ctx.input_dtype("Input") == ctx.input_dtype("Filter"),
              "Input and Filter must have the same dtype")
    s, p, d = (_ints(ctx, a, nd, lo) for a, lo in (("strides", 1), ("paddings", 0),
                                                   ("dilations", 1)))
    g = ctx.attr("groups")
    k = ws[2:]
    if transpose:
        ctx.check(xs[1] < 0 or xs[1] == ws[0], f"Input has {xs[1]} channels, Filter {ws} "
                  "expects dim 0 = input channels")
        out = [convt_out(xs[2 + i], k[i], s[i], p[i], d[i]) for i in range(nd)]
        want = list(ctx.attr("output_size"))
        if want:
            ctx.check(len(want) == nd and all(
                o < 0 or o <= w < o + s[i] for i, (o, w) in enumerate(zip(out, want))),
                f"output_size {want} must be within [size, size + stride) of {out}")
            out = want
        ctx.set_output("Output", [xs[0], ws[1] * g, *out], ctx.input_dtype("Input"))
    else:
        ctx.check(xs[1] < 0 or xs[1] == ws[1] * g, f"Input has {xs[1]} channels, Filter "
                  f"{ws} expects {ws[1] * g} ({ws[1]} per group x groups={g})")
        ctx.check(ws[0] % g == 0, f"the {ws[0]} filters do not split into groups={g}")
        out = [conv_out(xs[2 + i], k[i], s[i], p[i], d[i]) for i in range(nd)]
        ctx.check(all(o == -1 or o >= 1 for o in out), f"the output would be empty: {out}")
        ctx.set_output("Output", [xs[0], ws[0], *out], ctx.input_dtype("Input"))


def _infer_for(nd: int, transpose: bool) -> Callable[[InferContext], None]:
    def infer(ctx: InferContext) -> None:
        _infer(ctx, nd, transpose)

    return infer


for _t, _nd, _tr in (("conv3d", 3, False), ("conv2d_transpose", 2, True),
                     ("conv3d_transpose", 3, True)):
    define_op(_t, ["Input", "Filter"], ["Output"], _conv_attrs(_nd, _tr),
              doc=f"{_nd}-D {'transposed ' if _tr else ''}convolution (see the module doc)."
              )(_infer_for(_nd, _tr))


@define_op("pool3d", ["X"], ["Out"],
           [Attr("pooling_type", "string", "max", allowed=("max", "avg")),
            Attr("ksize", "ints"), Attr("global_pooling", "bool", False),
            Attr("strides", "ints", [1, 1, 1]), Attr("paddings", "ints", [0, 0, 0]),
            Attr("exclusive", "bool", True), Attr("adaptive", "bool", False),
            Attr("ceil_mode", "bool", False), Attr("use_cudnn", "bool", False),
            Attr("data_format", "string", "AnyLayout")],
           doc="3-D max / average pooling of [N, C, D, H, W] (pool2d's attributes).")
def _pool3d(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 5, f"X must be 5-D [N, C, D, H, W], got {xs}")
    if ctx.attr("global_pooling"):
        out = [1, 1, 1]
    elif ctx.attr("adaptive"):
        out = _ints(ctx, "ksize", 3, 1)
    else:
        k = _ints(ctx, "ksize", 3, 1)
        s, p = _ints(ctx, "strides", 3, 1), _ints(ctx, "paddings", 3, 0)
        out = [pool_out(xs[2 + i], k[i], s[i], p[i], ctx.attr("ceil_mode")) for i in range(3)]
        ctx.check(all(o == -1 or o >= 1 for o in out), f"the output would be empty: {out}")
    ctx.set_output("Out", [xs[0], xs[1], *out], ctx.input_dtype("X"))


def _declare() -> None:
    from ..grad import define_default_grad

    for t in ("conv3d", "conv2d_transpose", "conv3d_transpose"):
        define_default_grad(t, uses=("Input", "Filter"))
    define_default_grad("pool3d", uses=("X", "Out"), in_grads=["X"])


_declare()
