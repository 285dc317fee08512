"""What the image kinds (convolutions, pooling) share: the HWC input check, window
geometry from an op's attributes, and the sliding-window generator's memories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import hwc_order
from fluid_hw.rtl.swg import QUEUE_DEPTH, WindowGeometry, line_depth

from ...errors import FluidError
from ...ir.ops.nn import window_geometry
from ..partition import LoweringError
from ..stage_info import Cursor
from ._matrix import fifo_storage

__all__ = ["image_input", "window", "window_memories", "row_buffer", "lower_convolution"]


def image_input(op: Any, name: str, cur: Cursor) -> tuple[int, int, int]:
    """``(C, H, W)`` of the image a window stage reads, which must stream in HWC order."""
    if len(cur.shape) != 3:
        raise LoweringError(f"{op.type} {name!r} reads {cur.var!r} of shape "
                            f"{list(cur.shape)}; expected [C, H, W]")
    if not np.array_equal(cur.perm, hwc_order(*cur.shape)):
        raise LoweringError(
            f"{op.type} {name!r} reads {cur.var!r}, which arrives in an order that is not "
            "HWC (a fully-connected output reshaped into an image, or a transpose); the "
            "accelerator has no reordering stage. Reshape before the fully-connected layer "
            "instead, or keep that part on the CPU")
    c, h, w = cur.shape
    return c, h, w


def window(op: Any, name: str, hw: tuple[int, int], k: Sequence[int], strides: Sequence[int],
           paddings: Sequence[int], dilations: Sequence[int], ceil_mode: bool
           ) -> tuple[tuple[int, int], list[int], list[int]]:
    """Output size, pads (top, left, bottom, right) and dilation of a window op."""
    try:
        out, pads, dil = window_geometry(list(hw), list(k), list(strides), list(paddings),
                                         list(dilations), op.attr("padding_algorithm"),
                                         ceil_mode)
    except FluidError as e:
        raise LoweringError(f"{op.type} {name!r}: {e}") from None
    top, bottom, left, right = pads
    if ceil_mode:  # the last window may hang over: more bottom/right padding
        bottom = max(bottom, (out[0] - 1) * strides[0] + dil[0] * (k[0] - 1) + 1 - hw[0] - top)
        right = max(right, (out[1] - 1) * strides[1] + dil[1] * (k[1] - 1) + 1 - hw[1] - left)
    return (out[0], out[1]), [top, left, bottom, right], dil


def window_memories(geom: WindowGeometry, lanes: int) -> list[tuple[int, int, str]]:
    """The line buffer and output queue of a sliding-window generator."""
    return [(line_depth(geom, lanes), 8 * lanes, "ram"),
            (fifo_storage(QUEUE_DEPTH), 8 * lanes, "ram")]


def row_buffer(s: Any) -> int:
    """Elements a sliding-window stage holds of its input: one image row."""
    c, _h, w = s.in_shape
    return int(w * c)


def lower_convolution(b: Any, chain: Sequence[int], k: int, cur: Cursor, kind: str,
                      out_channels: Any, layout: dict[str, str]) -> tuple[Any, int]:
    """The LoweredStage of a ``quantized_conv2d`` (+ ``requantize``) at ``chain[k]``
    reading ``cur``: ``out_channels(filter_shape, in_channels)`` checks the filter
    against the input and gives the output channels (raising LoweringError)."""
    from ..partition import main_output
    from ..stage_info import LoweredStage, layer_name
    from ._matrix import check_weights, requant_tail

    op = b.ops[chain[k]]
    wname = op.input("Filter")[0]
    bname = (op.input("Bias") or [None])[0]
    name = b.unique(layer_name(wname, main_output(op)))
    wv = check_weights(b, op, name, wname)
    used, rq, out, relu, out_fmt, requantize = requant_tail(b, chain, k, name)
    c, h, w = image_input(op, name, cur)
    filt = tuple(int(d) for d in wv.shape)
    m = out_channels(name, wname, filt, c)
    (oh, ow), pads, dil = window(op, name, (h, w), filt[2:], op.attr("strides"),
                                 op.attr("paddings"), op.attr("dilations"), False)
    geometry = {"filter": list(filt), "stride": [int(s) for s in op.attr("strides")],
                "padding": pads, "dilation": dil}
    out_shape = (m, oh, ow)
    st = LoweredStage(name, kind, op.type, used, cur.var, out, cur.shape, out_shape,
                      cur.fmt, out_fmt, hwc_order(*out_shape),
                      {"weights": wname, "bias": bname, **rq}, layout, geometry, relu,
                      requantize)
    return st, len(used)
