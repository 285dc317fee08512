"""The multipliers of a matrix unit's PE x SIMD lanes: which kind each product is,
how narrow weights are held and decoded, two narrow products in one ``MULT18X18D``,
and what it all costs (for the folding).

**Kinds.**  A matrix stage's ``lut_mults`` of its ``PE * SIMD`` products are LUT
multipliers (:func:`._lutmul.lut_product`), the rest ``MULT18X18D`` blocks.  The LUT
products are the highest-indexed lanes, lane ``p * SIMD + s`` for PE ``p``, SIMD lane
``s``, or where two products share a DSP the highest-indexed *pairs* (PE ``p`` and
``p + 1`` in lane ``s`` together, so that every two LUT products free one DSP; a last
odd PE, one DSP a product, first) (:func:`lane_kinds`): a count, not a per-lane list,
because that is what the folding chooses (how many of the device's LUTs become
multipliers), it is one integer in a design's structure, and any count from 0 to
``PE * SIMD`` is allowed -- per-PE granularity would force LUT multipliers in steps of
SIMD.  Every kind has the same latency (two cycles from the operand registers), so the
pipeline does not change.

**Narrow weights.**  ``weight_bits`` (1-8) is the width a weight is held in: the weight
memory's words are ``SIMD * weight_bits`` bits, lane ``s`` in bits ``[s * wb, (s + 1) *
wb)``, two's complement (:func:`weight_range`); 1 bit is bipolar as the precision
types define it (``quantized_fc``'s ``weight_type="bipolar"``: W in {-1, +1}), stored as
bit 0 for -1 and bit 1 for +1 and decoded to a 2-bit signed value
(:func:`decode_weight`).  Products narrow to ``lane bits + 8`` (:func:`product_bits`),
and the adder trees with them.

**Narrow activations.**  ``act_bits`` (2-8) is the width of the activation operand: the
stream still carries int8 lanes, but where the values a unit reads lie in a narrower
range (an upstream requantiser's rails: ``[0, 15]`` for unsigned 4-bit activations,
:func:`act_operand_bits` gives 5 bits) each lane keeps only the low ``act_bits`` bits of
its lane as a two's complement operand.  Products shrink to ``lane bits + act_bits``
(a LUT product of a 4-bit weight and a 5-bit operand: 12 ``CCU2C`` instead of 16),
the adder trees with them, and more narrow products share a DSP.

**Two products per DSP.**  PE ``p`` and PE ``p + 1`` multiply the same activation
(lane ``s`` of the broadcast input vector) by their own weights.  Where both products
are DSP products and the weights have at most 4 bits (:func:`packs_two`), one
``MULT18X18D`` computes ``x * (w0 + w1 * 2^k)`` with ``k`` = :func:`product_bits`
(the packed operand has ``k`` + lane bits + 1 <= 18 bits): the low ``k`` bits,
sign-extended, are ``x * w0`` (it lies in ``[-2^(k-1), 2^(k-1))``), and ``x * w1 =
(P >> k) + P[k - 1]`` (the floor of the shift borrowed one where ``x * w0`` is
negative).  That halves the DSPs of an int4-weight layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from amaranth import Cat, Const, Module, Signal, Value, signed

from ._dsp import dsp_product
from ._util import HardwareConfigError

__all__ = ["WEIGHT_BITS", "ACT_BITS", "act_operand_bits", "weight_range", "weight_lane_bits",
           "product_bits", "packs_two",
           "encode_weights", "decode_weight", "lane_kinds", "dsp_pairs",
           "MultiplierCount", "mvau_multipliers", "weight_word_bits", "check_lane_options",
           "packed_pair"]

#: the weight widths a matrix unit holds
WEIGHT_BITS = tuple(range(1, 9))
#: the activation operand widths a matrix unit multiplies (two's complement)
ACT_BITS = tuple(range(2, 9))


def _check_bits(weight_bits: int) -> None:
    if weight_bits not in WEIGHT_BITS:
        raise HardwareConfigError(f"weight_bits={weight_bits}: a matrix unit holds weights "
                                  "of 1 to 8 bits")


def act_operand_bits(lo: int, hi: int) -> int:
    """The narrowest two's complement operand (2-8 bits, :data:`ACT_BITS`) holding every
    activation in ``[lo, hi]`` (within int8): 5 for ``[0, 15]``, 2 for bipolar
    ``[-1, 1]``, 8 for int8 with or without a relu."""
    for b in ACT_BITS:
        if -(1 << (b - 1)) <= lo <= hi <= (1 << (b - 1)) - 1:
            return b
    raise HardwareConfigError(f"activations in [{lo}, {hi}] do not fit an int8 lane")


def _check_act(act_bits: int, what: str = "a matrix unit") -> None:
    if act_bits not in ACT_BITS:
        raise HardwareConfigError(f"{what}: act_bits={act_bits} must lie in 2-8 (the "
                                  "activation operand's two's complement width)")


def weight_range(weight_bits: int) -> tuple[int, int]:
    """``(lo, hi)`` of a weight held in ``weight_bits``: two's complement (8 bits:
    int8's), or -1 / +1 for 1 bit (bipolar: 0 is not a weight)."""
    _check_bits(weight_bits)
    if weight_bits == 1:
        return -1, 1
    return -(1 << (weight_bits - 1)), (1 << (weight_bits - 1)) - 1


