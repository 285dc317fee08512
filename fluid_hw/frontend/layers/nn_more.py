"""Network layers of Paddle 1.5 that fluid-hw lacked (issue 20), with its signatures,
built from existing ops (each has the gradients of the ops it is made of): ``cos_sim``,
``l2_normalize``, ``layer_norm``, ``group_norm``, ``lrn``, ``maxout``,
``pixel_shuffle``, ``shuffle_channel``, ``affine_channel``, ``pad``, ``pad2d``,
``crop``, ``pad_constant_like``, ``clip_by_norm``, ``fsp_matrix`` and
``bilinear_tensor_product``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ...ir.program import Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from . import math_ops as M
from .activation_more import pow, reciprocal, square
from .tensor import reshape, slice, transpose, unsqueeze

__all__ = ["cos_sim", "l2_normalize", "layer_norm", "group_norm", "lrn", "maxout",
           "pixel_shuffle", "shuffle_channel", "affine_channel", "pad", "pad2d", "crop",
           "pad_constant_like", "clip_by_norm", "fsp_matrix", "bilinear_tensor_product",
           "row_conv", "add_position_encoding", "random_crop", "npair_loss", "affine_grid",
           "spectral_norm"]


def _known(layer: str, x: Variable, dims: Sequence[int], what: str) -> list[int]:
    s = list(x.shape)
    if any(s[d] is None or s[d] <= 0 for d in dims):
        raise ShapeError(f"{layer}: {what} of {x.name!r} (dims {list(dims)} of {s}) must be "
                         "known when the layer is built")
    return s


def _param(helper: LayerHelper, attr: Any, shape: list[int], dtype: str, value: float,
           is_bias: bool) -> Variable | None:
    if attr is False:
        return None
    pa = ParamAttr.to_attr(attr)
    assert isinstance(pa, ParamAttr)
    return helper.create_parameter(pa, shape, dtype, is_bias=is_bias,
                                   default_initializer=Constant(value))


def cos_sim(X: Variable, Y: Variable) -> Variable:
    """Cosine similarity of the rows of ``X`` [N, D] and ``Y`` ([N, D] or [1, D]): [N, 1]."""
    if len(X.shape) != 2 or len(Y.shape) != 2 or Y.shape[1] != X.shape[1]:
        raise ShapeError(f"cos_sim: X {list(X.shape)} and Y {list(Y.shape)} must be [N, D] "
                         "and [N, D] or [1, D]")
    dot = M.reduce_sum(M.elementwise_mul(X, Y), dim=1, keep_dim=True)
    xn = M.sqrt(M.reduce_sum(square(X), dim=1, keep_dim=True))
    yn = M.sqrt(M.reduce_sum(square(Y), dim=1, keep_dim=True))
    return M.elementwise_div(dot, M.elementwise_mul(xn, yn))


def l2_normalize(x: Variable, axis: int, epsilon: float = 1e-12,
                 name: str | None = None) -> Variable:
    """``x / sqrt(sum(x^2 along axis) + epsilon)``."""
    ax = axis % len(x.shape)
    norm = M.sqrt(M.reduce_sum(square(x), dim=ax, keep_dim=True))
    norm = M.sqrt(M.scale(square(norm), 1.0, float(epsilon)))
    return M.elementwise_div(x, norm)


def _normalize_rows(x: Variable, epsilon: float) -> Variable:
    """``(x - mean) / sqrt(var + epsilon)`` over the last dim of a 2-D or 3-D x."""
    d = len(x.shape) - 1
    mu = M.reduce_mean(x, dim=d, keep_dim=True)
    c = M.elementwise_sub(x, mu)
    var = M.reduce_mean(square(c), dim=d, keep_dim=True)
    return M.elementwise_div(c, M.sqrt(M.scale(var, 1.0, float(epsilon))))


def layer_norm(input: Variable, scale: bool = True, shift: bool = True,
               begin_norm_axis: int = 1, epsilon: float = 1e-05, param_attr: Any = None,
               bias_attr: Any = None, act: str | None = None,
               name: str | None = None) -> Variable:
    """Normalise over the dims from ``begin_norm_axis`` on, then scale (init 1) and shift
    (init 0) by parameters of that size (flattened, as Paddle's)."""
    s = list(input.shape)
    if not 0 < begin_norm_axis < len(s):
        raise ValueError(f"layer_norm: begin_norm_axis {begin_norm_axis} must be in "
                         f"[1, {len(s) - 1}] for input {input.name!r} {s}")
    _known("layer_norm", input, range(begin_norm_axis, len(s)), "the normalised dims")
    _known("layer_norm", input, range(1, begin_norm_axis), "the dims after the batch")
    d = 1
    for v in s[begin_norm_axis:]:
        d *= v
    helper = LayerHelper("layer_norm", name=name)
    out = _normalize_rows(reshape(input, [-1, d]), epsilon)
    if scale:
        g = _param(helper, param_attr, [d], input.dtype_name, 1.0, False)
        out = M.elementwise_mul(out, g, axis=1) if g is not None else out
    if shift:
        b = _param(helper, bias_attr, [d], input.dtype_name, 0.0, True)
        out = M.elementwise_add(out, b, axis=1) if b is not None else out
    out = reshape(out, [-1, *s[1:]])
    return helper.append_activation(out, act)


def group_norm(input: Variable, groups: int, epsilon: float = 1e-05, param_attr: Any = None,
               bias_attr: Any = None, act: str | None = None, data_layout: str = "NCHW",
               name: str | None = None) -> Variable:
    """Normalise each example's channels in ``groups`` groups (NCHW), then scale (init 1)
    and shift (init 0) per channel."""
    if data_layout != "NCHW":
        raise ValueError(f"group_norm: only data_layout 'NCHW' is supported, got "
                         f"{data_layout!r}")
    s = _known("group_norm", input, range(1, len(input.shape)), "the dims after the batch")
    c = s[1]
    if groups < 1 or c % groups:
        raise ValueError(f"group_norm: {c} channels of {input.name!r} do not split into "
                         f"{groups} groups")
    helper = LayerHelper("group_norm", name=name)
    per = c // groups
    for v in s[2:]:
        per *= v
    out = reshape(_normalize_rows(reshape(input, [-1, groups, per]), epsilon), [-1, *s[1:]])
    g = _param(helper, param_attr, [c], input.dtype_name, 1.0, False)
    if g is not None:
        out = M.elementwise_mul(out, g, axis=1)
    b = _param(helper, bias_attr, [c], input.dtype_name, 0.0, True)
    if b is not None:
        out = M.elementwise_add(out, b, axis=1)
    return helper.append_activation(out, act)


def lrn(input: Variable, n: int = 5, k: float = 1.0, alpha: float = 1e-4, beta: float = 0.75,
        name: str | None = None) -> Variable:
    """Local response normalisation across channels (NCHW): ``x / (k + alpha * sum of x^2
    over the n channels around)^beta``."""
    if len(input.shape) != 4:
        raise ShapeError(f"lrn: input {input.name!r} must be NCHW, got {list(input.shape)}")
    c = _known("lrn", input, [1], "the channels")[1]
    if n < 1:
        raise ValueError(f"lrn: n must be >= 1, got {n}")
    pre = (n - 1) // 2
    padded = pad(square(input), [0, 0, pre, n - 1 - pre, 0, 0, 0, 0])
    win = M.sums([slice(padded, axes=[1], starts=[i], ends=[i + c]) for i in range(n)]) \
        if n > 1 else padded
    return M.elementwise_mul(input, pow(M.scale(win, float(alpha), float(k)), -float(beta)))


def maxout(x: Variable, groups: int, name: str | None = None) -> Variable:
    """Channel ``i`` of the output = the max of input channels ``i*groups ..
    (i+1)*groups - 1`` (NCHW)."""
    s = _known("maxout", x, range(1, len(x.shape)), "the dims after the batch")
    if groups < 1 or s[1] % groups:
        raise ValueError(f"maxout: {s[1]} channels of {x.name!r} do not split into groups "
                         f"of {groups}")
    r = reshape(x, [-1, s[1] // groups, groups, *s[2:]])
    return M.reduce_max(r, dim=2)


def pixel_shuffle(x: Variable, upscale_factor: int) -> Variable:
    """[N, C*r*r, H, W] -> [N, C, H*r, W*r]: ``out[n, c, h*r+i, w*r+j] =
    x[n, c*r*r + i*r + j, h, w]``."""
    s = _known("pixel_shuffle", x, [1, 2, 3], "C, H and W")
    r = int(upscale_factor)
    if r < 1 or s[1] % (r * r):
        raise ValueError(f"pixel_shuffle: {s[1]} channels of {x.name!r} are not a multiple "
                         f"of upscale_factor^2 = {r * r}")
    c, h, w = s[1] // (r * r), s[2], s[3]
    t = transpose(reshape(x, [-1, c, r, r, h, w]), [0, 1, 4, 2, 5, 3])
    return reshape(t, [-1, c, h * r, w * r])


def shuffle_channel(x: Variable, group: int, name: str | None = None) -> Variable:
    """ShuffleNet's channel shuffle: [N, g, C/g, H, W] transposed to [N, C/g, g, H, W]."""
    s = _known("shuffle_channel", x, [1, 2, 3], "C, H and W")
    if group < 1 or s[1] % group:
        raise ValueError(f"shuffle_channel: {s[1]} channels of {x.name!r} do not split "
                         f"into {group} groups")
    t = transpose(reshape(x, [-1, group, s[1] // group, s[2], s[3]]), [0, 2, 1, 3, 4])
    return reshape(t, [-1, *s[1:]])


def affine_channel(x: Variable, scale: Variable | None = None, bias: Variable | None = None,
                   data_layout: str = "NCHW", name: str | None = None,
                   act: str | None = None) -> Variable:
    """``x * scale[c] + bias[c]`` per channel (dim 1 for NCHW, the last for NHWC)."""
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"affine_channel: data_layout must be 'NCHW' or 'NHWC', got "
                         f"{data_layout!r}")
    axis = 1 if data_layout == "NCHW" else len(x.shape) - 1
    out = x
    if scale is not None:
        out = M.elementwise_mul(out, scale, axis=axis)
    if bias is not None:
        out = M.elementwise_add(out, bias, axis=axis)
    return LayerHelper("affine_channel", name=name).append_activation(out, act)


def _pad_op(x: Variable, paddings: list[int], value: float, mode: str) -> Variable:
    helper = LayerHelper("pad")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("pad", {"X": x}, {"Out": out},
                     {"paddings": paddings, "pad_value": float(value), "mode": mode})
    return out


def pad(x: Variable, paddings: Sequence[int], pad_value: float = 0.0,
        name: str | None = None) -> Variable:
    """``x`` padded with ``pad_value``: ``paddings`` = [before_0, after_0, before_1, ...]."""
    if len(paddings) != 2 * len(x.shape):
        raise ValueError(f"pad: paddings needs 2 entries per dim of {x.name!r} "
                         f"{list(x.shape)} ({2 * len(x.shape)}), got {len(paddings)}")
    return _pad_op(x, [int(p) for p in paddings], pad_value, "constant")


def pad2d(input: Variable, paddings: Sequence[int] = (0, 0, 0, 0), mode: str = "constant",
          pad_value: float = 0.0, data_format: str = "NCHW",
          name: str | None = None) -> Variable:
    """Pad the spatial dims of an image batch: ``paddings`` = [top, bottom, left, right];
    ``mode`` 'constant' (pad_value), 'reflect' or 'edge'."""
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad2d: mode must be 'constant', 'reflect' or 'edge', got {mode!r}")
    if len(paddings) != 4 or len(input.shape) != 4:
        raise ValueError(f"pad2d: paddings must be [top, bottom, left, right] and input a 4-D "
                         f"image batch, got {list(paddings)} and {list(input.shape)}")
    t, b, lft, r = (int(p) for p in paddings)
    full = [0, 0, 0, 0, t, b, lft, r] if data_format == "NCHW" else [0, 0, t, b, lft, r, 0, 0]
    return _pad_op(input, full, pad_value, mode)


def crop(x: Variable, shape: Variable | Sequence[int] | None = None,
         offsets: Sequence[int] | None = None, name: str | None = None) -> Variable:
    """The block of ``x`` of ``shape`` (a list, or a variable whose shape it is) starting
    at ``offsets`` (zeros by default)."""
    if shape is None:
        raise ValueError(f"crop {x.name!r}: give the shape to crop to")
    dims = list(shape.shape) if isinstance(shape, Variable) else [int(d) for d in shape]
    offs = [0] * len(dims) if offsets is None else [int(o) for o in offsets]
    if len(dims) != len(x.shape) or len(offs) != len(dims):
        raise ValueError(f"crop {x.name!r}: shape {dims} and offsets {offs} need one entry "
                         f"per dim of {list(x.shape)}")
    axes, starts, ends = [], [], []
    for i, (d, o) in enumerate(zip(dims, offs)):
        if d == -1:
            continue
        if x.shape[i] > 0 and o + d > x.shape[i]:
            raise ShapeError(f"crop {x.name!r}: offset {o} + size {d} exceeds dim {i} "
                             f"({x.shape[i]})")
        axes.append(i)
        starts.append(o)
        ends.append(o + d)
    return slice(x, axes=axes, starts=starts, ends=ends)


def pad_constant_like(x: Variable, y: Variable, pad_value: float = 0.0,
                      name: str | None = None) -> Variable:
    """``y`` padded at the end of each dim with ``pad_value`` to ``x``'s shape."""
    if len(x.shape) != len(y.shape):
        raise ShapeError(f"pad_constant_like: x {list(x.shape)} and y {list(y.shape)} need "
                         "the same rank")
    pads = []
    for i, (a, b) in enumerate(zip(x.shape, y.shape)):
        if a == b:
            pads += [0, 0]
        elif a > 0 and b > 0 and a > b:
            pads += [0, a - b]
        else:
            raise ShapeError(f"pad_constant_like: dim {i} of y ({b}) must be known and not "
                             f"above x's ({a})")
    return _pad_op(y, pads, pad_value, "constant")


def clip_by_norm(x: Variable, max_norm: float, name: str | None = None) -> Variable:
    """``x`` scaled down to L2 norm ``max_norm`` when its norm is above it."""
    norm = M.sqrt(M.reduce_sum(square(x)))
    top = M.elementwise_max(norm, M.scale(norm, 0.0, float(max_norm)))
    return M.elementwise_mul(x, M.scale(reciprocal(top), float(max_norm)))


def fsp_matrix(x: Variable, y: Variable) -> Variable:
    """The flow-of-solution-procedure matrix [N, C1, C2] of feature maps x [N, C1, H, W]
    and y [N, C2, H, W]: ``x . y^T / (H * W)`` over the positions."""
    sx = _known("fsp_matrix", x, [1, 2, 3], "C, H and W")
    sy = _known("fsp_matrix", y, [1, 2, 3], "C, H and W")
    if sx[2:] != sy[2:]:
        raise ShapeError(f"fsp_matrix: x {sx} and y {sy} must have the same H and W")
    hw = sx[2] * sx[3]
    xr = reshape(x, [-1, sx[1], hw])
    yr = reshape(y, [-1, sy[1], hw])
    return M.matmul(xr, yr, transpose_y=True, alpha=1.0 / hw)


def bilinear_tensor_product(x: Variable, y: Variable, size: int, act: str | None = None,
                            name: str | None = None, param_attr: Any = None,
                            bias_attr: Any = None) -> Variable:
    """``out[n, k] = x[n] . W[k] . y[n]^T + b[k]`` with a weight W [size, M, N] (and a
    bias [1, size] unless bias_attr is False)."""
    m = _known("bilinear_tensor_product", x, [1], "the width")[1]
    n = _known("bilinear_tensor_product", y, [1], "the width")[1]
    helper = LayerHelper("bilinear_tensor_product", name=name)
    pa = ParamAttr.to_attr(param_attr)
    assert isinstance(pa, ParamAttr)
    w = helper.create_parameter(pa, [size, m, n], x.dtype_name)
    wm = reshape(transpose(w, [1, 0, 2]), [m, size * n])
    xw = reshape(M.matmul(x, wm), [-1, size, n])
    out = M.reduce_sum(M.elementwise_mul(xw, unsqueeze(y, [1])), dim=2)
    if bias_attr is not False:
        b = _param(helper, bias_attr, [1, size], x.dtype_name, 0.0, True)
        assert b is not None
        out = M.elementwise_add(out, b)
    return helper.append_activation(out, act)


def row_conv(input: Variable, future_context_size: int, param_attr: Any = None,
             act: str | None = None) -> Variable:
    """Look-ahead convolution over each sequence: ``out[t] = sum_k x[t + k] * w[k]``,
    k = 0 .. future_context_size (a filter [future_context_size + 1, D])."""
    d = _known("row_conv", input, [len(input.shape) - 1], "the feature size")[-1]
    if future_context_size < 0:
        raise ValueError(f"row_conv: future_context_size must be >= 0, got "
                         f"{future_context_size}")
    helper = LayerHelper("row_conv")
    pa = ParamAttr.to_attr(param_attr)
    assert isinstance(pa, ParamAttr)
    w = helper.create_parameter(pa, [future_context_size + 1, d], input.dtype_name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("row_conv", {"X": input, "Filter": w}, {"Out": out})
    return helper.append_activation(out, act)


def add_position_encoding(input: Variable, alpha: float, beta: float,
                          name: str | None = None) -> Variable:
    """``alpha * input + beta * PE``: sinusoidal position encodings (sin in the first
    half of the features, cos in the second) of [N, T, D] or of each sequence of a LoD
    input."""
    helper = LayerHelper("add_position_encoding", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("add_position_encoding", {"X": input}, {"Out": out},
                     {"alpha": float(alpha), "beta": float(beta)})
    return out


def random_crop(x: Variable, shape: Sequence[int], seed: int | None = None) -> Variable:
    """A window of ``shape`` (the last dims of ``x``) at a random offset, per example."""
    helper = LayerHelper("random_crop")
    out = helper.create_variable_for_type_inference(x.dtype)
    offs = helper.create_variable_for_type_inference("int64")
    helper.append_op("random_crop", {"X": x}, {"Out": out, "Offsets": offs},
                     {"shape": [int(d) for d in shape], "seed": int(seed or 0)})
    return out


def npair_loss(anchor: Variable, positive: Variable, labels: Variable,
               l2_reg: float = 0.002) -> Variable:
    """N-pair loss: softmax cross entropy of the anchor-positive similarities against
    the same-label targets (rows normalised), plus ``l2_reg / 4`` times the mean squared
    norms of the embeddings (Paddle 1.5's formula)."""
    from .control_flow import equal
    from .extra_ops import expand
    from .tensor import cast

    n = anchor.shape[0]
    if n is None or n <= 0:
        raise ShapeError(f"npair_loss: the batch size of anchor {anchor.name!r} must be known "
                         f"(shape {list(anchor.shape)})")
    lab = expand(reshape(labels, [n, 1]), [1, n])
    same = cast(equal(lab, transpose(lab, [1, 0])), anchor.dtype_name)
    same = M.elementwise_div(same, M.reduce_sum(same, dim=1, keep_dim=True))
    same.stop_gradient = True
    l2 = M.elementwise_add(M.reduce_mean(M.reduce_sum(square(anchor), dim=1)),
                           M.reduce_mean(M.reduce_sum(square(positive), dim=1)))
    l2 = M.scale(l2, 0.25 * float(l2_reg))
    sim = M.matmul(anchor, positive, transpose_y=True)
    from .nn import softmax_with_cross_entropy

    ce = softmax_with_cross_entropy(sim, same, soft_label=True)
    assert isinstance(ce, Variable)
    celoss = M.reduce_mean(M.reduce_sum(M.elementwise_mul(same, ce), dim=0))
    return M.elementwise_add(l2, celoss)


def affine_grid(theta: Variable, out_shape: Sequence[int], name: str | None = None
                ) -> Variable:
    """The sampling grid [N, H, W, 2] of the affine maps ``theta`` [N, 2, 3] over an
    output [N, C, H, W] (``out_shape``): (x, y) in [-1, 1], corners aligned."""
    import numpy as np

    from .tensor import assign

    if isinstance(out_shape, Variable) or len(out_shape) != 4:
        raise ValueError("affine_grid: out_shape must be a list [N, C, H, W] in fluid-hw")
    h, w = int(out_shape[2]), int(out_shape[3])
    ys, xs = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(h * w)], axis=0).astype(np.float32)
    grid = M.matmul(theta, assign(base))  # [N, 2, H*W]
    return reshape(transpose(grid, [0, 2, 1]), [-1, h, w, 2])


def spectral_norm(weight: Variable, dim: int = 0, power_iters: int = 1, eps: float = 1e-12,
                  name: str | None = None) -> Variable:
    """``weight / sigma``, sigma = u^T W v its largest singular value estimated by
    ``power_iters`` power iterations from vectors u and v kept between runs (W: weight
    reshaped to [dim's size, the rest]; u and v are constants for the gradient)."""
    from .tensor import assign

    s = _known("spectral_norm", weight, range(len(weight.shape)), "the shape")
    if not 0 <= dim < len(s) or power_iters < 0:
        raise ValueError(f"spectral_norm: dim {dim} must index the weight's {len(s)} dims and "
                         f"power_iters be >= 0")
    h = s[dim]
    wd = 1
    for i, size in enumerate(s):
        if i != dim:
            wd *= size
    helper = LayerHelper("spectral_norm", name=name)
    from ..initializer import Normal

    u = helper.create_parameter(ParamAttr(trainable=False), [h, 1], weight.dtype_name,
                                default_initializer=Normal(0.0, 1.0, 0))
    v = helper.create_parameter(ParamAttr(trainable=False), [wd, 1], weight.dtype_name,
                                default_initializer=Normal(0.0, 1.0, 0))
    perm = [dim, *[i for i in range(len(s)) if i != dim]]
    w2 = reshape(transpose(weight, perm) if dim else weight, [h, wd])
    wc = assign(w2)
    wc.stop_gradient = True  # the estimate is a constant for the gradient, as Paddle's

    def unit(x: Variable) -> Variable:
        norm = M.sqrt(M.reduce_sum(square(x)))
        return M.elementwise_div(x, M.scale(norm, 1.0, float(eps)))

    uu: Variable = u
    vv: Variable = v
    for _ in range(power_iters):
        vv = unit(M.matmul(wc, uu, transpose_x=True))
        uu = unit(M.matmul(wc, vv))
    if power_iters:
        assign(uu, u)
        assign(vv, v)
    # sigma = u^T W v with u, v constants: the gradient flows through W, as Paddle's
    sigma = M.reduce_sum(M.elementwise_mul(uu, M.matmul(w2, vv)))
    return M.elementwise_mul(weight, reciprocal(sigma))
