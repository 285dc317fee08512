"""Kind ``maxpool``: a max ``quantized_pool2d`` as a sliding-window generator (channel
group order "ckk") in front of a lane-wise max reducer; lanes follow the producer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import hwc_order

from ..partition import main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name
from ..stages import (
    MaxPoolStage,
    ReduceConsumer,
    Resources,
    swg_resources,
    window_cycles,
    window_times,
)
from ._base import StageKind
from ._image import image_input, row_buffer, window, window_memories


def pool_geometry(b: Any, op: Any, name: str, cur: Cursor) -> dict[str, Any]:
    """Kernel, stride and (top, left, bottom, right) padding of a pooling op."""
    _c, h, w = image_input(op, name, cur)
    if op.attr("global_pooling"):
        return {"kernel": [h, w], "stride": [1, 1], "padding": [0, 0, 0, 0], "out": (1, 1)}
    k = [int(v) for v in op.attr("ksize")]
    s = [int(v) for v in op.attr("strides")]
    (oh, ow), pads, _ = window(op, name, (h, w), k, s, op.attr("paddings"), [1, 1],
                               bool(op.attr("ceil_mode")))
    return {"kernel": k, "stride": s, "padding": pads, "out": (oh, ow)}


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    i = chain[k]
    op = b.ops[i]
    out = main_output(op)
    name = b.unique(layer_name(out))
    g = pool_geometry(b, op, name, cur)
    out_shape = (cur.shape[0], *g.pop("out"))
    st = LoweredStage(name, "maxpool", op.type, [i], cur.var, out, cur.shape, out_shape,
                      cur.fmt, cur.fmt, hwc_order(*out_shape), {}, {"stream": "HWC"}, g)
    return st, 1


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> MaxPoolStage:
    g = st.geometry
    return MaxPoolStage(st.name, st.in_shape, kernel=tuple(g["kernel"]),  # type: ignore[arg-type]
                        stride=tuple(g["stride"]), padding=tuple(g["padding"]))


def pool_cycles(s: Any, lanes: tuple[int, int]) -> int:
    """A window generator feeding a reducer that takes a beat a cycle."""
    c, h, w = s.in_shape
    return max(window_cycles(s.geometry, lanes[0]), h * w * c // lanes[0])


def pool_times(s: Any, lanes: tuple[int, int], t_in: np.ndarray, after: int = 0
               ) -> np.ndarray:
    """Output times of a window generator feeding a reducer, ``after`` cycles later."""
    g = s.geometry
    red = ReduceConsumer(g.kernel[0] * g.kernel[1])
    window_times(t_in, g, lanes[0], red)
    return np.repeat(np.array(red.outputs) + after, lanes[0])


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    return swg_resources(s.geometry, lanes[0]) + Resources(lut=12 * lanes[0], ff=24 * lanes[0])


def pool_shape(s: Any) -> dict[str, Any]:
    return {"in": list(s.in_shape), "out": list(s.out_shape), "kernel": list(s.kernel),
            "stride": list(s.stride)}


KIND = StageKind(
    name="maxpool", spec=MaxPoolStage, report_op="pool2d",
    matches=lambda program, op: op.type == "quantized_pool2d" and
    op.attr("pooling_type") == "max",
    lower=_lower, make_spec=_make_spec, cycles=pool_cycles, times=pool_times,
    resources=_resources,
    memories=lambda s, lanes: window_memories(s.geometry, lanes[0]),
    lut=lambda s, lanes, cal: cal.per_window,
    shape=pool_shape,
    buffer=row_buffer,
    relu_commutes=True,
    doc="max pooling: sliding windows into a lane-wise max reducer",
)