def weight_lane_bits(weight_bits: int) -> int:
    """Bits of a decoded weight (a bipolar weight decodes to 2-bit -1 / +1)."""
    _check_bits(weight_bits)
    return max(2, weight_bits)


def product_bits(weight_bits: int, act_bits: int = 8) -> int:
    """Bits of a weight x activation product (16 at int8 x int8)."""
    _check_act(act_bits)
    return weight_lane_bits(weight_bits) + act_bits


def packs_two(weight_bits: int, act_bits: int = 8) -> bool:
    """Whether two products of these weights and activations share one ``MULT18X18D``
    (the packed operand ``w0 + w1 * 2^k``, ``k`` = :func:`product_bits`, fits its 18
    bits)."""
    lb = weight_lane_bits(weight_bits)
    return product_bits(weight_bits, act_bits) + lb + 1 <= 18


def weight_word_bits(simd: int, weight_bits: int) -> int:
    """Bits of one weight memory word (a PE's SIMD weights of one cycle)."""
    _check_bits(weight_bits)
    return simd * weight_bits


def encode_weights(w: np.ndarray, weight_bits: int) -> np.ndarray:
    """The memory codes (non-negative, ``weight_bits`` wide) of weights ``w`` that lie in
    :func:`weight_range` (checked by the caller): two's complement, or for 1 bit 0 for
    -1 and 1 for +1."""
    w = np.asarray(w, np.int64)
    if weight_bits == 1:
        return (w > 0).astype(np.int64)
    return w & ((1 << weight_bits) - 1)


def decode_weight(code: Value, weight_bits: int) -> Value:
    """A weight's ``weight_bits``-wide memory code as the value to multiply
    (:func:`weight_lane_bits` wide; the bits as they are unless bipolar, whose bit ``b``
    becomes ``-1`` (``0b11``) or ``+1`` (``0b01``))."""
    if weight_bits == 1:
        return Cat(Const(1, 1), ~code[0])
    return code


def check_lane_options(what: str, pe: int, simd: int, lut_mults: int, weight_bits: int,
                       act_bits: int = 8) -> None:
    """``lut_mults`` within ``0 .. PE * SIMD``, ``weight_bits`` within 1-8 and
    ``act_bits`` within 2-8; the error names ``what``."""
    _check_bits(weight_bits)
    _check_act(act_bits, what)
    if not 0 <= lut_mults <= pe * simd:
        raise HardwareConfigError(f"{what}: lut_mults={lut_mults} must lie in 0 .. PE*SIMD = "
                                  f"{pe * simd} (the products built in LUTs)")


