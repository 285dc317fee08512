"""Kind ``recurrent``: ``quantized_fc`` (no requantiser: its int32 accumulator is the
cell's input) + ``quantized_lstm`` | ``quantized_gru`` | ``quantized_rnn`` (the plain
recurrence of a DynamicRNN body ``fc([x, h], act=...)``) [+ ``sequence_pool`` ``LAST``
(``sequence_last_step``; ``FIRST`` with ``is_reverse``)] as one stage
(:mod:`fluid_hw.rtl.recurrent`): a step a beat in, the last hidden state of each
sequence out (with the pool: mode ``"last"``) or every step's (mode ``"sequence"``).

Folding: PE divides the hidden size, SIMD both the input size and the hidden size (the
stage's ``fold_dims`` are ``(gcd(in_dim, D), D)`` so the balancer offers only those).
``cycles`` is one time step's (:func:`~fluid_hw.rtl.recurrent.recurrent_step_cycles`:
the matrix engine's ``groups * (in_dim + D) / SIMD`` cycles and drain (3 + its
registered adder-tree levels, ``max(1, ceil log2 SIMD)``), the element-wise
unit's ``D`` cycles and latency, per phase -- two for a GRU -- and the input and output
cycles; step t+1 starts after step t's ``h`` is written).  Refused, with the reason:
``H0`` / ``C0`` inputs, a ``Cell`` output read outside the stage, any pooling but the
step computed last (``LAST``; ``FIRST`` with ``is_reverse``, whose sequences the driver
streams last step first: host.json ``reverse_sequences``)."""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd
from typing import Any

import numpy as np

from fluid_hw.rtl.recurrent import (
    GATES,
    RecurrentParams,
    recurrent_step_cycles,
    state_read_split,
)
from fluid_hw.rtl.recurrent_spec import CELL_ATTRS, TABLES, RecurrentSpec

from ...ir.program import Operator, Program
from ..partition import LoweringError
from ..stage_info import Cursor, FixedPoint, LoweredStage, Values, layer_name, param_value
from ..stages import Resources, memory_resources
from ._base import StageKind
from .table import TABLE_BITS, TABLE_GENERIC, TABLE_LUT_FACTOR

CELLS = ("quantized_lstm", "quantized_gru", "quantized_rnn")

#: the element-wise unit's multipliers (ECP5 MULT18X18D): an int32 x 16-bit term two,
#: any narrower product one.  LSTM: 4 gates x 2 int32 terms, the cell's two products and
#: its two terms (f * c_prev 24 bits: two), tanh(c) and the hidden term one each, o *
#: tanh(c) one; peepholes add 3 products and 3 terms of 24 bits.  GRU: 3 gates x 2 int32
#: terms, r * h and its term, u * cand, (127 - u) * h and the hidden terms.  The plain
#: recurrence: its one gate's 2 int32 terms
ELEMENT_DSPS = {"lstm": 16 + 2 + 3 + 1 + 1 + 1, "lstm_peep": 24 + 3 + 6, "gru": 12 + 2 + 4,
                "rnn": 4}
