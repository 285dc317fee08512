"""Tensor layers: creation (constants, random), casting, copying and reshaping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import OpAttrError, ShapeError
from ...ir import dtypes
from ...ir.ops.tensor import ASSIGN_VALUE_ATTRS
from ...ir.program import Variable
from ..layer_helper import LayerHelper

__all__ = [
    "create_tensor", "fill_constant", "zeros", "ones", "uniform_random", "gaussian_random",
    "cast", "assign", "reshape", "transpose", "concat", "split", "slice", "squeeze",
    "unsqueeze", "flatten",
]

#: largest array ``assign`` stores in an op attribute (Fluid's limit)
MAX_ASSIGN_VALUES = 1024 * 1024


# -- creation -----------------------------------------------------------------------

def create_tensor(dtype: Any, name: str | None = None, persistable: bool = False) -> Variable:
    """An empty variable (no shape yet) to be filled by, say, ``assign``."""
    helper = LayerHelper("create_tensor", name=name)
    return helper.create_variable(name=helper.name, dtype=dtypes.to_enum(dtype),
                                  persistable=persistable)


def fill_constant(shape: Sequence[int], dtype: Any, value: float, force_cpu: bool = False,
                  out: Variable | None = None) -> Variable:
    """A tensor of ``shape`` filled with ``value`` (into ``out`` when given)."""
    helper = LayerHelper("fill_constant")
    if out is None:
        out = helper.create_variable_for_type_inference(dtypes.to_enum(dtype))
    helper.append_op("fill_constant", {}, {"Out": out},
                     {"shape": [int(d) for d in shape], "dtype": out.dtype,
                      "value": float(value)})
    out.stop_gradient = True
    return out


def zeros(shape: Sequence[int], dtype: Any, force_cpu: bool = False) -> Variable:
    """A tensor of zeros."""
    return fill_constant(shape, dtype, 0.0)


def ones(shape: Sequence[int], dtype: Any, force_cpu: bool = False) -> Variable:
    """A tensor of ones."""
    return fill_constant(shape, dtype, 1.0)


def _random(op_type: str, shape: Sequence[int], dtype: Any, seed: int,
            attrs: dict[str, float]) -> Variable:
    helper = LayerHelper(op_type)
    dt = dtypes.to_enum(dtype)
    out = helper.create_variable_for_type_inference(dt)
    helper.append_op(op_type, {}, {"Out": out},
                     {"shape": [int(d) for d in shape], "dtype": dt,
                      "seed": seed or helper.main_program.random_seed, **attrs})
    return out


def uniform_random(shape: Sequence[int], dtype: Any = "float32", min: float = -1.0,
                   max: float = 1.0, seed: int = 0) -> Variable:
    """Samples of U[min, max).  ``seed=0`` takes the program's ``random_seed``; when
    that is 0 too, each run draws from the executor's generator."""
    return _random("uniform_random", shape, dtype, seed, {"min": float(min), "max": float(max)})


def gaussian_random(shape: Sequence[int], mean: float = 0.0, std: float = 1.0, seed: int = 0,
                    dtype: Any = "float32") -> Variable:
    """Samples of N(mean, std^2); ``seed`` as for :func:`uniform_random`."""
    return _random("gaussian_random", shape, dtype, seed,
                   {"mean": float(mean), "std": float(std)})


# -- casting and copying --------------------------------------------------------------

def cast(x: Variable, dtype: Any) -> Variable:
    """``x`` converted to ``dtype`` (floats to integers truncate toward zero)."""
    helper = LayerHelper("cast")
    out = helper.create_variable_for_type_inference(dtypes.to_enum(dtype))
    helper.append_op("cast", {"X": x}, {"Out": out},
                     {"in_dtype": x.dtype, "out_dtype": out.dtype})
    return out


def assign(input: Variable | np.ndarray, output: Variable | None = None) -> Variable:
    """Copy a variable, or a float32/int32 numpy array (stored in the program), into
    ``output`` (a new variable when None)."""
    helper = LayerHelper("assign")
    if isinstance(input, Variable):
        if output is None:
            output = helper.create_variable_for_type_inference(input.dtype)
        helper.append_op("assign", {"X": input}, {"Out": output})
        return output
    if not isinstance(input, np.ndarray):
        raise OpAttrError(f"assign: input must be a Variable or a numpy array, got "
                          f"{type(input).__name__}")
    dt = dtypes.to_enum(input.dtype) if input.dtype in (np.float32, np.int32) else None
    if dt is None:
        raise OpAttrError(f"assign: a numpy input must be float32 or int32, got {input.dtype}; "
                          "convert it with .astype('float32') or .astype('int32')")
    if input.size > MAX_ASSIGN_VALUES:
        raise OpAttrError(f"assign: the array has {input.size} elements, more than "
                          f"{MAX_ASSIGN_VALUES} can be stored in a program; save it to a file "
                          "and load it instead")
    if output is None:
        output = helper.create_variable_for_type_inference(dt)
    values = input.ravel().tolist()
    helper.append_op("assign_value", {}, {"Out": output},
                     {"shape": list(input.shape), "dtype": dt, ASSIGN_VALUE_ATTRS[dt]: values})
    return output


