"""Pipeline pieces that several units' lanes share: a stage register, the int8 clamp
(to a stage's own rails, :class:`Clamp`, for narrow or bipolar outputs),
a rescaler's product (:func:`rescale_product`, the joins), the decoding of a shift
loaded at run time (:func:`loaded_shift`, the joins' runtime rescalers), and a MAC
lane's weight product (:func:`weight_product`), the lanes' check
(:func:`check_channel_lanes`) and requantised end (:func:`requant_lanes`) of the
per-channel units.

Each helper names its signals from what the caller gives, so a unit built with them
keeps the names (and the Verilog) it had when it wrote them out itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring

from ._dsp import dsp_product
from ._ff import check_ff_style, copy_register
from ._lutmul import bipolar_product, lut_product
from ._util import HardwareConfigError

__all__ = ["stage_reg", "Clamp", "clamp_int8", "rescale_product", "loaded_shift", "weight_product",
           "lane_product",
           "check_channel_lanes", "requant_lanes", "LOADED_ZERO_SHIFT"]

#: ``|x * m| < 2^22`` for an int8 ``x`` and a multiplier below ``2^15``: a loaded shift
#: of this or more rounds every product (and a rounding term below it) to 0
LOADED_ZERO_SHIFT = 24


def stage_reg(m: Module, valid: Sequence[Value], stage: int, shape: object, value: object,
              name: str) -> Signal:
    """Register of pipeline stage ``stage``, loaded when its input is valid
    (``valid[stage - 1]``)."""
    r = Signal(shape, name=name)
    with m.If(valid[stage - 1]):
        m.d.sync += r.eq(value)
    return r


@dataclass(frozen=True)
class Clamp:
    """A requantiser's output rails when they are not int8's: saturate to ``[lo, hi]``
    (within int8: narrow signed or unsigned values carried in int8 lanes), or with
    ``bipolar`` give ``hi`` (+1) where the rounded value is ``>= 0``, else ``lo`` (-1).
    A relu raises ``lo`` to 0 (docs/fixed_point.md, requantize)."""

    lo: int = -128
    hi: int = 127
    bipolar: bool = False

    def __post_init__(self) -> None:
        if not -128 <= self.lo <= self.hi <= 127:
            raise HardwareConfigError(f"clamp rails [{self.lo}, {self.hi}] must lie within "
                                      "int8 [-128, 127], lo <= hi")

    def rails(self, relu: bool) -> tuple[int, int]:
        return (max(self.lo, 0) if relu else self.lo), self.hi

    def model(self, r: np.ndarray, relu: bool) -> np.ndarray:
        """The clamp on exact integers ``r`` (behavioural models)."""
        lo, hi = self.rails(relu)
        if self.bipolar:
            return np.where(r >= 0, hi, lo).astype(np.int8)
        return np.clip(r, lo, hi).astype(np.int8)

    def as_list(self) -> list[int]:
        """As a design description stores it: ``[lo, hi, bipolar]``."""
        return [self.lo, self.hi, int(self.bipolar)]

    @classmethod
    def from_list(cls, v: Sequence[int] | None) -> Clamp | None:
        return None if v is None else cls(int(v[0]), int(v[1]), bool(v[2]))


def clamp_int8(r: Value, relu: bool, clamp: Clamp | None = None) -> Value:
    """Saturate to int8, or to [0, 127] with ``relu``; with ``clamp`` to its rails (or
    its sign, bipolar)."""
    lo, hi = (0 if relu else -128, 127) if clamp is None else clamp.rails(relu)
    if clamp is not None and clamp.bipolar:
        return Mux(r >= 0, hi, lo)
    return Mux(r > hi, hi, Mux(r < lo, lo, r[0:8]))


def rescale_product(m: Module, valid: Sequence[Value], x: Value, k: Value, ff_style: str, *,
                    x_name: str, dsp_name: str, p_name: str, k_name: str | None = None
                    ) -> Value:
    """Stages 1-3 of a rescaler: the int8 ``x`` into its input register (``ff_style`` as
    :func:`._ff.copy_register`; ``k`` too where ``k_name`` is given), the product and its
    second register (``p_name`` + ``2``/``3``), or with ``ff_style="trellis"`` a
    ``MULT18X18D`` with its own registers (:func:`._dsp.dsp_product`).  24 bits, signed."""
    x1 = copy_register(m, x, valid[0], x_name, ff_style).as_signed()
    if k_name is not None:
        k = copy_register(m, k, valid[0], k_name, ff_style).as_signed()
    if ff_style == "trellis":  # the DSP's own input and output registers
        return dsp_product(m, x1, k, dsp_name)[0:24].as_signed()
    p2 = stage_reg(m, valid, 2, signed(24), x1 * k, f"{p_name}2")
    return stage_reg(m, valid, 3, signed(24), p2, f"{p_name}3")


def loaded_shift(n: Value) -> tuple[Value, Value, Value]:
    """A shift ``n`` (6 bits, 0-47) loaded at run time, as a rescaler of an int8 product
    uses it: ``(zero, ns, k)`` -- whether the result is 0 whatever the product (``n >=``
    :data:`LOADED_ZERO_SHIFT`: take the multiplier as 0), the shift in 5 bits and the
    rounding term ``2^(ns-1)`` (0 for ``ns = 0``) in 23 bits."""
    zero = n >= LOADED_ZERO_SHIFT
    return (zero, Mux(zero, 0, n[0:5]),
            Mux(zero, 0, (Const(1, 24) << n[0:5]) >> 1))


def lane_product(m: Module, valid: Sequence[Value], w2: Value, x2: Value, ff_style: str, *,
                 lut: bool = False, width: int = 16, dsp_name: str, p3_name: str,
                 p4_name: str) -> Signal:
    """Stages 3 and 4 of a MAC lane: the product of its stage-2 registers ``w2`` and
    ``x2``, ``width`` bits, signed, valid with ``valid[4]``: two registers (``p3_name``,
    ``p4_name``), or with ``ff_style="trellis"`` a ``MULT18X18D`` with its own registers
    (:func:`._dsp.dsp_product`, ``dsp_name``), or with ``lut`` a LUT multiplier
    (:func:`._lutmul.lut_product`, ``dsp_name``, its ``CCU2C`` form with
    ``ff_style="trellis"``; a one-bit ``w2`` is a bipolar weight's code, 1 for +1:
    :func:`._lutmul.bipolar_product`), the same two cycles."""
    plain = not lut and ff_style != "trellis"
    p3 = Signal(signed(width), name=p3_name) if plain else None
    p4 = Signal(signed(width), name=p4_name)
    if lut:
        make = bipolar_product if len(w2) == 1 else lut_product
        m.d.comb += p4.eq(make(m, w2, x2, dsp_name, style=ff_style))
    elif ff_style == "trellis":  # the DSP's own registers (rtl._dsp)
        m.d.comb += p4.eq(dsp_product(m, w2, x2, dsp_name)[0:width])
    else:
        assert p3 is not None
        with m.If(valid[2]):
            m.d.sync += p3.eq(w2 * x2)
        with m.If(valid[3]):
            m.d.sync += p4.eq(p3)
    return p4


def weight_product(m: Module, valid: Sequence[Value], w: Value, x: Value, lane: int,
                   ff_style: str, lut: bool = False) -> Signal:
    """A MAC lane's product of a weight memory's read data ``w`` and the int8 ``x``:
    stage 2 fabric registers on both (``l<lane>_w2``, ``l<lane>_x2``), stages 3 and 4
    the product (:func:`lane_product`: twice registered, a ``MULT18X18D`` with its own
    registers with ``ff_style="trellis"``, or with ``lut`` a LUT multiplier); the 16-bit
    product ``l<lane>_p4`` is valid with ``valid[4]``."""
    w2 = Signal(signed(8), name=f"l{lane}_w2")
    x2 = Signal(signed(8), name=f"l{lane}_x2")
    with m.If(valid[1]):
        m.d.sync += [w2.eq(w), x2.eq(x)]
    return lane_product(m, valid, w2, x2, ff_style, lut=lut, dsp_name=f"l{lane}_m",
                        p3_name=f"l{lane}_p3", p4_name=f"l{lane}_p4")


def check_channel_lanes(what: str, pe: int, channels: int, ff_style: str) -> None:
    """A per-channel unit's PE lanes, which must divide its channels, and its
    ``ff_style``; the error names ``what``."""
    if pe < 1 or channels % pe:
        raise HardwareConfigError(f"{what}: PE={pe} must divide the {channels} channels")
    check_ff_style(what, ff_style)


def requant_lanes(m: Module, unit: Any, rq: Any, q: Any, valid: Value,
                  accs: Sequence[Value], group: Value) -> None:
    """A per-channel unit's end: its lanes' results ``accs`` (channel group ``group``,
    valid with ``valid``) into its requantiser ``rq``, the requantiser into the output
    queue ``q`` and the queue to ``unit.o``; with runtime weights ``unit.wr``'s memories
    after the ``unit.pe`` weight memories go to the requantiser's ``wr``."""
    m.d.comb += [
        rq.i_valid.eq(valid),
        rq.i_acc.eq(Cat(*accs)),
        rq.i_idx.eq(group),
        q.w_valid.eq(rq.o_valid),
        q.w_data.eq(rq.o_data),
    ]
    if unit.runtime:
        m.d.comb += [rq.wr.en.eq(unit.wr.en[unit.pe:]), rq.wr.addr.eq(unit.wr.addr),
                     rq.wr.data.eq(unit.wr.data)]
    wiring.connect(m, q.o, wiring.flipped(unit.o))
