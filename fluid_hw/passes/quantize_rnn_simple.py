"""The quantisation rule for a plain recurrence, ``simple_rnn`` (the whole-sequence form
of a DynamicRNN body ``fc([x, h_prev], act=tanh | sigmoid | relu)``:
passes/quantize_rnn_loop.py), docs/fixed_point.md "Plain recurrences":

    quantized_fc (the projection, the recurrence's bias folded in) -> int32 [T, D]
      -> quantized_rnn -> int8 hidden

Scales: the hidden state ``s_h = range(Hidden) / 127`` (all time steps); the hidden-to-
hidden weights per column ``max|U[:, j]| / 127``; the table's input ``s_z``: tanh and
sigmoid ``min(range(pre-activation), sat) / 127`` (the pre-activation observed from
``Hidden`` through the inverse activation, ``sat`` as for the gate tables), relu
``s_z = s_h`` (its positive side is the hidden state itself; the table is then the
identity on ``[0, 127]`` and 0 below).  Table: ``T[q + 128] = clamp(round_half_even(
f(q s_z) / s_h), -128, 127)``, ``f`` in float64: the activation straight to the hidden
state's integers.  Sum requantiser terms ``s_in s_wx[j] / s_z`` and ``s_h s_wh[j] / s_z``
(each its own multiplier and shift, :func:`~.quantize_rnn.term_params`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.program import VarType
from ._graph import OpSpec, add_param
from .base import get_value
from .quantize_rnn import (
    _FUNCS,
    RecurrentPlan,
    _gate_scale,
    _initial,
    _per_column,
    emit_projection,
    mark_replaced,
    plan_projection,
    term_params,
)

__all__ = ["emit_simple_rnn", "rnn_table"]

_F = {**_FUNCS, "relu": lambda x: np.maximum(x, 0.0)}


def rnn_table(act: str, s_z: float, s_h: float) -> np.ndarray:
    """``T[q + 128] = clamp(round_half_even(f(q s_z) / s_h), -128, 127)``."""
    x = np.arange(-128, 128, dtype=np.float64) * np.float64(s_z)
    return np.clip(np.rint(_F[act](x) / np.float64(s_h)), -128, 127).astype(np.int8)


def emit_simple_rnn(qz: Any, plan: RecurrentPlan) -> None:
    """Write the projection's ``quantized_fc`` and the ``quantized_rnn`` into
    ``qz.items`` (the module docstring says how each number is chosen)."""
    op = plan.op
    hidden = op.output("Hidden")[0]
    act = op.attr("activation")
    wh = np.asarray(get_value(qz.scope, op.input("Weight")[0]), np.float64)
    d = wh.shape[0]
    proj = plan_projection(qz, plan, d)
    whq, s_wh = _per_column(wh)
    s_h = np.float64(qz.scale_of(hidden))
    s_z = np.float64(np.float32(s_h)) if act == "relu" else \
        np.float64(_gate_scale(qz, plan, "candidate", act))
    table = rnn_table(act, float(s_z), float(s_h))
    gm = np.zeros((2, d), np.int32)
    gs = np.zeros((2, d), np.int32)
    for j in range(d):
        terms = [proj.s_acc[j] / s_z, s_h * np.float64(s_wh[j]) / s_z]
        gm[:, j], gs[:, j] = term_params([float(v) for v in terms],
                                         f"simple_rnn -> {hidden}, column {j}")
    # every check passed: the program's new values, ops and parameters
    acc = emit_projection(qz, plan, proj)
    ins: dict[str, list[str]] = {"Input": [acc], "H0": _initial(qz, op, "H0", float(s_h), 8)}
    for slot, base, value in (("Weight", f"{op.input('Weight')[0]}.int8", whq),
                              ("GateMultiplier", f"{hidden}.gate_multiplier", gm),
                              ("GateShift", f"{hidden}.gate_shift", gs),
                              ("Tables", f"{hidden}.tables", table.reshape(1, 256))):
        ins[slot] = [add_param(qz.block, qz.scope, base, value)]
    hq = qz.new_var(f"{hidden}.int8", hidden, VarType.INT8)
    qz.items.append(OpSpec(
        "quantized_rnn", {k: v for k, v in ins.items() if v}, {"Hidden": [hq]},
        {"is_reverse": op.attr("is_reverse"), "activation": act,
         "in_scale": [float(v) for v in proj.s_acc], "hidden_scale": float(s_h),
         "gate_scales": [float(s_z)]}))
    qz.qvars[hidden] = (hq, np.float32(s_h))
    qz.fmt[hidden] = (8, "signed")
    mark_replaced(qz, plan)
