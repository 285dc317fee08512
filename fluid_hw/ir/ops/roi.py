"""Region-of-interest pooling of Paddle 1.5 (issue 20): ``roi_pool`` (max over rounded
bins), ``roi_align`` (bilinear samples averaged per bin) and ``psroi_pool``
(position-sensitive average).  ROIs: [R, 4] boxes (x1, y1, x2, y2) in input-image
coordinates, a LoD tensor whose sequences are the boxes of each image of X."""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op


def _check(ctx: InferContext) -> list[int]:
    xs = ctx.input_shape("X")
    r = ctx.input_var("ROIs")
    ctx.check(len(xs) == 4, f"X must be NCHW, got {xs}")
    ctx.check(list(r.shape)[-1:] == [4] and r.lod_level > 0,
              f"ROIs {r.name!r} must be a LoD tensor [R, 4] of boxes (one sequence per image)")
    return xs


_COMMON = [Attr("pooled_height", "int", 1, min=1), Attr("pooled_width", "int", 1, min=1),
           Attr("spatial_scale", "float", 1.0, min=0.0)]


@define_op("roi_pool", ["X", "ROIs"], ["Out", Slot("Argmax", intermediate=True)], _COMMON,
           doc="Out[r, c] = the max of each of pooled_height x pooled_width bins of box r "
               "(corners scaled and rounded; an empty bin gives 0).")
def _roi_pool(ctx: InferContext) -> None:
    xs = _check(ctx)
    shape = [-1, xs[1], ctx.attr("pooled_height"), ctx.attr("pooled_width")]
    ctx.set_output("Out", shape, ctx.input_dtype("X"), lod_level=0)
    ctx.set_output("Argmax", shape, VarType.INT64, lod_level=0)


@define_op("roi_align", ["X", "ROIs"], ["Out"],
           [*_COMMON, Attr("sampling_ratio", "int", -1)],
           doc="Out[r, c] = per bin, the mean of sampling_ratio^2 bilinear samples (-1: "
               "ceil(bin size) per axis) of box r (corners scaled, not rounded).")
def _roi_align(ctx: InferContext) -> None:
    xs = _check(ctx)
    ctx.set_output("Out", [-1, xs[1], ctx.attr("pooled_height"), ctx.attr("pooled_width")],
                   ctx.input_dtype("X"), lod_level=0)


@define_op("psroi_pool", ["X", "ROIs"], ["Out"],
           [*_COMMON, Attr("output_channels", "int", min=1)],
           doc="Position-sensitive ROI average pooling: output channel c, bin (i, j) "
               "averages input channel (c * pooled_height + i) * pooled_width + j over the "
               "bin.")
def _psroi_pool(ctx: InferContext) -> None:
    xs = _check(ctx)
    oc, ph, pw = (ctx.attr(a) for a in ("output_channels", "pooled_height", "pooled_width"))
    ctx.check(xs[1] < 0 or xs[1] == oc * ph * pw,
              f"X has {xs[1]} channels; output_channels * pooled_height * pooled_width = "
              f"{oc * ph * pw}")
    ctx.set_output("Out", [-1, oc, ph, pw], ctx.input_dtype("X"), lod_level=0)


def _declare() -> None:
    from ..grad import define_default_grad

    define_default_grad("roi_pool", uses=("X", "ROIs", "Argmax"), out_grads=["Out"],
                        in_grads=["X"])
    define_default_grad("roi_align", uses=("X", "ROIs"), in_grads=["X"])
    define_default_grad("psroi_pool", uses=("X", "ROIs"), in_grads=["X"])


_declare()
