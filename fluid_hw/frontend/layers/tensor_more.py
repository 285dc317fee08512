"""Tensor layers of Paddle 1.5 that fluid-hw lacked (issue 20), with its signatures:
over the ops of ``ir/ops/tensor_more.py`` and compositions of existing ops (``stack``,
``unstack``, ``rank``, ``range``, ``linspace``, ``zeros_like``, ``sum``) plus the
variable creators ``create_parameter`` and ``create_global_var``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ShapeError
from ...ir import dtypes, unique_name
from ...ir.program import Variable
from ..initializer import Constant, Initializer
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from .math_ops import _reduce, _unary
from .tensor import assign, cast, concat, squeeze, unsqueeze

__all__ = [
    "shape", "rank", "argmin", "argsort", "reverse", "isfinite", "has_inf", "has_nan",
    "reduce_all", "reduce_any", "one_hot", "gather", "scatter", "diag", "multiplex", "sum",
    "zeros_like", "range", "linspace", "stack", "unstack", "create_parameter",
    "create_global_var",
]


def _op(op_type: str, inputs: dict[str, Any], out_dtype: Any,
        attrs: dict[str, Any] | None = None, out_slot: str = "Out") -> Variable:
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(out_dtype)
    helper.append_op(op_type, inputs, {out_slot: out}, attrs)
    return out


def shape(input: Variable) -> Variable:
    """The shape of ``input`` at run time (int32 [rank])."""
    out = _op("shape", {"Input": input}, "int32")
    out.stop_gradient = True
    return out


def rank(input: Variable) -> Variable:
    """The number of dims of ``input`` (an int32 [1] constant)."""
    return assign(np.array([len(input.shape)], np.int32))


def argmin(x: Variable, axis: int = 0) -> Variable:
    """Index of the smallest element along ``axis`` (int64)."""
    return _op("arg_min", {"X": x}, "int64", {"axis": int(axis)})


def argsort(input: Variable, axis: int = -1, name: str | None = None
            ) -> tuple[Variable, Variable]:
    """``input`` sorted ascending along ``axis``, and the indices it was taken from."""
    helper = LayerHelper("argsort", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    ids = helper.create_variable_for_type_inference("int64")
    helper.append_op("argsort", {"X": input}, {"Out": out, "Indices": ids},
                     {"axis": int(axis)})
    return out, ids


def reverse(x: Variable, axis: int | Sequence[int]) -> Variable:
    """``x`` with its elements in reverse order along ``axis`` (one dim or several)."""
    axes = [axis] if isinstance(axis, int) else [int(a) for a in axis]
    return _unary("reverse", x, None, {"axis": axes})


def isfinite(x: Variable) -> Variable:
    """Whether every element of ``x`` is finite (bool [1])."""
    return _op("isfinite", {"X": x}, "bool")


def has_inf(x: Variable) -> Variable:
    """Whether some element of ``x`` is +-inf (bool [1])."""
    return _op("isinf", {"X": x}, "bool")


def has_nan(x: Variable) -> Variable:
    """Whether some element of ``x`` is NaN (bool [1])."""
    return _op("isnan", {"X": x}, "bool")


def reduce_all(input: Variable, dim: int | Sequence[int] | None = None,
               keep_dim: bool = False, name: str | None = None) -> Variable:
    """Logical and of a bool tensor over ``dim`` (every dim when None)."""
    return _reduce("reduce_all", input, dim, keep_dim, name)


def reduce_any(input: Variable, dim: int | Sequence[int] | None = None,
               keep_dim: bool = False, name: str | None = None) -> Variable:
    """Logical or of a bool tensor over ``dim`` (every dim when None)."""
    return _reduce("reduce_any", input, dim, keep_dim, name)


def one_hot(input: Variable, depth: int) -> Variable:
    """float32 one-hot rows of the int ids ``input`` ([..., 1] -> [..., depth])."""
    return _op("one_hot", {"X": input}, "float32",
               {"depth": int(depth), "dtype": int(dtypes.VarType.FP32)})


def gather(input: Variable, index: Variable) -> Variable:
    """The rows ``input[index[i]]``."""
    return _op("gather", {"X": input, "Index": index}, input.dtype)


def scatter(input: Variable, index: Variable, updates: Variable,
            name: str | None = None) -> Variable:
    """``input`` with rows ``index[i]`` replaced by ``updates[i]``."""
    helper = LayerHelper("scatter", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("scatter", {"X": input, "Ids": index, "Updates": updates}, {"Out": out},
                     {"overwrite": True})
    return out


def diag(diagonal: Variable | np.ndarray) -> Variable:
    """The square matrix with ``diagonal`` (a 1-D variable or numpy array) on its
    diagonal and zeros elsewhere."""
    if isinstance(diagonal, np.ndarray):
        diagonal = assign(diagonal)
    return _op("diag", {"Diagonal": diagonal}, diagonal.dtype)


def multiplex(inputs: Sequence[Variable], index: Variable) -> Variable:
    """Row ``i`` of ``inputs[index[i]]`` for each row ``i``."""
    if len(inputs) < 2:
        raise ValueError(f"multiplex: needs at least two inputs, got {len(inputs)}")
    return _op("multiplex", {"X": list(inputs), "Ids": index}, inputs[0].dtype)


def sum(x: Variable | Sequence[Variable]) -> Variable:
    """The element-wise sum of the variables ``x`` (one variable: a copy)."""
    xs = [x] if isinstance(x, Variable) else list(x)
    return _op("sum", {"X": xs}, xs[0].dtype)


def zeros_like(x: Variable, out: Variable | None = None) -> Variable:
    """Zeros of ``x``'s shape and dtype."""
    helper = LayerHelper("zeros_like")
    if out is None:
        out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("fill_zeros_like", {"X": x}, {"Out": out})
    out.stop_gradient = True
    return out


