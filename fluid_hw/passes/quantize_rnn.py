"""The quantisation rule for recurrent cells (docs/fixed_point.md, "Recurrent cells").

An ``lstm`` (the ``dynamic_lstm`` layer, with or without peepholes) or ``gru``
(``dynamic_gru``) whose input is the output of an ``fc`` (the input projection, no
activation, read by nothing else) becomes

    quantized_fc (the projection; the recurrence's gate bias folded into its bias)
      -> int32 [T, gates * D] -> quantized_lstm / quantized_gru -> int8 hidden
                                                                 (int16 cell)

Scales (``range`` = the calibrated largest |value| over every time step of every
calibration batch):

* hidden state ``s_h = range(Hidden) / 127``, one scale for all time steps (it feeds
  back into the hidden-to-hidden product); the cell ``s_c = range(Cell) / 32767``
  (int16);
* weights per column (each gate unit): ``s_w[j] = max|W[:, j]| / 127`` for the
  projection and the hidden-to-hidden matrix; peephole weights per gate
  ``max|w| / 127``;
* each gate's table input ``s_g = min(range(pre-activation), sat) / 127``, where ``sat``
  is where the table's output has reached its rail (the float function at 126.75 / 127,
  the middle of the last output step: sigmoid ``ln(126.75 / 0.25)`` = 6.23, tanh
  ``atanh(126.75 / 127)`` = 3.40): a wider range would only spend table entries on
  saturated values.  Pre-activation ranges come from the float op's gate outputs (``BatchGate``)
  through the inverse activation (:class:`RecurrentObserver`); the cell's tanh table
  input ``min(range(Cell), sat_tanh) / 127``;
* gate outputs (table outputs) at ``1 / 127``: 127 is exactly 1.0 (a forget gate at
  1 keeps the cell unchanged);
* each term of a sum requantiser has its own multiplier and shift, chosen as for
  ``requantize`` (``quantize.requant_params``: full 15-bit precision); the terms are
  aligned by left shifts, so no term loses precision to another (:func:`term_params`).

Tables: ``Table[q + 128] = clamp(round_half_even(f(q * s_g) * 127), -128, 127)``, ``f``
in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import QuantizationError
from ..ir.ops.quant_rnn import GATE_ONE, RNN_ACTIVATIONS
from ..ir.program import Operator, Program, VarType
from ._graph import OpSpec, add_param
from .base import get_value
from .precision import acc_bits, int_range, max_abs

__all__ = ["RECURRENT_OPS", "RecurrentObserver", "RecurrentPlan", "term_params",
           "emit_recurrence", "gate_table", "plan_recurrence"]

#: float ops this module quantises, and the layer each one is
RECURRENT_OPS = {"lstm": "dynamic_lstm", "gru": "dynamic_gru",
                 "simple_rnn": "DynamicRNN fc recurrence"}
#: where a gate table's int8 output (scale 1/127) has reached its rail: the float
#: function is at 126.75 / 127, the middle of the last output step (beyond, nothing changes)
SIGMOID_SAT = math.log((GATE_ONE - 0.25) / 0.25)
TANH_SAT = math.atanh((GATE_ONE - 0.25) / GATE_ONE)
CELL_MAX = 2**15 - 1
_LSTM_GATES = (("candidate", "tanh"), ("input", "sigmoid"), ("forget", "sigmoid"),
               ("output", "sigmoid"))
_GRU_GATES = (("update", "sigmoid"), ("reset", "sigmoid"), ("candidate", "tanh"))
_LSTM_DEFAULTS = {"gate_activation": "sigmoid", "cell_activation": "tanh",
                  "candidate_activation": "tanh"}
_GRU_DEFAULTS = {"gate_activation": "sigmoid", "activation": "tanh"}
_FUNCS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "tanh": np.tanh}
_SAT = {"sigmoid": SIGMOID_SAT, "tanh": TANH_SAT}


class _Observer(Protocol):
    def update(self, a: np.ndarray) -> None: ...

    def value(self) -> float: ...


def _gates(op: Operator) -> tuple[tuple[str, str], ...]:
    if op.type == "simple_rnn":
        return (("candidate", op.attr("activation")),)
    return _LSTM_GATES if op.type == "lstm" else _GRU_GATES


def observed_gates(op: Operator) -> str:
    """The float output whose values give the gate pre-activations through the inverse
    activation: ``BatchGate`` (lstm, gru), ``Hidden`` (simple_rnn: its one table's)."""
    return op.output("Hidden" if op.type == "simple_rnn" else "BatchGate")[0]


def pre_key(batch_gate: str, gate: str) -> str:
    """The calibration key of a gate's pre-activation range."""
    return f"{batch_gate}@pre.{gate}"


def _inverse(g: np.ndarray, act: str) -> np.ndarray:
    """The pre-activation from a gate's output, clipped to the table's saturation point
    (beyond it the exact value does not matter)."""
    v = np.asarray(g, np.float64)
    sat = _SAT[act]
    with np.errstate(divide="ignore", invalid="ignore"):
        if act == "tanh":
            x = np.arctanh(np.clip(v, -1.0, 1.0))
        else:
            x = np.log(v) - np.log1p(-v)
    return np.clip(np.nan_to_num(x, nan=0.0, posinf=sat, neginf=-sat), -sat, sat)


class RecurrentObserver:
    """Observes each recurrence's gate pre-activations over all time steps (the
    quantisation pass's calibration observes Hidden and Cell like any value)."""

    def __init__(self, fp: Program, make: Callable[[], _Observer]) -> None:
        self.parts: list[tuple[str, int, int, str, str]] = []  # (BatchGate, k, D, key, act)
        self.obs: dict[str, _Observer] = {}
        block = fp.global_block()
        for op in block.ops:
            if op.type not in RECURRENT_OPS or not op.output(
                    "Hidden" if op.type == "simple_rnn" else "BatchGate"):
                continue
            w = block._find_var_recursive(op.input("Weight")[0])
            if w is None or len(w.shape) != 2 or w.shape[0] <= 0:
                continue
            bg = observed_gates(op)
            for k, (gate, act) in enumerate(_gates(op)):
                if act not in _SAT:  # relu: the table's input is at the hidden scale
                    continue
                key = pre_key(bg, gate)
                self.parts.append((bg, k, int(w.shape[0]), key, act))
                self.obs[key] = make()

    def names(self) -> list[str]:
        return sorted({p[0] for p in self.parts})

    def update(self, values: dict[str, np.ndarray]) -> None:
        for bg, k, d, key, act in self.parts:
            if bg in values:
                self.obs[key].update(_inverse(np.asarray(values[bg])[:, k * d:(k + 1) * d],
                                              act))

    def ranges(self) -> dict[str, float]:
        return {k: o.value() for k, o in self.obs.items()}


# -- integer helpers ---------------------------------------------------------------------

def term_params(multipliers: list[float], what: str) -> tuple[list[int], list[int]]:
    """``([m_j], [n_j])``: each term's multiplier and shift as ``requantize``'s
    (``m_j 2^-n_j ~ M_j``, ``m_j <= 2^15 - 1`` with the largest ``n_j <= 47``)."""
    from .quantize import requant_params

    try:
        pairs = [requant_params(float(v)) for v in multipliers]
    except QuantizationError as e:
        raise QuantizationError(f"{what}: {e}") from None
    return [m for m, _ in pairs], [n for _, n in pairs]


def gate_table(act: str, s_in: float) -> np.ndarray:
    """``Table[q + 128] = clamp(round_half_even(f(q * s_in) * 127), -128, 127)``."""
    x = np.arange(-128, 128, dtype=np.float64) * np.float64(s_in)
    return np.clip(np.rint(_FUNCS[act](x) * GATE_ONE), -128, 127).astype(np.int8)


def _per_column(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weights, float32 per-column scales max|W[:, j]| / 127)."""
    amax = np.max(np.abs(w), axis=0)
    whole = float(np.max(amax)) if amax.size else 0.0
    amax = np.where(amax > 0, amax, whole if whole > 0 else 127.0)
    s = np.asarray(amax / 127.0, np.float32)
    q = np.clip(np.rint(w / s.astype(np.float64)), -127, 127).astype(np.int8)
    return q, s


# -- planning ----------------------------------------------------------------------------

@dataclass
class RecurrentPlan:
    """An fc (the input projection) and the lstm / gru it feeds."""

    index: int        # the recurrence's op index
    fc_index: int     # the projection's op index
    op: Operator
    fc: Operator
    x: str            # the projection's float input
    wx: str           # the projection's weight
    bx: str | None    # the projection's bias


def _unsupported(qz: Any, op: Operator, why: str) -> QuantizationError:
    layer = RECURRENT_OPS[op.type]
    return QuantizationError(
        f"{layer} (op {op.type} -> {op.output('Hidden')[0]}) cannot be quantised: {why}. "
        f"The fixed-point {layer} (quantized_{op.type}, docs/fixed_point.md 'Recurrent "
        f"cells') supports {_supported(op.type)}. Keep it in float with QuantConfig("
        f"exclude=[{op.type!r}]) (or its output name {op.output('Hidden')[0]!r}), or "
        "QuantConfig(float_fallback=True)")


def _supported(op_type: str) -> str:
    if op_type == "simple_rnn":
        return ("activation tanh, sigmoid or relu, is_reverse either way, optional H0, with "
                "its input from an fc (no activation, 2-D input, read by nothing else)")
    acts = _LSTM_DEFAULTS if op_type == "lstm" else _GRU_DEFAULTS
    extra = "with or without peepholes, " if op_type == "lstm" else "origin_mode either way, "
    return (", ".join(f"{k}={v!r}" for k, v in acts.items()) + ", " + extra +
            "is_reverse either way, optional H0" + ("/C0" if op_type == "lstm" else "") +
            ", with its input from an fc (no activation, 2-D input, read by nothing else)")


def plan_recurrence(qz: Any, i: int) -> RecurrentPlan | None:
    """The plan for recurrence op ``i`` of the quantiser ``qz`` (a
    ``quantize._Quantizer``), None when it stays float; an unsupported configuration
    inside the quantised region raises, naming the op and the ways out."""
    op = qz.block.ops[i]
    if op.type not in RECURRENT_OPS or qz.excluded(op):
        return None
    x = op.input("Input")[0]
    prod = qz.graph.producers.get(x, [])
    fc = qz.block.ops[prod[0]] if len(prod) == 1 else None
    from_layer = fc is not None and fc.type in ("fc", "mul")
    strict = from_layer and not qz.cfg.float_fallback

    def refuse(why: str) -> None:
        if strict:
            raise _unsupported(qz, op, why)

    defaults = _LSTM_DEFAULTS if op.type == "lstm" else _GRU_DEFAULTS
    if op.type == "simple_rnn":
        defaults = {}
        if op.attr("activation") not in RNN_ACTIVATIONS:
            refuse(f"activation is {op.attr('activation')!r}, not one of {RNN_ACTIVATIONS}")
            return None
    for k, v in defaults.items():
        if op.attr(k) != v:
            refuse(f"{k} is {op.attr(k)!r}, not {v!r}: its gates are tabulated as "
                   f"{', '.join(f'{a}={b}' for a, b in defaults.items())}")
            return None
    if qz.abits != 8:
        refuse("the quantised program has 16-bit activations; the fixed-point cell is int8 "
               "(hidden state) and int16 (cell)")
        return None
    if not from_layer or fc is None:
        return None
    t = fc.type
    xin = fc.input("Input" if t == "fc" else "X")[0]
    w = fc.input("W" if t == "fc" else "Y")[0]
    b = next(iter(fc.input("Bias")), None) if t == "fc" else None
    ncol = fc.attr("in_num_col_dims" if t == "fc" else "x_num_col_dims")
    act = fc.attr("activation_type") if t == "fc" else ""
    xv, wv = qz.graph.var(xin), qz.graph.var(w)
    if act or ncol != 1 or (t == "mul" and fc.attr("y_num_col_dims") != 1):
        refuse(f"its input projection {t} (-> {x}) has activation {act!r} / num_col_dims "
               f"{ncol}; the projection must be a plain fc")
        return None
    if xv is None or xv.dtype != VarType.FP32 or len(xv.shape) != 2 or wv is None:
        refuse(f"its input projection {t} (-> {x}) must read a 2-D float32 value")
        return None
    if qz.graph.consumers.get(x, []) != [i] or not qz.graph.is_internal(x):
        refuse(f"the projection's output {x!r} is read by other ops too; the fixed-point "
               "cell takes the projection's int32 accumulator")
        return None
    params = [w, b, op.input("Weight")[0], *op.input("Bias")]
    if not all(qz._param(p) for p in params):
        refuse("its weights and biases must be constant parameters")
        return None
    return RecurrentPlan(i, prod[0], op, fc, xin, w, b)


# -- emission ----------------------------------------------------------------------------

def _initial(qz: Any, op: Operator, slot: str, scale: float, bits: int) -> list[str]:
    """The int8 / int16 initial state from the float ``slot`` (a quantize at the state's
    scale), or nothing."""
    if not op.input(slot):
        return []
    name = op.input(slot)[0]
    qz.float_of(name)
    q = qz.new_var(f"{name}.int{bits}", name, VarType.INT8 if bits == 8 else VarType.INT16)
    qz.items.append(OpSpec("quantize", {"X": [name]}, {"Out": [q]},
                           {"scale": float(scale), "bits": bits, "signed": True}))
    return [q]


def _gate_scale(qz: Any, plan: RecurrentPlan, gate: str, act: str) -> np.float32:
    amax = qz.ranges.get(pre_key(observed_gates(plan.op), gate), 0.0)
    amax = min(amax, _SAT[act]) if amax > 0 else _SAT[act]
    return np.float32(amax / 127.0)


def emit_recurrence(qz: Any, plan: RecurrentPlan) -> None:
    """Write the projection's ``quantized_fc`` and the ``quantized_lstm`` /
    ``quantized_gru`` into ``qz.items`` (the module docstring says how each number is
    chosen).  Every number is computed and checked before anything enters the scope."""
    if plan.op.type == "simple_rnn":
        from .quantize_rnn_simple import emit_simple_rnn

        emit_simple_rnn(qz, plan)
        return
    op, lstm = plan.op, plan.op.type == "lstm"
    hidden = op.output("Hidden")[0]
    ngates = 4 if lstm else 3
    wh = np.asarray(get_value(qz.scope, op.input("Weight")[0]), np.float64)
    d = wh.shape[0]
    cols = ngates * d
    proj = plan_projection(qz, plan, cols)
    s_acc, rb = proj.s_acc, proj.rec_bias
    # the recurrence
    whq, s_wh = _per_column(wh)
    s_h = np.float64(qz.scale_of(hidden))
    gates = _gates(op)
    s_g = [_gate_scale(qz, plan, g, a) for g, a in gates]
    tables = [gate_table(a, float(s)) for (_, a), s in zip(gates, s_g)]
    attrs: dict[str, Any] = {"is_reverse": op.attr("is_reverse"),
                             "in_scale": [float(v) for v in s_acc],
                             "hidden_scale": float(s_h),
                             "gate_scales": [float(v) for v in s_g]}
    one = 1.0 / GATE_ONE
    s_c = np.float64(1.0)
    s_wp = np.zeros(3)
    wpq = None
    if lstm:
        c_range = qz.ranges.get(op.output("Cell")[0], 0.0)
        s_c = np.float64(np.float32((c_range if c_range > 0 else 1.0) / CELL_MAX))
        if op.attr("use_peepholes"):
            wp = rb[4 * d:7 * d].reshape(3, d)
            amax = np.max(np.abs(wp), axis=1)
            s_wp = np.where(amax > 0, amax, 127.0) / 127.0
            wpq = np.clip(np.rint(wp / s_wp[:, None]), -127, 127).astype(np.int8)
        s_ct = np.float64(_cell_tanh_scale(qz, op))
        tables.append(gate_table("tanh", float(s_ct)))
        mc, nc = term_params([one, one * one / s_c], f"lstm -> {hidden}: the cell update")
        (mt,), (nt,) = term_params([float(s_c / s_ct)], f"lstm -> {hidden}: tanh(cell)")
        (mh,), (nh,) = term_params([float(one * one / s_h)], f"lstm -> {hidden}: the hidden "
                                   "state")
        attrs.update(use_peepholes=op.attr("use_peepholes"), cell_multipliers=mc,
                     cell_shifts=nc, cell_tanh_multiplier=mt, cell_tanh_shift=nt,
                     hidden_multiplier=mh, hidden_shift=nh, cell_scale=float(s_c))
    else:
        (mr,), (nr,) = term_params([one], f"gru -> {hidden}: r * h")
        mh2, nh2 = term_params([one * one / s_h, one], f"gru -> {hidden}: the hidden state")
        attrs.update(origin_mode=op.attr("origin_mode"), reset_multiplier=mr, reset_shift=nr,
                     hidden_multipliers=mh2, hidden_shifts=nh2)
    gm = np.zeros((3 if lstm else 2, cols), np.int32)
    gs = np.zeros((3 if lstm else 2, cols), np.int32)
    for j in range(cols):
        g = j // d
        sg = np.float64(s_g[g])
        terms = [s_acc[j] / sg, s_h * np.float64(s_wh[j]) / sg]
        if lstm:
            terms.append(s_c * s_wp[g - 1] / sg if g > 0 else 0.0)
        gm[:, j], gs[:, j] = term_params([float(v) for v in terms],
                                         f"{op.type} -> {hidden}, column {j}")
    # every check passed: the program's new values, ops and parameters
    def param(base: str, value: np.ndarray) -> list[str]:
        return [add_param(qz.block, qz.scope, base, value)]

    acc = emit_projection(qz, plan, proj)
    ins: dict[str, list[str]] = {"Input": [acc], "H0": _initial(qz, op, "H0", float(s_h), 8)}
    hq = qz.new_var(f"{hidden}.int8", hidden, VarType.INT8)
    outs: dict[str, list[str]] = {"Hidden": [hq]}
    if lstm:
        ins["C0"] = _initial(qz, op, "C0", float(s_c), 16)
        if wpq is not None:
            ins["Peephole"] = param(f"{hidden}.peephole.int8", wpq)
        cell = op.output("Cell")[0]
        cq = qz.new_var(f"{cell}.int16", cell, VarType.INT16)
        outs["Cell"] = [cq]
        qz.qvars[cell] = (cq, np.float32(s_c))
        qz.fmt[cell] = (16, "signed")
    ins["Weight"] = param(f"{op.input('Weight')[0]}.int8", whq)
    ins["GateMultiplier"] = param(f"{hidden}.gate_multiplier", gm)
    ins["GateShift"] = param(f"{hidden}.gate_shift", gs)
    ins["Tables"] = param(f"{hidden}.tables", np.stack(tables))
    qz.items.append(OpSpec(f"quantized_{op.type}", {k: v for k, v in ins.items() if v}, outs,
                           attrs))
    qz.qvars[hidden] = (hq, np.float32(s_h))
    qz.fmt[hidden] = (8, "signed")
    mark_replaced(qz, plan)


def mark_replaced(qz: Any, plan: RecurrentPlan) -> None:
    """The float values the recurrence's integer ops replace."""
    op = plan.op
    qz.replaced |= {plan.wx, op.input("Weight")[0], *op.input("Bias"),
                    *([plan.bx] if plan.bx else []), *plan.fc.output_arg_names,
                    *op.output_arg_names}


@dataclass
class Projection:
    """The input projection's integers (``quantized_fc`` with the recurrence's gate bias
    folded into its int32 bias), computed and checked before anything is emitted."""

    xq: str
    s_in: np.float32
    wxq: np.ndarray
    s_wx: np.ndarray
    bq: np.ndarray
    s_acc: np.ndarray       # float64 per column: s_in * s_wx[j]
    rec_bias: np.ndarray    # the recurrence's whole Bias (float64, flat; zeros without)
    acc_bits: int


def plan_projection(qz: Any, plan: RecurrentPlan, cols: int) -> Projection:
    op = plan.op
    hidden = op.output("Hidden")[0]
    rb = np.zeros(cols)
    if op.input("Bias"):
        rb = np.asarray(get_value(qz.scope, op.input("Bias")[0]), np.float64).reshape(-1)
    xq, s_in = qz.int_of(plan.x)
    x_lo, x_hi = int_range(*qz.fmt_of(plan.x))
    wx = np.asarray(get_value(qz.scope, plan.wx), np.float64)
    wxq, s_wx = _per_column(wx)
    bias = rb[:cols].copy()
    if plan.bx is not None:
        bias += np.asarray(get_value(qz.scope, plan.bx), np.float64).reshape(-1)
    s_acc = np.float64(s_in) * s_wx.astype(np.float64)
    bq = np.rint(bias / s_acc)
    k = wx.shape[0]
    bq_max = int(np.max(np.abs(bq)))
    bound = k * 127 * max_abs(x_lo, x_hi) + bq_max
    if bound >= 2**31:
        raise QuantizationError(
            f"{RECURRENT_OPS[op.type]} (-> {hidden}): its input projection's int32 "
            f"accumulator could reach {bound} (>= 2^31); exclude it: QuantConfig(exclude="
            f"[{op.type!r}])")
    return Projection(xq, s_in, wxq, s_wx, bq, s_acc, rb,
                      acc_bits((x_lo, x_hi), (-127, 127), k, bq_max))


def emit_projection(qz: Any, plan: RecurrentPlan, p: Projection) -> str:
    """The projection's ``quantized_fc`` into ``qz.items``; returns its int32 output."""
    hidden = plan.op.output("Hidden")[0]
    cols = p.wxq.shape[1]
    acc = qz.new_var(f"{plan.fc.output('Out')[0]}.acc", plan.x, VarType.INT32, [-1, cols])
    qz.items.append(OpSpec(
        "quantized_fc",
        {"X": [p.xq], "W": [add_param(qz.block, qz.scope, f"{plan.wx}.int8", p.wxq)],
         "Bias": [add_param(qz.block, qz.scope, f"{hidden}.proj_bias.int32",
                            p.bq.astype(np.int32))]},
        {"Out": [acc]},
        {"in_scale": float(p.s_in), "weight_scale": [float(v) for v in p.s_wx],
         "weight_bits": 8, "weight_type": "signed", "acc_bits": p.acc_bits}))
    return acc


def _cell_tanh_scale(qz: Any, op: Operator) -> np.float32:
    c_range = qz.ranges.get(op.output("Cell")[0], 0.0)
    return np.float32((min(c_range, TANH_SAT) if c_range > 0 else TANH_SAT) / 127.0)
