"""More sequence layers of Paddle 1.5 (issue 20): ``sequence_reverse``,
``sequence_slice``, ``sequence_expand_as``, ``sequence_enumerate`` and
``sequence_scatter``."""

from __future__ import annotations

from ...ir.program import Variable
from ..layer_helper import LayerHelper

__all__ = ["sequence_reverse", "sequence_slice", "sequence_expand_as", "sequence_enumerate",
           "sequence_scatter"]


def _op(op_type: str, inputs: dict[str, Variable], like: Variable, out_slot: str = "Out",
        attrs: dict[str, int] | None = None, name: str | None = None) -> Variable:
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(like.dtype)
    helper.append_op(op_type, inputs, {out_slot: out}, attrs)
    return out


def sequence_reverse(x: Variable, name: str | None = None) -> Variable:
    """Each sequence of ``x`` with its rows in reverse order."""
    return _op("sequence_reverse", {"X": x}, x, "Y", name=name)


def sequence_slice(input: Variable, offset: Variable, length: Variable,
                   name: str | None = None) -> Variable:
    """Of sequence ``i``, the ``length[i]`` rows from row ``offset[i]`` on (int [S, 1])."""
    return _op("sequence_slice", {"X": input, "Offset": offset, "Length": length}, input,
               name=name)


def sequence_expand_as(x: Variable, y: Variable, name: str | None = None) -> Variable:
    """Row ``i`` of ``x`` repeated as many times as sequence ``i`` of ``y`` has rows."""
    return _op("sequence_expand_as", {"X": x, "Y": y}, x, name=name)


def sequence_enumerate(input: Variable, win_size: int, pad_value: int = 0,
                       name: str | None = None) -> Variable:
    """Each row's window of ``win_size`` ids within its sequence, ``pad_value`` past the
    end ([N, win_size])."""
    return _op("sequence_enumerate", {"X": input}, input,
               attrs={"win_size": int(win_size), "pad_value": int(pad_value)}, name=name)


def sequence_scatter(input: Variable, index: Variable, updates: Variable,
                     name: str | None = None) -> Variable:
    """``input`` [B, D] with ``updates[j]`` added at column ``index[j]`` of row ``i`` for
    each row ``j`` of sequence ``i`` of ``index``."""
    return _op("sequence_scatter", {"X": input, "Ids": index, "Updates": updates}, input,
               name=name)
