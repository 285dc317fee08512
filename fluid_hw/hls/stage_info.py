"""What the lowering knows of one hardware stage, independent of its folding.

:class:`LoweredStage` is a stage found in the program (its ops, values, shapes,
fixed-point formats, stream order, parameter names); the stage kinds of
:mod:`.kinds` make it from the program's ops and turn it into a spec for a folding.
:class:`Cursor` is the stream between two stages as the lowering walks the chain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from fluid_hw.rtl import Clamp
from fluid_hw.rtl.spec import StageSpec

from ..ir.lod import LoDTensor
from .partition import LoweringError

__all__ = ["FixedPoint", "INT8", "INT32", "LoweredStage", "Cursor", "layer_name",
           "param_value", "broadcast", "Values"]


class ValueSource(Protocol):
    """Where parameter values are looked up by name: a Scope (``find_value``)."""

    def find_value(self, name: str) -> Any: ...


#: parameter values: a Scope (anything with ``find_value``) or a dict of arrays
Values = Mapping[str, Any] | ValueSource


@dataclass(frozen=True)
class FixedPoint:
    """An integer format (docs/fixed_point.md): ``bits`` wide (1-8, 16 or 32), of
    ``kind`` ``signed``, ``unsigned`` or ``bipolar`` (-1 / +1), values in ``[lo, hi]``
    (a relu raises ``lo`` to 0), real value ``q * scale``: one scale per tensor, or a
    tuple of one per channel (an accumulator: input scale x weight scale), or None where
    the program does not record it.  Values of 1-8 bits travel in int8 lanes."""

    bits: int
    lo: int
    hi: int
    scale: float | tuple[float, ...] | None = None
    kind: str = "signed"

    @classmethod
    def of(cls, bits: int, kind: str = "signed", relu: bool = False,
           scale: float | tuple[float, ...] | None = None) -> FixedPoint:
        """The format of ``bits``-wide values of ``kind`` (the range from the kind)."""
        if kind == "bipolar":
            return cls(bits, -1, 1, scale, kind)
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind == "signed" else \
            (0, 2**bits - 1)
        return cls(bits, max(lo, 0) if relu else lo, hi, scale, kind)

    def as_dict(self) -> dict[str, Any]:
        scale = list(self.scale) if isinstance(self.scale, tuple) else self.scale
        return {"bits": self.bits, "kind": self.kind, "lo": self.lo, "hi": self.hi,
                "scale": scale}

    def clamped_below(self, lo: int) -> FixedPoint:
        return FixedPoint(self.bits, max(self.lo, lo), self.hi, self.scale, self.kind)

    @property
    def in_int8_lanes(self) -> bool:
        """Whether the values fit the accelerator's int8 lanes."""
        return self.lo >= -128 and self.hi <= 127

    def clamp(self) -> Clamp | None:
        """The requantiser rails that produce this format: None for int8's own (with or
        without relu: the int8 designs' hardware), else :class:`~fluid_hw.rtl._lane.Clamp`."""
        if self.kind != "bipolar" and (self.lo, self.hi) in ((-128, 127), (0, 127)):
            return None
        return Clamp(self.lo, self.hi, self.kind == "bipolar")


INT8 = FixedPoint(8, -128, 127)
INT32 = FixedPoint(32, -2**31, 2**31 - 1)


@dataclass
class Cursor:
    """The stream at one point of the chain: the program value it carries, that
    value's per-example shape, its fixed-point format, and which element each stream
    position carries (``perm[j]``: element of the flattened value at position ``j``)."""

    var: str
    shape: tuple[int, ...]
    perm: np.ndarray
    fmt: FixedPoint


@dataclass
class LoweredStage:
    """One hardware stage and where it came from.

    ``kind``: its stage kind (:mod:`.kinds`); ``ops``: indices of the program ops it
    implements; ``in_var``/``out_var``: the program values at its input and output
    (``out_var``'s golden value, with ``relu`` applied when ``golden_relu``, is what the
    stage streams, in ``stream_perm`` order: stream position ``j`` carries element
    ``stream_perm[j]`` of one example's flattened ``out_var``); ``params``: slot ->
    program variable (weights, bias, multiplier, shift, table); ``layout``: how the
    parameters were rearranged; ``fold_dims``: ``(mw, mh)`` of a folding stage (SIMD
    divides mw, PE divides mh)."""

    name: str
    kind: str
    op: str
    ops: list[int]
    in_var: str
    out_var: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    in_format: FixedPoint
    out_format: FixedPoint
    stream_perm: np.ndarray
    params: dict[str, str | None] = field(default_factory=dict)
    layout: dict[str, Any] = field(default_factory=dict)
    geometry: dict[str, Any] = field(default_factory=dict)
    relu: bool = False
    requantize: bool = True
    golden_relu: bool = False
    col_perm: np.ndarray | None = None
    fold_dims: tuple[int, int] | None = None
    #: program values of further input ports (a join's second input)
    extra_in: list[str] = field(default_factory=list)
    #: the producer of each input port: a stage index, -1 for the accelerator's input
    inputs: list[int] = field(default_factory=list)
    spec: StageSpec | None = None

    @property
    def in_vars(self) -> list[str]:
        return [self.in_var, *self.extra_in]

    @property
    def folds(self) -> bool:
        """Whether the stage has a PE x SIMD folding of its own."""
        return self.fold_dims is not None

    @property
    def mw(self) -> int:
        return self.fold_dims[0] if self.fold_dims else 0

    @property
    def mh(self) -> int:
        return self.fold_dims[1] if self.fold_dims else 0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "op": self.op, "ops": self.ops,
                "in_var": self.in_var, "out_var": self.out_var,
                "in_shape": list(self.in_shape), "out_shape": list(self.out_shape),
                "in_format": self.in_format.as_dict(), "out_format": self.out_format.as_dict(),
                "params": self.params, "layout": self.layout, "relu": self.relu,
                "requantize": self.requantize, "golden_relu": self.golden_relu,
                "inputs": self.inputs, "in_vars": self.in_vars}


def layer_name(*candidates: str | None) -> str:
    """A stage name from the first program name given: its prefix before the first
    dot (``fc_0.w_0.int8`` -> ``fc_0``), as a Verilog-safe identifier."""
    for c in candidates:
        if c:
            base = re.sub(r"\W", "_", c.split(".")[0]) or "stage"
            return base if not base[0].isdigit() else f"s_{base}"
    return "stage"


def param_value(values: Values, name: str) -> np.ndarray:
    """A parameter's array from a Scope or a dict (a clear error when it is missing)."""
    v = values.get(name) if isinstance(values, Mapping) else values.find_value(name)
    if v is None:
        raise LoweringError(f"parameter {name!r} has no value: load the model's parameters "
                            "(io.load_inference_model) into the scope given to lower()")
    return np.asarray(v.data if isinstance(v, LoDTensor) else v)


def broadcast(arr: np.ndarray, n: int, what: str, stage: str) -> np.ndarray:
    """A per-channel parameter of ``n`` values from one or ``n`` values."""
    a = np.asarray(arr).reshape(-1)
    if a.size == 1:
        return np.full(n, a[0], dtype=a.dtype)
    if a.size != n:
        raise LoweringError(f"stage {stage!r}: {what} has {a.size} values, expected 1 or {n}")
    return a
