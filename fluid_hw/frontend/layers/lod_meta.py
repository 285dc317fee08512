"""Layers over a tensor's LoD and size (issue 20): ``lod_reset`` and ``is_empty``."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.program import Variable
from ..layer_helper import LayerHelper

__all__ = ["lod_reset", "is_empty"]


def lod_reset(x: Variable, y: Variable | None = None,
              target_lod: Sequence[int] | None = None) -> Variable:
    """``x``'s data with a new LoD: ``y``'s LoD (or, when ``y`` has none, its values as
    offsets), else ``target_lod`` (offsets)."""
    if y is None and not target_lod:
        raise ValueError(f"lod_reset {x.name!r}: give y or target_lod (offsets of the new "
                         "sequences)")
    helper = LayerHelper("lod_reset")
    out = helper.create_variable_for_type_inference(x.dtype)
    if y is not None:
        helper.append_op("lod_reset", {"X": x, "Y": y}, {"Out": out})
    else:
        helper.append_op("lod_reset", {"X": x}, {"Out": out},
                         {"target_lod": [int(t) for t in target_lod or []]})
    return out


def is_empty(x: Variable, cond: Variable | None = None) -> Variable:
    """A bool [1]: whether ``x`` has no elements (written to ``cond`` when given)."""
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference("bool")
        cond.stop_gradient = True
    helper.append_op("is_empty", {"X": x}, {"Out": cond})
    return cond
