"""Specialised layers of Paddle 1.5 (issue 20): ``continuous_value_model``,
``similarity_focus``, ``im2sequence`` and ``hsigmoid`` (the default tree)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ShapeError
from ...ir.program import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from .tensor import assign

__all__ = ["continuous_value_model", "similarity_focus", "im2sequence", "hsigmoid",
           "warpctc", "grid_sampler", "roi_pool", "roi_align", "psroi_pool", "nce",
           "teacher_student_sigmoid_loss", "space_to_depth", "where"]


def continuous_value_model(input: Variable, cvm: Variable, use_cvm: bool = True) -> Variable:
    """CTR show/click features: with ``use_cvm`` the first two columns of ``input``
    become log(show + 1) and log(click + 1) - log(show + 1); without, they are dropped."""
    helper = LayerHelper("cvm")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("cvm", {"X": input, "CVM": cvm}, {"Y": out}, {"use_cvm": bool(use_cvm)})
    return out


def similarity_focus(input: Variable, axis: int, indexes: Sequence[int],
                     name: str | None = None) -> Variable:
    """A 0/1 mask of ``input`` [N, C, A, B]: for each index of dim ``axis``, the largest
    elements of that 2-D slice picked one per row and column (see the op)."""
    if axis not in (1, 2, 3):
        raise ValueError(f"similarity_focus: axis must be 1, 2 or 3, got {axis}")
    helper = LayerHelper("similarity_focus", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("similarity_focus", {"X": input}, {"Out": out},
                     {"axis": int(axis), "indexes": [int(i) for i in indexes]})
    out.stop_gradient = True
    return out


def _two(v: int | Sequence[int], what: str) -> list[int]:
    out = [v, v] if isinstance(v, int) else [int(a) for a in v]
    if len(out) != 2:
        raise ValueError(f"im2sequence: {what} must be an int or two ints, got {v!r}")
    return out


def im2sequence(input: Variable, filter_size: int | Sequence[int] = 1,
                stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                input_image_size: Variable | None = None, out_stride: int = 1,
                name: str | None = None) -> Variable:
    """Each ``filter_size`` patch of each NCHW image as a row [C*kh*kw]: one sequence of
    out_h*out_w rows per image.  ``padding``: an int, [pad_h, pad_w] or [up, left, down,
    right]."""
    if input_image_size is not None or out_stride != 1:
        raise ValueError("im2sequence: input_image_size / out_stride (per-image real sizes) "
                         "are not supported")
    pad = [padding] * 4 if isinstance(padding, int) else [int(p) for p in padding]
    if len(pad) == 2:
        pad = [pad[0], pad[1], pad[0], pad[1]]
    if len(pad) != 4:
        raise ValueError(f"im2sequence: padding must be an int, 2 or 4 ints, got {padding!r}")
    helper = LayerHelper("im2sequence", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("im2sequence", {"X": input}, {"Out": out},
                     {"kernels": _two(filter_size, "filter_size"),
                      "strides": _two(stride, "stride"), "paddings": pad})
    return out


def _row_params(layer: str, op_type: str, input: Variable, rows: int, param_attr: Any,
                bias_attr: Any, name: str | None
                ) -> tuple[LayerHelper, Variable, Variable | None]:
    """For a layer scoring ``input`` [N, D] (D known) against ``rows`` rows of weights:
    the ``op_type`` helper, the weight [rows, D] and, unless ``bias_attr`` is False, the
    bias [rows, 1]."""
    d = input.shape[-1]
    if len(input.shape) != 2 or d is None or d <= 0:
        raise ShapeError(f"{layer}: input {input.name!r} must be [N, D] with D known, got "
                         f"{list(input.shape)}")
    helper = LayerHelper(op_type, name=name)
    pa = ParamAttr.to_attr(param_attr)
    assert isinstance(pa, ParamAttr)
    w = helper.create_parameter(pa, [rows, d], input.dtype_name)
    bias = None
    if bias_attr is not False:
        ba = ParamAttr.to_attr(bias_attr)
        assert isinstance(ba, ParamAttr)
        bias = helper.create_parameter(ba, [rows, 1], input.dtype_name, is_bias=True)
    return helper, w, bias


def hsigmoid(input: Variable, label: Variable, num_classes: int, param_attr: Any = None,
             bias_attr: Any = None, name: str | None = None, path_table: Any = None,
             path_code: Any = None, is_custom: bool = False, is_sparse: bool = False
             ) -> Variable:
    """Hierarchical sigmoid loss over Paddle's default complete binary tree of
    ``num_classes`` leaves ([N, 1]); weights [num_classes - 1, D] and a bias per node."""
    if is_custom or path_table is not None or path_code is not None:
        raise ValueError("hsigmoid: custom trees (path_table / path_code) are not supported")
    if num_classes < 2:
        raise ValueError(f"hsigmoid: num_classes must be >= 2, got {num_classes}")
    helper, w, bias = _row_params("hsigmoid", "hierarchical_sigmoid", input, num_classes - 1,
                                  param_attr, bias_attr, name)
    ins: dict[str, Any] = {"X": input, "W": w, "Label": label}
    if bias is not None:
        ins["Bias"] = bias
    out = helper.create_variable_for_type_inference(input.dtype)
    pre = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("hierarchical_sigmoid", ins, {"Out": out, "PreOut": pre},
                     {"num_classes": int(num_classes)})
    return out


def warpctc(input: Variable, label: Variable, blank: int = 0, norm_by_times: bool = False,
            use_cudnn: bool = False) -> Variable:
    """CTC loss per sequence ([num_seqs, 1]) of unnormalised class scores ``input`` (LoD
    [T, classes + 1]) against ``label`` (LoD int [L, 1]); ``blank`` is the blank class."""
    helper = LayerHelper("warpctc")
    loss = helper.create_variable_for_type_inference(input.dtype)
    grad = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("warpctc", {"Logits": input, "Label": label},
                     {"Loss": loss, "WarpCTCGrad": grad},
                     {"blank": int(blank), "norm_by_times": bool(norm_by_times)})
    return loss


def grid_sampler(x: Variable, grid: Variable, name: str | None = None) -> Variable:
    """``x`` (NCHW) sampled bilinearly at ``grid`` [N, H_out, W_out, 2] (x, y in [-1, 1],
    corners aligned, zero outside); with affine_grid, a spatial transformer."""
    helper = LayerHelper("grid_sampler", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("grid_sampler", {"X": x, "Grid": grid}, {"Output": out})
    return out


def _roi(op_type: str, input: Variable, rois: Variable, attrs: dict[str, Any],
         name: str | None = None, extra: tuple[str, ...] = ()) -> Variable:
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    outs = {"Out": out, **{s: helper.create_variable_for_type_inference("int64")
                           for s in extra}}
    helper.append_op(op_type, {"X": input, "ROIs": rois}, outs, attrs)
    return out


def roi_pool(input: Variable, rois: Variable, pooled_height: int = 1, pooled_width: int = 1,
             spatial_scale: float = 1.0) -> Variable:
    """Max pooling of each box of ``rois`` (LoD [R, 4], x1 y1 x2 y2; one sequence per
    image) into pooled_height x pooled_width bins: [R, C, ph, pw]."""
    return _roi("roi_pool", input, rois,
                {"pooled_height": int(pooled_height), "pooled_width": int(pooled_width),
                 "spatial_scale": float(spatial_scale)}, extra=("Argmax",))


def roi_align(input: Variable, rois: Variable, pooled_height: int = 1, pooled_width: int = 1,
              spatial_scale: float = 1.0, sampling_ratio: int = -1,
              name: str | None = None) -> Variable:
    """RoIAlign: per bin, the mean of bilinear samples of each box: [R, C, ph, pw]."""
    return _roi("roi_align", input, rois,
                {"pooled_height": int(pooled_height), "pooled_width": int(pooled_width),
                 "spatial_scale": float(spatial_scale),
                 "sampling_ratio": int(sampling_ratio)}, name)


def psroi_pool(input: Variable, rois: Variable, output_channels: int, spatial_scale: float,
               pooled_height: int, pooled_width: int, name: str | None = None) -> Variable:
    """Position-sensitive ROI average pooling: [R, output_channels, ph, pw] from an input
    of output_channels * ph * pw channels."""
    return _roi("psroi_pool", input, rois,
                {"output_channels": int(output_channels),
                 "spatial_scale": float(spatial_scale),
                 "pooled_height": int(pooled_height), "pooled_width": int(pooled_width)}, name)


def nce(input: Variable, label: Variable, num_total_classes: int,
        sample_weight: Variable | None = None, param_attr: Any = None, bias_attr: Any = None,
        num_neg_samples: int | None = None, name: str | None = None,
        sampler: str = "uniform", custom_dist: Sequence[float] | None = None, seed: int = 0,
        is_sparse: bool = False) -> Variable:
    """Noise-contrastive estimation cost per row ([N, 1]) of ``input`` [N, D] against the
    int64 classes ``label`` [N, num_true], with ``num_neg_samples`` (default 10) negative
    classes drawn by ``sampler`` ('uniform', 'log_uniform' or 'custom_dist' with the
    probabilities ``custom_dist``)."""
    if sampler not in ("uniform", "log_uniform", "custom_dist"):
        raise ValueError(f"nce: sampler must be 'uniform', 'log_uniform' or 'custom_dist', "
                         f"got {sampler!r}")
    if (sampler == "custom_dist") != (custom_dist is not None):
        raise ValueError("nce: custom_dist (the class probabilities) goes with "
                         "sampler='custom_dist' only")
    helper, w, bias = _row_params("nce", "nce", input, num_total_classes, param_attr,
                                  bias_attr, name)
    ins: dict[str, Any] = {"Input": input, "Label": label, "Weight": w}
    if bias is not None:
        ins["Bias"] = bias
    if sample_weight is not None:
        ins["SampleWeight"] = sample_weight
    if custom_dist is not None:
        probs = np.asarray(custom_dist, np.float32)
        if probs.size != num_total_classes:
            raise ValueError(f"nce: custom_dist needs {num_total_classes} probabilities, got "
                             f"{probs.size}")
        ins["CustomDistProbs"] = assign(probs)
    outs = {"Cost": helper.create_variable_for_type_inference(input.dtype),
            "SampleLogits": helper.create_variable_for_type_inference(input.dtype),
            "SampleLabels": helper.create_variable_for_type_inference("int64")}
    helper.append_op("nce", ins, outs,
                     {"num_total_classes": int(num_total_classes),
                      "num_neg_samples": int(num_neg_samples or 10), "seed": int(seed),
                      "sampler": sampler, "is_sparse": bool(is_sparse)})
    return outs["Cost"]


def teacher_student_sigmoid_loss(input: Variable, label: Variable,
                                 soft_max_up_bound: float = 15.0,
                                 soft_max_lower_bound: float = -15.0) -> Variable:
    """Paddle's click + teacher-score distillation loss of logits ``input`` [N, 1] (see
    the op for the label encoding)."""
    helper = LayerHelper("teacher_student_sigmoid_loss")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("teacher_student_sigmoid_loss", {"X": input, "Label": label},
                     {"Y": out}, {"soft_max_up_bound": float(soft_max_up_bound),
                                  "soft_max_lower_bound": float(soft_max_lower_bound)})
    return out


def space_to_depth(x: Variable, blocksize: int, name: str | None = None) -> Variable:
    """Paddle 1.5's space_to_depth of x [N, C, H, W] -> [N, C*b*b, H/b, W/b]: its kernel
    writes element (n, k, j, i) to position (n, k % (C/b^2), j*b + (k / (C/b^2)) / b,
    i*b + (k / (C/b^2)) % b) of a [N, C/b^2, H*b, W*b] buffer, read back in the output
    shape (so the element order is Paddle's, not ONNX's)."""
    from .tensor import reshape, transpose

    s = list(x.shape)
    b = int(blocksize)
    if len(s) != 4 or any(d <= 0 for d in s[1:]):
        raise ShapeError(f"space_to_depth: x {x.name!r} must be NCHW with C, H, W known, got "
                         f"{s}")
    if b < 1 or s[1] % (b * b) or s[2] % b or s[3] % b:
        raise ValueError(f"space_to_depth: C ({s[1]}) must divide by blocksize^2 and H, W "
                         f"({s[2]}, {s[3]}) by blocksize ({b})")
    c, h, w = s[1:]
    oc = c // (b * b)
    y = transpose(reshape(x, [-1, b, b, oc, h, w]), [0, 3, 4, 1, 5, 2])
    return reshape(y, [-1, c * b * b, h // b, w // b])


def where(condition: Variable, x: Variable | None = None, y: Variable | None = None,
          name: str | None = None) -> Variable:
    """Paddle 1.5's ``where(condition)``: the coordinates of the true elements (int64
    [M, rank]); with ``x`` and ``y``, Paddle 2's element choice ``x if condition else
    y`` (the ONNX layer of extra_ops)."""
    from . import extra_ops

    if x is not None or y is not None:
        if x is None or y is None:
            raise ValueError("where: give both x and y (element choice) or neither "
                             "(coordinates of the true elements)")
        return extra_ops.where(condition, x, y, name=name)
    helper = LayerHelper("where_index", name=name)
    out = helper.create_variable_for_type_inference("int64")
    helper.append_op("where_index", {"Condition": condition}, {"Out": out})
    out.stop_gradient = True
    return out
