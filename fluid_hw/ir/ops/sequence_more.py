"""More sequence ops of Paddle 1.5 (issue 20): ``sequence_reverse``, ``sequence_slice``,
``sequence_expand_as``, ``sequence_enumerate`` and ``sequence_scatter``.  Sequences are
the last LoD level of the input named."""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, define_op


def _lod(ctx: InferContext, slot: str) -> int:
    v = ctx.input_var(slot)
    ctx.check(v.lod_level > 0, f"{slot} {v.name!r} has lod_level 0; {ctx.op.type} needs a "
              "batch of sequences (declare it with lod_level=1)")
    return v.lod_level


@define_op("sequence_reverse", ["X"], ["Y"], doc="Y = each sequence of X, rows reversed.")
def _sequence_reverse(ctx: InferContext) -> None:
    _lod(ctx, "X")
    ctx.share("X", "Y")


@define_op("sequence_slice", ["X", "Offset", "Length"], ["Out"],
           doc="Out sequence i = rows Offset[i] .. Offset[i] + Length[i] - 1 of sequence i.")
def _sequence_slice(ctx: InferContext) -> None:
    _lod(ctx, "X")
    for s in ("Offset", "Length"):
        ctx.check(ctx.input_dtype(s) in (VarType.INT32, VarType.INT64), f"{s} must be int")
    x = ctx.input_var("X")
    ctx.set_output("Out", [-1, *x.shape[1:]], x.dtype, lod_level=1)


@define_op("sequence_expand_as", ["X", "Y"], ["Out"],
           doc="Out = row i of X repeated as many times as sequence i of Y has rows; Y's LoD.")
def _sequence_expand_as(ctx: InferContext) -> None:
    _lod(ctx, "Y")
    x = ctx.input_var("X")
    ctx.set_output("Out", [-1, *x.shape[1:]], x.dtype, lod_level=1)


@define_op("sequence_enumerate", ["X"], ["Out"],
           [Attr("win_size", "int", min=1), Attr("pad_value", "int", 0)],
           doc="Out[i] = the win_size ids from row i of X on, within its sequence (pad_value "
               "past the end).")
def _sequence_enumerate(ctx: InferContext) -> None:
    lvl = _lod(ctx, "X")
    x = ctx.input_var("X")
    ctx.check(x.dtype in (VarType.INT32, VarType.INT64), f"X {x.name!r} must hold int ids")
    ctx.check(len(x.shape) == 2 and x.shape[1] == 1, f"X must be [N, 1], got {list(x.shape)}")
    ctx.set_output("Out", [x.shape[0], ctx.attr("win_size")], x.dtype, lod_level=lvl)


@define_op("sequence_scatter", ["X", "Ids", "Updates"], ["Out"],
           doc="Out = X with Updates[j] added at column Ids[j] of row i, for each row j of "
               "sequence i of Ids.")
def _sequence_scatter(ctx: InferContext) -> None:
    _lod(ctx, "Ids")
    ctx.check(len(ctx.input_shape("X")) == 2, "X must be 2-D [rows, columns]")
    ctx.share("X", "Out", lod=False)


def _declare() -> None:
    from ..grad import define_default_grad, no_grad

    define_default_grad("sequence_reverse", uses=("X",), in_grads=["X"])
    define_default_grad("sequence_slice", uses=("X", "Offset", "Length"), in_grads=["X"])
    define_default_grad("sequence_expand_as", uses=("X", "Y"), in_grads=["X"])
    define_default_grad("sequence_scatter", uses=("Ids",), in_grads=["X", "Updates"])
    no_grad("integer", "sequence_enumerate")


_declare()
