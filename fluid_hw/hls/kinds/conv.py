"""Kind ``conv``: ``quantized_conv2d`` (groups 1) + ``requantize`` as a sliding-window
generator in front of an MVAU; the filter ``[M, C, kh, kw]`` becomes the matrix
``[M, (ky*kw + kx)*C + c]`` (window order "kkc"), images stream HWC.  A thin input
(fewer channels than SIMD, ``ConvSpec.wide_window``) takes its windows from the wide
generator, SIMD elements a cycle; its models are in :mod:`._image`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.mvau import mvau_latency
from fluid_hw.rtl.swg_wide import wide_window_cycles

from ..partition import LoweringError
from ..stage_info import Cursor, LoweredStage, Values
from ..stages import (
    ConvStage,
    MVAUConsumer,
    Resources,
    queue_latency,
    swg_resources,
    window_cycles,
    window_times,
)
from ._base import StageKind
from ._image import (
    lower_convolution,
    row_buffer,
    wide_window_lut,
    wide_window_memories,
    wide_window_resources,
    wide_window_times,
    window_memories,
)
from ._matrix import (
    matrix_arrays,
    matrix_lut,
    matrix_memories,
    matrix_resources,
    stage_act_bits,
    stage_clamp,
    weight_layout,
    window_args,
)


def _matches(program: Any, op: Any) -> bool:
    return op.type == "quantized_conv2d" and op.attr("groups") == 1


def _out_channels(name: str, wname: str, filt: tuple[int, ...], c: int) -> int:
    if filt[1] != c:
        raise LoweringError(f"quantized_conv2d {name!r}: its filter {wname!r} {list(filt)} "
                            f"expects {filt[1]} input channels, the input has {c}")
    return filt[0]


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    st, used = lower_convolution(
        b, chain, k, cur, "conv", _out_channels,
        {"weights": "Filter [M, C, kh, kw] -> matrix [M, (ky*kw + kx)*C + c]",
         "stream": "HWC"})
    m, c, kh, kw = st.geometry["filter"]
    st.fold_dims = (c * kh * kw, m)
    st.layout.update(weight_layout(b.ops[chain[k]]))
    return st, used


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> ConvStage:
    arrays, mode = matrix_arrays(st, values, mode)
    return ConvStage(st.name, st.in_shape, st.geometry["filter"][0],  # type: ignore[arg-type]
                     pe=pe, simd=simd, relu=st.relu, weights_mode=mode,
                     requantize=st.requantize, clamp=stage_clamp(st), **window_args(st),
                     weight_bits=int(st.layout.get("weight_bits", 8)),
                     act_bits=stage_act_bits(st), **arrays)


def _cycles(s: Any, lanes: tuple[int, int]) -> int:
    oh, ow = s.geometry.out_hw
    c, h, w = s.in_shape
    if s.wide_window:
        windows = wide_window_cycles(s.geometry, s.simd, s.nf * s.sf)
    else:
        windows = window_cycles(s.geometry, s.window_lanes)
    return max(windows, oh * ow * s.nf * s.sf, h * w * c // s.window_lanes)


def _times(s: Any, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    g = s.geometry
    if s.wide_window:
        cons = MVAUConsumer(s.sf, 1, s.sf, s.nf)
        wide_window_times(t_in, g, s.simd, cons, s.nf * s.sf)
    else:
        n_w = g.window_size // s.window_lanes
        cons = MVAUConsumer(n_w, s.simd // s.window_lanes, s.sf, s.nf)
        window_times(t_in, g, s.window_lanes, cons)
    lat = mvau_latency(s.simd, s.requantize, pe=s.pe, sf=s.sf,
                       thresholds=s.thresholds is not None)
    nf = np.arange(s.mh) // s.pe
    return np.concatenate([c + (nf + 1) * s.sf - 1 + lat + queue_latency()
                           for c in cons.compute])


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    if s.wide_window:
        windows = wide_window_resources(s.geometry, s.simd)
    else:
        windows = swg_resources(s.geometry, s.window_lanes)
    return matrix_resources(s) + windows


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    if s.wide_window:
        return matrix_memories(s) + wide_window_memories(s.geometry)
    return matrix_memories(s) + window_memories(s.geometry, s.window_lanes)


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    if s.wide_window:
        return matrix_lut(s, cal) + wide_window_lut(s.geometry, s.simd, cal)
    return matrix_lut(s, cal) + cal.per_window


def _shape(s: Any) -> dict[str, Any]:
    kh, kw = s.kernel
    return {"in": list(s.in_shape), "out": list(s.out_shape), "kernel": [kh, kw],
            "stride": list(s.stride), "padding": list(s.padding)}


KIND = StageKind(
    name="conv", spec=ConvStage, report_op="quantized_conv2d",
    matches=_matches, lower=_lower, make_spec=_make_spec,
    cycles=_cycles, times=_times, resources=_resources,
    memories=_memories,
    lut=_lut,
    shape=_shape,
    buffer=row_buffer,
    doc="convolution (groups 1) + requantisation: sliding windows into an MVAU",
)
