"""Bilinear resizing of Paddle 1.5 (issue 20): the ``bilinear_interp`` op, with
``nearest_interp``'s attributes and output size rules (``ir/ops/interp.py``)."""

from __future__ import annotations

import numpy as np

from ..registry import Attr, Slot, define_op
from .interp import _infer_nearest


def bilinear_weights(in_size: int, out_size: int, align_corners: bool, align_mode: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output index along one axis: the two input indices it mixes and the weight
    of the second (Paddle's rule: source ``k * ratio``, or with ``align_mode=0`` and
    not ``align_corners`` the half-pixel ``(k + 0.5) * ratio - 0.5`` clamped at 0;
    ratio ``(in - 1) / (out - 1)`` with align_corners, else ``in / out``)."""
    if align_corners:
        ratio = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        ratio = in_size / out_size
    k = np.arange(out_size, dtype=np.float64)
    if align_mode == 0 and not align_corners:
        src = np.maximum(ratio * (k + 0.5) - 0.5, 0.0)
    else:
        src = ratio * k
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, src - i0


define_op(
    "bilinear_interp",
    [Slot("X", doc="[N, C, H, W]"),
     Slot("OutSize", dispensable=True,
          doc="int32 [2]: (out_h, out_w) at run time, overriding scale and out_h/out_w")],
    [Slot("Out", doc="[N, C, out_h, out_w]")],
    [
        Attr("out_h", "int", 0), Attr("out_w", "int", 0),
        Attr("scale", "float", 0.0, min=0),
        Attr("interp_method", "string", "bilinear", allowed=("bilinear",)),
        Attr("align_corners", "bool", True),
        Attr("align_mode", "int", 1, allowed=(0, 1)),
        Attr("data_layout", "string", "NCHW", allowed=("NCHW", "AnyLayout")),
    ],
    doc="Bilinear resizing of an NCHW image (Fluid 1.5 ``bilinear_interp``); output size "
        "as nearest_interp's; each output mixes the 2x2 input cells around its source "
        "position (see bilinear_weights).",
)(_infer_nearest)


def _declare() -> None:
    from ..grad import define_default_grad

    define_default_grad("bilinear_interp", uses=("X",), in_grads=("X",))


_declare()
