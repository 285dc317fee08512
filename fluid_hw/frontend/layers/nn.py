"""Neural-network layers (fc, conv, pooling, normalisation, losses...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ...ir.program import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["fc"]


def fc(input: Variable | Sequence[Variable], size: int, num_flatten_dims: int = 1,
       param_attr: Any = None, bias_attr: Any = None, act: str | None = None,
       name: str | None = None, is_test: bool = False) -> Variable:
    """Fully connected: ``act(sum_i flatten(input_i) @ W_i + b)``.

    Each input is flattened to 2-D at ``num_flatten_dims``; ``bias_attr=False``
    leaves out the bias.
    """
    helper = LayerHelper("fc", name=name)
    inputs = [input] if isinstance(input, Variable) else list(input)
    if not inputs:
        raise ShapeError(f"layer fc {helper.name!r}: needs at least one input")
    if size <= 0:
        raise ShapeError(f"layer fc {helper.name!r}: size must be positive, got {size}")
    dtype = helper.input_dtype(inputs)
    pattrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    products = []
    for x, pa in zip(inputs, pattrs):
        shape = list(x.shape)
        if not 0 < num_flatten_dims < len(shape):
            raise ShapeError(f"layer fc {helper.name!r}: num_flatten_dims={num_flatten_dims} "
                             f"must be in 1..{len(shape) - 1} for input {x.name!r} {shape}")
        in_dim = 1
        for d in shape[num_flatten_dims:]:
            if d == -1:
                raise ShapeError(f"layer fc {helper.name!r}: input {x.name!r} {shape} has an "
                                 f"unknown dimension after num_flatten_dims={num_flatten_dims}")
            in_dim *= d
        attr = ParamAttr.to_attr(pa)
        assert isinstance(attr, ParamAttr)
        w = helper.create_parameter(attr, [in_dim, size], dtype)
        tmp = helper.create_variable_for_type_inference(dtype)
        helper.append_op("mul", {"X": x, "Y": w}, {"Out": tmp},
                         {"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1})
        products.append(tmp)
    if len(products) == 1:
        pre_bias = products[0]
    else:
        pre_bias = helper.create_variable_for_type_inference(dtype)
        helper.append_op("sum", {"X": products}, {"Out": pre_bias})
    pre_act = helper.append_bias_op(pre_bias, bias_attr, dim_start=num_flatten_dims)
    return helper.append_activation(pre_act, act)
