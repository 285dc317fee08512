"""Math layers: element-wise arithmetic, activations, products, scaling, reductions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.program import Variable
from ..layer_helper import LayerHelper

__all__ = [
    "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
    "elementwise_max", "elementwise_min", "elementwise_pow",
    "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "leaky_relu", "softmax",
    "mul", "matmul", "scale", "mean", "reduce_sum", "reduce_mean", "reduce_max", "sums",
]


def _one(x: Any, op_type: str, what: str = "x") -> Variable:
    """``x``, or the variable of a one-element list: Fluid scripts pass IfElse's
    output list on as it is (``reduce_sum(ie())``)."""
    if isinstance(x, (list, tuple)):
        if len(x) != 1:
            raise TypeError(f"{op_type}: {what} is a list of {len(x)} variables; give one "
                            "variable (e.g. ie()[0] for an IfElse with several outputs)")
        x = x[0]
    return x


def _unary(op_type: str, x: Variable, name: str | None, attrs: dict[str, Any] | None = None,
           act: str | None = None) -> Variable:
    """Append ``op_type`` (slots X -> Out, Out like X) and an optional activation."""
    x = _one(x, op_type)
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": x}, {"Out": out}, attrs)
    return helper.append_activation(out, act)


def _binary(op_type: str, x: Variable, y: Variable, attrs: dict[str, Any],
            act: str | None, name: str | None) -> Variable:
    x, y = _one(x, op_type), _one(y, op_type, "y")
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": x, "Y": y}, {"Out": out}, attrs)
    return helper.append_activation(out, act)


# -- element-wise arithmetic ------------------------------------------------------

def elementwise_add(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x + y``; ``y``'s dims line up with ``x``'s from ``axis`` (-1: from the right)."""
    return _binary("elementwise_add", x, y, {"axis": axis}, act, name)


def elementwise_sub(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x - y`` with ``elementwise_add``'s broadcasting."""
    return _binary("elementwise_sub", x, y, {"axis": axis}, act, name)


def elementwise_mul(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x * y`` with ``elementwise_add``'s broadcasting."""
    return _binary("elementwise_mul", x, y, {"axis": axis}, act, name)


def elementwise_div(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x / y`` (integers truncate toward zero) with ``elementwise_add``'s broadcasting."""
    return _binary("elementwise_div", x, y, {"axis": axis}, act, name)


def elementwise_max(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``max(x, y)`` with ``elementwise_add``'s broadcasting."""
    return _binary("elementwise_max", x, y, {"axis": axis}, act, name)


def elementwise_min(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``min(x, y)`` with ``elementwise_add``'s broadcasting."""
    return _binary("elementwise_min", x, y, {"axis": axis}, act, name)


def elementwise_pow(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x ** y`` with ``elementwise_add``'s broadcasting."""
    return _binary("elementwise_pow", x, y, {"axis": axis}, act, name)


# -- activations ---------------------------------------------------------------------

def relu(x: Variable, name: str | None = None) -> Variable:
    """``max(x, 0)``."""
    return _unary("relu", x, name)


def sigmoid(x: Variable, name: str | None = None) -> Variable:
    """``1 / (1 + exp(-x))``."""
    return _unary("sigmoid", x, name)


def tanh(x: Variable, name: str | None = None) -> Variable:
    """Hyperbolic tangent."""
    return _unary("tanh", x, name)


def exp(x: Variable, name: str | None = None) -> Variable:
    """``e ** x``."""
    return _unary("exp", x, name)


def log(x: Variable, name: str | None = None) -> Variable:
    """Natural logarithm."""
    return _unary("log", x, name)


def sqrt(x: Variable, name: str | None = None) -> Variable:
    """Square root."""
    return _unary("sqrt", x, name)


def abs(x: Variable, name: str | None = None) -> Variable:
    """Absolute value."""
    return _unary("abs", x, name)


def leaky_relu(x: Variable, alpha: float = 0.02, name: str | None = None) -> Variable:
    """``x`` where positive, else ``alpha * x``."""
    return _unary("leaky_relu", x, name, {"alpha": float(alpha)})


def softmax(input: Variable, use_cudnn: bool = False, name: str | None = None,
            axis: int = -1) -> Variable:
    """Softmax along ``axis`` (Fluid's argument order; ``use_cudnn`` is ignored)."""
    return _unary("softmax", input, name, {"axis": axis})


# -- products and scaling ----------------------------------------------------------

def mul(x: Variable, y: Variable, x_num_col_dims: int = 1, y_num_col_dims: int = 1,
        name: str | None = None) -> Variable:
    """``flatten(x, x_num_col_dims) @ flatten(y, y_num_col_dims)``, reshaped to
    ``x.shape[:x_num_col_dims] + y.shape[y_num_col_dims:]``."""
    return _binary("mul", x, y, {"x_num_col_dims": x_num_col_dims,
                                 "y_num_col_dims": y_num_col_dims}, None, name)


def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False,
           alpha: float = 1.0, name: str | None = None) -> Variable:
    """``alpha * op(x) @ op(y)``: 1-D operands act as vectors, leading dims as batches."""
    return _binary("matmul", x, y, {"transpose_X": bool(transpose_x),
                                    "transpose_Y": bool(transpose_y),
                                    "alpha": float(alpha)}, None, name)


def scale(x: Variable, scale: float = 1.0, bias: float = 0.0, bias_after_scale: bool = True,
          act: str | None = None, name: str | None = None) -> Variable:
    """``scale * x + bias`` (or ``scale * (x + bias)`` when not ``bias_after_scale``)."""
    return _unary("scale", x, name, {"scale": float(scale), "bias": float(bias),
                                     "bias_after_scale": bool(bias_after_scale)}, act)


# -- sums and reductions ----------------------------------------------------------------

def mean(x: Variable, name: str | None = None) -> Variable:
    """The mean of all elements, shape [1]."""
    return _unary("mean", x, name)


def _reduce(op_type: str, input: Variable, dim: int | Sequence[int] | None, keep_dim: bool,
            name: str | None) -> Variable:
    dims = [] if dim is None else [dim] if isinstance(dim, int) else [int(d) for d in dim]
    # naming every axis in dim reduces them all too (the op checks the axes)
    return _unary(op_type, input, name, {"dim": dims or [0], "keep_dim": bool(keep_dim),
                                         "reduce_all": not dims})


def reduce_sum(input: Variable, dim: int | Sequence[int] | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Sum over ``dim`` (every dim when None); reducing all without keep_dim gives [1]."""
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input: Variable, dim: int | Sequence[int] | None = None,
                keep_dim: bool = False, name: str | None = None) -> Variable:
    """Mean over ``dim`` (every dim when None); reducing all without keep_dim gives [1]."""
    return _reduce("reduce_mean", input, dim, keep_dim, name)


def reduce_max(input: Variable, dim: int | Sequence[int] | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Maximum over ``dim`` (every dim when None); reducing all without keep_dim gives [1]."""
    return _reduce("reduce_max", input, dim, keep_dim, name)


def sums(input: Variable | Sequence[Variable], out: Variable | None = None) -> Variable:
    """The element-wise sum of same-shaped variables (into ``out`` when given)."""
    inputs = [input] if isinstance(input, Variable) else list(input)
    helper = LayerHelper("sum")
    if out is None:
        out = helper.create_variable_for_type_inference(helper.input_dtype(inputs))
    helper.append_op("sum", {"X": inputs}, {"Out": out})
    return out