def lane_kinds(pe: int, simd: int, lut_mults: int, weight_bits: int = 8, act_bits: int = 8
               ) -> list[list[bool]]:
    """``[p][s]``: whether PE ``p``'s SIMD lane ``s`` multiplies in LUTs: the
    ``lut_mults`` highest-indexed lanes ``p * simd + s``, or where two products of these
    widths share a DSP (:func:`packs_two`) the highest in the order of the pairs (PE
    pair ``p // 2``, then lane ``s``, then ``p % 2``; a last odd PE after every pair):
    a shared DSP's two products go to LUTs together and free it."""
    first_lut = pe * simd - lut_mults
    if not packs_two(weight_bits, act_bits):
        return [[p * simd + s >= first_lut for s in range(simd)] for p in range(pe)]
    paired = pe - pe % 2  # PEs in pairs; a last odd PE after them

    def order(p: int, s: int) -> int:
        if p >= paired:
            return paired * simd + s
        return (p // 2) * 2 * simd + 2 * s + p % 2

    return [[order(p, s) >= first_lut for s in range(simd)] for p in range(pe)]


def dsp_pairs(pe: int, simd: int, lut_mults: int, weight_bits: int, act_bits: int = 8
              ) -> list[tuple[int, int]]:
    """``(p, s)`` of each DSP shared by PE ``p`` and PE ``p + 1`` in lane ``s`` (``p``
    even; both products DSP ones, :func:`packs_two` weights and activations)."""
    if not packs_two(weight_bits, act_bits):
        return []
    lut = lane_kinds(pe, simd, lut_mults, weight_bits, act_bits)
    return [(p, s) for p in range(0, pe - 1, 2) for s in range(simd)
            if not lut[p][s] and not lut[p + 1][s]]


class MultiplierCount(tuple[int, int]):
    """``(dsp, lut)``: ``MULT18X18D`` blocks and LUT multipliers of a unit's lanes."""

    @property
    def dsp(self) -> int:
        return self[0]

    @property
    def lut(self) -> int:
        return self[1]


def mvau_multipliers(pe: int, simd: int, lut_mults: int = 0, weight_bits: int = 8,
                     act_bits: int = 8) -> MultiplierCount:
    """The multipliers of a matrix unit's PE x SIMD lanes (the requantiser's are not
    counted): ``(dsp, lut)`` with ``lut = lut_mults`` LUT products of
    ``weight_lane_bits(weight_bits)`` x ``act_bits`` bits each, and one ``MULT18X18D``
    per other product, less one per shared pair (:func:`dsp_pairs`)."""
    check_lane_options("mvau_multipliers", pe, simd, lut_mults, weight_bits, act_bits)
    dsp = pe * simd - lut_mults - len(dsp_pairs(pe, simd, lut_mults, weight_bits,
                                                 act_bits))
    return MultiplierCount((dsp, lut_mults))


def packed_pair(m: Module, valid: Sequence[Value], w0: Value, w1: Value, x: Value,
                weight_bits: int, ff_style: str, name: str
                ) -> tuple[Signal, Signal, Signal]:
    """``(x * w0, x * w1 - c, c)`` of stage-2 registers ``w0``, ``w1`` (decoded weights)
    and the activation operand ``x`` (int8, or ``len(x)`` bits: :func:`product_bits`),
    through one multiplier (module docstring): the packed product at
    stage 4 as :func:`._lane.lane_product` makes a single one (``ff_style="trellis"``: a
    ``MULT18X18D`` with its own registers; plain: two registers, which Yosys maps onto
    one ``MULT18X18D``), split by wiring alone: the low ``k`` bits, and the high bits
    ``P >> k`` with the correction bit ``c = P[k - 1]`` apart -- the adder tree adds it
    as the carry-in of one of its adders, so the split costs no adder on the path from
    the multiplier (measured: the product -> correction -> tree adder path was the
    critical one of an int4 ULX3S build)."""
    k = product_bits(weight_bits, len(x))
    a = Signal(signed(k + weight_lane_bits(weight_bits) + 1), name=f"{name}_a")
    m.d.comb += a.eq(w0.as_signed() + (w1.as_signed() << k))
    if ff_style == "trellis":
        p: Value = dsp_product(m, a, x, f"{name}_m")
    else:
        p3 = Signal(signed(len(a) + len(x)), name=f"{name}_p3")
        p4 = Signal(signed(len(a) + len(x)), name=f"{name}_p4")
        with m.If(valid[2]):
            m.d.sync += p3.eq(a * x.as_signed())
        with m.If(valid[3]):
            m.d.sync += p4.eq(p3)
        p = p4
    lo = Signal(signed(k), name=f"{name}_lo")
    hi = Signal(signed(k), name=f"{name}_hi")
    c = Signal(name=f"{name}_c")
    m.d.comb += [lo.eq(p[0:k]), hi.eq(p[k:2 * k]), c.eq(p[k - 1])]
    return lo, hi, c
