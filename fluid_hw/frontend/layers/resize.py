"""Image resizing layers: ``resize_nearest`` (Fluid 1.5's, the ``nearest_interp`` op)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real

from ...errors import ShapeError
from ...ir.program import Variable
from ..layer_helper import LayerHelper
from .nn import _check_rank

__all__ = ["resize_nearest"]


def resize_nearest(input: Variable, out_shape: Sequence[int] | Variable | None = None,
                   scale: float | None = None, name: str | None = None,
                   actual_shape: Variable | None = None,
                   align_corners: bool = True) -> Variable:
    """Nearest-neighbour resizing of an NCHW image to ``out_shape`` ``[out_h, out_w]``
    (ints, or an int32 [2] variable) or by ``scale`` (``out = int(in * scale)``);
    ``actual_shape`` (an int32 [2] variable) overrides both at run time.  As in Fluid,
    ``align_corners`` defaults to True; ``align_corners=False`` with an integer scale
    repeats every row and column ``scale`` times (what the FPGA's ``upsample`` stage
    does).  See the ``nearest_interp`` op."""
    helper = LayerHelper("resize_nearest", name=name)
    _check_rank(helper, input, 4, "4-D NCHW")
    if out_shape is None and scale is None:
        raise ShapeError(f"layer resize_nearest {helper.name!r}: give out_shape or scale")
    inputs: dict[str, Variable] = {"X": input}
    attrs: dict[str, object] = {"out_h": 0, "out_w": 0, "interp_method": "nearest",
                                "align_corners": bool(align_corners)}
    if isinstance(out_shape, Variable):
        inputs["OutSize"] = out_shape
    elif out_shape is not None:
        vals = list(out_shape)
        if len(vals) != 2 or not all(isinstance(v, Integral) and v >= 1 for v in vals):
            raise ShapeError(f"layer resize_nearest {helper.name!r}: out_shape must be two "
                             f"ints >= 1 [out_h, out_w], got {out_shape!r}")
        attrs["out_h"], attrs["out_w"] = int(vals[0]), int(vals[1])
    else:
        if not isinstance(scale, Real) or isinstance(scale, bool) or not scale > 0:
            raise ShapeError(f"layer resize_nearest {helper.name!r}: scale must be a number "
                             f"> 0, got {scale!r}")
        attrs["scale"] = float(scale)
    if actual_shape is not None:
        inputs["OutSize"] = actual_shape
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("nearest_interp", inputs, {"Out": out}, attrs)
    return out
