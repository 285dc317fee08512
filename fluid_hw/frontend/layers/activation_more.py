"""Paddle 1.5's remaining activation and element-wise math layers (issue 20), with its
signatures and defaults: the ops of ``ir/ops/activation_more.py`` and layers over
element-wise ops that had none (``floor``, ``ceil``, ``round``, ``sign``, ``cos``,
``sin``, ``square``, ``reciprocal``, ``clip``)."""

from __future__ import annotations

from typing import Any

from ...errors import ShapeError
from ...ir.program import Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from .math_ops import _unary

__all__ = [
    "elu", "relu6", "selu", "swish", "brelu", "soft_relu", "softplus", "softsign",
    "logsigmoid", "rsqrt", "stanh", "tanh_shrink", "softshrink", "hard_shrink",
    "thresholded_relu", "atan", "acos", "asin", "pow", "prelu",
    "floor", "ceil", "round", "sign", "cos", "sin", "square", "reciprocal", "clip",
]


def _attrs(**kw: Any) -> dict[str, Any]:
    """Float attributes given (None: the op's default)."""
    return {k: float(v) for k, v in kw.items() if v is not None}


def elu(x: Variable, alpha: float = 1.0, name: str | None = None) -> Variable:
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    return _unary("elu", x, name, _attrs(alpha=alpha))


def relu6(x: Variable, threshold: float = 6.0, name: str | None = None) -> Variable:
    """``min(max(x, 0), threshold)``."""
    return _unary("relu6", x, name, _attrs(threshold=threshold))


def selu(x: Variable, scale: float | None = None, alpha: float | None = None,
         name: str | None = None) -> Variable:
    """``scale * (x if x > 0 else alpha * (exp(x) - 1))`` (defaults: the self-normalising
    constants 1.0507... and 1.6732...)."""
    return _unary("selu", x, name, _attrs(scale=scale, alpha=alpha))


def swish(x: Variable, beta: float = 1.0, name: str | None = None) -> Variable:
    """``x * sigmoid(beta * x)``."""
    return _unary("swish", x, name, _attrs(beta=beta))


def brelu(x: Variable, t_min: float = 0.0, t_max: float = 24.0,
          name: str | None = None) -> Variable:
    """``min(max(x, t_min), t_max)``."""
    if t_min > t_max:
        raise ValueError(f"brelu: t_min {t_min} must not exceed t_max {t_max}")
    return _unary("brelu", x, name, _attrs(t_min=t_min, t_max=t_max))


def soft_relu(x: Variable, threshold: float = 40.0, name: str | None = None) -> Variable:
    """``log(1 + exp(clip(x, -threshold, threshold)))``."""
    return _unary("soft_relu", x, name, _attrs(threshold=threshold))


def softplus(x: Variable, name: str | None = None) -> Variable:
    """``log(1 + exp(x))``."""
    return _unary("softplus", x, name)


def softsign(x: Variable, name: str | None = None) -> Variable:
    """``x / (1 + |x|)``."""
    return _unary("softsign", x, name)


def logsigmoid(x: Variable, name: str | None = None) -> Variable:
    """``log(sigmoid(x))``."""
    return _unary("logsigmoid", x, name)


def rsqrt(x: Variable, name: str | None = None) -> Variable:
    """``1 / sqrt(x)``."""
    return _unary("rsqrt", x, name)


def stanh(x: Variable, scale_a: float = 2.0 / 3.0, scale_b: float = 1.7159,
          name: str | None = None) -> Variable:
    """``scale_b * tanh(scale_a * x)``."""
    return _unary("stanh", x, name, _attrs(scale_a=scale_a, scale_b=scale_b))


def tanh_shrink(x: Variable, name: str | None = None) -> Variable:
    """``x - tanh(x)``."""
    return _unary("tanh_shrink", x, name)


def softshrink(x: Variable, alpha: float | None = None, name: str | None = None) -> Variable:
    """``x - alpha`` above ``alpha``, ``x + alpha`` below ``-alpha``, else 0 (alpha: the
    op's ``lambda``, default 0.5)."""
    return _unary("softshrink", x, name, {"lambda": float(alpha)} if alpha is not None else {})


