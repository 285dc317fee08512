"""Fixed-point recurrent cells: ``quantized_lstm`` and ``quantized_gru``, the golden
model of ``dynamic_lstm`` / ``dynamic_gru`` (Fluid's ``lstm`` / ``gru`` ops) that FPGA
hardware must match bit for bit, ``quantized_rnn`` (a plain ``fc`` + activation
recurrence, from the float ``simple_rnn`` the quantiser makes of a DynamicRNN / StaticRNN
loop), and the one-step forms ``quantized_lstm_unit`` /
``quantized_gru_unit`` (Fluid's ``lstm_unit`` / ``gru_unit``).  docs/fixed_point.md,
"Recurrent cells", is the contract; this docstring states the same arithmetic.

Every step is one of four hardware primitives: int8 x int8 products summed in an
int32 accumulator (the hidden-to-hidden matrix-vector product), a *sum requantiser*,
a 256-entry int8 table, and element-wise int8 / int16 products.

Sum requantiser (``quantized_add``'s contract, for any number of terms): integer
products ``p_j``, each with a multiplier ``m_j`` in ``[0, 2^15 - 1]`` and a shift ``n_j``
in ``[0, 47]`` (``p_j`` real scale over the output's ~ ``m_j 2^-n_j``); ``n = max_j
n_j``::

    SRQ([(p_j, m_j, n_j)]; lo, hi) = clamp((sum_j p_j * m_j * 2^(n - n_j) + R(n)) >> n,
                                           lo, hi)
    R(n) = 2^(n-1) if n > 0 else 0      (>> arithmetic: round half up, toward +inf)

exact (no intermediate rounding: each term is aligned by a left shift).

Gate tables output integers at scale 1/127 (the integer 127 stands for 1.0).

``quantized_lstm`` (gates ``[candidate, input, forget, output]``, column ``j`` of
gate ``k = j // D``, unit ``d = j % D``).  Per sequence, ``h`` (int8) and ``c``
(int16) start as the sequence's row of ``H0`` / ``C0`` (zero without them); each time
step (last row first with ``is_reverse``) with ``x`` the step's row of Input (int32)::

    a[j]  = sum_e h[e] * Weight[e, j]                               (int32)
    z[j]  = SRQ([(x[j], GM[0, j], GS[0, j]), (a[j], GM[1, j], GS[1, j]),
                 (pp[j], GM[2, j], GS[2, j])]; -128, 127)
            (GM, GS = GateMultiplier, GateShift); pp = c_prev[d] * Peephole[0, d]
            (input gate), c_prev[d] * Peephole[1, d] (forget gate), c_new[d] *
            Peephole[2, d] (output gate, after c_new), 0 for the candidate or without
            peepholes
    g = Tables[0][z_g + 128], i = Tables[1][z_i + 128], f = Tables[2][z_f + 128]
    c_new = SRQ([(f * c_prev, cell_multipliers[0], cell_shifts[0]),
                 (i * g, cell_multipliers[1], cell_shifts[1])]; -32768, 32767)
    o = Tables[3][z_o + 128]
    u = SRQ([(c_new, cell_tanh_multiplier, cell_tanh_shift)]; -128, 127)
    h_new = SRQ([(o * Tables[4][u + 128], hidden_multiplier, hidden_shift)]; -128, 127)

``quantized_gru`` (gates ``[update, reset, candidate]``)::

    a[j]  = sum_e h[e] * Weight[e, j]                     (j < 2D)
    z[j]  = SRQ([(x[j], GM[0, j], GS[0, j]), (a[j], GM[1, j], GS[1, j])]; -128, 127)
    u = Tables[0][z_u + 128], r = Tables[1][z_r + 128]
    rh = SRQ([(r * h, reset_multiplier, reset_shift)]; -128, 127)
    a_c[d] = sum_e rh[e] * Weight[e, 2D + d]
    z_c = SRQ([(x[2D + d], GM[0, 2D + d], GS[0, 2D + d]), (a_c[d], GM[1, 2D + d],
               GS[1, 2D + d])]; -128, 127)
    cand = Tables[2][z_c + 128]
    h_new = SRQ([(u * cand, hm[0], hs[0]), ((127 - u) * h, hm[1], hs[1])]; -128, 127)
            (hm, hs = hidden_multipliers, hidden_shifts; origin_mode: (127 - u) * cand
            and u * h)

``quantized_gru_unit`` is one such step: Input [N, 3D], HiddenPrev int8 [N, D] -> Hidden
(Fluid's ``gru_unit``, a DynamicRNN body's cell).  ``quantized_lstm_unit`` is one step of
Fluid's ``lstm_unit`` (gates ``[input, forget, output, candidate]``, X the int32
accumulator of the fc over ``[x, h_prev]``, which holds the hidden product already; no
peepholes; ``forget_bias`` folded into that fc's bias)::

    z[j] = SRQ([(X[j], GM[0, j], GS[0, j])]; -128, 127)
    i, f, o, g = Tables[0..3][z + 128] of the gate's columns
    C = SRQ([(f * C_prev, ..), (i * g, ..)]; -32768, 32767)       (as quantized_lstm)
    H = SRQ([(o * Tables[4][SRQ([(C, cell_tanh_multiplier, cell_tanh_shift)]) + 128],
              hidden_multiplier, hidden_shift)]; -128, 127)

``quantized_rnn`` (a plain recurrence ``h_t = act(x_t W_x + h_{t-1} U + b)``, the
DynamicRNN / StaticRNN body ``fc([x, h_prev], act=tanh | sigmoid | relu)``)::

    a[j]  = sum_e h[e] * Weight[e, j]
    z[j]  = SRQ([(x[j], GM[0, j], GS[0, j]), (a[j], GM[1, j], GS[1, j])]; -128, 127)
    h_new[j] = Tables[0][z[j] + 128]

its one table maps the int8 pre-activation straight to the int8 hidden state (the
activation's output at the hidden state's scale, not at ``1/127``).

Input is the int32 accumulator of the input projection (``quantized_fc`` of the fc
before the recurrence, with the recurrence's gate bias folded into its bias).
"""

