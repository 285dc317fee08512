"""Kind ``add``: ``quantized_add`` of two int8 streams (a residual join) as an
:class:`~fluid_hw.rtl.join.AddJoin`: both inputs rescaled to the output's format with
their own multiplier and shift, one rounding, saturation.  Both inputs must stream the
value in the same order; lanes follow the producers.  A relu after it folds into its
clamp.  With runtime weights both multipliers and shifts are one entry the host writes
through the register map (the shifts are then variable: a longer pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.join_spec import JoinSpec
from fluid_hw.rtl.stream import credit_depth

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name
from ..stages import Resources
from ._join import join_kind, join_mode, join_output
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
    relu, fmt = join_output(op)
    st = LoweredStage(name, "add", op.type, [i], cur.var, out, cur.shape, cur.shape, cur.fmt,
                      fmt, np.asarray(cur.perm), {}, {"join": "X -> port a, Y -> port b"},
                      {"x": [int(op.attr("x_multiplier")), int(op.attr("x_shift"))],
                       "y": [int(op.attr("y_multiplier")), int(op.attr("y_shift"))]}, relu,
                      extra_in=[other.var])
    return st, 1


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> JoinSpec:
    (ma, na), (mb, nb) = st.geometry["x"], st.geometry["y"]
    return JoinSpec(st.name, st.in_shape, ma=ma, na=na, mb=mb, nb=nb, relu=st.relu,
                    weights_mode=join_mode(values, mode))


#: LUTs and flip-flops of a lane (ECP5)
ADD_LUT_LANE, ADD_FF_LANE = 150, 260
#: runtime multipliers and shifts (variable shifts, two more pipeline stages), fitted
#: to Yosys (synth_ecp5) on conv -> table -> add designs of 1 and 4 lanes against the
#: const ones (450 and 1,478 LUT4 more, 337 and 654 flip-flops, in designs whose only
#: runtime stage it is, so the parameter loader's share included): LUTs per stage and
#: per lane in units of ``cal.per_runtime_pe`` and in ECP5 LUT4, flip-flops per stage
#: and per lane
ADD_RUNTIME_LUT, ADD_RUNTIME_LUT_LANE = 0.57, 1.82
ADD_GENERIC_RUNTIME_LUT, ADD_GENERIC_RUNTIME_LUT_LANE = 107, 343
ADD_RUNTIME_FF, ADD_RUNTIME_FF_LANE = 243, 111


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    ln = lanes[0]
    lut, ff = ADD_LUT_LANE * ln, ADD_FF_LANE * ln
    if s.runtime:
        lut += ADD_GENERIC_RUNTIME_LUT + ADD_GENERIC_RUNTIME_LUT_LANE * ln
        ff += ADD_RUNTIME_FF + ADD_RUNTIME_FF_LANE * ln
    return Resources(lut=lut, ff=ff, dsp=2 * ln)


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    lut = float(ADD_LUT_LANE * lanes[0])
    if s.runtime:
        lut += (ADD_RUNTIME_LUT + ADD_RUNTIME_LUT_LANE * lanes[0]) * cal.per_runtime_pe
    return lut


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    """The output queue: as fitted to Yosys, 3 entries for the const join (its 9 x 8
    bits stay in logic on iCE40, which the block-RAM rule would not predict), the
    runtime join's whole storage (11 x 8 bits: a block on iCE40, as Yosys does)."""
    depth = credit_depth(s.latency, 1) if s.runtime else 4
    return [(fifo_storage(depth), 8 * lanes[0], "ram")]


KIND = join_kind(
    "add", JoinSpec, "quantized_add", lower=_lower, make_spec=_make_spec,
    resources=_resources, memories=_memories, lut=_lut,
    shape=lambda s: {"in": list(s.in_shape), "out": list(s.out_shape)},
    doc="residual join: element-wise sum of two rescaled int8 streams",
)
