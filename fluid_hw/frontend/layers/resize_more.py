"""Bilinear and generic resizing layers of Paddle 1.5 (issue 20): ``resize_bilinear``,
``image_resize`` (bilinear or nearest) and ``image_resize_short``."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real

from ...errors import ShapeError
from ...ir.program import Variable
from ..layer_helper import LayerHelper
from .nn import _check_rank
from .resize import resize_nearest

__all__ = ["resize_bilinear", "image_resize", "image_resize_short"]


def resize_bilinear(input: Variable, out_shape: Sequence[int] | Variable | None = None,
                    scale: float | None = None, name: str | None = None,
                    actual_shape: Variable | None = None, align_corners: bool = True,
                    align_mode: int = 1) -> Variable:
    """Bilinear resizing of an NCHW image to ``out_shape`` [out_h, out_w] (ints or an
    int32 [2] variable) or by ``scale``; ``actual_shape`` overrides both at run time
    (see the ``bilinear_interp`` op for align_corners / align_mode)."""
    helper = LayerHelper("resize_bilinear", name=name)
    _check_rank(helper, input, 4, "4-D NCHW")
    if out_shape is None and scale is None:
        raise ShapeError(f"layer resize_bilinear {helper.name!r}: give out_shape or scale")
    if align_mode not in (0, 1):
        raise ValueError(f"resize_bilinear: align_mode must be 0 or 1, got {align_mode!r}")
    inputs: dict[str, Variable] = {"X": input}
    attrs: dict[str, object] = {"out_h": 0, "out_w": 0, "interp_method": "bilinear",
                                "align_corners": bool(align_corners),
                                "align_mode": int(align_mode)}
    if isinstance(out_shape, Variable):
        inputs["OutSize"] = out_shape
    elif out_shape is not None:
        vals = list(out_shape)
        if len(vals) != 2 or not all(isinstance(v, Integral) and v >= 1 for v in vals):
            raise ShapeError(f"layer resize_bilinear {helper.name!r}: out_shape must be two "
                             f"ints >= 1 [out_h, out_w], got {out_shape!r}")
        attrs["out_h"], attrs["out_w"] = int(vals[0]), int(vals[1])
    else:
        if not isinstance(scale, Real) or isinstance(scale, bool) or not scale > 0:
            raise ShapeError(f"layer resize_bilinear {helper.name!r}: scale must be a number "
                             f"> 0, got {scale!r}")
        attrs["scale"] = float(scale)
    if actual_shape is not None:
        inputs["OutSize"] = actual_shape
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("bilinear_interp", inputs, {"Out": out}, attrs)
    return out


def image_resize(input: Variable, out_shape: Sequence[int] | Variable | None = None,
                 scale: float | None = None, name: str | None = None,
                 resample: str = "BILINEAR", actual_shape: Variable | None = None,
                 align_corners: bool = True, align_mode: int = 1) -> Variable:
    """``resize_bilinear`` or ``resize_nearest`` by ``resample``."""
    if resample == "BILINEAR":
        return resize_bilinear(input, out_shape, scale, name, actual_shape, align_corners,
                               align_mode)
    if resample == "NEAREST":
        return resize_nearest(input, out_shape, scale, name, actual_shape, align_corners)
    raise ValueError(f"image_resize: resample must be 'BILINEAR' or 'NEAREST', got "
                     f"{resample!r}")


def image_resize_short(input: Variable, out_short_len: int,
                       resample: str = "BILINEAR") -> Variable:
    """Resize so the shorter of H and W becomes ``out_short_len``, keeping the aspect
    ratio (the longer side rounded to the nearest int)."""
    s = list(input.shape)
    if len(s) != 4 or s[2] <= 0 or s[3] <= 0:
        raise ShapeError(f"image_resize_short: input {input.name!r} must be NCHW with known "
                         f"H and W, got {s}")
    hw = s[2:]
    short = 0 if hw[0] <= hw[1] else 1
    out = [0, 0]
    out[short] = int(out_short_len)
    out[1 - short] = int(float(hw[1 - short]) * (float(out_short_len) / float(hw[short])) + 0.5)
    return image_resize(input, out_shape=out, resample=resample)
