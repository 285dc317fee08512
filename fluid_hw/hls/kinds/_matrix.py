"""What the matrix-like kinds (fc, convolution, depthwise convolution) share: the
requantisation behind their accumulator, their parameter arrays, and the memories
and LUT share of their MVAU-style datapath."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fluid_hw.rtl import Clamp, ceil_log2
from fluid_hw.rtl.multipliers import act_operand_bits, product_bits
from fluid_hw.rtl.mvau import mvau_latency
from fluid_hw.rtl.requant import PARAM_ENTRY_BITS
from fluid_hw.rtl.stream import credit_depth

from ...ir import dtypes
from ..lane_costs import requant_lanes, requant_param_depth
from ..partition import LoweringError, main_output
from ..stage_info import INT32, FixedPoint, Values, broadcast, param_value
from ..stages import (
    Resources,
    adder_tree_bits,
    memory_resources,
    mvau_resources,
    product_resources,
)

__all__ = ["requant_tail", "requant_format", "threshold_format", "acc_format", "stage_clamp",
           "stage_act_bits",
           "requant_arrays", "matrix_arrays", "window_args", "check_weights", "weight_layout",
           "fifo_storage", "tree_bits", "requant_units_of", "matrix_memories", "matrix_lut",
           "matrix_resources", "lane_memories", "lane_resources", "lane_lut", "LaneCosts"]


def check_weights(b: Any, op: Any, name: str, wname: str) -> Any:
    wv = b.gb.var(wname)
    if wv.dtype != dtypes.VarType.INT8:
        raise LoweringError(f"{op.type} {name!r}: weights {wname!r} are {wv.dtype_name}; the "
                            "accelerator's multipliers take int8 (quantise with "
                            "weight_bits 8 or 4)")
    return wv


def weight_layout(op: Any) -> dict[str, int]:
    """``{"weight_bits": b}`` where the layer's weights are narrower than 8 bits
    (``weight_bits`` 1-7: the stage holds them at that width, 1 bipolar), else ``{}``."""
    bits = int(op.attr("weight_bits")) if op.has_attr("weight_bits") else 8
    return {"weight_bits": bits} if bits < 8 else {}


def requant_tail(b: Any, chain: Sequence[int], k: int, name: str
                 ) -> tuple[list[int], dict[str, str | None], str, bool, FixedPoint, bool]:
    """The ``requantize`` after the accumulating op at ``chain[k]``: ``(ops used,
    {multiplier, shift}, output value, relu, output format, requantize)``; without one
    (int32 out) only the last stage of the chain is allowed."""
    i = chain[k]
    op = b.ops[i]
    acc = main_output(op)
    if k + 1 < len(chain) and b.ops[chain[k + 1]].type == "requantize":
        req = b.ops[chain[k + 1]]
        relu = bool(req.attr("relu"))
        scale = float(req.attr("out_scale")) or None
        out_fmt = requant_format(req, relu, scale)
        if req.attr("bits") > 8 or not out_fmt.in_int8_lanes:
            raise LoweringError(f"requantize (-> {main_output(req)}) of layer {name!r} "
                                f"makes {out_fmt.kind} {req.attr('bits')}-bit values; the "
                                "accelerator streams int8 lanes (signed 1-8 bits, unsigned "
                                "1-7, bipolar): quantise with activation_bits=8 or narrower")
        return ([i, chain[k + 1]],
                {"multiplier": req.input("Multiplier")[0], "shift": req.input("Shift")[0]},
                main_output(req), relu, out_fmt, True)
    if k + 1 < len(chain) and b.ops[chain[k + 1]].type == "multi_threshold":
        mt = b.ops[chain[k + 1]]
        out_fmt = threshold_format(b, mt, name)
        return ([i, chain[k + 1]],
                {"multiplier": None, "shift": None, "thresholds": mt.input("Thresholds")[0]},
                main_output(mt), False, out_fmt, True)
    if k + 1 < len(chain):
        nxt = b.ops[chain[k + 1]]
        raise LoweringError(f"{op.type} {name!r} (-> {acc}) is followed by {nxt.type}, not "
                            "requantize: only the last stage may stream int32 values")
    return [i], {"multiplier": None, "shift": None}, acc, False, acc_format(op), False


def stage_clamp(st: Any) -> Clamp | None:
    """The requantiser rails of a requantising stage whose output format is not int8's
    (narrow or bipolar values in int8 lanes); None for int8 and int32 outputs.  A
    threshold stage always has its rails (its outputs count up from ``lo``)."""
    f = st.out_format
    if st.params.get("thresholds"):
        return Clamp(f.lo, f.hi, f.kind == "bipolar")
    return f.clamp() if st.requantize else None


def stage_act_bits(st: Any) -> int:
    """The activation operand width of a matrix stage: the narrowest two's complement
    width holding its input format's range (:func:`~fluid_hw.rtl.multipliers.
    act_operand_bits`: 8 for int8, 5 for unsigned 4-bit)."""
    f = st.in_format
    return act_operand_bits(int(f.lo), int(f.hi))


def threshold_format(b: Any, mt: Any, name: str) -> FixedPoint:
    """The format a ``multi_threshold`` makes: ``[out_bias, out_bias + T]`` (bipolar:
    -1 / +1), which must fit the int8 lanes."""
    t = int(b.gb.var(mt.input("Thresholds")[0]).shape[-1])
    kind = "bipolar" if mt.attr("bipolar") else "signed" if mt.attr("signed") else "unsigned"
    lo, hi = (-1, 1) if kind == "bipolar" else (mt.attr("out_bias"), mt.attr("out_bias") + t)
    fmt = FixedPoint(mt.attr("bits"), lo, hi, float(mt.attr("out_scale")) or None, kind)
    if not fmt.in_int8_lanes:
        raise LoweringError(f"multi_threshold (-> {main_output(mt)}) of layer {name!r} makes "
                            f"values in [{lo}, {hi}]; the accelerator streams int8 lanes")
    return fmt


def requant_format(req: Any, relu: bool, scale: float | None) -> FixedPoint:
    """The format a ``requantize`` makes: its bits, signed / unsigned / bipolar, relu."""
    kind = "bipolar" if req.attr("bipolar") else "signed" if req.attr("signed") else \
        "unsigned"
    return FixedPoint.of(req.attr("bits"), kind, relu, scale)


def acc_format(op: Any) -> FixedPoint:
    """An int32 accumulator's format; its scale per output channel (input scale x weight
    scale) where the layer records them."""
    ws = [float(v) for v in op.attr("weight_scale")] if op.has_attr("weight_scale") else []
    s_in = float(op.attr("in_scale")) if op.has_attr("in_scale") else 0.0
    if not ws or not s_in:
        return INT32
    return FixedPoint(32, INT32.lo, INT32.hi, tuple(s_in * w for w in ws))


def requant_arrays(st: Any, values: Values, channels: int) -> dict[str, np.ndarray]:
    """Bias, multiplier and shift of a stage (per channel) from ``values``."""
    out: dict[str, np.ndarray] = {}
    if st.params.get("bias"):
        out["bias"] = param_value(values, st.params["bias"]).reshape(-1)
    if st.params.get("thresholds"):
        th = param_value(values, st.params["thresholds"])
        th = np.asarray(th).reshape(-1, th.shape[-1])
        out["thresholds"] = np.repeat(th, channels, axis=0) if th.shape[0] == 1 else th
    elif st.requantize:
        for slot in ("multiplier", "shift"):
            out[slot] = broadcast(param_value(values, st.params[slot]), channels, slot, st.name)
    return out


def matrix_arrays(st: Any, values: Values | None, mode: str,
                  arrange: Any = lambda w: w) -> tuple[dict[str, Any], str]:
    """A matrix-like stage's weights (``arrange``-d from the program's layout), bias,
    multiplier and shift from ``values``, and its weights mode; with no values (a
    trial spec for costing) no arrays, and a requantising stage is costed as runtime."""
    if values is not None:
        w = param_value(values, st.params["weights"])
        return {"weights": arrange(w), **requant_arrays(st, values, st.mh)}, mode
    return {}, "runtime" if st.requantize else mode


def window_args(st: Any) -> dict[str, Any]:
    """The window keyword arguments of a convolution spec from a stage's geometry."""
    g = st.geometry
    return {"kernel": tuple(g["filter"][2:]), "stride": tuple(g["stride"]),
            "padding": tuple(g["padding"]), "dilation": tuple(g["dilation"])}


def fifo_storage(depth: int) -> int:
    """Entries of the memory in amaranth's SyncFIFOBuffered of ``depth`` (>= 3)."""
    return max(3, depth) - 1


def tree_bits(simd: int, weight_bits: int = 8, act_bits: int = 8) -> int:
    """Register bits of a PE's adder tree (its products :func:`~fluid_hw.rtl.
    multipliers.product_bits` wide)."""
    return adder_tree_bits(simd, product_bits(weight_bits, act_bits))


def requant_units_of(s: Any, unit: str = "matrix") -> tuple[int, int]:
    """``(lanes, depth)``: a matrix-like stage's physical requantiser lanes (PE results
    once every ``sf`` cycles; :func:`~..lane_costs.requant_lanes` of the RTL ``unit``
    family, none shared in a threshold or bias-only pipe) and the entries of each one's
    parameter memory."""
    if getattr(s, "stream_input", False):  # latency mode: the requantiser unshared
        return s.pe, requant_param_depth(s.pe, s.pe, s.nf)
    lanes = requant_lanes(s.pe, s.sf, unit, s.requantize and s.thresholds is None)
    return lanes, requant_param_depth(s.pe, lanes, s.nf)


def matrix_memories(s: Any) -> list[tuple[int, int, str]]:
    """Weights per PE, parameters per requantiser lane, the input double buffer and the
    output queue of an MVAU-style datapath."""
    const = "ram" if s.runtime else "rom"
    out = []
    for _ in range(s.pe):
        out.append((s.nf * s.sf, getattr(s, "weight_bits", 8) * s.simd, const))  # weights
    lanes, depth = requant_units_of(s)
    for _ in range(lanes):
        out.append((depth, PARAM_ENTRY_BITS, const))         # bias, multiplier, shift
    out.append((2 << ceil_log2(s.sf), 8 * s.simd, "ram"))  # input double buffer
    depth = credit_depth(mvau_latency(s.simd, s.requantize, pe=s.pe, sf=s.sf,
                                      thresholds=s.thresholds is not None,
                                      stream_input=getattr(s, "stream_input", False)), s.sf)
    out.append((fifo_storage(depth), s.out_bits * s.pe, "ram"))  # output queue
    return out


def matrix_lut(s: Any, cal: Any) -> float:
    """The PEs' share of the calibrated LUT model (autofold.Calibration), and the LUT
    multipliers' (:func:`~..stages.product_resources`, as measured)."""
    wb, ab = getattr(s, "weight_bits", 8), getattr(s, "act_bits", 8)
    lut = cal.per_pe * s.pe + cal.per_tree_bit * s.pe * tree_bits(s.simd, wb, ab)
    if s.runtime:
        lut += cal.per_runtime_pe * s.pe
    lut -= getattr(cal, "per_shared_lane", 0.0) * (s.pe - requant_units_of(s)[0])
    if getattr(s, "lut_mults", 0):
        lut += product_resources(s.pe, s.simd, s.lut_mults, wb, ab).lut
    return lut


def matrix_resources(s: Any) -> Resources:
    """An MVAU-style datapath's resources (:func:`~..stages.mvau_resources`) with the
    spec's multiplier kinds (``lut_mults``, ``weight_bits``) and threshold mode."""
    return mvau_resources(s.mw, s.mh, s.pe, s.simd, s.requantize, not s.runtime,
                          getattr(s, "lut_mults", 0), getattr(s, "weight_bits", 8),
                          s.thresholds is not None, getattr(s, "stream_input", False),
                          getattr(s, "act_bits", 8))


def lane_memories(s: Any, weight_depth: int) -> list[tuple[int, int, str]]:
    """A per-channel stage's (``affine``, ``dwconv``) memories: each PE lane's
    ``weight_depth`` int8 weights and each requantiser lane's bias / multiplier / shift
    (:func:`requant_units_of`: shared across PE lanes by a depthwise unit)."""
    const = "ram" if s.runtime else "rom"
    lanes, depth = requant_units_of(s, "dwconv")
    if lanes == s.pe:  # one requantiser a PE lane: lane by lane
        return [m for _ in range(s.pe)
                for m in ((weight_depth, 8, const), (depth, PARAM_ENTRY_BITS, const))]
    return [(weight_depth, 8, const) for _ in range(s.pe)] + \
        [(depth, PARAM_ENTRY_BITS, const) for _ in range(lanes)]


@dataclass(frozen=True)
class LaneCosts:
    """A per-channel stage's figures of one PE lane (ECP5): generic LUTs (``lut``, and
    ``lut_runtime`` more with runtime weights), flip-flops (``ff`` the product path,
    ``ff_requant`` the requantiser or ``ff_bias_only`` without requantisation,
    ``ff_runtime`` more with runtime weights), and the calibrated LUT model's lane in
    units of ``cal.per_pe`` (``cal_lut``) and of ``cal.per_runtime_pe``
    (``cal_lut_runtime``, runtime weights)."""

    lut: int
    lut_runtime: int
    ff: int
    ff_requant: int
    ff_bias_only: int
    ff_runtime: int
    cal_lut: float
    cal_lut_runtime: float


def lane_resources(s: Any, base: Resources, weight_depth: int, c: LaneCosts) -> Resources:
    """A per-channel stage's resources: ``base`` (the stage's own) and per PE lane its
    figures ``c``, one multiplier and its memories (:func:`lane_memories`); with
    requantisation the requantiser lanes (:func:`requant_units_of`), two multipliers
    (a threshold lane none) and ``c.ff_requant`` flip-flops each."""
    lane = Resources(lut=c.lut + (c.lut_runtime if s.runtime else 0),
                     ff=c.ff + (c.ff_runtime if s.runtime else 0) +
                     (0 if s.requantize else c.ff_bias_only), dsp=1)
    total = base
    for _ in range(s.pe):
        total = total + lane + memory_resources(weight_depth, 8, const=not s.runtime)
    lanes, depth = requant_units_of(s, "dwconv")
    rq = Resources(ff=c.ff_requant, dsp=0 if s.thresholds is not None else 2) \
        if s.requantize else Resources()
    for _ in range(lanes):
        total = total + rq + memory_resources(depth, PARAM_ENTRY_BITS, const=not s.runtime)
    return total


def lane_lut(s: Any, cal: Any, c: LaneCosts) -> float:
    """A per-channel stage's PE lanes in the calibrated LUT model (``c.cal_lut`` and
    ``c.cal_lut_runtime`` each), less ``cal.per_shared_lane`` for each requantiser lane
    a depthwise unit shares away (Yosys, ECP5: conv_dw_8_pe4 +9 %, its runtime form
    +29 %, conv_dw_64_5x5s2_pe4 -4 %, where one requantiser a lane gave +33 / +52 / +14 %)."""
    per = c.cal_lut * cal.per_pe + (c.cal_lut_runtime * cal.per_runtime_pe if s.runtime
                                    else 0.0)
    shared = s.pe - requant_units_of(s, "dwconv")[0]
    return per * s.pe - getattr(cal, "per_shared_lane", 0.0) * shared
