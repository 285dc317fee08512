"""Kind ``add``: ``quantized_add`` of two int8 streams (a residual join) as an
:class:`~fluid_hw.rtl.join.AddJoin`: both inputs rescaled to the output's format with
their own multiplier and shift, one rounding, saturation.  Both inputs must stream the
value in the same order; lanes follow the producers.  A relu after it folds into its
clamp."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.join import ADD_JOIN_LATENCY
from fluid_hw.rtl.join_spec import JoinSpec

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, FixedPoint, LoweredStage, Values, layer_name
from ..stages import Resources, queue_latency
from ._base import StageKind
from ._matrix import fifo_storage


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    i = chain[k]
    op = b.ops[i]
    out = main_output(op)
    name = b.unique(layer_name(out))
    other = b.cursor(op.input("Y")[0], op)
    if tuple(other.shape) != tuple(cur.shape) or not np.array_equal(other.perm, cur.perm):
        raise LoweringError(f"quantized_add {name!r} (-> {out}): its inputs {cur.var!r} and "
                            f"{other.var!r} arrive in different shapes or orders "
                            f"({list(cur.shape)} / {list(other.shape)}); the accelerator has "
                            "no reordering stage")
    relu = bool(op.attr("relu"))
    fmt = FixedPoint(8, 0 if relu else -128, 127, float(op.attr("out_scale")) or None)
    st = LoweredStage(name, "add", op.type, [i], cur.var, out, cur.shape, cur.shape, cur.fmt,
                      fmt, np.asarray(cur.perm), {}, {"join": "X -> port a, Y -> port b"},
                      {"x": [int(op.attr("x_multiplier")), int(op.attr("x_shift"))],
                       "y": [int(op.attr("y_multiplier")), int(op.attr("y_shift"))]}, relu,
                      extra_in=[other.var])
    return st, 1


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> JoinSpec:
    (ma, na), (mb, nb) = st.geometry["x"], st.geometry["y"]
    return JoinSpec(st.name, st.in_shape, ma=ma, na=na, mb=mb, nb=nb, relu=st.relu)


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    ln = lanes[0]
    return Resources(lut=150 * ln, ff=260 * ln, dsp=2 * ln)


KIND = StageKind(
    name="add", spec=JoinSpec, report_op="quantized_add",
    matches=lambda program, op: op.type == "quantized_add",
    lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: s.in_len // lanes[0],
    times=lambda s, lanes, t_in: t_in + ADD_JOIN_LATENCY + queue_latency(),
    resources=_resources,
    memories=lambda s, lanes: [(fifo_storage(4), 8 * lanes[0], "ram")],
    lut=lambda s, lanes, cal: 150.0 * lanes[0],
    shape=lambda s: {"in": list(s.in_shape), "out": list(s.out_shape)},
    doc="residual join: element-wise sum of two rescaled int8 streams",
)
