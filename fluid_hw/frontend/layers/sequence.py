"""Sequence layers: they take LoD tensors (a batch of variable-length sequences, no
padding) and the recurrent layers ``dynamic_lstm`` / ``dynamic_gru`` /
``lstm_unit`` / ``gru_unit``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ...ir import dtypes
from ...ir.ops.sequence import ACTIVATIONS, GRU_UNIT_ACTS, POOL_TYPES
from ...ir.program import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from .nn import fc
from .tensor import concat, fill_constant

__all__ = [
    "sequence_pool", "sequence_first_step", "sequence_last_step", "sequence_softmax",
    "sequence_expand", "sequence_concat", "sequence_reshape", "sequence_conv",
    "sequence_mask", "sequence_pad", "sequence_unpad", "lstm_unit", "gru_unit",
    "dynamic_lstm", "dynamic_gru",
]


def _lod_input(x: Variable, layer: str, name: str) -> None:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: input must be a Variable, got {type(x).__name__}")
    if x.lod_level < 1:
        raise ShapeError(f"layer {layer} {name!r}: input {x.name!r} has lod_level 0; it needs "
                         "a LoD tensor (declare the data with lod_level=1)")


def _param(helper: LayerHelper, attr: Any, shape: Sequence[int], dtype: Any,
           is_bias: bool = False) -> Variable:
    pa = ParamAttr.to_attr(attr)
    assert isinstance(pa, ParamAttr)
    return helper.create_parameter(pa, list(shape), dtype, is_bias=is_bias)


def sequence_pool(input: Variable, pool_type: str, is_test: bool = False,
                  pad_value: float = 0.0) -> Variable:
    """One row per sequence: ``sum``, ``average``, ``sqrt`` (sum / sqrt(length)),
    ``max``, ``first`` or ``last``; an empty sequence gives ``pad_value``."""
    helper = LayerHelper("sequence_pool")
    _lod_input(input, "sequence_pool", helper.name)
    kind = pool_type.upper()
    if kind not in POOL_TYPES:
        raise ShapeError(f"sequence_pool: pool_type {pool_type!r} is not one of "
                         f"{[p.lower() for p in POOL_TYPES]}")
    out = helper.create_variable_for_type_inference(input.dtype)
    index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("sequence_pool", {"X": input}, {"Out": out, "MaxIndex": index},
                     {"pooltype": kind, "is_test": is_test, "pad_value": float(pad_value)})
    return out


def sequence_first_step(input: Variable) -> Variable:
    """The first row of each sequence."""
    return sequence_pool(input, "first")


def sequence_last_step(input: Variable) -> Variable:
    """The last row of each sequence."""
    return sequence_pool(input, "last")


def _unary(op: str, x: Variable, attrs: dict[str, Any] | None = None,
           name: str | None = None) -> Variable:
    helper = LayerHelper(op, name=name)
    _lod_input(x, op, helper.name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op, {"X": x}, {"Out": out}, attrs)
    return out


def sequence_softmax(input: Variable, use_cudnn: bool = False,
                     name: str | None = None) -> Variable:
    """Softmax over the rows of each sequence (input [T, 1] or [T])."""
    return _unary("sequence_softmax", input, name=name)


def sequence_reshape(input: Variable, new_dim: int) -> Variable:
    """Each sequence re-cut into rows of ``new_dim`` values."""
    return _unary("sequence_reshape", input, {"new_dim": int(new_dim)})


def sequence_expand(x: Variable, y: Variable, ref_level: int = -1,
                    name: str | None = None) -> Variable:
    """Sequence i of ``x`` (row i when ``x`` has no LoD) repeated once per element of
    sequence i of ``y``'s LoD level ``ref_level``."""
    helper = LayerHelper("sequence_expand", name=name)
    _lod_input(y, "sequence_expand", helper.name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_expand", {"X": x, "Y": y}, {"Out": out},
                     {"ref_level": int(ref_level)})
    return out


def sequence_concat(input: Sequence[Variable], name: str | None = None) -> Variable:
    """Sequence i of the output is sequence i of each input, one after another."""
    helper = LayerHelper("sequence_concat", name=name)
    xs = list(input)
    for x in xs:
        _lod_input(x, "sequence_concat", helper.name)
    out = helper.create_variable_for_type_inference(helper.input_dtype(xs))
    helper.append_op("sequence_concat", {"X": xs}, {"Out": out})
    return out