#: flip-flops of the element-wise unit's pipeline (its registers: about 35 stages of
#: 40-100 bits); the GRU's fitted to Yosys (synth_ecp5, LFE5U-85F: 5289 flip-flops for
#: the GRU 4 -> 8 at PE 2 x SIMD 2 with an fc behind it and the board top, 1308 more
#: than the model gave with 1800), the LSTM's scaled from it (not measured)
ELEMENT_FF = {"gru": 3100, "lstm": 4130, "rnn": 620}
#: LUTs of a sum-requantiser term's alignment, adder and rounding (generic figure)
SRQ_TERM_LUT = 90
#: LUT4 of the element-wise unit beyond the calibrated per-PE and table shares (its sum
#: requantisers' alignment shifts, adders, roundings and clamps, the state's
#: multiplexers): the GRU's is the excess of Yosys (synth_ecp5, LFE5U-85F: 5948 LUT4
#: for the GRU 4 -> 8 at PE 2 x SIMD 2 with an fc behind it and the board top) over the
#: model without it (5712); the LSTM's is that scaled by its sum-requantiser terms (17
#: against 10; not measured)
ELEMENT_LUT = {"gru": 236, "lstm": 236 * 17 // 10, "rnn": 236 * 2 // 10}


def _readers(program: Program, var: str) -> list[Operator]:
    return [op for op in program.global_block().ops if var in op.input_arg_names]


def _cell_after(program: Program, fc: Operator) -> Operator | None:
    out = fc.output("Out")[0]
    for op in _readers(program, out):
        if op.type in CELLS and op.input("Input")[0] == out:
            return op
    return None


def _matches(program: Program, op: Operator) -> bool:
    """A ``quantized_fc`` feeding a recurrence, the recurrence itself, and a
    ``sequence_pool`` reading its hidden state (all parts of the one stage)."""
    if op.type == "quantized_fc":
        return _cell_after(program, op) is not None
    if op.type in CELLS:
        return True
    if op.type == "sequence_pool":
        x = op.input("X")[0]
        return any(p.type in CELLS and p.output("Hidden")[0] == x
                   for p in program.global_block().ops)
    return False


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    fc = b.ops[chain[k]]
    if fc.type != "quantized_fc":
        raise LoweringError(f"{fc.type} (-> {fc.output_arg_names}): a recurrence needs its "
                            "input projection (a quantized_fc) in the same accelerator region")
    if k + 1 >= len(chain) or b.ops[chain[k + 1]].type not in CELLS:
        raise LoweringError(f"quantized_fc (-> {fc.output('Out')[0]}): the recurrence reading "
                            "it must follow it in the accelerator region")
    cell_op = b.ops[chain[k + 1]]
    cell = cell_op.type.removeprefix("quantized_")
    hidden_var = cell_op.output("Hidden")[0]
    name = b.unique(layer_name(cell_op.input("Weight")[0], hidden_var))
    who = f"{cell_op.type} {name!r} (-> {hidden_var})"
    for slot in ("H0", "C0"):
        if cell_op.input(slot):
            raise LoweringError(f"{who}: an initial state ({slot}) is not supported by the "
                                "recurrent stage (its state starts at 0 for every sequence); "
                                f"drop {slot} from the model or keep the recurrence on the host "
                                "(QuantConfig(exclude=[...]))")
    # is_reverse: the driver streams each sequence's steps last first (host.json
    # ``reverse_sequences``) and puts a whole-sequence output back in program order
    reverse = bool(cell_op.attr("is_reverse"))
    if cell == "lstm":
        cvar = cell_op.output("Cell")[0]
        if _readers(b.program, cvar) or cvar in b.part.fetches:
            raise LoweringError(f"{who}: its Cell output {cvar!r} is read; the recurrent "
                                "stage streams the hidden state only")
    if int(np.prod(cur.shape)) != int(b.gb.var(fc.input("W")[0]).shape[0]):
        raise LoweringError(f"{who}: the projection reads {list(cur.shape)} values a step "
                            f"but its weights are {list(b.gb.var(fc.input('W')[0]).shape)}")
    b.check_int8(cur.var, fc)
    used = [chain[k], chain[k + 1]]
    mode, out = "sequence", hidden_var
    if k + 2 < len(chain) and b.ops[chain[k + 2]].type == "sequence_pool":
        pool = b.ops[chain[k + 2]]
        # the step computed last: the sequence's last (first with is_reverse)
        want = "FIRST" if reverse else "LAST"
        if pool.attr("pooltype") != want:
            hint = " (with is_reverse the state after the whole sequence is its first " \
                   "step: sequence_first_step)" if reverse and \
                pool.attr("pooltype") == "LAST" else ""
            raise LoweringError(f"sequence_pool ({pool.attr('pooltype')}, -> "
                                f"{pool.output('Out')[0]}) after {who}: the recurrent stage "
                                f"gives the step computed last ({want}) or the whole "
                                f"sequence{hint}; pool on the host")
        used.append(chain[k + 2])
        mode, out = "last", pool.output("Out")[0]
    if mode == "sequence" and k + 2 < len(chain):
        raise LoweringError(f"{who}: stages after a recurrence must read its last step "
                            "(sequence_last_step); the whole hidden sequence leaves the "
                            "accelerator")
    d = int(b.gb.var(cell_op.input("Weight")[0]).shape[0])
    in_dim = int(np.prod(cur.shape))
    scale = float(cell_op.attr("hidden_scale")) if cell_op.has_attr("hidden_scale") else 0.0
    out_fmt = FixedPoint(8, -128, 127, scale or None)
    peep = cell == "lstm" and bool(cell_op.attr("use_peepholes"))
    params = {"wx": fc.input("W")[0], "bias": (fc.input("Bias") or [None])[0],
              "wh": cell_op.input("Weight")[0], "gm": cell_op.input("GateMultiplier")[0],
              "gs": cell_op.input("GateShift")[0], "tables": cell_op.input("Tables")[0],
              "peephole": cell_op.input("Peephole")[0] if peep else None}
    layout = {"cell": cell, "mode": mode, "peepholes": peep, "reverse": reverse,
              "attrs": {a: cell_op.attr(a) for a in CELL_ATTRS[cell]}}
    st = LoweredStage(name, "recurrent", cell_op.type, used, cur.var, out, (in_dim,), (d,),
                      cur.fmt, out_fmt, np.arange(d), params, layout, {}, False, True,
                      col_perm=np.asarray(cur.perm), fold_dims=(gcd(in_dim, d), d))
    return st, len(used)


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> RecurrentSpec:
    lay = st.layout
    in_dim, d = st.in_shape[0], st.out_shape[0]
    if values is None:
        return RecurrentSpec(st.name, lay["cell"], in_dim, d, pe, simd, lay["mode"],
                             lay["peepholes"])
    if mode == "runtime":
        raise LoweringError(f"{st.op} {st.name!r}: the recurrent stage builds its weights in "
                            "(weights='const'); runtime weights are not supported for it")
    p = st.params

    def val(slot: str) -> np.ndarray:
        return np.asarray(param_value(values, p[slot]))  # type: ignore[arg-type]

    g = GATES[lay["cell"]]
    # stream position j carries input element col_perm[j]: the projection's row for it
    wx = val("wx")[st.col_perm] if st.col_perm is not None else val("wx")
    bias = val("bias").reshape(-1) if p.get("bias") else np.zeros(g * d, np.int64)
    arrays = RecurrentParams(wx=wx, bias=bias, wh=val("wh"), gm=val("gm"), gs=val("gs"),
                             tables=val("tables"),
                             peephole=val("peephole") if p.get("peephole") else None,
                             attrs=dict(lay["attrs"]))
    return RecurrentSpec(st.name, lay["cell"], in_dim, d, pe, simd, lay["mode"],
                         lay["peepholes"], arrays)


def _weight_words(s: RecurrentSpec) -> int:
    return GATES[s.cell] * s.hidden // s.pe * s.sf


def _memories(s: RecurrentSpec, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    """Weights per PE (ROM), the accumulators per gate and PE (x and h, RAM; one word
    deep, at PE = hidden size, they are registers: :func:`_accumulator_ff`), the
    per-column requantiser parameters per gate (ROM: bias, multipliers and shifts)."""
    g = GATES[s.cell]
    out = [(_weight_words(s), 8 * s.simd, "rom") for _ in range(s.pe)]
    if s.hidden // s.pe > 1:
        out += [(s.hidden // s.pe, 32, "ram") for _ in range(2 * g * s.pe)]
    terms = 3 if s.cell == "lstm" else 2
    out += [(s.hidden, 32 + 22 * terms, "rom") for _ in range(g)]
    return out


def _accumulator_ff(s: RecurrentSpec) -> int:
    """Flip-flops of the accumulators' read side: the element-wise unit's shift chain
    (32 bits per PE, per gate, x and h; none at PE 1) and, at one word per PE, the
    accumulator memories themselves (Yosys builds a one-word memory from flip-flops)."""
    per_acc = 32 * (s.pe if s.pe > 1 else 0) + (32 * s.pe if s.hidden // s.pe == 1 else 0)
    return 2 * GATES[s.cell] * per_acc


def _state_read_ff(s: RecurrentSpec) -> int:
    """The state reads' first multiplexer level (``rtl.recurrent.state_read_split``):
    a register per group, 16 bits (the LSTM's c; the GRU's h and u, 8 bits each)."""
    return 16 * state_read_split(s.hidden)[1]


def _dsps(s: RecurrentSpec) -> int:
    key = "lstm_peep" if s.peepholes else s.cell
    return s.pe * s.simd + ELEMENT_DSPS[key]


def _resources(s: RecurrentSpec, lanes: tuple[int, int]) -> Resources:
    tables = TABLES[s.cell]
    # h and c (LSTM) | h, r * h and u (GRU) | h (plain)
    state_ff = s.hidden * (8 if s.cell == "rnn" else 24)
    total = Resources(lut=TABLE_GENERIC.lut * tables + SRQ_TERM_LUT * 12 +
                      s.hidden * 8 * 2,  # the state's read / write multiplexers
                      ff=ELEMENT_FF[s.cell] + state_ff + 8 * s.in_dim +
                      s.pe * (s.simd * 32 + 64) + 8 * s.hidden +
                      # the adder tree's registers beyond the PE's sum (about 18 bits
                      # each) and the operand's shift register
                      s.pe * 18 * max(0, s.simd - 2) + 8 * (s.in_dim + s.hidden - s.simd) +
                      _accumulator_ff(s) + _state_read_ff(s),
                      dsp=_dsps(s))
    for depth, width, kind in _memories(s, lanes):
        total = total + memory_resources(depth, width, const=kind == "rom")
    return total


def _lut(s: RecurrentSpec, lanes: tuple[int, int], cal: Any) -> float:
    tables = TABLES[s.cell]
    return cal.per_pe * (s.pe + 4) + ELEMENT_LUT[s.cell] + \
        TABLE_LUT_FACTOR * cal.per_soft_rom * TABLE_BITS / 16 * tables


def _max_pe(s: RecurrentSpec) -> int:
    """Automatic folding's PE limit: the element-wise unit's accumulator chains (x and h,
    32 bits, per gate and PE: ``64 G PE`` flip-flops) up to 3,072 bits, PE 16 at most.
    Measured on the ECP5-85F (docs/recurrent.md): at PE 32 both full reference models
    left routing unfinished; the GRU (G 3) at 16 x 2 routes at 111.7 MHz, the plain
    recurrence (G 1) at 16 x 2 at 117.8 MHz, the LSTM (G 4) at 16 x 2 at 91.9 MHz
    (critical path through the element-wise unit's control, 7.4 of its 10.9 ns routing)
    but at 8 x 4 at 104.5 MHz; the LSTM at 8 x 8 (64 lanes: ``max_lanes``, 100
    MULT18X18Ds) did not finish routing."""
    return min(16, 48 // GATES[s.cell])


def _times(s: RecurrentSpec, lanes: tuple[int, int], t_in: np.ndarray) -> np.ndarray:
    return np.full(s.out_len, float(np.max(t_in)) + s.step_cycles())


KIND = StageKind(
    name="recurrent", spec=RecurrentSpec, report_op="quantized_lstm",
    matches=_matches, lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: recurrent_step_cycles(s.cell, s.in_dim, s.hidden, s.pe, s.simd,
                                                  s.peepholes),
    times=_times, resources=_resources, memories=_memories, lut=_lut,
    shape=lambda s: {"cell": s.cell, "in": s.in_dim, "hidden": s.hidden, "mode": s.mode},
    buffer=lambda s: s.in_len,
    max_pe=_max_pe,
    max_lanes=32,
    doc="quantised LSTM / GRU / plain recurrence with its input projection over streamed "
    "sequences",
)
