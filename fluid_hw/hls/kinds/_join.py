"""What the join kinds (``add``, ``concat``) share: the output format of their op, their
rate (a beat a cycle through their lanes) and timing (their pipeline and output queue),
and the weights mode of their specs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..stage_info import FixedPoint, Values
from ..stages import queue_latency
from ._base import StageKind

__all__ = ["join_output", "join_cycles", "join_times", "join_mode", "join_kind"]


def join_output(op: Any) -> tuple[bool, FixedPoint]:
    """The op's ``relu`` and its output's format: int8 (clamped at 0 with relu) at its
    ``out_scale``."""
    relu = bool(op.attr("relu"))
    return relu, FixedPoint(8, 0 if relu else -128, 127, float(op.attr("out_scale")) or None)


def join_cycles(s: Any, lanes: tuple[int, int]) -> int:
    """A beat a cycle: every element of every input in turn or together."""
    return int(s.in_len // lanes[0])


def join_times(s: Any, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    """Each element out ``latency`` and the output queue's cycles after it is taken."""
    return t_in + s.latency + queue_latency()


def join_mode(values: Values | None, mode: str) -> str:
    """The spec's weights mode: a trial spec (no values) costing a matrix stage's tail is
    const, as always."""
    return "const" if values is None else mode


def join_kind(name: str, spec: type, op_type: str, **kw: Any) -> StageKind:
    """The :class:`StageKind` of a join of ``op_type`` ops: reported as that op, a beat
    a cycle (:func:`join_cycles`, :func:`join_times`); ``kw`` the rest."""
    return StageKind(name=name, spec=spec, report_op=op_type,
                     matches=lambda program, op: op.type == op_type,
                     cycles=join_cycles, times=join_times, **kw)