# -- reshaping -------------------------------------------------------------------------

def _with_xshape(op_type: str, layer: str, x: Variable, attrs: dict[str, Any],
                 name: str | None = None, act: str | None = None) -> Variable:
    """Append an op with outputs Out and XShape (``reshape2``, ``transpose2``...)."""
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": x}, {"Out": out, "XShape": x_shape}, attrs)
    return helper.append_activation(out, act)


def reshape(x: Variable, shape: Sequence[int], actual_shape: Variable | None = None,
            act: str | None = None, inplace: bool = False, name: str | None = None) -> Variable:
    """``x`` with a new shape: a 0 copies ``x``'s dim at that index, one -1 is inferred.

    ``actual_shape`` (a run-time shape tensor) is not supported; ``inplace`` is
    accepted and has no effect.
    """
    if actual_shape is not None:
        raise ShapeError("reshape: actual_shape (a shape given by a tensor) is not supported; "
                         "pass the shape as the `shape` list")
    return _with_xshape("reshape2", "reshape", x, {"shape": [int(d) for d in shape]},
                        name, act)


def transpose(x: Variable, perm: Sequence[int], name: str | None = None) -> Variable:
    """``x`` with dims permuted: output dim i is ``x``'s dim ``perm[i]``."""
    return _with_xshape("transpose2", "transpose", x, {"axis": [int(p) for p in perm]}, name)


def squeeze(input: Variable, axes: Sequence[int], name: str | None = None) -> Variable:
    """``input`` without the size-1 dims in ``axes`` (all size-1 dims when empty)."""
    return _with_xshape("squeeze2", "squeeze", input, {"axes": [int(a) for a in axes]}, name)


def unsqueeze(input: Variable, axes: Sequence[int], name: str | None = None) -> Variable:
    """``input`` with size-1 dims inserted at ``axes`` (in order)."""
    return _with_xshape("unsqueeze2", "unsqueeze", input, {"axes": [int(a) for a in axes]},
                        name)


def flatten(x: Variable, axis: int = 1, name: str | None = None) -> Variable:
    """``x`` as a matrix: dims before ``axis`` become rows, the rest columns."""
    return _with_xshape("flatten2", "flatten", x, {"axis": int(axis)}, name)


def concat(input: Sequence[Variable], axis: int = 0, name: str | None = None) -> Variable:
    """The inputs joined along ``axis`` (negative counts from the end)."""
    inputs = list(input)
    helper = LayerHelper("concat", name=name)
    if not inputs:
        raise ShapeError("concat: needs at least one input")
    out = helper.create_variable_for_type_inference(helper.input_dtype(inputs))
    helper.append_op("concat", {"X": inputs}, {"Out": out}, {"axis": int(axis)})
    return out


def split(input: Variable, num_or_sections: int | Sequence[int], dim: int = -1,
          name: str | None = None) -> list[Variable]:
    """``input`` cut along ``dim`` into ``num_or_sections`` equal pieces, or into pieces
    of the given sizes (one may be -1: the rest)."""
    helper = LayerHelper("split", name=name)
    if isinstance(num_or_sections, int):
        num, sections = num_or_sections, []
    else:
        num, sections = 0, [int(s) for s in num_or_sections]
    n = num if num else len(sections)
    if n < 1:
        raise ShapeError(f"split: num_or_sections={num_or_sections!r} gives no pieces")
    outs = [helper.create_variable_for_type_inference(input.dtype) for _ in range(n)]
    helper.append_op("split", {"X": input}, {"Out": outs},
                     {"num": num, "sections": sections, "axis": int(dim)})
    return outs


def slice(input: Variable, axes: Sequence[int], starts: Sequence[int],
          ends: Sequence[int]) -> Variable:
    """``input[starts:ends]`` along each of ``axes``; negative indices count from the
    end and out-of-range ones are clamped."""
    helper = LayerHelper("slice")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("slice", {"Input": input}, {"Out": out},
                     {"axes": [int(a) for a in axes], "starts": [int(s) for s in starts],
                      "ends": [int(e) for e in ends]})
    return out
