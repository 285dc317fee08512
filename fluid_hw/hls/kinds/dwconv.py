"""Kind ``dwconv``: a depthwise ``quantized_conv2d`` (groups = input channels = output
channels, filter ``[C, 1, kh, kw]``) + ``requantize``: a sliding-window generator in
channel-group order ("ckk") feeding one multiply-accumulate per PE lane (FINN's VVAU),
then the requantiser.  PE channels in parallel; no SIMD."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import hwc_order
from fluid_hw.rtl.dwconv import dwconv_latency
from fluid_hw.rtl.dwconv_spec import DepthwiseSpec

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name, param_value
from ..stages import (
    ReduceConsumer,
    Resources,
    memory_resources,
    queue_latency,
    swg_resources,
    window_cycles,
    window_times,
)
from ._base import StageKind
from ._image import image_input, row_buffer, window, window_memories
from ._matrix import check_weights, fifo_storage, requant_arrays, requant_tail


def is_depthwise(program: Any, op: Any) -> bool:
    if op.type != "quantized_conv2d" or op.attr("groups") == 1:
        return False
    gb = program.global_block()
    fname = op.input("Filter")[0]
    if not gb.has_var(fname):
        return False
    shape = list(gb.var(fname).shape)
    return len(shape) == 4 and shape[1] == 1 and shape[0] == op.attr("groups")


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    op = b.ops[chain[k]]
    wname = op.input("Filter")[0]
    bname = (op.input("Bias") or [None])[0]
    name = b.unique(layer_name(wname, main_output(op)))
    wv = check_weights(b, op, name, wname)
    used, rq, out, relu, out_fmt, requantize = requant_tail(b, chain, k, name)
    c, h, w = image_input(op, name, cur)
    filt = tuple(int(d) for d in wv.shape)
    if filt[0] != c:
        raise LoweringError(f"quantized_conv2d {name!r}: a depthwise filter {list(filt)} of "
                            f"{filt[0]} channels on an input of {c}")
    (oh, ow), pads, dil = window(op, name, (h, w), filt[2:], op.attr("strides"),
                                 op.attr("paddings"), op.attr("dilations"), False)
    geometry = {"filter": list(filt), "stride": [int(s) for s in op.attr("strides")],
                "padding": pads, "dilation": dil}
    out_shape = (c, oh, ow)
    st = LoweredStage(name, "dwconv", op.type, used, cur.var, out, cur.shape, out_shape,
                      cur.fmt, out_fmt, hwc_order(*out_shape),
                      {"weights": wname, "bias": bname, **rq},
                      {"weights": "Filter [C, 1, kh, kw], one filter per channel",
                       "stream": "HWC"}, geometry, relu, requantize, fold_dims=(1, c))
    return st, len(used)


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> DepthwiseSpec:
    arrays: dict[str, Any] = {}
    if values is not None:
        arrays = {"weights": param_value(values, st.params["weights"]),  # type: ignore
                  **requant_arrays(st, values, st.mh)}
    elif st.requantize:
        mode = "runtime"
    g = st.geometry
    _c, _one, kh, kw = g["filter"]
    return DepthwiseSpec(st.name, st.in_shape, kernel=(kh, kw),  # type: ignore[arg-type]
                         stride=tuple(g["stride"]), padding=tuple(g["padding"]),
                         dilation=tuple(g["dilation"]), pe=pe, relu=st.relu,
                         weights_mode=mode, requantize=st.requantize, **arrays)


def _cycles(s: Any, lanes: tuple[int, int]) -> int:
    c, h, w = s.in_shape
    return max(window_cycles(s.geometry, s.pe), h * w * c // s.pe)


def _latency(s: Any) -> int:
    return dwconv_latency(s.requantize) + queue_latency()


def _times(s: Any, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    g = s.geometry
    red = ReduceConsumer(g.kernel[0] * g.kernel[1])
    window_times(t_in, g, s.pe, red)
    return np.repeat(np.array(red.outputs) + _latency(s), s.pe)


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    const = "ram" if s.runtime else "rom"
    out = []
    for _ in range(s.pe):
        out.append((s.nf * s.sf, 8, const))       # weights: channel group x kernel position
        out.append((s.nf, 54, const))             # bias, multiplier, shift
    out.append((fifo_storage(4), s.out_bits * s.pe, "ram"))
    return out + window_memories(s.geometry, s.pe)


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    per_lane = Resources(lut=60, ff=16 + 32 + 40, dsp=1)
    rq = Resources(lut=180, ff=550, dsp=2) if s.requantize else Resources(lut=32, ff=130)
    total = swg_resources(s.geometry, s.pe) + Resources(lut=80, ff=60)
    for _ in range(s.pe):
        total = total + per_lane + rq + memory_resources(s.nf * s.sf, 8, const=not s.runtime) \
            + memory_resources(s.nf, 54, const=not s.runtime)
    return total


def _shape(s: Any) -> dict[str, Any]:
    kh, kw = s.kernel
    return {"in": list(s.in_shape), "out": list(s.out_shape), "kernel": [kh, kw],
            "stride": list(s.stride), "padding": list(s.padding), "depthwise": True}


KIND = StageKind(
    name="dwconv", spec=DepthwiseSpec, report_op="quantized_conv2d",
    matches=is_depthwise, lower=_lower, make_spec=_make_spec,
    cycles=_cycles, times=_times, resources=_resources, memories=_memories,
    lut=lambda s, lanes, cal: cal.per_pe * s.pe * 0.5 + cal.per_window,
    shape=_shape,
    buffer=row_buffer,
    doc="depthwise convolution + requantisation: windows into one MAC per PE lane",
)
