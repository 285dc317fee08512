"""The registry of hardware stage kinds: one row per kind, one file per kind.

A :class:`StageKind` says everything the FPGA back end needs of one kind of stage:

* ``matches(program, op)``: whether a program op begins such a stage (the
  partition consults this to decide what runs on the accelerator);
* ``lower(builder, chain, k, cursor)``: the :class:`~..stage_info.LoweredStage` made
  from the ops at ``chain[k:]`` and how many ops it took (discovery, once per build);
* ``make_spec(stage, values, pe, simd, mode)``: the stage's spec (an rtl
  :class:`~fluid_hw.rtl.spec.StageSpec`) for a folding, with the parameter arrays
  from ``values`` (None: a trial spec for costing);
* the analytic models over a spec and its ``(in, out)`` lanes: ``cycles``, ``times``
  (per-element output times from input times), ``resources`` (:mod:`..stages`'
  generic ECP5 figures), ``memories`` (``(depth, width, "rom"|"ram")`` of every
  synchronously read memory, for the device-aware block-RAM model), ``lut`` (the
  stage's share of the calibrated LUT model, memories excluded) and ``shape`` (for
  the report).

The spec class itself (in ``fluid_hw.rtl``) carries the hardware side: its
component, behavioural model and ``from_structure``.  Adding a kind is its rtl
component and spec, its file here, the fixed-point rule and golden kernel where the
op is new to fixed point, and one row of :data:`KINDS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fluid_hw.rtl.spec import StageSpec

from ...errors import unknown_name
from . import add, affine, avgpool, concat, conv, dwconv, maxpool, mvau, recurrent, table, upsample
from ._base import StageKind

if TYPE_CHECKING:
    from ...ir.program import Operator, Program

__all__ = ["StageKind", "KINDS", "get_kind", "kind_of", "kind_for_op", "host_reason"]

#: kind name (== the spec's ``kind``) -> :class:`StageKind`; one row per kind
KINDS: dict[str, StageKind] = {k.name: k for k in (
    recurrent.KIND,  # before mvau: it takes the quantized_fc feeding a recurrence
    mvau.KIND,
    conv.KIND,
    maxpool.KIND,
    dwconv.KIND,
    avgpool.KIND,
    table.KIND,
    add.KIND,
    affine.KIND,
    concat.KIND,
    upsample.KIND,
)}


def get_kind(name: str) -> StageKind:
    """A stage kind by name; an unknown name lists the known ones."""
    if name not in KINDS:
        raise unknown_name("stage kind", name, sorted(KINDS))
    return KINDS[name]


def kind_of(spec: StageSpec) -> StageKind:
    """The kind of a stage spec."""
    return get_kind(spec.kind)


def kind_for_op(program: Program, op: Operator) -> StageKind | None:
    """The kind whose stage begins with ``op``, or None."""
    for k in KINDS.values():
        if k.matches(program, op):
            return k
    return None


def host_reason(program: Program, op: Operator) -> str | None:
    """Why ``op``, of a type some kind lowers, runs on the host instead (the compile
    listing says it), or None."""
    for k in KINDS.values():
        why = k.declines(program, op)
        if why:
            return why
    return None
