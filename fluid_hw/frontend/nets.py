"""``fluid.nets``: the composite networks Fluid 1.5 builds from layers
(convolution + pooling blocks, VGG-style groups, text convolution + pooling, the
gated linear unit and scaled dot-product attention)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ..ir.program import Variable
from . import layers

__all__ = ["glu", "img_conv_group", "scaled_dot_product_attention", "sequence_conv_pool",
           "simple_img_conv_pool"]

T = TypeVar("T")


def simple_img_conv_pool(input: Variable, num_filters: int, filter_size: int | Sequence[int],
                         pool_size: int | Sequence[int], pool_stride: int | Sequence[int],
                         pool_padding: int | Sequence[int] = 0, pool_type: str = "max",
                         global_pooling: bool = False, conv_stride: int = 1,
                         conv_padding: int = 0, conv_dilation: int = 1, conv_groups: int = 1,
                         param_attr: Any = None, bias_attr: Any = None, act: str | None = None,
                         use_cudnn: bool = True) -> Variable:
    """``conv2d`` (with ``act``) followed by ``pool2d``."""
    conv = layers.conv2d(input, num_filters=num_filters, filter_size=filter_size,
                         stride=conv_stride, padding=conv_padding, dilation=conv_dilation,
                         groups=conv_groups, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, use_cudnn=use_cudnn)
    return layers.pool2d(conv, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, pool_padding=pool_padding,
                         global_pooling=global_pooling, use_cudnn=use_cudnn)


def _per_conv(value: T | Sequence[T], n: int, what: str) -> list[T]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"img_conv_group: {what} has {len(value)} entries for {n} "
                             "convolutions; give one value or one per convolution")
        return list(value)
    return [value] * n  # type: ignore[list-item]


def img_conv_group(input: Variable, conv_num_filter: Sequence[int],
                   pool_size: int | Sequence[int], conv_padding: Any = 1,
                   conv_filter_size: Any = 3, conv_act: str | None = None,
                   param_attr: Any = None, conv_with_batchnorm: Any = False,
                   conv_batchnorm_drop_rate: Any = 0.0, pool_stride: int | Sequence[int] = 1,
                   pool_type: str = "max", use_cudnn: bool = True) -> Variable:
    """VGG's block: one ``conv2d`` per entry of ``conv_num_filter`` (each optionally
    with batch norm and dropout after it), then ``pool2d``. The per-convolution
    arguments take one value for all or a list with one per convolution."""
    n = len(conv_num_filter)
    paddings = _per_conv(conv_padding, n, "conv_padding")
    sizes = _per_conv(conv_filter_size, n, "conv_filter_size")
    attrs = _per_conv(param_attr, n, "param_attr")
    with_bn = _per_conv(conv_with_batchnorm, n, "conv_with_batchnorm")
    drops = _per_conv(conv_batchnorm_drop_rate, n, "conv_batchnorm_drop_rate")
    tmp = input
    for i in range(n):
        tmp = layers.conv2d(tmp, num_filters=conv_num_filter[i], filter_size=sizes[i],
                            padding=paddings[i], param_attr=attrs[i],
                            act=None if with_bn[i] else conv_act, use_cudnn=use_cudnn)
        if with_bn[i]:
            tmp = layers.batch_norm(tmp, act=conv_act)
            if abs(drops[i]) > 1e-5:
                tmp = layers.dropout(tmp, dropout_prob=drops[i])
    return layers.pool2d(tmp, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, use_cudnn=use_cudnn)


def sequence_conv_pool(input: Variable, num_filters: int, filter_size: int,
                       param_attr: Any = None, act: str | None = "sigmoid",
                       pool_type: str = "max", bias_attr: Any = None) -> Variable:
    """``sequence_conv`` over a LoD input, then ``sequence_pool`` per sequence."""
    conv = layers.sequence_conv(input, num_filters=num_filters, filter_size=filter_size,
                                param_attr=param_attr, bias_attr=bias_attr, act=act)
    return layers.sequence_pool(conv, pool_type=pool_type)


def glu(input: Variable, dim: int = -1) -> Variable:
    """Gated linear unit: split ``input`` in two halves ``a``, ``b`` along ``dim``;
    ``a * sigmoid(b)``."""
    a, b = layers.split(input, num_or_sections=2, dim=dim)
    return layers.elementwise_mul(a, layers.sigmoid(b))


def scaled_dot_product_attention(queries: Variable, keys: Variable, values: Variable,
                                 num_heads: int = 1, dropout_rate: float = 0.0) -> Variable:
    """``softmax(Q K^T / sqrt(d)) V`` over 3-D ``[batch, length, size]`` inputs;
    with ``num_heads > 1`` the inputs are first projected (``fc`` without bias)
    and split into heads, whose results are joined again."""
    for what, v in (("queries", queries), ("keys", keys), ("values", values)):
        if len(v.shape) != 3:
            raise ValueError(f"scaled_dot_product_attention: {what} {v.name!r} has shape "
                             f"{list(v.shape)}; give 3-D [batch, length, size] inputs")
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: queries have size {queries.shape[-1]}"
                         f", keys {keys.shape[-1]}; they must match")
    if keys.shape[1] != values.shape[1]:
        raise ValueError(f"scaled_dot_product_attention: keys have length {keys.shape[1]}, "
                         f"values {values.shape[1]}; they must match")
    for what, v in (("queries", queries), ("values", values)):
        if v.shape[-1] % num_heads:
            raise ValueError(f"scaled_dot_product_attention: {what} size {v.shape[-1]} is "
                             f"not divisible by num_heads={num_heads}")

    def split_heads(x: Variable) -> Variable:
        if num_heads == 1:
            return x
        size = x.shape[-1]
        x = layers.reshape(x, [0, 0, num_heads, size // num_heads])
        return layers.transpose(x, [0, 2, 1, 3])

    q, k, v = queries, keys, values
    if num_heads > 1:
        q = layers.fc(q, size=q.shape[-1], num_flatten_dims=2, bias_attr=False)
        k = layers.fc(k, size=k.shape[-1], num_flatten_dims=2, bias_attr=False)
        v = layers.fc(v, size=v.shape[-1], num_flatten_dims=2, bias_attr=False)
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    key_dim = keys.shape[-1] // num_heads
    scaled_q = layers.scale(q, scale=key_dim ** -0.5)
    weights = layers.softmax(layers.matmul(scaled_q, k, transpose_y=True))
    if dropout_rate:
        weights = layers.dropout(weights, dropout_prob=dropout_rate, is_test=False)
    ctx = layers.matmul(weights, v)
    if num_heads == 1:
        return ctx
    ctx = layers.transpose(ctx, [0, 2, 1, 3])
    return layers.reshape(ctx, [0, 0, ctx.shape[2] * ctx.shape[3]])
