"""Network ops of Paddle 1.5 added for issue 20: ``row_conv`` (look-ahead convolution
over each sequence), ``add_position_encoding`` (sinusoids added to a sequence batch)
and ``random_crop`` (a random window of each example)."""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op


@define_op("row_conv", ["X", "Filter"], ["Out"],
           doc="Out[t] = sum_k X[t + k] * Filter[k] (element-wise over features) for the "
               "rows t + k of t's sequence; Filter [future_context_size + 1, D].")
def _row_conv(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ws = ctx.input_shape("Filter")
    ctx.check(x.lod_level > 0, f"X {x.name!r} must be a LoD tensor of sequences (lod_level 1)")
    ctx.check(len(ws) == 2 and ws[1] == x.shape[-1],
              f"Filter must be [context, {x.shape[-1]}], got {ws}")
    ctx.share("X", "Out")


@define_op("add_position_encoding", ["X"], ["Out"],
           [Attr("alpha", "float", 1.0), Attr("beta", "float", 1.0)],
           doc="Out = alpha * X + beta * PE: position p, feature k < D/2: sin(p / "
               "10000^(k / (D/2 - 1))), feature D/2 + k: the cosine (positions restart "
               "with each sequence of a LoD X, else along dim 1 of [N, T, D]).")
def _add_position_encoding(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.shape[-1] > 0 and x.shape[-1] % 2 == 0,
              f"the encoding size (last dim of X {list(x.shape)}) must be even")
    ctx.check(x.lod_level > 0 or len(x.shape) == 3,
              f"X must be [N, T, D] or a LoD tensor [rows, D], got {list(x.shape)}")
    ctx.share("X", "Out")


@define_op("random_crop", ["X"], ["Out", Slot("Offsets", intermediate=True)],
           [Attr("shape", "ints", min=1), Attr("seed", "int", 0)],
           doc="Out = a window of `shape` (the last dims) of each example at a random "
               "offset; Offsets = the offsets drawn (for the gradient).")
def _random_crop(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    shape = list(ctx.attr("shape"))
    ctx.check(len(shape) <= len(xs), f"shape {shape} has more dims than X {xs}")
    tail = xs[len(xs) - len(shape):]
    ctx.check(all(t < 0 or s <= t for s, t in zip(shape, tail)),
              f"crop {shape} larger than X's last dims {tail}")
    lead = xs[:len(xs) - len(shape)]
    ctx.set_output("Out", [*lead, *shape], ctx.input_dtype("X"))
    n = 1
    for d in lead:
        n = -1 if d < 0 or n < 0 else n * d
    ctx.set_output("Offsets", [n, len(shape)], VarType.INT64)


def _declare() -> None:
    from ..grad import define_default_grad

    define_default_grad("row_conv", uses=("X", "Filter"))
    define_default_grad("add_position_encoding", uses=(), in_grads=["X"])
    define_default_grad("random_crop", uses=("X", "Offsets"), in_grads=["X"])


_declare()