from __future__ import annotations

from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim
from .quant import MULTIPLIER_MAX, SHIFT_MAX

VarType = dtypes.VarType

#: the integer that stands for 1.0 at a gate table's output (scale 1/127)
GATE_ONE = 127
#: Tables rows of quantized_lstm / quantized_gru
LSTM_TABLES = ("candidate", "input", "forget", "output", "cell")
LSTM_UNIT_TABLES = ("input", "forget", "output", "candidate", "cell")
GRU_TABLES = ("update", "reset", "candidate")

_INFO = (Attr("in_scale", "floats", [], doc="informational: Input's scale per column"),
         Attr("hidden_scale", "float", 0.0, doc="informational: Hidden's scale"),
         Attr("gate_scales", "floats", [],
              doc="informational: each gate table's input scale"))


def _dtype(ctx: InferContext, slot: str, want: int) -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype == want, f"{slot} {v.name!r} must be {dtypes.name(want)}, got "
              f"{v.dtype_name}")


def _shape(ctx: InferContext, slot: str, want: list[int]) -> None:
    s = ctx.input_shape(slot)
    ctx.check(len(s) == len(want) and all(merge_dim(a, b) is not None
                                          for a, b in zip(s, want)),
              f"{slot} must have shape {want}, got {s}")


def _check_pair(ctx: InferContext, m_attr: str, n_attr: str, count: int) -> None:
    for a, hi in ((m_attr, MULTIPLIER_MAX), (n_attr, SHIFT_MAX)):
        vs = ctx.attr(a)
        vs = vs if isinstance(vs, list) else [vs]
        ctx.check(len(vs) == count, f"{a} needs {count} value(s), has {len(vs)}")
        ctx.check(all(0 <= v <= hi for v in vs), f"{a} {vs} must lie in [0, {hi}]")


