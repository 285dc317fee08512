"""Precision as data: the widths and kinds of a layer's weights and activations.

    Precision(w=4, a=4)                   # 4-bit signed weights, 4-bit activations
    Precision(w=1, a=1)                   # bipolar {-1, +1} weights and activations
    Precision(w=2, a=2, a_type="unsigned")

Widths are 1 to 8 or 16 bits.  Weights are symmetric signed (``[-(2^(w-1) - 1),
2^(w-1) - 1]``: 2 bits is ternary {-1, 0, 1}) or bipolar {-1, +1} (``w=1`` implies
bipolar).  Activations are signed (``[-2^(a-1), 2^(a-1) - 1]``), unsigned (``[0, 2^a
- 1]``) or bipolar (``a=1`` implies bipolar).  The integer arithmetic that uses them
is ``fluid_hw/ir/ops/quant.py``'s (docs/fixed_point.md); the quantisation pass
(``QuantConfig(precision=..., overrides=...)``) and the quantisation-aware training
pass read this type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np

from ..errors import QuantizationError
from ..ir.ops import quant as _q

__all__ = ["Precision", "WeightType", "ActivationType", "int_range", "weight_range",
           "acc_bits", "max_abs", "requant_thresholds"]

WeightType = Literal["signed", "bipolar"]
ActivationType = Literal["signed", "unsigned", "bipolar"]
_WEIGHT_TYPES = ("signed", "bipolar")
_ACT_TYPES = ("signed", "unsigned", "bipolar")


def _check_bits(bits: int, what: str) -> None:
    if bits not in _q.BITS:
        raise QuantizationError(f"{what}={bits}: use 1 to 8 or 16 bits")


def int_range(bits: int, kind: str = "signed") -> tuple[int, int]:
    """``(lo, hi)`` of a ``bits``-wide activation of ``kind`` (``signed``, ``unsigned``
    or ``bipolar``: -1 and +1 only)."""
    if kind not in _ACT_TYPES:
        raise QuantizationError(f"activation type {kind!r}: use one of {_ACT_TYPES}")
    _check_bits(bits, "bits")
    return _q.int_range(bits, kind != "unsigned", kind == "bipolar")


def weight_range(bits: int, kind: str = "signed") -> tuple[int, int]:
    """``(lo, hi)`` of a ``bits``-wide weight of ``kind``: symmetric signed
    ``(-(2^(bits-1) - 1), 2^(bits-1) - 1)`` or bipolar ``(-1, 1)`` ({-1, +1})."""
    if kind not in _WEIGHT_TYPES:
        raise QuantizationError(f"weight type {kind!r}: use one of {_WEIGHT_TYPES}")
    _check_bits(bits, "bits")
    return _q.weight_range(bits, kind)


def max_abs(lo: int, hi: int) -> int:
    """The largest magnitude in ``[lo, hi]``."""
    return max(abs(lo), abs(hi))


def acc_bits(in_range: tuple[int, int], w_range: tuple[int, int], fan_in: int,
             bias_max: int = 0) -> int:
    """The signed accumulator width a layer needs: the fewest bits ``B`` with
    ``fan_in * max|x| * max|w| + bias_max <= 2^(B-1) - 1`` (at least 2)."""
    bound = fan_in * max_abs(*in_range) * max_abs(*w_range) + abs(bias_max)
    return max(2, bound.bit_length() + 1)


@dataclass(frozen=True)
class Precision:
    """One layer's precision: ``w``-bit weights of ``w_type``, ``a``-bit output
    activations of ``a_type``, weight scales per output channel (``per_channel``) or
    per tensor.  ``w=1`` implies bipolar weights and ``a=1`` bipolar activations."""

    w: int = 8
    a: int = 8
    w_type: WeightType = "signed"
    a_type: ActivationType = "signed"
    per_channel: bool = True

    def __post_init__(self) -> None:
        _check_bits(self.w, "w")
        _check_bits(self.a, "a")
        if self.w_type not in _WEIGHT_TYPES:
            raise QuantizationError(f"w_type={self.w_type!r}: use one of {_WEIGHT_TYPES}")
        if self.a_type not in _ACT_TYPES:
            raise QuantizationError(f"a_type={self.a_type!r}: use one of {_ACT_TYPES}")
        if self.w == 1:
            object.__setattr__(self, "w_type", "bipolar")
        if self.a == 1:
            object.__setattr__(self, "a_type", "bipolar")
        if self.w_type == "bipolar" and self.w != 1:
            raise QuantizationError(f"bipolar weights are 1-bit; got w={self.w}")
        if self.a_type == "bipolar" and self.a != 1:
            raise QuantizationError(f"bipolar activations are 1-bit; got a={self.a}")
        if self.a == 16 and self.a_type == "unsigned":
            raise QuantizationError("unsigned 16-bit activations have no tensor dtype; use "
                                    "a_type='signed' or at most 8 bits")

    @property
    def weight_range(self) -> tuple[int, int]:
        return weight_range(self.w, self.w_type)

    @property
    def act_range(self) -> tuple[int, int]:
        return int_range(self.a, self.a_type)

    def with_weights(self, w: int, w_type: str = "signed") -> Precision:
        return Precision(w, self.a, cast(WeightType, w_type), self.a_type, self.per_channel)

    def with_activations(self, a: int, a_type: str = "signed") -> Precision:
        return Precision(self.w, a, self.w_type, cast(ActivationType, a_type),
                         self.per_channel)


def requant_thresholds(multiplier: Sequence[int] | np.ndarray,
                       shift: Sequence[int] | np.ndarray, lo: int, hi: int,
                       bipolar: bool = False) -> np.ndarray:
    """The ``multi_threshold`` thresholds (int32 ``[C, T]``) equal to ``requantize`` with
    per-channel ``multiplier`` / ``shift`` and rails ``[lo, hi]`` (or its sign when
    ``bipolar``, ``T = 1``).

    ``requantize`` gives ``clamp(R(x), lo, hi)`` with ``R(x) = (x * m + 2^(n-1)) >> n``,
    non-decreasing in ``x`` (``m >= 0``); level ``v`` in ``lo + 1 .. hi`` is reached from
    the least ``x`` with ``R(x) >= v``, i.e. ``x * m >= v * 2^n - 2^(n-1)``: ``t_v =
    ceil((v * 2^n - 2^(n-1)) / m)``, computed in Python ints (with ``m = 0`` R is 0).
    Thresholds are clipped to int32: one below it is always crossed (exact), one above
    it is never crossed by an ``x < 2^31 - 1``, so the two ops agree for every int32
    ``x`` but ``2^31 - 1``."""
    levels = [0] if bipolar else list(range(lo + 1, hi + 1))
    rows = []
    for m, n in zip(multiplier, shift):
        m, n = int(m), int(n)
        half = 1 << (n - 1) if n > 0 else 0
        row = []
        for v in levels:
            need = (v << n) - half  # x * m >= need
            if m == 0:
                t = _q.INT32_MIN if need <= 0 else _q.INT32_MAX
            else:
                t = -((-need) // m)
            row.append(min(max(t, _q.INT32_MIN), _q.INT32_MAX))
        rows.append(row)
    return np.array(rows, np.int64).astype(np.int32)
