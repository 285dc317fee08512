"""The ONNX <-> fluid ops that map one to one: one table, read by both directions.

A :class:`Pair` is one ONNX op and one fluid op whose inputs, output and attributes
correspond by name.  ``_import_ops`` makes an importer of each pair (unless the
importer needs more than the renaming: ``imports=False``) and ``_export_ops`` an
exporter of each; the op-specific converters sit beside those generated entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Attr", "Pair", "PAIRS"]


@dataclass(frozen=True)
class Attr:
    """An attribute of both ops: ONNX ``onnx`` is fluid ``fluid``, its value passed
    through ``convert``; an ONNX node without it takes ``default``."""

    onnx: str
    fluid: str
    convert: Callable[[Any], Any] = int
    default: Any = None


@dataclass(frozen=True)
class Pair:
    """One ONNX op and one fluid op, one to one.

    ``form``: ``unary`` (ONNX input 0 is fluid ``X``, its output fluid ``Out``),
    ``binary`` (inputs 0 and 1 are ``X`` and ``Y``; exported with Fluid's ``axis``
    broadcast made explicit) or ``variadic`` (every given input goes to ``X``).
    ``fixed``: fluid attributes the importer sets (ONNX has no such attribute).
    ``imports``: False when the importer converts the ONNX op its own way (a scale for
    a constant operand, a chain for more inputs, opset differences...), so only the
    exporter comes from this pair."""

    onnx: str
    fluid: str
    form: Literal["unary", "binary", "variadic"] = "unary"
    attrs: tuple[Attr, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    imports: bool = True


_AXIS = (Attr("axis", "axis"),)
_BROADCAST = {"axis": -1}  # numpy broadcasting is Fluid's rule with axis -1


def _unary(*names: tuple[str, str]) -> list[Pair]:
    return [Pair(o, f) for o, f in names]


#: every one-to-one pair, in the order of the docs' tables
PAIRS: tuple[Pair, ...] = (
    # element-wise
    *_unary(("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Exp", "exp"),
            ("Log", "log"), ("Sqrt", "sqrt"), ("Abs", "abs"), ("Floor", "floor"),
            ("Ceil", "ceil"), ("Round", "round"), ("Sign", "sign"), ("Sin", "sin"),
            ("Cos", "cos"), ("Reciprocal", "reciprocal"), ("Not", "logical_not")),
    Pair("LeakyRelu", "leaky_relu", attrs=(Attr("alpha", "alpha", float, 0.01),)),
    Pair("Erf", "erf"),
    *_unary(("Tan", "tan"), ("Sinh", "sinh"), ("Cosh", "cosh"), ("Asin", "asin"),
            ("Acos", "acos"), ("Atan", "atan"), ("Asinh", "asinh"), ("Acosh", "acosh"),
            ("Atanh", "atanh")),
    Pair("HardSigmoid", "hard_sigmoid", attrs=(Attr("alpha", "slope", float, 0.2),
                                               Attr("beta", "offset", float, 0.5))),
    Pair("Softmax", "softmax", attrs=_AXIS, imports=False),  # opset < 13 flattens
    Pair("LogSoftmax", "log_softmax", attrs=_AXIS, imports=False),
    Pair("Add", "elementwise_add", "binary", imports=False),  # a scale for a constant
    Pair("Sub", "elementwise_sub", "binary", imports=False),
    Pair("Mul", "elementwise_mul", "binary", imports=False),
    Pair("Div", "elementwise_div", "binary", imports=False),  # per-channel constants
    Pair("Pow", "elementwise_pow", "binary", imports=False),  # the exponent's type
    Pair("Max", "elementwise_max", "binary", imports=False),  # variadic in ONNX
    Pair("Min", "elementwise_min", "binary", imports=False),
    Pair("Sum", "sum", "variadic", imports=False),  # imported as elementwise_add
    # comparisons and logic
    Pair("Equal", "equal", "binary", fixed=_BROADCAST),
    Pair("Less", "less_than", "binary", fixed=_BROADCAST),
    Pair("LessOrEqual", "less_equal", "binary", fixed=_BROADCAST),
    Pair("Greater", "greater_than", "binary", fixed=_BROADCAST),
    Pair("GreaterOrEqual", "greater_equal", "binary", fixed=_BROADCAST),
    Pair("And", "logical_and", "binary"),
    Pair("Or", "logical_or", "binary"),
    Pair("Xor", "logical_xor", "binary"),
    # shapes
    Pair("Transpose", "transpose2", attrs=(Attr("perm", "axis", list),),
         imports=False),  # ONNX's default perm depends on the rank
    Pair("Flatten", "flatten2", attrs=_AXIS, imports=False),  # a negative axis
    Pair("Concat", "concat", "variadic", attrs=_AXIS),
    Pair("Identity", "assign", imports=False),  # imported as an alias, not a copy
)
