"""Assorted layers of Paddle 1.5 (issue 20): ``ctc_greedy_decoder``, ``edit_distance``,
``mean_iou``, ``elementwise_floordiv``, ``uniform_random_batch_size_like``,
``gaussian_random_batch_size_like``, ``sampling_id``, ``Print``, ``py_func``,
``temporal_shift``, and ``merge_selected_rows`` / ``get_tensor_from_selected_rows``
(fluid-hw's gradients are dense tensors, never SelectedRows: both return a copy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...ir import dtypes, unique_name
from ...ir.ops.misc_more import register_py_func
from ...ir.program import Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper
from .nn_more import pad
from .tensor import assign, concat, fill_constant, reshape, slice

__all__ = ["ctc_greedy_decoder", "edit_distance", "mean_iou", "elementwise_floordiv",
           "uniform_random_batch_size_like", "gaussian_random_batch_size_like",
           "sampling_id", "Print", "py_func", "temporal_shift", "merge_selected_rows",
           "get_tensor_from_selected_rows", "auc", "load"]


def _out(helper: LayerHelper, dtype: Any) -> Variable:
    return helper.create_variable_for_type_inference(dtype)


def ctc_greedy_decoder(input: Variable, blank: int, name: str | None = None) -> Variable:
    """Best path decoding of per-step class probabilities (LoD [T, C]): argmax, repeats
    merged, ``blank`` removed (int64 [M, 1], one sequence per input sequence)."""
    helper = LayerHelper("ctc_greedy_decoder", name=name)
    out = _out(helper, "int64")
    helper.append_op("ctc_greedy_decoder", {"Input": input}, {"Output": out},
                     {"blank": int(blank), "merge_repeated": True})
    return out


def edit_distance(input: Variable, label: Variable, normalized: bool = True,
                  ignored_tokens: Sequence[int] | None = None) -> tuple[Variable, Variable]:
    """Levenshtein distance of each hypothesis sequence to its reference (divided by the
    reference's length when ``normalized``), and the number of sequences."""
    helper = LayerHelper("edit_distance")
    dist, num = _out(helper, "float32"), _out(helper, "int64")
    helper.append_op("edit_distance", {"Hyps": input, "Refs": label},
                     {"Out": dist, "SequenceNum": num},
                     {"normalized": bool(normalized),
                      "ignored_tokens": [int(t) for t in ignored_tokens or []]})
    return dist, num


def mean_iou(input: Variable, label: Variable, num_classes: int
             ) -> tuple[Variable, Variable, Variable]:
    """Mean intersection over union of predicted classes: (mean_iou, wrong, correct)."""
    helper = LayerHelper("mean_iou")
    m, w, c = _out(helper, "float32"), _out(helper, "int32"), _out(helper, "int32")
    helper.append_op("mean_iou", {"Predictions": input, "Labels": label},
                     {"OutMeanIou": m, "OutWrong": w, "OutCorrect": c},
                     {"num_classes": int(num_classes)})
    return m, w, c


def elementwise_floordiv(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                         name: str | None = None) -> Variable:
    """``floor(x / y)`` for integers, with ``elementwise_add``'s broadcasting."""
    helper = LayerHelper("elementwise_floordiv", name=name)
    out = _out(helper, x.dtype)
    helper.append_op("elementwise_floordiv", {"X": x, "Y": y}, {"Out": out}, {"axis": axis})
    return helper.append_activation(out, act)


def _random_like(op_type: str, input: Variable, shape: Sequence[int], dtype: Any,
                 attrs: dict[str, Any]) -> Variable:
    helper = LayerHelper(op_type)
    out = _out(helper, dtypes.to_enum(dtype))
    helper.append_op(op_type, {"Input": input}, {"Out": out},
                     {"shape": [int(d) for d in shape], "dtype": int(dtypes.to_enum(dtype)),
                      **attrs})
    out.stop_gradient = True
    return out


def uniform_random_batch_size_like(input: Variable, shape: Sequence[int],
                                   dtype: Any = "float32", input_dim_idx: int = 0,
                                   output_dim_idx: int = 0, min: float = -1.0,
                                   max: float = 1.0, seed: int = 0) -> Variable:
    """U(min, max) values of ``shape``, its dim ``output_dim_idx`` taken from ``input``'s
    dim ``input_dim_idx`` at run time."""
    return _random_like("uniform_random_batch_size_like", input, shape, dtype,
                        {"input_dim_idx": input_dim_idx, "output_dim_idx": output_dim_idx,
                         "min": float(min), "max": float(max), "seed": int(seed)})


def gaussian_random_batch_size_like(input: Variable, shape: Sequence[int],
                                    input_dim_idx: int = 0, output_dim_idx: int = 0,
                                    mean: float = 0.0, std: float = 1.0, seed: int = 0,
                                    dtype: Any = "float32") -> Variable:
    """N(mean, std^2) values of ``shape``, its dim ``output_dim_idx`` taken from
    ``input``'s dim ``input_dim_idx`` at run time."""
    return _random_like("gaussian_random_batch_size_like", input, shape, dtype,
                        {"input_dim_idx": input_dim_idx, "output_dim_idx": output_dim_idx,
                         "mean": float(mean), "std": float(std), "seed": int(seed)})


def sampling_id(x: Variable, min: float = 0.0, max: float = 1.0, seed: int = 0,
                dtype: Any = "float32") -> Variable:
    """One class id drawn per row of the probabilities ``x`` [N, C] (int64 [N])."""
    helper = LayerHelper("sampling_id")
    out = _out(helper, "int64")
    helper.append_op("sampling_id", {"X": x}, {"Out": out},
                     {"min": float(min), "max": float(max), "seed": int(seed)})
    out.stop_gradient = True
    return out


def Print(input: Variable, first_n: int = -1, message: str | None = None,
          summarize: int = -1, print_tensor_name: bool = True, print_tensor_type: bool = True,
          print_tensor_shape: bool = True, print_tensor_lod: bool = True,
          print_phase: str = "both") -> Variable:
    """``input`` unchanged, printed to stdout when the op runs (and its gradient in the
    backward pass, by ``print_phase``)."""
    if print_phase not in ("forward", "backward", "both"):
        raise ValueError(f"Print: print_phase must be 'forward', 'backward' or 'both', got "
                         f"{print_phase!r}")
    helper = LayerHelper("print")
    out = _out(helper, input.dtype)
    helper.append_op("print", {"In": input}, {"Out": out},
                     {"first_n": int(first_n), "message": message or "",
                      "summarize": int(summarize), "print_tensor_name": print_tensor_name,
                      "print_tensor_type": print_tensor_type,
                      "print_tensor_shape": print_tensor_shape,
                      "print_tensor_lod": print_tensor_lod, "print_phase": print_phase})
    return out


def py_func(func: Callable[..., Any], x: Variable | Sequence[Variable],
            out: Variable | Sequence[Variable] | None,
            backward_func: Callable[..., Any] | None = None,
            skip_vars_in_backward_input: Variable | Sequence[Variable] | None = None) -> Any:
    """Run ``func`` (numpy arrays in, numpy arrays out) as an op: ``out`` are variables
    made beforehand (``create_tensor`` / ``create_variable``) with their shapes and
    dtypes.  ``backward_func`` gets the inputs, outputs (less those skipped) and output
    gradients, and returns the input gradients; without it no gradient flows back."""
    xs = [x] if isinstance(x, Variable) else list(x or [])
    outs = [] if out is None else [out] if isinstance(out, Variable) else list(out)
    skip = [] if skip_vars_in_backward_input is None else \
        [skip_vars_in_backward_input] if isinstance(skip_vars_in_backward_input, Variable) \
        else list(skip_vars_in_backward_input)
    if not callable(func) or (backward_func is not None and not callable(backward_func)):
        raise TypeError("py_func: func and backward_func must be callables")
    helper = LayerHelper("py_func")
    helper.append_op("py_func", {"X": xs}, {"Out": outs},
                     {"forward_callable_id": register_py_func(func),
                      "backward_callable_id": register_py_func(backward_func),
                      "backward_skip_vars": [v.name for v in skip]})
    if backward_func is None:
        for o in outs:
            o.stop_gradient = True
    return out


def temporal_shift(x: Variable, seg_num: int, shift_ratio: float = 0.25,
                   name: str | None = None) -> Variable:
    """TSM's shift of x [N*T, C, H, W] (T = seg_num): the first C*shift_ratio channels
    take the previous frame's values, the next C*shift_ratio the next frame's (zeros past
    the ends), the rest stay."""
    s = list(x.shape)
    if len(s) != 4 or any(d <= 0 for d in s[1:]):
        raise ValueError(f"temporal_shift: x {x.name!r} must be [N*T, C, H, W] with C, H, W "
                         f"known, got {s}")
    if not 0 < shift_ratio <= 0.5 or seg_num < 1:
        raise ValueError(f"temporal_shift: shift_ratio must be in (0, 0.5] and seg_num >= 1, "
                         f"got {shift_ratio}, {seg_num}")
    c, t = s[1], int(seg_num)
    c1, c2 = int(c * shift_ratio), int(c * shift_ratio) * 2
    x5 = reshape(x, [-1, t, c, s[2], s[3]])
    parts = []
    if c1 > 0:
        prev = slice(x5, axes=[1, 2], starts=[0, 0], ends=[t - 1, c1])
        parts.append(pad(prev, [0, 0, 1, 0, 0, 0, 0, 0, 0, 0]))
        nxt = slice(x5, axes=[1, 2], starts=[1, c1], ends=[t, c2])
        parts.append(pad(nxt, [0, 0, 0, 1, 0, 0, 0, 0, 0, 0]))
    parts.append(slice(x5, axes=[2], starts=[c2], ends=[c]))
    out = concat(parts, axis=2) if len(parts) > 1 else parts[0]
    return reshape(out, [-1, c, s[2], s[3]])


def merge_selected_rows(x: Variable, name: str | None = None) -> Variable:
    """A copy of ``x``: fluid-hw's gradients are dense, never SelectedRows, so there are
    no duplicate rows to merge."""
    return assign(x)


def get_tensor_from_selected_rows(x: Variable, name: str | None = None) -> Variable:
    """A copy of ``x``: fluid-hw's gradients are dense, never SelectedRows."""
    return assign(x)


def auc(input: Variable, label: Variable, curve: str = "ROC", num_thresholds: int = 4095,
        topk: int = 1, slide_steps: int = 1) -> tuple[Any, ...]:
    """The area under the ROC curve of ``input``'s positive-class probabilities
    (``input[:, -1]``) against ``label``: ``(auc, batch_auc, [batch_stat_pos,
    batch_stat_neg, stat_pos, stat_neg])`` -- auc over every batch run so far
    (statistics in persistable variables), batch_auc over this batch
    (``slide_steps=1``; longer windows are not supported)."""
    if curve != "ROC":
        raise ValueError(f"auc: only curve='ROC' is supported, got {curve!r}")
    if slide_steps != 1:
        raise ValueError(f"auc: slide_steps must be 1 (this batch) in fluid-hw, got "
                         f"{slide_steps}")
    helper = LayerHelper("auc")
    n = int(num_thresholds) + 1
    gb = helper.main_program.global_block()
    sb = helper.startup_program.global_block()
    stats = []
    for what in ("stat_pos", "stat_neg"):
        vname = unique_name.generate(f"auc_{what}")
        v = gb.create_var(name=vname, shape=[n], dtype="int64", persistable=True)
        Constant(0.0)(sb.create_var(name=vname, shape=[n], dtype="int64", persistable=True), sb)
        stats.append(v)
    batch = [fill_constant([n], "int64", 0) for _ in range(2)]
    outs = []
    for pos, neg in (stats, batch):
        a = _out(helper, "float64")
        helper.append_op("auc", {"Predict": input, "Label": label, "StatPos": pos,
                                 "StatNeg": neg},
                         {"AUC": a, "StatPosOut": pos, "StatNegOut": neg},
                         {"curve": curve, "num_thresholds": int(num_thresholds)})
        a.stop_gradient = True
        outs.append(a)
    return outs[0], outs[1], [batch[0], batch[1], stats[0], stats[1]]


def load(out: Variable, file_path: str, load_as_fp16: bool | None = None) -> None:
    """Fill ``out`` with the array in ``file_path`` (a ``.npy`` file as
    ``io.save_vars`` writes one per variable) when the program runs."""
    helper = LayerHelper("load")
    helper.append_op("load", {}, {"Out": out},
                     {"file_path": str(file_path), "load_as_fp16": bool(load_as_fp16)})