def sequence_conv(input: Variable, num_filters: int, filter_size: int = 3,
                  filter_stride: int = 1, padding: bool = True,
                  padding_start: int | None = None, bias_attr: Any = None,
                  param_attr: Any = None, act: str | None = None,
                  name: str | None = None) -> Variable:
    """Convolution over time within each sequence: each row sees ``filter_size`` rows
    starting ``padding_start`` rows before it (default: centred); rows beyond a
    sequence's ends count as zeros."""
    helper = LayerHelper("sequence_conv", name=name)
    _lod_input(input, "sequence_conv", helper.name)
    if filter_stride != 1:
        raise ShapeError(f"layer sequence_conv {helper.name!r}: only filter_stride 1 is "
                         "supported")
    width = input.shape[-1]
    if width <= 0:
        raise ShapeError(f"layer sequence_conv {helper.name!r}: input {input.name!r} needs a "
                         f"known width, has shape {list(input.shape)}")
    start = -(filter_size // 2) if padding_start is None else int(padding_start)
    w = _param(helper, param_attr, [filter_size * width, num_filters], input.dtype)
    pre = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("sequence_conv", {"X": input, "Filter": w}, {"Out": pre},
                     {"contextLength": int(filter_size), "contextStart": start,
                      "contextStride": 1, "paddingTrainable": False})
    return helper.append_activation(helper.append_bias_op(pre, bias_attr), act)


def sequence_mask(x: Variable, maxlen: int | None = None, dtype: Any = "int64",
                  name: str | None = None) -> Variable:
    """``mask[..., j] = j < x[...]`` for integer lengths ``x`` (interop with padded data)."""
    helper = LayerHelper("sequence_mask", name=name)
    out = helper.create_variable_for_type_inference(dtypes.to_enum(dtype), stop_gradient=True)
    helper.append_op("sequence_mask", {"X": x}, {"Y": out},
                     {"maxlen": -1 if maxlen is None else int(maxlen),
                      "out_dtype": dtypes.to_enum(dtype)})
    return out


def sequence_pad(x: Variable, pad_value: Variable | float,
                 maxlen: int | None = None, name: str | None = None) -> tuple[Variable, Variable]:
    """(padded [N, maxlen, ...], lengths) of a LoD tensor — for interop only; the
    sequence ops and RNNs here never pad."""
    helper = LayerHelper("sequence_pad", name=name)
    _lod_input(x, "sequence_pad", helper.name)
    if not isinstance(pad_value, Variable):
        pad_value = fill_constant([1], x.dtype, float(pad_value))
    out = helper.create_variable_for_type_inference(x.dtype)
    length = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("sequence_pad", {"X": x, "PadValue": pad_value},
                     {"Out": out, "Length": length},
                     {"padded_length": -1 if maxlen is None else int(maxlen)})
    return out, length


def sequence_unpad(x: Variable, length: Variable, name: str | None = None) -> Variable:
    """The first ``length[i]`` rows of each ``x[i]``, as one LoD tensor."""
    helper = LayerHelper("sequence_unpad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("sequence_unpad", {"X": x, "Length": length}, {"Out": out})
    return out


# -- recurrent layers ----------------------------------------------------------------------

def _check_act(value: str, what: str, layer: str) -> str:
    if value not in ACTIVATIONS:
        raise ShapeError(f"{layer}: {what} {value!r} is not one of {list(ACTIVATIONS)}")
    return value


def lstm_unit(x_t: Variable, hidden_t_prev: Variable, cell_t_prev: Variable,
              forget_bias: float = 0.0, param_attr: Any = None, bias_attr: Any = None,
              name: str | None = None) -> tuple[Variable, Variable]:
    """One LSTM step: ``fc([x_t, h_prev]) -> [i, f, o, g]``, then the ``lstm_unit`` op.
    Returns ``(hidden, cell)``."""
    helper = LayerHelper("lstm_unit", name=name)
    size = cell_t_prev.shape[-1]
    if size <= 0:
        raise ShapeError(f"layer lstm_unit {helper.name!r}: cell_t_prev needs a known width")
    gates = fc(concat([x_t, hidden_t_prev], axis=1), size=4 * size, param_attr=param_attr,
               bias_attr=bias_attr)
    c = helper.create_variable_for_type_inference(x_t.dtype)
    h = helper.create_variable_for_type_inference(x_t.dtype)
    helper.append_op("lstm_unit", {"X": gates, "C_prev": cell_t_prev}, {"C": c, "H": h},
                     {"forget_bias": float(forget_bias)})
    return h, c


def gru_unit(input: Variable, hidden: Variable, size: int, param_attr: Any = None,
             bias_attr: Any = None, activation: str = "tanh",
             gate_activation: str = "sigmoid",
             origin_mode: bool = False) -> tuple[Variable, Variable, Variable]:
    """One GRU step on ``input`` [N, size] (already projected, size = 3 * D).
    Returns ``(hidden, reset_hidden_prev, gate)``."""
    helper = LayerHelper("gru_unit")
    if size % 3:
        raise ShapeError(f"layer gru_unit {helper.name!r}: size {size} must be 3 * hidden")
    codes = {v: k for k, v in GRU_UNIT_ACTS.items()}
    d = size // 3
    dtype = input.dtype
    w = _param(helper, param_attr, [d, 3 * d], dtype)
    ins: dict[str, Any] = {"Input": input, "HiddenPrev": hidden, "Weight": w}
    battr = ParamAttr.to_attr(bias_attr)
    if battr is not False:
        ins["Bias"] = _param(helper, battr, [1, 3 * d], dtype, is_bias=True)
    gate = helper.create_variable_for_type_inference(dtype)
    reset = helper.create_variable_for_type_inference(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("gru_unit", ins,
                     {"Gate": gate, "ResetHiddenPrev": reset, "Hidden": out},
                     {"activation": codes[_check_act(activation, "activation", "gru_unit")],
                      "gate_activation": codes[_check_act(gate_activation, "gate_activation",
                                                          "gru_unit")],
                      "origin_mode": bool(origin_mode)})
    return out, reset, gate


def dynamic_lstm(input: Variable, size: int, h_0: Variable | None = None,
                 c_0: Variable | None = None, param_attr: Any = None, bias_attr: Any = None,
                 use_peepholes: bool = True, is_reverse: bool = False,
                 gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                 candidate_activation: str = "tanh", dtype: Any = "float32",
                 name: str | None = None) -> tuple[Variable, Variable]:
    """LSTM over each sequence of ``input`` [T, size] (x already projected, size = 4 * D;
    gates [candidate, input, forget, output]).  Returns ``(hidden, cell)``, [T, D] with
    the input's LoD.  Time steps batch the active sequences: no padding."""
    helper = LayerHelper("lstm", name=name)
    _lod_input(input, "dynamic_lstm", helper.name)
    if size % 4:
        raise ShapeError(f"layer dynamic_lstm {helper.name!r}: size {size} must be 4 * hidden")
    d = size // 4
    dt = dtypes.to_enum(dtype)
    w = _param(helper, param_attr, [d, 4 * d], dt)
    b = _param(helper, bias_attr, [1, (7 if use_peepholes else 4) * d], dt, is_bias=True)
    ins: dict[str, Any] = {"Input": input, "Weight": w, "Bias": b}
    if h_0 is not None:
        ins["H0"] = h_0
    if c_0 is not None:
        ins["C0"] = c_0
    outs = {s: helper.create_variable_for_type_inference(dt)
            for s in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
    helper.append_op("lstm", ins, outs,
                     {"use_peepholes": use_peepholes, "is_reverse": is_reverse,
                      "gate_activation": _check_act(gate_activation, "gate_activation",
                                                    "dynamic_lstm"),
                      "cell_activation": _check_act(cell_activation, "cell_activation",
                                                    "dynamic_lstm"),
                      "candidate_activation": _check_act(candidate_activation,
                                                         "candidate_activation",
                                                         "dynamic_lstm")})
    return outs["Hidden"], outs["Cell"]


def dynamic_gru(input: Variable, size: int, param_attr: Any = None, bias_attr: Any = None,
                is_reverse: bool = False, gate_activation: str = "sigmoid",
                candidate_activation: str = "tanh", h_0: Variable | None = None,
                origin_mode: bool = False) -> Variable:
    """GRU over each sequence of ``input`` [T, 3 * size] (x already projected; gates
    [update, reset, candidate]).  Returns hidden [T, size] with the input's LoD."""
    helper = LayerHelper("gru")
    _lod_input(input, "dynamic_gru", helper.name)
    dtype = input.dtype
    w = _param(helper, param_attr, [size, 3 * size], dtype)
    ins: dict[str, Any] = {"Input": input, "Weight": w}
    battr = ParamAttr.to_attr(bias_attr)
    if battr is not False:
        ins["Bias"] = _param(helper, battr, [1, 3 * size], dtype, is_bias=True)
    if h_0 is not None:
        ins["H0"] = h_0
    outs = {s: helper.create_variable_for_type_inference(dtype)
            for s in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
    helper.append_op("gru", ins, outs,
                     {"activation": _check_act(candidate_activation, "candidate_activation",
                                               "dynamic_gru"),
                      "gate_activation": _check_act(gate_activation, "gate_activation",
                                                    "dynamic_gru"),
                      "is_reverse": is_reverse, "origin_mode": origin_mode})
    return outs["Hidden"]