def hard_shrink(x: Variable, threshold: float | None = None) -> Variable:
    """``x`` where ``|x| > threshold`` (default 0.5), else 0."""
    return _unary("hard_shrink", x, None, _attrs(threshold=threshold))


def thresholded_relu(x: Variable, threshold: float | None = None) -> Variable:
    """``x`` where ``x > threshold`` (default 1.0), else 0."""
    return _unary("thresholded_relu", x, None, _attrs(threshold=threshold))


def atan(x: Variable, name: str | None = None) -> Variable:
    """Arc tangent, element-wise."""
    return _unary("atan", x, name)


def acos(x: Variable, name: str | None = None) -> Variable:
    """Arc cosine, element-wise (``x`` in [-1, 1])."""
    return _unary("acos", x, name)


def asin(x: Variable, name: str | None = None) -> Variable:
    """Arc sine, element-wise (``x`` in [-1, 1])."""
    return _unary("asin", x, name)


def pow(x: Variable, factor: float = 1.0, name: str | None = None) -> Variable:
    """``x ** factor``."""
    return _unary("pow", x, name, _attrs(factor=factor))


def prelu(x: Variable, mode: str, param_attr: Any = None, name: str | None = None) -> Variable:
    """``max(0, x) + alpha * min(0, x)`` with a learned ``alpha`` (initial value 0.25):
    one for all (``mode='all'``), one per channel (``'channel'``, dim 1) or one per
    element of an example (``'element'``)."""
    if mode not in ("all", "channel", "element"):
        raise ValueError(f"prelu: mode must be 'all', 'channel' or 'element', got {mode!r}")
    shape = list(x.shape)
    if mode == "all":
        ashape = [1]
    elif mode == "channel":
        if len(shape) < 2 or shape[1] <= 0:
            raise ShapeError(f"prelu {x.name!r}: mode 'channel' needs a known dim 1 (channels); "
                             f"x has shape {shape}")
        ashape = [shape[1]]
    else:
        if any(d <= 0 for d in shape[1:]):
            raise ShapeError(f"prelu {x.name!r}: mode 'element' needs known dims after the "
                             f"batch; x has shape {shape}")
        ashape = shape[1:]
    helper = LayerHelper("prelu", name=name)
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    alpha = helper.create_parameter(attr, ashape, x.dtype_name, default_initializer=Constant(0.25))
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("prelu", {"X": x, "Alpha": alpha}, {"Out": out}, {"mode": mode})
    return out


def floor(x: Variable, name: str | None = None) -> Variable:
    """Largest integer not above ``x``, element-wise."""
    return _unary("floor", x, name)


def ceil(x: Variable, name: str | None = None) -> Variable:
    """Smallest integer not below ``x``, element-wise."""
    return _unary("ceil", x, name)


def round(x: Variable, name: str | None = None) -> Variable:
    """``x`` rounded to the nearest integer, element-wise."""
    return _unary("round", x, name)


def sign(x: Variable) -> Variable:
    """-1, 0 or 1 by the sign of ``x``."""
    return _unary("sign", x, None)


def cos(x: Variable, name: str | None = None) -> Variable:
    """Cosine, element-wise."""
    return _unary("cos", x, name)


def sin(x: Variable, name: str | None = None) -> Variable:
    """Sine, element-wise."""
    return _unary("sin", x, name)


def square(x: Variable, name: str | None = None) -> Variable:
    """``x * x``."""
    return _unary("square", x, name)


def reciprocal(x: Variable, name: str | None = None) -> Variable:
    """``1 / x``."""
    return _unary("reciprocal", x, name)


def clip(x: Variable, min: float, max: float, name: str | None = None) -> Variable:
    """``x`` clipped to ``[min, max]``."""
    if min > max:
        raise ValueError(f"clip: min {min} must not exceed max {max}")
    return _unary("clip", x, name, {"min": float(min), "max": float(max)})
