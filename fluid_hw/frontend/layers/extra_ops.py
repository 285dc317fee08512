"""Layers of the ops added for ONNX models (issue 16), with Paddle 1.5's names and
arguments: ``erf``, ``hard_sigmoid``, ``hard_swish``, ``expand``, ``cumsum``,
``cumprod``, ``reduce_min``, ``reduce_prod``, ``elementwise_mod``, ``elementwise_fmod``
and the three-operand ``where`` (Paddle 2's ``where(condition, x, y)``; Paddle 1.5's
one-operand ``where`` returned indices)."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.program import Variable
from ..layer_helper import LayerHelper
from .math_ops import _binary, _reduce, _unary

__all__ = ["erf", "hard_sigmoid", "hard_swish", "expand", "cumsum", "where", "reduce_min",
           "reduce_prod", "elementwise_mod", "elementwise_fmod", "cumprod"]


def erf(x: Variable, name: str | None = None) -> Variable:
    """The Gauss error function, element-wise."""
    return _unary("erf", x, name)


def hard_sigmoid(x: Variable, slope: float = 0.2, offset: float = 0.5,
                 name: str | None = None) -> Variable:
    """``min(max(slope * x + offset, 0), 1)``."""
    return _unary("hard_sigmoid", x, name, {"slope": float(slope), "offset": float(offset)})


def hard_swish(x: Variable, threshold: float = 6.0, scale: float = 6.0, offset: float = 3.0,
               name: str | None = None) -> Variable:
    """``x * min(max(x + offset, 0), threshold) / scale``."""
    return _unary("hard_swish", x, name, {"threshold": float(threshold),
                                          "scale": float(scale), "offset": float(offset)})


def expand(x: Variable, expand_times: Sequence[int], name: str | None = None) -> Variable:
    """``x`` tiled ``expand_times[i]`` times along dim ``i`` (one entry per dim)."""
    return _unary("expand", x, name, {"expand_times": [int(t) for t in expand_times]})


def cumsum(x: Variable, axis: int | None = None, exclusive: bool | None = None,
           reverse: bool | None = None, name: str | None = None) -> Variable:
    """Cumulative sum along ``axis`` (default -1); ``exclusive`` leaves each element out of
    its own sum, ``reverse`` sums from the end."""
    return _unary("cumsum", x, name, {"axis": -1 if axis is None else int(axis),
                                      "exclusive": bool(exclusive), "reverse": bool(reverse)})


def cumprod(x: Variable, axis: int | None = None, exclusive: bool | None = None,
            reverse: bool | None = None, name: str | None = None) -> Variable:
    """Cumulative product along ``axis`` (default -1); ``exclusive`` leaves each element
    out of its own product, ``reverse`` multiplies from the end."""
    return _unary("cumprod", x, name, {"axis": -1 if axis is None else int(axis),
                                       "exclusive": bool(exclusive), "reverse": bool(reverse)})


def where(condition: Variable, x: Variable, y: Variable, name: str | None = None) -> Variable:
    """``x`` where ``condition`` (bool) else ``y``, the three broadcast together."""
    helper = LayerHelper("where", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("where", {"Condition": condition, "X": x, "Y": y}, {"Out": out})
    return out


def reduce_min(input: Variable, dim: int | Sequence[int] | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Minimum over ``dim`` (every dim when None); reducing all without keep_dim gives [1]."""
    return _reduce("reduce_min", input, dim, keep_dim, name)


def reduce_prod(input: Variable, dim: int | Sequence[int] | None = None, keep_dim: bool = False,
                name: str | None = None) -> Variable:
    """Product over ``dim`` (every dim when None); reducing all without keep_dim gives [1]."""
    return _reduce("reduce_prod", input, dim, keep_dim, name)


def elementwise_mod(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x mod y`` with the divisor's sign (Python's ``%``), ``elementwise_add``'s
    broadcasting."""
    return _binary("elementwise_mod", x, y, {"axis": axis}, act, name)


def elementwise_fmod(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                     name: str | None = None) -> Variable:
    """``x mod y`` with the dividend's sign (C's ``fmod``), ``elementwise_add``'s
    broadcasting."""
    return _binary("elementwise_fmod", x, y, {"axis": axis}, act, name)