def _common(ctx: InferContext, gates: int, terms: int) -> tuple[int, int]:
    """Check Input / Weight / H0 / the gate requantisers and tables; (D, LoD level)."""
    x = ctx.input_var("Input")
    ctx.check(x.lod_level > 0, f"Input {x.name!r} has lod_level 0; {ctx.op.type} needs a "
              "LoD tensor (a batch of sequences)")
    _dtype(ctx, "Input", VarType.INT32)
    _dtype(ctx, "Weight", VarType.INT8)
    w = ctx.input_shape("Weight")
    ctx.check(len(w) == 2 and w[1] in (-1, gates * w[0]),
              f"Weight must be [D, {gates}D], is {w}")
    d = w[0]
    xs = ctx.input_shape("Input")
    ctx.check(len(xs) == 2 and (xs[1] == -1 or d == -1 or xs[1] == gates * d),
              f"Input must be [T, {gates}D] with D = {d}, is {xs}")
    if ctx.has_input("H0"):
        _dtype(ctx, "H0", VarType.INT8)
        _shape(ctx, "H0", [-1, d])
    _dtype(ctx, "GateMultiplier", VarType.INT32)
    _shape(ctx, "GateMultiplier", [terms, gates * d])
    _dtype(ctx, "GateShift", VarType.INT32)
    _shape(ctx, "GateShift", [terms, gates * d])
    _dtype(ctx, "Tables", VarType.INT8)
    return d, x.lod_level


_CELL_ATTRS = (
    Attr("cell_multipliers", "ints", doc="[f * c_prev term, i * g term]", min=0,
         max=MULTIPLIER_MAX),
    Attr("cell_shifts", "ints", doc="their shifts", min=0, max=SHIFT_MAX),
    Attr("cell_tanh_multiplier", "int", doc="the cell (int16) to the cell table's int8 "
         "input", min=0, max=MULTIPLIER_MAX),
    Attr("cell_tanh_shift", "int", min=0, max=SHIFT_MAX),
    Attr("hidden_multiplier", "int", doc="o * tanh(c) to the hidden state", min=0,
         max=MULTIPLIER_MAX),
    Attr("hidden_shift", "int", min=0, max=SHIFT_MAX))


def _check_cell_attrs(ctx: InferContext) -> None:
    _check_pair(ctx, "cell_multipliers", "cell_shifts", 2)
    _check_pair(ctx, "cell_tanh_multiplier", "cell_tanh_shift", 1)
    _check_pair(ctx, "hidden_multiplier", "hidden_shift", 1)


@define_op(
    "quantized_lstm",
    [Slot("Input", doc="int32 [T, 4D] (LoD): the input projection's accumulator, gates "
          "[candidate, input, forget, output]"),
     Slot("H0", dispensable=True, doc="int8 [N, D]: each sequence's initial hidden state"),
     Slot("C0", dispensable=True, doc="int16 [N, D]: each sequence's initial cell state"),
     Slot("Weight", doc="int8 [D, 4D]: hidden-to-hidden weights"),
     Slot("Peephole", dispensable=True, doc="int8 [3, D]: input, forget, output gate "
          "peephole weights (use_peepholes)"),
     Slot("GateMultiplier", doc="int32 [3, 4D]: the Input, hidden-product and peephole "
          "terms' multipliers of each column's sum requantiser"),
     Slot("GateShift", doc="int32 [3, 4D]: those terms' shifts"),
     Slot("Tables", doc="int8 [5, 256]: candidate (tanh), input, forget, output "
          "(sigmoid), cell (tanh)")],
    [Slot("Hidden", doc="int8 [T, D], Input's LoD"),
     Slot("Cell", doc="int16 [T, D], Input's LoD")],
    [Attr("use_peepholes", "bool", True), Attr("is_reverse", "bool", False),
     *_CELL_ATTRS,
     *_INFO,
     Attr("cell_scale", "float", 0.0, doc="informational: Cell's scale")],
    doc="An LSTM over each sequence of Input in integers: int8 hidden state, int16 cell, "
    "int32 gate accumulators, sum requantisers and 256-entry tables (see the module "
    "docstring and docs/fixed_point.md, 'Recurrent cells').",
)
def _infer_quantized_lstm(ctx: InferContext) -> None:
    d, lvl = _common(ctx, 4, 3)
    _shape(ctx, "Tables", [len(LSTM_TABLES), 256])
    if ctx.has_input("C0"):
        _dtype(ctx, "C0", VarType.INT16)
        _shape(ctx, "C0", [-1, d])
    if ctx.attr("use_peepholes"):
        ctx.check(ctx.has_input("Peephole"), "use_peepholes needs the Peephole input "
                  "(int8 [3, D])")
        _dtype(ctx, "Peephole", VarType.INT8)
        _shape(ctx, "Peephole", [3, d])
    _check_cell_attrs(ctx)
    ctx.set_output("Hidden", [-1, d], VarType.INT8, lod_level=lvl)
    ctx.set_output("Cell", [-1, d], VarType.INT16, lod_level=lvl)


