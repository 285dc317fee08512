"""The :class:`StageKind` record (see :mod:`fluid_hw.hls.kinds`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fluid_hw.rtl.spec import StageSpec

if TYPE_CHECKING:
    from ...ir.program import Operator, Program
    from ..stage_info import Cursor, LoweredStage, Values
    from ..stages import Resources

__all__ = ["StageKind", "Lanes", "Memory"]

Lanes = tuple[int, int]
Memory = tuple[int, int, str]


@dataclass(frozen=True)
class StageKind:
    """One kind of hardware stage (see the module docstring)."""

    name: str
    spec: type[StageSpec]
    report_op: str
    matches: Callable[[Program, Operator], bool]
    lower: Callable[[Any, Sequence[int], int, Cursor], tuple[LoweredStage, int]]
    make_spec: Callable[[LoweredStage, Values | None, int, int, str], StageSpec]
    cycles: Callable[[Any, Lanes], int]
    times: Callable[[Any, Lanes, np.ndarray], np.ndarray]
    resources: Callable[[Any, Lanes], Resources]
    memories: Callable[[Any, Lanes], list[Memory]]
    lut: Callable[[Any, Lanes, Any], float]
    shape: Callable[[Any], dict[str, Any]]
    #: elements of its input the stage itself holds (an MVAU a whole vector, a sliding
    #: window a row of the image): buffering a FIFO in front need not provide
    buffer: Callable[[Any], int] = lambda s: 0
    #: a relu after the stage may be applied before it (max pooling): a relu further on
    #: folds into the clamp of the stage before this one
    relu_commutes: bool = False
    #: why an op of the kind's op type that it does not match runs on the host (a
    #: ``nearest_interp`` by a fractional factor), for the compile listing; None: no note
    declines: Callable[[Program, Operator], str | None] = lambda program, op: None
    #: for each input port, the place in the stage's input sequence (``in_len``
    #: elements, whose times ``times`` gets) where the stage takes each of that port's
    #: elements; None: element ``j`` of every port at place ``j`` (a join takes its
    #: inputs together).  A concat takes each place from one port, a beat a cycle
    port_order: Callable[[Any], list[np.ndarray]] | None = None
    #: the most PEs automatic folding for a device gives a stage of the kind (a hand
    #: ``--fold`` may go further), or that for a spec (a function of it); None: no limit
    max_pe: int | Callable[[Any], int] | None = None
    #: the most multiplier lanes (PE x SIMD) automatic folding for a device gives it;
    #: None: no limit
    max_lanes: int | None = None
    doc: str = ""

    def folding(self, spec: Any, lanes: Lanes) -> dict[str, int]:
        """The report's ``folding`` of a stage."""
        if spec.folds:
            return {"pe": spec.pe, "simd": spec.simd}
        return {"lanes": lanes[0]}
