"""Convolution and pooling layers of Paddle 1.5 beyond the 2-D ones (issue 20):
``conv3d``, ``conv2d_transpose``, ``conv3d_transpose``, ``pool3d`` and
``adaptive_pool3d``, with Paddle's signatures and default initialisers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ...ir.program import Variable
from ..initializer import Normal
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["conv3d", "conv2d_transpose", "conv3d_transpose", "pool3d", "adaptive_pool3d"]


def _n(value: int | Sequence[int], n: int, what: str, layer: str) -> list[int]:
    v = [value] * n if isinstance(value, int) else [int(x) for x in value]
    if len(v) != n:
        raise ValueError(f"{layer}: {what} must be an int or {n} ints, got {value!r}")
    return v


def _channels(layer: str, input: Variable, nd: int, groups: int | None) -> tuple[int, int]:
    s = list(input.shape)
    if len(s) != nd + 2 or s[1] <= 0:
        raise ShapeError(f"{layer}: input {input.name!r} must be {nd + 2}-D with known "
                         f"channels, got {s}")
    g = 1 if groups is None else int(groups)
    if g < 1 or s[1] % g:
        raise ShapeError(f"{layer}: input channels {s[1]} must be divisible by groups={g}")
    return s[1], g


def conv3d(input: Variable, num_filters: int, filter_size: int | Sequence[int],
           stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
           dilation: int | Sequence[int] = 1, groups: int | None = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: str | None = None, name: str | None = None) -> Variable:
    """3-D convolution of an NCDHW input, plus a bias per filter and an activation
    (filter initialised Normal(0, sqrt(2 / (k^3 * C_in))) as Fluid's)."""
    layer = "conv3d"
    c, g = _channels(layer, input, 3, groups)
    k = _n(filter_size, 3, "filter_size", layer)
    helper = LayerHelper(layer, name=name)
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    std = (2.0 / (k[0] * k[1] * k[2] * c)) ** 0.5
    w = helper.create_parameter(attr, [num_filters, c // g, *k], input.dtype_name,
                                default_initializer=Normal(0.0, std, 0))
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("conv3d", {"Input": input, "Filter": w}, {"Output": out},
                     {"strides": _n(stride, 3, "stride", layer),
                      "paddings": _n(padding, 3, "padding", layer),
                      "dilations": _n(dilation, 3, "dilation", layer), "groups": g,
                      "use_cudnn": use_cudnn})
    return helper.append_activation(helper.append_bias_op(out, bias_attr, dim_start=1,
                                                          dim_end=2), act)


def _conv_transpose(layer: str, nd: int, input: Variable, num_filters: int,
                    output_size: int | Sequence[int] | None,
                    filter_size: int | Sequence[int] | None, padding: Any, stride: Any,
                    dilation: Any, groups: int | None, param_attr: Any, bias_attr: Any,
                    use_cudnn: bool, act: str | None, name: str | None) -> Variable:
    c, g = _channels(layer, input, nd, groups)
    if num_filters % g:
        raise ShapeError(f"{layer}: num_filters {num_filters} must be divisible by groups={g}")
    s, p, d = (_n(v, nd, w, layer) for v, w in ((stride, "stride"), (padding, "padding"),
                                                (dilation, "dilation")))
    if filter_size is None:
        if output_size is None:
            raise ValueError(f"{layer}: give filter_size or output_size")
        o = _n(output_size, nd, "output_size", layer)
        sp = list(input.shape[2:])
        if any(v <= 0 for v in sp):
            raise ShapeError(f"{layer}: the input's spatial dims {sp} must be known to "
                             "derive filter_size from output_size")
        k = [(o[i] + 2 * p[i] - (sp[i] - 1) * s[i] - 1) // d[i] + 1 for i in range(nd)]
        if any(v < 1 for v in k):
            raise ValueError(f"{layer}: output_size {o} is too small for input {sp}")
    else:
        k = _n(filter_size, nd, "filter_size", layer)
    helper = LayerHelper(layer, name=name)
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    w = helper.create_parameter(attr, [c, num_filters // g, *k], input.dtype_name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(layer, {"Input": input, "Filter": w}, {"Output": out},
                     {"strides": s, "paddings": p, "dilations": d, "groups": g,
                      "use_cudnn": use_cudnn,
                      "output_size": [] if output_size is None
                      else _n(output_size, nd, "output_size", layer)})
    return helper.append_activation(helper.append_bias_op(out, bias_attr, dim_start=1,
                                                          dim_end=2), act)


def conv2d_transpose(input: Variable, num_filters: int,
                     output_size: int | Sequence[int] | None = None,
                     filter_size: int | Sequence[int] | None = None,
                     padding: int | Sequence[int] = 0, stride: int | Sequence[int] = 1,
                     dilation: int | Sequence[int] = 1, groups: int | None = None,
                     param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
                     act: str | None = None, name: str | None = None) -> Variable:
    """2-D transposed convolution (NCHW): filter [C_in, num_filters/groups, kh, kw];
    ``filter_size`` may be derived from ``output_size``."""
    return _conv_transpose("conv2d_transpose", 2, input, num_filters, output_size,
                           filter_size, padding, stride, dilation, groups, param_attr,
                           bias_attr, use_cudnn, act, name)


def conv3d_transpose(input: Variable, num_filters: int,
                     output_size: int | Sequence[int] | None = None,
                     filter_size: int | Sequence[int] | None = None,
                     padding: int | Sequence[int] = 0, stride: int | Sequence[int] = 1,
                     dilation: int | Sequence[int] = 1, groups: int | None = None,
                     param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
                     act: str | None = None, name: str | None = None) -> Variable:
    """3-D transposed convolution (NCDHW)."""
    return _conv_transpose("conv3d_transpose", 3, input, num_filters, output_size,
                           filter_size, padding, stride, dilation, groups, param_attr,
                           bias_attr, use_cudnn, act, name)


def pool3d(input: Variable, pool_size: int | Sequence[int] = -1, pool_type: str = "max",
           pool_stride: int | Sequence[int] = 1, pool_padding: int | Sequence[int] = 0,
           global_pooling: bool = False, use_cudnn: bool = True, ceil_mode: bool = False,
           name: str | None = None, exclusive: bool = True) -> Variable:
    """3-D max or average pooling of an NCDHW input."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool3d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if not global_pooling and (pool_size == -1 or pool_size is None):
        raise ValueError("pool3d: give pool_size (or global_pooling=True)")
    helper = LayerHelper("pool3d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    k = [1, 1, 1] if global_pooling else _n(pool_size, 3, "pool_size", "pool3d")
    helper.append_op("pool3d", {"X": input}, {"Out": out},
                     {"pooling_type": pool_type, "ksize": k, "global_pooling": global_pooling,
                      "strides": _n(pool_stride, 3, "pool_stride", "pool3d"),
                      "paddings": _n(pool_padding, 3, "pool_padding", "pool3d"),
                      "exclusive": exclusive, "ceil_mode": ceil_mode, "use_cudnn": use_cudnn})
    return out


def adaptive_pool3d(input: Variable, pool_size: int | Sequence[int], pool_type: str = "max",
                    require_index: bool = False, name: str | None = None) -> Variable:
    """Pool an NCDHW input to ``pool_size`` cells (Fluid's bins: floor(i*in/out) ..
    ceil((i+1)*in/out))."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"adaptive_pool3d: pool_type must be 'max' or 'avg', got "
                         f"{pool_type!r}")
    if require_index:
        raise ValueError("adaptive_pool3d: require_index (the max positions) is not "
                         "supported")
    helper = LayerHelper("adaptive_pool3d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("pool3d", {"X": input}, {"Out": out},
                     {"pooling_type": pool_type,
                      "ksize": _n(pool_size, 3, "pool_size", "adaptive_pool3d"),
                      "adaptive": True})
    return out