@define_op(
    "quantized_gru",
    [Slot("Input", doc="int32 [T, 3D] (LoD): the input projection's accumulator, gates "
          "[update, reset, candidate]"),
     Slot("H0", dispensable=True, doc="int8 [N, D]: each sequence's initial hidden state"),
     Slot("Weight", doc="int8 [D, 3D]: hidden-to-hidden weights ([:, 2D:] read r * h)"),
     Slot("GateMultiplier", doc="int32 [2, 3D]: the Input and hidden-product terms' "
          "multipliers of each column's sum requantiser"),
     Slot("GateShift", doc="int32 [2, 3D]: those terms' shifts"),
     Slot("Tables", doc="int8 [3, 256]: update, reset (sigmoid), candidate (tanh)")],
    [Slot("Hidden", doc="int8 [T, D], Input's LoD")],
    [Attr("is_reverse", "bool", False), Attr("origin_mode", "bool", False),
     Attr("reset_multiplier", "int", doc="r * h to the int8 reset hidden state", min=0,
          max=MULTIPLIER_MAX),
     Attr("reset_shift", "int", min=0, max=SHIFT_MAX),
     Attr("hidden_multipliers", "ints", doc="[u * candidate term, (127 - u) * h term] "
          "(origin_mode: [(127 - u) * candidate, u * h])", min=0, max=MULTIPLIER_MAX),
     Attr("hidden_shifts", "ints", doc="their shifts", min=0, max=SHIFT_MAX),
     *_INFO],
    doc="A GRU over each sequence of Input in integers: int8 hidden state, int32 gate "
    "accumulators, sum requantisers and 256-entry tables (see the module docstring and "
    "docs/fixed_point.md, 'Recurrent cells').",
)
def _infer_quantized_gru(ctx: InferContext) -> None:
    d, lvl = _common(ctx, 3, 2)
    _shape(ctx, "Tables", [len(GRU_TABLES), 256])
    _check_pair(ctx, "reset_multiplier", "reset_shift", 1)
    _check_pair(ctx, "hidden_multipliers", "hidden_shifts", 2)
    ctx.set_output("Hidden", [-1, d], VarType.INT8, lod_level=lvl)


def _unit_state(ctx: InferContext, slot: str, dtype: int, width: int) -> list[int]:
    _dtype(ctx, slot, dtype)
    s = ctx.input_shape(slot)
    ctx.check(len(s) == 2, f"{slot} must be [N, D], is {s}")
    xs = ctx.input_shape("X" if ctx.op.type == "quantized_lstm_unit" else "Input")
    ctx.check(len(xs) == 2 and (xs[1] == -1 or s[1] == -1 or xs[1] == width * s[1]),
              f"the gates must be [N, {width} * D] with D = {s[1]}, are {xs}")
    return list(s)


