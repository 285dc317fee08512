"""The multipliers of a matrix unit's PE x SIMD lanes: which kind each product is,
how narrow weights are held and decoded, two narrow products in one ``MULT18X18D``,
and what it all costs (for the folding).

**Kinds.**  A matrix stage's ``lut_mults`` of its ``PE * SIMD`` products are LUT
multipliers (:func:`._lutmul.lut_product`), the rest ``MULT18X18D`` blocks.  The LUT
products are the highest-indexed lanes, lane ``p * SIMD + s`` for PE ``p``, SIMD lane
``s`` (:func:`lane_kinds`): a count, not a per-lane list, because that is what the
folding chooses (how many of the device's LUTs become multipliers), it is one integer
in a design's structure, and any count from 0 to ``PE * SIMD`` is allowed -- per-PE
granularity would force LUT multipliers in steps of SIMD.  Every kind has the same
latency (two cycles from the operand registers), so the pipeline does not change.

**Narrow weights.**  ``weight_bits`` (1-8) is the width a weight is held in: the weight
memory's words are ``SIMD * weight_bits`` bits, lane ``s`` in bits ``[s * wb, (s + 1) *
wb)``, two's complement (:func:`weight_range`); 1 bit is bipolar as the precision
types define it (``quantized_fc``'s ``weight_type="bipolar"``: W in {-1, +1}), stored as
bit 0 for -1 and bit 1 for +1 and decoded to a 2-bit signed value
(:func:`decode_weight`).  Products narrow to ``lane bits + 8`` (:func:`product_bits`),
and the adder trees with them.

**Two products per DSP.**  PE ``p`` and PE ``p + 1`` multiply the same activation
(lane ``s`` of the broadcast input vector) by their own weights.  Where both products
are DSP products and the weights have at most 4 bits (:func:`packs_two`), one
``MULT18X18D`` computes ``x * (w0 + w1 * 2^k)`` with ``k`` = :func:`product_bits`
(the packed operand has at most ``2k - 8 + 1 <= 18`` bits): the low ``k`` bits,
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

__all__ = ["WEIGHT_BITS", "weight_range", "weight_lane_bits", "product_bits", "packs_two",
           "encode_weights", "decode_weight", "lane_kinds", "dsp_pairs",
           "MultiplierCount", "mvau_multipliers", "weight_word_bits", "check_lane_options",
           "packed_pair"]

#: the weight widths a matrix unit holds
WEIGHT_BITS = tuple(range(1, 9))


def _check_bits(weight_bits: int) -> None:
    if weight_bits not in WEIGHT_BITS:
        raise HardwareConfigError(f"weight_bits={weight_bits}: a matrix unit holds weights "
                                  "of 1 to 8 bits")


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


def product_bits(weight_bits: int) -> int:
    """Bits of a weight x int8 product (16 at int8)."""
    return weight_lane_bits(weight_bits) + 8


def packs_two(weight_bits: int) -> bool:
    """Whether two products of these weights share one ``MULT18X18D`` (the packed
    operand ``w0 + w1 * 2^k``, ``k`` = :func:`product_bits`, fits its 18 bits)."""
    lb = weight_lane_bits(weight_bits)
    return product_bits(weight_bits) + lb + 1 <= 18


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


def check_lane_options(what: str, pe: int, simd: int, lut_mults: int, weight_bits: int
                       ) -> None:
    """``lut_mults`` within ``0 .. PE * SIMD`` and ``weight_bits`` within 1-8; the error
    names ``what``."""
    _check_bits(weight_bits)
    if not 0 <= lut_mults <= pe * simd:
        raise HardwareConfigError(f"{what}: lut_mults={lut_mults} must lie in 0 .. PE*SIMD = "
                                  f"{pe * simd} (the products built in LUTs)")


def lane_kinds(pe: int, simd: int, lut_mults: int) -> list[list[bool]]:
    """``[p][s]``: whether PE ``p``'s SIMD lane ``s`` multiplies in LUTs (the
    ``lut_mults`` highest-indexed lanes ``p * simd + s``)."""
    first_lut = pe * simd - lut_mults
    return [[p * simd + s >= first_lut for s in range(simd)] for p in range(pe)]


def dsp_pairs(pe: int, simd: int, lut_mults: int, weight_bits: int
              ) -> list[tuple[int, int]]:
    """``(p, s)`` of each DSP shared by PE ``p`` and PE ``p + 1`` in lane ``s`` (``p``
    even; both products DSP ones, :func:`packs_two` weights)."""
    if not packs_two(weight_bits):
        return []
    lut = lane_kinds(pe, simd, lut_mults)
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


def mvau_multipliers(pe: int, simd: int, lut_mults: int = 0, weight_bits: int = 8
                     ) -> MultiplierCount:
    """The multipliers of a matrix unit's PE x SIMD lanes (the requantiser's are not
    counted): ``(dsp, lut)`` with ``lut = lut_mults`` LUT products of
    ``weight_lane_bits(weight_bits)`` x 8 bits each, and one ``MULT18X18D`` per other
    product, less one per shared pair (:func:`dsp_pairs`)."""
    check_lane_options("mvau_multipliers", pe, simd, lut_mults, weight_bits)
    dsp = pe * simd - lut_mults - len(dsp_pairs(pe, simd, lut_mults, weight_bits))
    return MultiplierCount((dsp, lut_mults))


def packed_pair(m: Module, valid: Sequence[Value], w0: Value, w1: Value, x: Value,
                weight_bits: int, ff_style: str, name: str
                ) -> tuple[Signal, Signal, Signal]:
    """``(x * w0, x * w1 - c, c)`` of stage-2 registers ``w0``, ``w1`` (decoded weights)
    and the int8 ``x``, through one multiplier (module docstring): the packed product at
    stage 4 as :func:`._lane.lane_product` makes a single one (``ff_style="trellis"``: a
    ``MULT18X18D`` with its own registers; plain: two registers, which Yosys maps onto
    one ``MULT18X18D``), split by wiring alone: the low ``k`` bits, and the high bits
    ``P >> k`` with the correction bit ``c = P[k - 1]`` apart -- the adder tree adds it
    as the carry-in of one of its adders, so the split costs no adder on the path from
    the multiplier (measured: the product -> correction -> tree adder path was the
    critical one of an int4 ULX3S build)."""
    k = product_bits(weight_bits)
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