def _constant_array(values: np.ndarray, dtype: Any, layer: str) -> Variable:
    dt = dtypes.to_numpy(dtype)
    base = values.astype(np.float32 if dt.kind == "f" else np.int32)
    if dt.kind not in "fiu":
        raise TypeError(f"{layer}: dtype must be a float or int type, got {dtype!r}")
    v = assign(base)
    return v if base.dtype == dt else cast(v, dt.name)


def _number(v: Any, what: str, layer: str) -> float:
    if isinstance(v, Variable):
        raise TypeError(f"{layer}: {what} must be a Python number in fluid-hw (a constant "
                        f"range); got the variable {v.name!r}")
    return float(v)


def range(start: Any, end: Any, step: Any, dtype: Any) -> Variable:
    """``[start, start + step, ...)`` below ``end`` (above it for a negative step)."""
    s, e, st = (_number(v, w, "range") for v, w in ((start, "start"), (end, "end"),
                                                     (step, "step")))
    if st == 0:
        raise ValueError("range: step must not be 0")
    return _constant_array(np.arange(s, e, st), dtype, "range")


def linspace(start: Any, stop: Any, num: Any, dtype: Any) -> Variable:
    """``num`` evenly spaced values from ``start`` to ``stop`` (both included)."""
    n = int(_number(num, "num", "linspace"))
    if n < 1:
        raise ValueError(f"linspace: num must be >= 1, got {n}")
    return _constant_array(np.linspace(_number(start, "start", "linspace"),
                                       _number(stop, "stop", "linspace"), n), dtype, "linspace")


def stack(x: Variable | Sequence[Variable], axis: int = 0) -> Variable:
    """The variables ``x`` (one shape) stacked along a new dim ``axis``."""
    xs = [x] if isinstance(x, Variable) else list(x)
    if any(list(v.shape) != list(xs[0].shape) for v in xs):
        raise ShapeError(f"stack: the inputs must share one shape, got "
                         f"{[list(v.shape) for v in xs]}")
    ax = axis + len(xs[0].shape) + 1 if axis < 0 else axis
    return concat([unsqueeze(v, [ax]) for v in xs], axis=ax)


def unstack(x: Variable, axis: int = 0, num: int | None = None) -> list[Variable]:
    """The slices of ``x`` along ``axis``, that dim removed."""
    from .tensor import split

    ax = axis % len(x.shape)
    n = x.shape[ax] if num is None else num
    if n is None or n <= 0:
        raise ShapeError(f"unstack {x.name!r}: dim {ax} of shape {list(x.shape)} is not known; "
                         "pass num")
    parts = split(x, int(n), dim=ax)
    return [squeeze(p, [ax]) for p in parts]


def create_parameter(shape: Sequence[int], dtype: Any, name: str | None = None,
                     attr: Any = None, is_bias: bool = False,
                     default_initializer: Initializer | None = None) -> Variable:
    """A trainable parameter of ``shape`` (initialised in the startup program)."""
    pa = ParamAttr.to_attr(attr)
    assert isinstance(pa, ParamAttr)
    if name is not None and pa.name is None:
        pa.name = name
    helper = LayerHelper("create_parameter")
    return helper.create_parameter(pa, [int(d) for d in shape], dtypes.to_numpy(dtype).name,
                                   is_bias, default_initializer)


def create_global_var(shape: Sequence[int], value: float, dtype: Any,
                      persistable: bool = False, force_cpu: bool = False,
                      name: str | None = None) -> Variable:
    """A variable of the global block filled with ``value`` by the startup program."""
    helper = LayerHelper("global_var")
    vname = name or unique_name.generate("global_var")
    dt = dtypes.to_numpy(dtype).name
    shp = [int(d) for d in shape]
    var = helper.main_program.global_block().create_var(name=vname, shape=shp, dtype=dt,
                                                        persistable=persistable)
    sb = helper.startup_program.global_block()
    sv = sb.create_var(name=vname, shape=shp, dtype=dt, persistable=persistable)
    Constant(value)(sv, sb)
    var.stop_gradient = True
    return var