@define_op(
    "quantized_lstm_unit",
    [Slot("X", doc="int32 [N, 4D]: the accumulator of the fc over [x, h_prev], gates "
          "[input, forget, output, candidate]"),
     Slot("C_prev", doc="int16 [N, D]"),
     Slot("GateMultiplier", doc="int32 [1, 4D]"), Slot("GateShift", doc="int32 [1, 4D]"),
     Slot("Tables", doc="int8 [5, 256]: input, forget, output (sigmoid), candidate, cell "
          "(tanh)")],
    [Slot("C", doc="int16 [N, D]"), Slot("H", doc="int8 [N, D]")],
    [*_CELL_ATTRS, *_INFO, Attr("cell_scale", "float", 0.0, doc="informational")],
    doc="One LSTM step in integers (Fluid's lstm_unit): see the module docstring.",
)
def _infer_quantized_lstm_unit(ctx: InferContext) -> None:
    _dtype(ctx, "X", VarType.INT32)
    c = _unit_state(ctx, "C_prev", VarType.INT16, 4)
    _dtype(ctx, "GateMultiplier", VarType.INT32)
    _shape(ctx, "GateMultiplier", [1, 4 * c[1] if c[1] > 0 else -1])
    _dtype(ctx, "GateShift", VarType.INT32)
    _shape(ctx, "GateShift", [1, 4 * c[1] if c[1] > 0 else -1])
    _dtype(ctx, "Tables", VarType.INT8)
    _shape(ctx, "Tables", [len(LSTM_UNIT_TABLES), 256])
    _check_cell_attrs(ctx)
    ctx.set_output("C", c, VarType.INT16)
    ctx.set_output("H", c, VarType.INT8)


@define_op(
    "quantized_gru_unit",
    [Slot("Input", doc="int32 [N, 3D]: the projection's accumulator, gates [update, reset, "
          "candidate]"),
     Slot("HiddenPrev", doc="int8 [N, D]"), Slot("Weight", doc="int8 [D, 3D]"),
     Slot("GateMultiplier", doc="int32 [2, 3D]"), Slot("GateShift", doc="int32 [2, 3D]"),
     Slot("Tables", doc="int8 [3, 256]: update, reset (sigmoid), candidate (tanh)")],
    [Slot("Hidden", doc="int8 [N, D]")],
    [Attr("origin_mode", "bool", False),
     Attr("reset_multiplier", "int", min=0, max=MULTIPLIER_MAX),
     Attr("reset_shift", "int", min=0, max=SHIFT_MAX),
     Attr("hidden_multipliers", "ints", min=0, max=MULTIPLIER_MAX),
     Attr("hidden_shifts", "ints", min=0, max=SHIFT_MAX), *_INFO],
    doc="One GRU step in integers (Fluid's gru_unit): one step of quantized_gru from "
    "HiddenPrev.",
)
def _infer_quantized_gru_unit(ctx: InferContext) -> None:
    _dtype(ctx, "Input", VarType.INT32)
    h = _unit_state(ctx, "HiddenPrev", VarType.INT8, 3)
    d = h[1]
    _dtype(ctx, "Weight", VarType.INT8)
    _shape(ctx, "Weight", [d, 3 * d if d > 0 else -1])
    for slot in ("GateMultiplier", "GateShift"):
        _dtype(ctx, slot, VarType.INT32)
        _shape(ctx, slot, [2, 3 * d if d > 0 else -1])
    _dtype(ctx, "Tables", VarType.INT8)
    _shape(ctx, "Tables", [len(GRU_TABLES), 256])
    _check_pair(ctx, "reset_multiplier", "reset_shift", 1)
    _check_pair(ctx, "hidden_multipliers", "hidden_shifts", 2)
    ctx.set_output("Hidden", h, VarType.INT8)


#: activations of simple_rnn / quantized_rnn (a plain fc + activation recurrence)
RNN_ACTIVATIONS = ("tanh", "sigmoid", "relu")


