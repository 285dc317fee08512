"""Neural-network layers (fc, conv, pooling, normalisation, losses...)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

from ...errors import ShapeError
from ...ir import dtypes
from ...ir.program import Variable
from ..initializer import Constant, Normal
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = [
    "fc", "conv2d", "pool2d", "adaptive_pool2d", "batch_norm", "embedding", "dropout",
    "cross_entropy", "softmax_with_cross_entropy", "accuracy", "topk", "argmax",
]


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


# -- helpers -----------------------------------------------------------------


def _pair(value: int | Sequence[int], what: str, layer: str) -> list[int]:
    """Fluid's ``convert_to_list(value, 2, what)``: an int or two ints."""
    vals = [value, value] if isinstance(value, (int, Integral)) else list(value)
    if len(vals) != 2 or not all(isinstance(v, Integral) for v in vals):
        raise ShapeError(f"layer {layer}: {what} must be an int or two ints, got {value!r}")
    return [int(v) for v in vals]


def _padding(padding: int | str | Sequence[int], layer: str) -> tuple[list[int], str]:
    """(paddings, padding_algorithm) from an int, 2 or 4 ints, or 'SAME' / 'VALID'."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            raise ShapeError(f"layer {layer}: padding {padding!r} must be 'SAME', 'VALID' "
                             "or numbers")
        return [0, 0], algo
    vals = [padding, padding] if isinstance(padding, (int, Integral)) else list(padding)
    if len(vals) not in (2, 4) or not all(isinstance(v, Integral) for v in vals):
        raise ShapeError(f"layer {layer}: padding must be an int, [pad_h, pad_w] or "
                         f"[top, bottom, left, right], got {padding!r}")
    return [int(v) for v in vals], "EXPLICIT"


def _check_rank(helper: LayerHelper, x: Variable, rank: int, what: str) -> None:
    if len(x.shape) != rank:
        raise ShapeError(f"layer {helper.layer_type} {helper.name!r}: input {x.name!r} must be "
                         f"{what}, got shape {list(x.shape)}")


# -- convolution and pooling -------------------------------------------------


def conv2d(input: Variable, num_filters: int, filter_size: int | Sequence[int],
           stride: int | Sequence[int] = 1, padding: int | str | Sequence[int] = 0,
           dilation: int | Sequence[int] = 1, groups: int | None = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: str | None = None, name: str | None = None,
           data_format: str = "NCHW") -> Variable:
    """2-D convolution of an NCHW input, plus a bias per filter and an activation.

    ``padding`` is an int, ``[pad_h, pad_w]``, ``[top, bottom, left, right]`` or
    ``'SAME'``/``'VALID'``.  The filter defaults to Fluid's initializer
    Normal(0, sqrt(2 / (kh * kw * C_in))) with C_in the *input* channel count
    (Fluid does not divide by groups here).  When ``groups`` equals the input
    channels and ``num_filters`` is a multiple of them the op is
    ``depthwise_conv2d`` (Fluid also requires ``use_cudnn=False`` for that; this
    back end has no cuDNN, so ``use_cudnn`` is only recorded as an attribute).
    """
    helper = LayerHelper("conv2d", name=name)
    _check_rank(helper, input, 4, "4-D NCHW")
    if data_format != "NCHW":
        raise ShapeError(f"layer conv2d {helper.name!r}: data_format {data_format!r} is not "
                         "supported, only 'NCHW'; transpose the input first")
    channels = input.shape[1]
    if channels <= 0:
        raise ShapeError(f"layer conv2d {helper.name!r}: the channel dimension of input "
                         f"{input.name!r} {list(input.shape)} must be known")
    g = 1 if groups is None else groups
    if g < 1 or channels % g:
        raise ShapeError(f"layer conv2d {helper.name!r}: input channels {channels} must be "
                         f"divisible by groups={g}")
    ksize = _pair(filter_size, "filter_size", helper.name)
    paddings, algo = _padding(padding, helper.name)
    op_type = "conv2d"
    if g == channels and num_filters % channels == 0 and g > 1:
        op_type = "depthwise_conv2d"
    dtype = helper.input_dtype(input)
    std = (2.0 / (ksize[0] * ksize[1] * channels)) ** 0.5
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    w = helper.create_parameter(attr, [num_filters, channels // g, *ksize], dtype,
                                default_initializer=Normal(0.0, std, 0))
    pre_bias = helper.create_variable_for_type_inference(dtype)
    helper.append_op(op_type, {"Input": input, "Filter": w}, {"Output": pre_bias}, {
        "strides": _pair(stride, "stride", helper.name), "paddings": paddings,
        "dilations": _pair(dilation, "dilation", helper.name), "groups": g,
        "padding_algorithm": algo, "data_format": data_format, "use_cudnn": use_cudnn,
    })
    pre_act = helper.append_bias_op(pre_bias, bias_attr, dim_start=1, dim_end=2)
    return helper.append_activation(pre_act, act)


def pool2d(input: Variable, pool_size: int | Sequence[int] = -1, pool_type: str = "max",
           pool_stride: int | Sequence[int] = 1, pool_padding: int | str | Sequence[int] = 0,
           global_pooling: bool = False, use_cudnn: bool = True, ceil_mode: bool = False,
           name: str | None = None, exclusive: bool = True,
           data_format: str = "NCHW") -> Variable:
    """Max or average pooling of an NCHW input (see the pool2d op for the edge rules)."""
    helper = LayerHelper("pool2d", name=name)
    _check_rank(helper, input, 4, "4-D NCHW")
    if pool_type not in ("max", "avg"):
        raise ShapeError(f"layer pool2d {helper.name!r}: pool_type must be 'max' or 'avg', "
                         f"got {pool_type!r}")
    if not global_pooling and pool_size == -1:
        raise ShapeError(f"layer pool2d {helper.name!r}: pool_size must be given unless "
                         "global_pooling=True")
    paddings, algo = _padding(pool_padding, helper.name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("pool2d", {"X": input}, {"Out": out}, {
        "pooling_type": pool_type, "ksize": _pair(pool_size, "pool_size", helper.name),
        "global_pooling": global_pooling, "strides": _pair(pool_stride, "pool_stride",
                                                           helper.name),
        "paddings": paddings, "padding_algorithm": algo, "use_cudnn": use_cudnn,
        "ceil_mode": ceil_mode, "exclusive": exclusive, "data_format": data_format,
    })
    return out


def adaptive_pool2d(input: Variable, pool_size: int | Sequence[int], pool_type: str = "max",
                    require_index: bool = False, name: str | None = None) -> Variable:
    """Pooling to a fixed output size ``pool_size`` (Fluid's adaptive bins)."""
    helper = LayerHelper("adaptive_pool2d", name=name)
    _check_rank(helper, input, 4, "4-D NCHW")
    if pool_type not in ("max", "avg"):
        raise ShapeError(f"layer adaptive_pool2d {helper.name!r}: pool_type must be 'max' or "
                         f"'avg', got {pool_type!r}")
    if require_index:
        raise ShapeError(f"layer adaptive_pool2d {helper.name!r}: require_index=True (the "
                         "max_pool2d_with_index op) is not supported")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("pool2d", {"X": input}, {"Out": out}, {
        "pooling_type": pool_type, "ksize": _pair(pool_size, "pool_size", helper.name),
        "adaptive": True,
    })
    return out


# -- normalisation and regularisation ----------------------------------------


def batch_norm(input: Variable, act: str | None = None, is_test: bool = False,
               momentum: float = 0.9, epsilon: float = 1e-5, param_attr: Any = None,
               bias_attr: Any = None, data_layout: str = "NCHW", in_place: bool = False,
               name: str | None = None, moving_mean_name: str | None = None,
               moving_variance_name: str | None = None,
               do_model_average_for_mean_and_var: bool = False,
               use_global_stats: bool = False) -> Variable:
    """Batch normalisation over the channel axis (1 for NCHW and 2-D input, last for NHWC).

    Creates Scale (init 1), Bias (init 0) and the running mean (init 0) and
    variance (init 1): persistable, non-trainable parameters named
    ``moving_mean_name`` / ``moving_variance_name`` when given, which the op
    updates in training.  ``Program.clone(for_test=True)`` turns ``is_test`` on.
    """
    helper = LayerHelper("batch_norm", name=name)
    shape = list(input.shape)
    if not 2 <= len(shape) <= 5:
        raise ShapeError(f"layer batch_norm {helper.name!r}: input {input.name!r} must have "
                         f"rank 2 to 5, got shape {shape}")
    if data_layout not in ("NCHW", "NHWC"):
        raise ShapeError(f"layer batch_norm {helper.name!r}: data_layout must be 'NCHW' or "
                         f"'NHWC', got {data_layout!r}")
    channels = shape[-1] if data_layout == "NHWC" else shape[1]
    if channels <= 0:
        raise ShapeError(f"layer batch_norm {helper.name!r}: the channel dimension of input "
                         f"{input.name!r} {shape} must be known")
    dtype = helper.input_dtype(input)
    pdtype = dtypes.VarType.FP32 if dtype == dtypes.VarType.FP16 else dtype  # fp32 params
    sattr, battr = ParamAttr.to_attr(param_attr), ParamAttr.to_attr(bias_attr)
    assert isinstance(sattr, ParamAttr) and isinstance(battr, ParamAttr)
    scale = helper.create_parameter(sattr, [channels], pdtype, default_initializer=Constant(1.0))
    bias = helper.create_parameter(battr, [channels], pdtype, is_bias=True)
    stats = []
    for stat_name, init in ((moving_mean_name, 0.0), (moving_variance_name, 1.0)):
        v = helper.create_parameter(
            ParamAttr(name=stat_name, initializer=Constant(init), trainable=False,
                      do_model_average=do_model_average_for_mean_and_var),
            [channels], pdtype)
        v.stop_gradient = True
        stats.append(v)
    mean, variance = stats
    saved_mean = helper.create_variable_for_type_inference(pdtype, stop_gradient=True)
    saved_var = helper.create_variable_for_type_inference(pdtype, stop_gradient=True)
    out = input if in_place else helper.create_variable_for_type_inference(dtype)
    helper.append_op(
        "batch_norm",
        {"X": input, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance},
        {"Y": out, "MeanOut": mean, "VarianceOut": variance, "SavedMean": saved_mean,
         "SavedVariance": saved_var},
        {"momentum": momentum, "epsilon": epsilon, "is_test": is_test,
         "data_layout": data_layout, "use_global_stats": use_global_stats},
    )
    return helper.append_activation(out, act)


def dropout(x: Variable, dropout_prob: float, is_test: bool = False, seed: int | None = None,
            name: str | None = None,
            dropout_implementation: str = "downgrade_in_infer") -> Variable:
    """Zero each cell with probability ``dropout_prob`` in training (see the dropout op).

    ``seed=None`` takes the main program's ``random_seed`` when that is set; any
    seed makes the masks reproducible (``fix_seed``), still new on every run.
    """
    helper = LayerHelper("dropout", name=name)
    if not 0.0 <= dropout_prob <= 1.0:
        raise ShapeError(f"layer dropout {helper.name!r}: dropout_prob must be in [0, 1], "
                         f"got {dropout_prob}")
    if not seed and helper.main_program.random_seed:
        seed = helper.main_program.random_seed
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference("uint8", stop_gradient=True)
    helper.append_op("dropout", {"X": x}, {"Out": out, "Mask": mask}, {
        "dropout_prob": float(dropout_prob), "is_test": is_test, "fix_seed": seed is not None,
        "seed": seed or 0, "dropout_implementation": dropout_implementation,
    })
    return out


def embedding(input: Variable, size: Sequence[int], is_sparse: bool = False,
              is_distributed: bool = False, padding_idx: int | None = None,
              param_attr: Any = None, dtype: Any = "float32") -> Variable:
    """Rows of a ``size = [V, D]`` table for int64 ids of shape [..., 1] -> [..., D].

    ``padding_idx`` (negative counts from V) gives zero rows; the table defaults
    to Xavier initialisation.
    """
    helper = LayerHelper("embedding")
    if len(size) != 2 or any(d <= 0 for d in size):
        raise ShapeError(f"layer embedding {helper.name!r}: size must be [vocab, dim] with "
                         f"positive entries, got {list(size)}")
    pad = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else size[0] + padding_idx
    if pad != -1 and not 0 <= pad < size[0]:
        raise ShapeError(f"layer embedding {helper.name!r}: padding_idx {padding_idx} is "
                         f"outside the {size[0]} rows")
    attr = ParamAttr.to_attr(param_attr)
    assert isinstance(attr, ParamAttr)
    w = helper.create_parameter(attr, list(size), dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("lookup_table", {"W": w, "Ids": input}, {"Out": out}, {
        "is_sparse": is_sparse, "is_distributed": is_distributed,
        "remote_prefetch": is_sparse and not is_distributed, "padding_idx": pad,
    })
    return out


# -- losses and metrics ------------------------------------------------------


def cross_entropy(input: Variable, label: Variable, soft_label: bool = False,
                  ignore_index: int = -100) -> Variable:
    """-log(input[label]) per row; ``input`` holds probabilities (e.g. a softmax)."""
    helper = LayerHelper("cross_entropy")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("cross_entropy", {"X": input, "Label": label}, {"Y": out},
                     {"soft_label": soft_label, "ignore_index": ignore_index})
    return out


def softmax_with_cross_entropy(logits: Variable, label: Variable, soft_label: bool = False,
                               ignore_index: int = -100, numeric_stable_mode: bool = True,
                               return_softmax: bool = False,
                               axis: int = -1) -> Variable | tuple[Variable, Variable]:
    """Cross entropy of softmax(logits) along ``axis``; the loss, or (loss, softmax)."""
    helper = LayerHelper("softmax_with_cross_entropy")
    softmax = helper.create_variable_for_type_inference(logits.dtype)
    loss = helper.create_variable_for_type_inference(logits.dtype)
    helper.append_op("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
                     {"Softmax": softmax, "Loss": loss},
                     {"soft_label": soft_label, "ignore_index": ignore_index,
                      "numeric_stable_mode": numeric_stable_mode, "axis": axis})
    return (loss, softmax) if return_softmax else loss


def topk(input: Variable, k: int, name: str | None = None) -> tuple[Variable, Variable]:
    """(values, int64 indices) of the k largest entries along the last axis, descending."""
    helper = LayerHelper("top_k", name=name)
    values = helper.create_variable_for_type_inference(input.dtype)
    indices = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("top_k", {"X": input}, {"Out": values, "Indices": indices}, {"k": k})
    return values, indices


def accuracy(input: Variable, label: Variable, k: int = 1, correct: Variable | None = None,
             total: Variable | None = None) -> Variable:
    """Top-k accuracy of class scores ``input`` [N, C] against int64 ``label`` [N, 1].

    ``correct`` and ``total`` (int32 [1]) receive the counts when given.
    """
    helper = LayerHelper("accuracy")
    values, indices = topk(input, k)
    acc = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    if correct is None:
        correct = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    if total is None:
        total = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("accuracy", {"Out": values, "Indices": indices, "Label": label},
                     {"Accuracy": acc, "Correct": correct, "Total": total})
    return acc


def argmax(x: Variable, axis: int = 0) -> Variable:
    """int64 index of the largest value along ``axis`` (that axis is removed)."""
    helper = LayerHelper("arg_max")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("arg_max", {"X": x}, {"Out": out}, {"axis": axis})
    return out
