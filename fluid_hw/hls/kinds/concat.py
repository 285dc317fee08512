"""Kind ``concat``: ``quantized_concat`` of two or more int8 streams along the channel
axis as a :class:`~fluid_hw.rtl.concat.ConcatJoin`: per output group (a pixel of
HWC-streamed images; the whole value for vectors) each input's block in turn, each
rescaled to the output's format with its own multiplier and shift.  Lanes follow the
producers and divide every input's block.  A relu after it folds into its clamp.

The join takes each element from one input (``port_order``), so the timing model and
the join FIFO sizing (:func:`~fluid_hw.hls.lower.join_fifo_depths`) follow each input
on its own.  With runtime weights each input's multiplier and shift is an entry the host
writes through the register map; every input then has a rescaler (new scales may need
one) and the shifts are variable: a stage longer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.concat import CONCAT_PORTS, concat_positions
from fluid_hw.rtl.concat_spec import ConcatSpec
from fluid_hw.rtl.stream import credit_depth

from ..partition import LoweringError, main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name
from ..stages import Resources
from ._join import join_kind, join_mode, join_output
from ._matrix import fifo_storage

#: generic (ECP5) figures of a lane: with a rescaling multiplier (the input and
#: multiplier registers, product registers, rounding, shift and clamp), and without one
#: (every input at the output's scale: a register and the clamp).  Flip-flops and
#: multipliers as Yosys' synth_ecp5 counts them on 4-lane units (417 and 110 FFs, with
#: the select and the output queue); LUTs estimated from its gate counts before
#: mapping (uncalibrated)
CONCAT_SCALED_LANE = Resources(lut=100, ff=105, dsp=1)
CONCAT_PLAIN_LANE = Resources(lut=35, ff=28)
#: what runtime multipliers and shifts add, fitted to Yosys (synth_ecp5, the unit alone:
#: 2 and 3 inputs, 1 and 4 lanes, against the const unit: +276 / +831 and +371 / +1,128
#: LUT4, +127 / +241 and +159 / +240 flip-flops): per stage, per input (its registers:
#: multiplier, shift, rounding term), per lane (the variable shift, a pipeline stage)
#: and per input and lane (the select of its registers); flip-flops least squares
#: (Yosys trims some).  The parameter loader's share in the top comes on top
CONCAT_RUNTIME_STAGE = Resources(lut=35, ff=69)
CONCAT_RUNTIME_INPUT = Resources(lut=28, ff=16)
CONCAT_RUNTIME_LANE = Resources(lut=51, ff=33)
CONCAT_RUNTIME_LANE_INPUT = Resources(lut=67)


def _channel_fastest(shape: tuple[int, ...]) -> np.ndarray:
    """The stream order with the first (channel) axis fastest: HWC for an image."""
    n = int(np.prod(shape))
    return np.moveaxis(np.arange(n).reshape(shape), 0, -1).reshape(-1)


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    i = chain[k]
    op = b.ops[i]
    out = main_output(op)
    name = b.unique(layer_name(out))
    curs = [b.cursor(v, op) for v in op.input("X")]
    shapes = [tuple(int(d) for d in c.shape) for c in curs]
    axis = int(op.attr("axis")) % (len(shapes[0]) + 1)
    if axis != 1:
        raise LoweringError(f"quantized_concat {name!r} (-> {out}) joins along axis {axis}; "
                            "the accelerator joins along the channel axis (1) only. Concatenate "
                            "along the channels, or keep this concat on the CPU")
    if len(curs) > len(CONCAT_PORTS):
        raise LoweringError(f"quantized_concat {name!r} (-> {out}) joins {len(curs)} values; "
                            f"a concat stage takes at most {len(CONCAT_PORTS)}. Split it into "
                            "nested concats")
    rest = shapes[0][1:]
    g = int(np.prod(rest))
    # every input channel-fastest (HWC images, or vectors): one group per pixel, and the
    # output is channel-fastest too; otherwise each input's whole stream in turn
    groups = g if all(np.array_equal(c.perm, _channel_fastest(s))
                      for c, s in zip(curs, shapes)) else 1
    channels = [s[0] for s in shapes]
    blocks = [c * g // groups for c in channels]
    out_shape = (sum(channels), *rest)
    perm = np.empty(int(np.prod(out_shape)), np.int64)
    first = 0
    for c, pos, ch in zip(curs, concat_positions(blocks, groups), channels):
        chan, r = np.divmod(np.asarray(c.perm, np.int64), g)  # element (chan, r) of its input
        perm[pos] = (chan + first) * g + r
        first += ch
    relu, fmt = join_output(op)
    order = "a pixel of each input in turn (HWC)" if groups == g > 1 else \
        "each input's stream in turn"
    st = LoweredStage(name, "concat", op.type, [i], cur.var, out, cur.shape, out_shape,
                      cur.fmt, fmt, perm, {},
                      {"join": f"X[p] -> port {', '.join(CONCAT_PORTS[:len(curs)])}",
                       "stream": order},
                      {"shapes": [list(s) for s in shapes], "groups": groups,
                       "multipliers": [int(v) for v in op.attr("multipliers")],
                       "shifts": [int(v) for v in op.attr("shifts")]}, relu,
                      extra_in=[c.var for c in curs[1:]])
    return st, 1


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> ConcatSpec:
    g = st.geometry
    return ConcatSpec(st.name, tuple(tuple(s) for s in g["shapes"]), g["groups"],
                      tuple(g["multipliers"]), tuple(g["shifts"]), relu=st.relu,
                      weights_mode=join_mode(values, mode))


def _lane(s: ConcatSpec) -> Resources:
    return CONCAT_PLAIN_LANE if s.latency == 2 else CONCAT_SCALED_LANE


def _resources(s: ConcatSpec, lanes: tuple[int, int]) -> Resources:
    lane, ln = _lane(s), lanes[0]
    mux = 4 * s.n_inputs * ln  # the input select
    lut, ff = lane.lut * ln + mux, lane.ff * ln
    if s.runtime:  # a rescaler on every input (``_lane`` is the scaled lane)
        k = s.n_inputs
        for r, times in ((CONCAT_RUNTIME_STAGE, 1), (CONCAT_RUNTIME_INPUT, k),
                         (CONCAT_RUNTIME_LANE, ln), (CONCAT_RUNTIME_LANE_INPUT, k * ln)):
            lut, ff = lut + r.lut * times, ff + r.ff * times
    return Resources(lut=lut, ff=ff, dsp=lane.dsp * ln)


KIND = join_kind(
    "concat", ConcatSpec, "quantized_concat", lower=_lower, make_spec=_make_spec,
    resources=_resources,
    memories=lambda s, lanes: [(fifo_storage(credit_depth(s.latency, 1)), 8 * lanes[0],
                                "ram")],
    lut=lambda s, lanes, cal: float(_resources(s, lanes).lut),
    shape=lambda s: {"in": [list(v) for v in s.shapes], "out": list(s.out_shape)},
    port_order=lambda s: s.positions(),
    doc="channel concat: each input's block of a pixel in turn, each rescaled",
)