@define_op(
    "simple_rnn",
    [Slot("Input", doc="float [T, D] (LoD): the projected input x W_x + b_x"),
     Slot("H0", dispensable=True, doc="float [N, D]: each sequence's initial hidden state"),
     Slot("Weight", doc="float [D, D]: hidden-to-hidden weights U"),
     Slot("Bias", dispensable=True, doc="float [1, D]")],
    [Slot("Hidden", doc="float [T, D], Input's LoD")],
    [Attr("activation", "string", "tanh", allowed=RNN_ACTIVATIONS),
     Attr("is_reverse", "bool", False)],
    doc="A plain recurrence over each sequence of Input: h_t = act(Input_t + h_{t-1} U + "
    "b), h starting at H0 (or 0).  The whole-sequence form of a DynamicRNN / StaticRNN "
    "body fc([x, h_prev], act=...), made by the quantiser's loop rewrite "
    "(passes/quantize_rnn_loop.py) so that calibration sees every time step; its "
    "fixed-point form is quantized_rnn.",
)
def _infer_simple_rnn(ctx: InferContext) -> None:
    x = ctx.input_var("Input")
    ctx.check(x.lod_level > 0, f"Input {x.name!r} has lod_level 0; simple_rnn needs a LoD "
              "tensor (a batch of sequences)")
    w = ctx.input_shape("Weight")
    ctx.check(len(w) == 2 and w[1] in (-1, w[0]), f"Weight must be [D, D], is {w}")
    d = w[0]
    xs = ctx.input_shape("Input")
    ctx.check(len(xs) == 2 and (xs[1] == -1 or d == -1 or xs[1] == d),
              f"Input must be [T, {d}], is {xs}")
    if ctx.has_input("Bias"):
        _shape(ctx, "Bias", [1, d])
    if ctx.has_input("H0"):
        _shape(ctx, "H0", [-1, d])
    ctx.set_output("Hidden", [-1, d], x.dtype, lod_level=x.lod_level)


@define_op(
    "quantized_rnn",
    [Slot("Input", doc="int32 [T, D] (LoD): the input projection's accumulator"),
     Slot("H0", dispensable=True, doc="int8 [N, D]: each sequence's initial hidden state"),
     Slot("Weight", doc="int8 [D, D]: hidden-to-hidden weights"),
     Slot("GateMultiplier", doc="int32 [2, D]: the Input and hidden-product terms' "
          "multipliers of each column's sum requantiser"),
     Slot("GateShift", doc="int32 [2, D]: those terms' shifts"),
     Slot("Tables", doc="int8 [1, 256]: the activation, from the pre-activation's int8 "
          "to the hidden state's")],
    [Slot("Hidden", doc="int8 [T, D], Input's LoD")],
    [Attr("is_reverse", "bool", False),
     Attr("activation", "string", "tanh", allowed=RNN_ACTIVATIONS,
          doc="informational: the function Tables holds"),
     *_INFO],
    doc="A plain recurrence h_t = act(x_t W_x + h_{t-1} U + b) over each sequence of Input "
    "in integers: int8 hidden state, int32 accumulators, one sum requantiser per unit and "
    "a 256-entry table straight to the hidden state (see the module docstring and "
    "docs/fixed_point.md, 'Recurrent cells').",
)
def _infer_quantized_rnn(ctx: InferContext) -> None:
    d, lvl = _common(ctx, 1, 2)
    _shape(ctx, "Tables", [1, 256])
    ctx.set_output("Hidden", [-1, d], VarType.INT8, lod_level=lvl)


def _declare() -> None:
    from ..grad import define_default_grad, no_grad
    from ..registry import mark_category

    ops = ("quantized_lstm", "quantized_gru", "quantized_lstm_unit", "quantized_gru_unit",
           "quantized_rnn")
    no_grad("integer", *ops)
    mark_category("quantised", *ops)
    define_default_grad("simple_rnn", uses=("Input", "H0", "Weight", "Bias", "Hidden"),
                        out_grads=("Hidden",))


_declare()

__all__ = ["GATE_ONE", "GRU_TABLES", "LSTM_TABLES", "LSTM_UNIT_TABLES", "RNN_ACTIVATIONS"]
