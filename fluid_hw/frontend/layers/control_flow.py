"""Comparison and logical layers, ``increment`` and the global step counter.

(The block-structured control flow — While, IfElse, Switch — comes later.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...ir import dtypes, unique_name
from ...ir.program import Block, Operator, Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper

__all__ = [
    "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "increment",
    "autoincreased_step_counter",
]

_BOOL = dtypes.VarType.BOOL


# -- comparisons ---------------------------------------------------------------------

def _compare(op_type: str, x: Variable, y: Variable, cond: Variable | None,
             attrs: dict[str, Any] | None = None) -> Variable:
    helper = LayerHelper(op_type)
    if cond is None:
        cond = helper.create_variable_for_type_inference(_BOOL, stop_gradient=True)
    helper.append_op(op_type, {"X": x, "Y": y}, {"Out": cond}, attrs)
    return cond


def less_than(x: Variable, y: Variable, force_cpu: bool | None = None,
              cond: Variable | None = None) -> Variable:
    """``x < y`` element-wise, a bool tensor (written into ``cond`` when given)."""
    return _compare("less_than", x, y, cond,
                    {"force_cpu": force_cpu} if force_cpu is not None else None)


def less_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x <= y`` element-wise, a bool tensor."""
    return _compare("less_equal", x, y, cond)


def greater_than(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x > y`` element-wise, a bool tensor."""
    return _compare("greater_than", x, y, cond)


def greater_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x >= y`` element-wise, a bool tensor."""
    return _compare("greater_equal", x, y, cond)


def equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x == y`` element-wise, a bool tensor."""
    return _compare("equal", x, y, cond)


def not_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    """``x != y`` element-wise, a bool tensor."""
    return _compare("not_equal", x, y, cond)


# -- logical ---------------------------------------------------------------------------

def _logical(op_type: str, inputs: dict[str, Variable], out: Variable | None,
             name: str | None) -> Variable:
    helper = LayerHelper(op_type, name=name)
    if out is None:
        out = helper.create_variable_for_type_inference(_BOOL, stop_gradient=True)
    helper.append_op(op_type, inputs, {"Out": out})
    return out


def logical_and(x: Variable, y: Variable, out: Variable | None = None,
                name: str | None = None) -> Variable:
    """``x and y`` on bool tensors."""
    return _logical("logical_and", {"X": x, "Y": y}, out, name)


def logical_or(x: Variable, y: Variable, out: Variable | None = None,
               name: str | None = None) -> Variable:
    """``x or y`` on bool tensors."""
    return _logical("logical_or", {"X": x, "Y": y}, out, name)


def logical_xor(x: Variable, y: Variable, out: Variable | None = None,
                name: str | None = None) -> Variable:
    """``x xor y`` on bool tensors."""
    return _logical("logical_xor", {"X": x, "Y": y}, out, name)


def logical_not(x: Variable, out: Variable | None = None, name: str | None = None) -> Variable:
    """``not x`` on a bool tensor."""
    return _logical("logical_not", {"X": x}, out, name)


# -- counters ----------------------------------------------------------------------------

def increment(x: Variable, value: float = 1.0, in_place: bool = True) -> Variable:
    """``x + value`` for a one-element ``x``; with ``in_place`` the result is ``x`` itself."""
    helper = LayerHelper("increment")
    out = x if in_place else helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("increment", {"X": x}, {"Out": out}, {"step": float(value)})
    return out


def autoincreased_step_counter(counter_name: str | None = None, begin: int = 1,
                               step: int = 1) -> Variable:
    """A persistable int64 [1] counter that is ``begin`` on the first run of the main
    program and grows by ``step`` each run (Fluid's global step counter).

    The counter is filled with ``begin - step`` in the startup program and an
    ``increment`` op is put at the very front of the main program.  Asking twice for
    the same ``counter_name`` returns the same variable.
    """
    return step_counter(counter_name or "@STEP_COUNTER@", begin, step)


def step_counter(name: str, begin: int, step: int, op_role: str | None = None,
                 dtype: Any = "int64") -> Variable:
    """:func:`autoincreased_step_counter` with the increment op's role and the dtype."""
    helper = LayerHelper("global_step_counter")
    gb = helper.main_program.global_block()
    if gb.has_var(name):
        return gb.var(name)
    counter = gb.create_var(name=name, shape=[1], dtype=dtype, persistable=True,
                            stop_gradient=True)
    sb = helper.startup_program.global_block()
    if not sb.has_var(name):
        sv = sb.create_var(name=name, shape=[1], dtype=dtype, persistable=True)
        Constant(float(begin - step))(sv, sb)
    attrs: dict[str, Any] = {"step": float(step)}
    if op_role:
        attrs["op_role"] = op_role
    gb._prepend_op("increment", {"X": counter}, {"Out": counter}, attrs)
    return counter


# -- building ops that all carry one op_role ----------------------------------------------

class RoleOps:
    """Appends ops carrying one ``op_role`` attribute to a block, with temporaries
    named after ``prefix``.  The optimizers, regularizers, gradient clips and
    learning-rate schedules build their ops through it.
    """

    def __init__(self, block: Block, role: str, prefix: str) -> None:
        self.block = block
        self.role = role
        self.prefix = prefix

    def op(self, type: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
           attrs: Mapping[str, Any] | None = None) -> Operator:
        return self.block.append_op(type, inputs, outputs, {**(attrs or {}),
                                                            "op_role": self.role})

    def tmp(self, dtype: Any = "float32", name: str | None = None) -> Variable:
        return self.block.create_var(name=name or unique_name.generate(f"{self.prefix}.tmp"),
                                     dtype=dtype, stop_gradient=True)

    def unary(self, type: str, x: Variable, **attrs: Any) -> Variable:
        out = self.tmp(x.dtype)
        self.op(type, {"X": x}, {"Out": out}, attrs)
        return out

    def binary(self, type: str, x: Variable, y: Variable, axis: int = -1) -> Variable:
        """``elementwise_<type>`` or a comparison (bool Out)."""
        full = type if type in _COMPARE_TYPES else f"elementwise_{type}"
        out = self.tmp(_BOOL if full in _COMPARE_TYPES else x.dtype)
        self.op(full, {"X": x, "Y": y}, {"Out": out}, {"axis": axis})
        return out

    def scale(self, x: Variable, scale: float = 1.0, bias: float = 0.0) -> Variable:
        return self.unary("scale", x, scale=float(scale), bias=float(bias))

    def const(self, value: float, dtype: Any = "float32",
              shape: Sequence[int] = (1,)) -> Variable:
        out = self.tmp(dtype)
        self.op("fill_constant", {}, {"Out": out},
                {"shape": list(shape), "dtype": dtypes.to_enum(dtype), "value": float(value)})
        return out

    def cast(self, x: Variable, dtype: Any) -> Variable:
        out = self.tmp(dtype)
        self.op("cast", {"X": x}, {"Out": out},
                {"in_dtype": x.dtype, "out_dtype": dtypes.to_enum(dtype)})
        return out

    def sum(self, xs: Sequence[Variable], out: Variable | None = None) -> Variable:
        out = out if out is not None else self.tmp(xs[0].dtype)
        self.op("sum", {"X": list(xs)}, {"Out": out})
        return out


_COMPARE_TYPES = frozenset({"less_than", "less_equal", "greater_than", "greater_equal",
                            "equal", "not_equal"})
