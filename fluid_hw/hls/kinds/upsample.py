"""Kind ``upsample``: a ``nearest_interp`` on int8 that repeats every row ``fy`` and
every column ``fx`` times (integer factors: ``align_corners=False``, or any setting
that picks the same rows) as an :class:`~fluid_hw.rtl.upsample.Upsample`: one row
buffer, every row read ``fy`` times, every pixel ``fx`` times.  Same numbers and scale
in and out; lanes follow the producer; a relu after it commutes with it.

A separate kind rather than part of the sliding-window generator: the window
generator's read address is the design's critical path, and a unit of its own costs
one row of buffer.  Any other ``nearest_interp`` (a fractional factor, a size given at
run time) runs on the host, exactly, and :func:`host_reason` says why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl import ceil_log2, hwc_order
from fluid_hw.rtl.upsample import UPSAMPLE_LATENCY, upsample_queue_depth
from fluid_hw.rtl.upsample_spec import UpsampleSpec

from ...ir import dtypes
from ...ir.ops.interp import integer_factor
from ..partition import LoweringError, main_output
from ..stage_info import Cursor, LoweredStage, Values, layer_name
from ..stages import Resources, memory_resources, queue_latency
from ._base import StageKind
from ._image import image_input
from ._matrix import fifo_storage

__all__ = ["KIND", "factors", "host_reason", "upsample_times"]

#: LUTs of the counters and comparators besides the memories, in units of
#: ``cal.per_window``: base + per bit of the row buffer's address.  Fitted to Yosys
#: (synth_ecp5, LUT4 + 2 per CCU2C) on five units alone (16 or 64 channels x 16 to 40
#: pixels at 1 lane; 16 x 16 at 4, 32 x 32 at 2, 8 x 8 at 8 lanes): 84 to 201 LUTs,
#: the fit within -8 .. +7 %; the lanes add none (their data goes through the memory)
UPSAMPLE_LUT_BASE, UPSAMPLE_LUT_BIT = 31 / 148, 14.7 / 148
#: flip-flops, from the same synthesis (103 to 229, within -8 .. +4 %): base, per
#: address bit, per lane (the read register and the queue's output register)
UPSAMPLE_FF = (65 / 0.951, 3.2 / 0.951, 20 / 0.951)


def factors(program: Any, op: Any) -> tuple[tuple[int, int] | None, str]:
    """``((fy, fx), "")`` when ``op`` is a ``nearest_interp`` the upsample stage can do,
    else ``(None, why not)`` (``why`` empty for an op that is not an integer
    ``nearest_interp`` at all)."""
    if op.type != "nearest_interp":
        return None, ""
    gb = program.global_block()
    x, out = op.input("X")[0], op.output("Out")[0]
    if not gb.has_var(x) or not dtypes.is_integer(gb.var(x).dtype):
        return None, ""
    if op.input("OutSize"):
        return None, "its size comes from the OutSize tensor at run time"
    xs, os_ = list(gb.var(x).shape), list(gb.var(out).shape) if gb.has_var(out) else []
    if len(xs) != 4 or len(os_) != 4 or min(xs[1:] + os_[2:]) < 1:
        return None, (f"the shapes {xs} -> {os_} are not fixed; give the model's input a "
                      "fixed shape")
    ac = bool(op.attr("align_corners"))
    fy, fx = (integer_factor(xs[d], os_[d], ac) for d in (2, 3))
    if fy is None or fx is None:
        return None, (f"{xs[2]}x{xs[3]} -> {os_[2]}x{os_[3]} (align_corners={ac}) does not "
                      "repeat every input row and column an integer number of times; the "
                      "FPGA's upsample stage does only that: use an integer scale with "
                      "align_corners=False")
    return (fy, fx), ""


def host_reason(program: Any, op: Any) -> str | None:
    """Why an integer ``nearest_interp`` runs on the host (None: it does not)."""
    f, why = factors(program, op)
    return why if f is None and why else None


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    i = chain[k]
    op = b.ops[i]
    out = main_output(op)
    name = b.unique(layer_name(out))
    c, h, w = image_input(op, name, cur)
    f, why = factors(b.program, op)
    if f is None:  # pragma: no cover - the partition lets matching ops only
        raise LoweringError(f"nearest_interp {name!r} (-> {out}): {why}")
    out_shape = (c, h * f[0], w * f[1])
    st = LoweredStage(name, "upsample", op.type, [i], cur.var, out, cur.shape, out_shape,
                      cur.fmt, cur.fmt, hwc_order(*out_shape), {}, {"stream": "HWC"},
                      {"factor": list(f)})
    return st, 1


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> UpsampleSpec:
    return UpsampleSpec(st.name, st.in_shape, tuple(st.geometry["factor"]))  # type: ignore[arg-type]


def _seq(ready: np.ndarray, after: float) -> np.ndarray:
    """One event a cycle, in order, each at or after its ready time, the first after
    ``after``."""
    ready = ready.copy()
    ready[0] = max(ready[0], after + 1)
    idx = np.arange(len(ready))
    return np.maximum.accumulate(ready - idx) + idx


def upsample_times(s: Any, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    """Output element times of one image (input element times ``t_in``), from the
    rtl's rules: the writer stores a beat a cycle once it has arrived and its slot is
    free (the reader issued that slot's last read of the previous row a cycle before);
    the reader issues a read a cycle, in the row's first pass a cycle after the slot
    was written; a beat reaches ``o.valid`` :data:`UPSAMPLE_LATENCY` cycles and the
    queue's latency after its read."""
    c, h, w = s.in_shape
    fy, fx = s.factor
    ln = lanes[0]
    cpb = c // ln
    n = w * cpb
    rows = np.asarray(t_in, float).reshape(-1, ln).max(axis=1).reshape(h, n)
    beat = np.arange(cpb)
    # the slot of each read of a pass (pixel, copy, beat), and each slot's last read
    # (the last pass, the last copy)
    slot = np.broadcast_to(np.arange(w)[:, None, None] * cpb + beat, (w, fx, cpb)).reshape(-1)
    last = ((fy - 1) * n * fx + np.arange(w)[:, None] * fx * cpb + (fx - 1) * cpb
            + beat).reshape(-1)
    free = np.full(n, -np.inf)
    t_write, t_read = -np.inf, -np.inf
    out = []
    for r in range(h):
        written = _seq(np.maximum(rows[r], free), t_write)
        t_write = written[-1]
        need = np.full(fy * n * fx, -np.inf)
        need[:n * fx] = written[slot] + 1
        reads = _seq(need, t_read)
        t_read = reads[-1]
        free = reads[last] + 1
        out.append(reads)
    return np.repeat(np.concatenate(out) + UPSAMPLE_LATENCY + queue_latency(), ln)


def _words(s: Any, lanes: tuple[int, int]) -> int:
    """Entries of the row buffer."""
    c, _h, w = s.in_shape
    return w * c // lanes[0]


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    """The row buffer and the output queue (Yosys maps both as the block-RAM model
    says on the five units of :data:`UPSAMPLE_LUT_BIT`)."""
    width = 8 * lanes[0]
    return [(_words(s, lanes), width, "ram"), (fifo_storage(upsample_queue_depth()), width,
                                               "ram")]


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    bits = ceil_log2(_words(s, lanes) + 1)
    base, per_bit, per_lane = UPSAMPLE_FF
    r = Resources(lut=round(148 * (UPSAMPLE_LUT_BASE + UPSAMPLE_LUT_BIT * bits)),
                  ff=round(base + per_bit * bits + per_lane * lanes[0]))
    for depth, width, _ in _memories(s, lanes):
        r = r + memory_resources(depth, width, const=False)
    return r


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    bits = ceil_log2(_words(s, lanes) + 1)
    return cal.per_window * (UPSAMPLE_LUT_BASE + UPSAMPLE_LUT_BIT * bits)


KIND = StageKind(
    name="upsample", spec=UpsampleSpec, report_op="nearest_interp",
    matches=lambda program, op: factors(program, op)[0] is not None,
    lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: s.out_len // lanes[0],
    times=upsample_times,
    resources=_resources,
    memories=_memories,
    lut=_lut,
    shape=lambda s: {"in": list(s.in_shape), "out": list(s.out_shape),
                     "factor": list(s.factor)},
    buffer=lambda s: int(s.in_shape[0] * s.in_shape[2]),
    relu_commutes=True,
    declines=host_reason,
    doc="nearest-neighbour upsampling by integer factors: a row buffer read fy x fx times",
)
