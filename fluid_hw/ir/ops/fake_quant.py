"""Fake-quantise ops for quantisation-aware training (Paddle Fluid 1.5's names).

Each op rounds a float tensor to the integer grid the golden model will use and
stays in float, so a training program sees the quantisation error while the
optimiser updates float parameters.  ``fluid_hw.passes.qat`` inserts them;
``fluid_hw.passes.qat_freeze`` turns them into the integer ops of ``ir/ops/quant.py``.

The grid (docs/qat.md): ``bit_length`` b and ``kind``

=============  ==========================  ==========  ==============================
kind           integer range [lo, hi]      step        q
=============  ==========================  ==========  ==============================
``signed``     [-2^(b-1), 2^(b-1) - 1]     s / (2^(b-1) - 1)  clamp(rint(x / step))
``unsigned``   [0, 2^b - 1]                s / (2^b - 1)      clamp(rint(x / step))
``bipolar``    {-1, +1} (b = 1)            s           +1 where x >= 0 else -1
=============  ==========================  ==========  ==============================

``s`` is the op's scale (``OutScale``, or ``InScale`` in test mode), ``rint`` rounds
half to even (the golden ``quantize`` op's rounding; Paddle rounds half away from
zero), ``step`` is computed in float32 (``float32(s) / float32(levels)``) and the
division in float64, exactly as the frozen program's ``quantize`` does.  The
``*_quantize_*`` forms output ``q`` (integers held in float32), the
``*_quantize_dequantize_*`` forms ``float32(q * step)``.  An abs-max scale takes
the largest ``|X|`` (so the symmetric weight range [-(2^(b-1) - 1), 2^(b-1) - 1] is
never left); for ``bipolar`` the abs-max forms take the mean ``|X|`` instead (the
scale that minimises ``|X - s sign(X)|``, as XNOR-Net).  A scale of 0 (an all-zero
tensor) gives zeros.

Gradients (straight-through estimator): ``dX = dOut`` for the quantise-dequantise
forms, ``dX = dOut / step`` for the quantise forms and ``dX = dOut * Scale /
max_range`` for ``fake_dequantize_max_abs`` (so a quantise followed by a dequantise
is the identity too).  The moving-average forms with ``ste_clip`` (default) give 0
where X lies outside the range the grid covers, ``[lo * step, hi * step]``
(``[-s, s]`` for bipolar): there the output is saturated and does not move with X.
The abs-max forms never clip (their scale covers X), so their gradient is the
identity everywhere.
"""

from __future__ import annotations

import numpy as np

from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim
from .nn import attr_fail, check_float

KINDS = ("signed", "unsigned", "bipolar")

_GRID_ATTRS = (
    Attr("bit_length", "int", 8, min=1, max=16, doc="integer width b (1 needs kind bipolar)"),
    Attr("kind", "string", "signed", allowed=KINDS,
         doc="signed, unsigned or bipolar ({-1, +1}) integers (see the module doc)"),
)


def grid(bits: int, kind: str) -> tuple[int, int, int]:
    """``(lo, hi, levels)``: the integer range and the divisor of the scale (step =
    scale / levels) of a ``bits``-wide ``kind`` grid (module doc)."""
    if kind == "bipolar":
        if bits != 1:
            raise ValueError(f"kind 'bipolar' is 1-bit: bit_length must be 1, got {bits}")
        return -1, 1, 1
    if kind == "unsigned":
        return 0, 2**bits - 1, 2**bits - 1
    if kind == "signed":
        if bits < 2:
            raise ValueError("a 1-bit signed grid has no symmetric levels; use "
                             "kind='bipolar' for 1-bit values")
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, 2 ** (bits - 1) - 1
    raise ValueError(f"unknown kind {kind!r}; use one of {list(KINDS)}")


F32 = np.float32


def step_of(scale: np.ndarray, bits: int, kind: str) -> np.ndarray:
    """The grid's step per scale entry, float32: ``float32(scale) / float32(levels)``."""
    return np.asarray(scale, F32) / F32(grid(bits, kind)[2])


def quantize_values(x: np.ndarray, step: np.ndarray, bits: int, kind: str) -> np.ndarray:
    """The integers q (float64) of ``x`` on the grid with ``step`` (broadcast against x).
    A zero step gives q = 0 (bipolar: the sign still, times a zero step)."""
    lo, hi, _ = grid(bits, kind)
    x64 = np.asarray(x, np.float64)
    if kind == "bipolar":
        return np.where(x64 >= 0, 1.0, -1.0)
    s64 = np.asarray(step, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint(np.where(s64 > 0, x64 / np.where(s64 > 0, s64, 1.0), 0.0))
    return np.clip(q, lo, hi)


def statistic(x: np.ndarray, kind: str, axes: tuple[int, ...] | None = None) -> np.ndarray:
    """max|x| (mean|x| for bipolar) over ``axes`` (all: a [1] array), float32."""
    a = np.abs(np.asarray(x, np.float64))
    if a.size == 0:
        return np.zeros(1, F32)
    red = np.mean if kind == "bipolar" else np.max
    v = red(a, axis=axes) if axes is not None else np.array([red(a)])
    return np.asarray(v, F32).reshape(-1)


def _check_grid(ctx: InferContext) -> None:
    try:
        grid(ctx.attr("bit_length"), ctx.attr("kind"))
    except ValueError as e:
        attr_fail(ctx, str(e))


def _scalar_state(ctx: InferContext, slot: str) -> None:
    if ctx.has_input(slot):
        s = ctx.input_shape(slot)
        ctx.check(len(s) == 1 and merge_dim(s[0], 1) is not None,
                  f"{slot} must have shape [1], got {s}")
        check_float(ctx, slot)


def _infer_abs_max(ctx: InferContext) -> None:
    check_float(ctx, "X")
    _check_grid(ctx)
    ctx.share("X", "Out")
    ctx.set_output("OutScale", [1], ctx.input_dtype("X"))


def _infer_channel_wise(ctx: InferContext) -> None:
    check_float(ctx, "X")
    _check_grid(ctx)
    xs = ctx.input_shape("X")
    axis = ctx.attr("quant_axis")
    ctx.check(0 <= axis < len(xs), f"quant_axis {axis} is not an axis of X {xs}")
    ctx.share("X", "Out")
    ctx.set_output("OutScale", [xs[axis]], ctx.input_dtype("X"))


def _infer_moving_average(ctx: InferContext) -> None:
    check_float(ctx, "X")
    _check_grid(ctx)
    rate = ctx.attr("moving_rate")
    if not 0.0 <= rate < 1.0:
        attr_fail(ctx, f"moving_rate must be in [0, 1), got {rate}")
    for slot in ("InScale", "InAccum", "InState"):
        _scalar_state(ctx, slot)
    ctx.check(ctx.has_input("InAccum") == ctx.has_input("InState"),
              "give both InAccum and InState (the running sums) or neither")
    ctx.share("X", "Out")
    dt = ctx.input_dtype("InScale")
    for slot in ("OutScale", "OutAccum", "OutState"):
        ctx.set_output(slot, [1], dt)


_ABS_MAX_DOC = ("OutScale = max|X| (mean|X| for bipolar); Out = {what} on the b-bit grid of "
                "that scale (module doc).  Weights' quantiser.")
_CHANNEL_DOC = ("OutScale[c] = max|X[c]| (mean for bipolar) over every axis but quant_axis; "
                "Out = {what} per channel (module doc).  Per-channel weights' quantiser.")
_MOVING_DOC = """Activations' quantiser with a moving-average scale (module doc).

Training: cur = max|X|; OutState = moving_rate * InState + 1; OutAccum =
moving_rate * InAccum + cur; OutScale = OutAccum / OutState (without InAccum /
InState: OutScale = moving_rate * InScale + (1 - moving_rate) * cur).  Test
(is_test, set by Program.clone(for_test=True)): OutScale = InScale and the state
passes through.  Out = {what} on the b-bit grid of OutScale.  The Out* state slots
are the In* variables themselves (persistable, like batch_norm's running
statistics)."""

_CHANNEL_ATTRS = (*_GRID_ATTRS, Attr("quant_axis", "int", 0, min=0,
                                     doc="the channel axis: 0 for conv filters [M, C, kh, kw], "
                                         "1 for fc / mul weights [K, C]"))
_MOVING_INPUTS = [Slot("X"), Slot("InScale", doc="[1], the running scale"),
                  Slot("InAccum", dispensable=True, doc="[1], running sum of max|X|"),
                  Slot("InState", dispensable=True, doc="[1], running count")]
_MOVING_OUTPUTS = [Slot("Out"), Slot("OutScale", doc="InScale's variable"),
                   Slot("OutAccum", dispensable=True, doc="InAccum's variable"),
                   Slot("OutState", dispensable=True, doc="InState's variable")]
_MOVING_ATTRS = (*_GRID_ATTRS,
                 Attr("moving_rate", "float", 0.9, min=0.0, max=1.0),
                 Attr("is_test", "bool", False, doc="use InScale, update nothing"),
                 Attr("ste_clip", "bool", True,
                      doc="zero gradient where X is outside the grid's range (saturated)"))

for _prefix, _what in (("fake_quantize", "q"), ("fake_quantize_dequantize", "q * step")):
    define_op(f"{_prefix}_abs_max", ["X"], ["Out", "OutScale"], _GRID_ATTRS,
              doc=_ABS_MAX_DOC.format(what=_what))(_infer_abs_max)
    define_op(f"{_prefix}_moving_average_abs_max", _MOVING_INPUTS, _MOVING_OUTPUTS,
              _MOVING_ATTRS, doc=_MOVING_DOC.format(what=_what))(_infer_moving_average)
for _name, _what in (("fake_channel_wise_quantize_abs_max", "q"),
                     ("fake_channel_wise_quantize_dequantize_abs_max", "q * step")):
    define_op(_name, ["X"], ["Out", "OutScale"], _CHANNEL_ATTRS,
              doc=_CHANNEL_DOC.format(what=_what))(_infer_channel_wise)


@define_op(
    "fake_dequantize_max_abs", [Slot("X", doc="quantised values (float)"),
                                Slot("Scale", doc="[1]: the quantiser's OutScale")],
    ["Out"], [Attr("max_range", "float", doc="the grid's levels, e.g. 127 for 8-bit signed")],
    doc="Out = X * Scale / max_range: the inverse of fake_quantize_abs_max.",
)
def _infer_dequantize(ctx: InferContext) -> None:
    check_float(ctx, "X")
    _scalar_state(ctx, "Scale")
    if not ctx.attr("max_range") > 0:
        attr_fail(ctx, f"max_range must be > 0, got {ctx.attr('max_range')}")
    ctx.share("X", "Out")


@define_op(
    "fake_quantize_dequantize_bias",
    [Slot("X", doc="the bias [C]"),
     Slot("InScale", doc="[1]: the layer input quantiser's scale"),
     Slot("WeightScale", doc="[C] or [1]: the weight quantiser's OutScale")],
    ["Out"],
    [Attr("in_bit_length", "int", 8, min=1, max=16),
     Attr("in_kind", "string", "signed", allowed=KINDS),
     Attr("weight_bit_length", "int", 8, min=1, max=16),
     Attr("weight_kind", "string", "signed", allowed=KINDS),
     Attr("half_step", "bool", False,
          doc="put the bias half-way between accumulator steps (a bipolar output)")],
    doc="""A layer's bias on its integer accumulator's grid (fluid-hw's extension; Paddle
keeps the bias in float).  acc_step[c] = step_in * step_w[c] (the two quantisers'
steps, float32, multiplied in float64); Out = float32(k * acc_step) with k =
round_half_even(X / acc_step) -- the frozen int32 bias -- or, with half_step, Out =
float32((floor(X / acc_step) + 1/2) * acc_step), frozen as floor(X / acc_step): then
the sign of x W + Out never sits on 0 and equals the sign of the integer
accumulator (acc >= 0), which a bipolar output takes.  Where acc_step is 0, Out = X.
Gradient: the identity (straight through).""",
)
def _infer_bias(ctx: InferContext) -> None:
    check_float(ctx, "X")
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 1, f"X must be a 1-D bias, got shape {xs}")
    _scalar_state(ctx, "InScale")
    ws = ctx.input_shape("WeightScale")
    ctx.check(len(ws) == 1 and (ws[0] == 1 or merge_dim(ws[0], xs[0]) is not None),
              f"WeightScale must have shape [1] or [{xs[0]}], got {ws}")
    for b, k in (("in_bit_length", "in_kind"), ("weight_bit_length", "weight_kind")):
        try:
            grid(ctx.attr(b), ctx.attr(k))
        except ValueError as e:
            attr_fail(ctx, f"{b} / {k}: {e}")
    ctx.share("X", "Out")


def bias_grid(bias: np.ndarray, in_scale: np.ndarray, w_scale: np.ndarray, in_bits: int,
              in_kind: str, w_bits: int, w_kind: str, half_step: bool
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(k, acc_step)``: the integer bias (float64 holding integers) and the
    accumulator's step per channel (float64), as ``fake_quantize_dequantize_bias``
    computes them."""
    b = np.asarray(bias, np.float64).reshape(-1)
    acc = np.float64(step_of(np.asarray(in_scale).reshape(1), in_bits, in_kind)[0]) * \
        step_of(np.asarray(w_scale).reshape(-1), w_bits, w_kind).astype(np.float64)
    acc = np.broadcast_to(acc, b.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(acc > 0, b / np.where(acc > 0, acc, 1.0), 0.0)
    return (np.floor(r) if half_step else np.rint(r)), acc


@define_op(
    "fake_channel_wise_dequantize_max_abs",
    [Slot("X", doc="quantised values (float)"),
     Slot("Scales", duplicable=True,
          doc="the weight quantiser's OutScale [C], and optionally the input's [1]")],
    ["Out"],
    [Attr("quant_bits", "ints", [8], min=2, max=16,
          doc="the widths of the Scales (max_range_i = 2^(bits_i - 1) - 1)"),
     Attr("quant_axis", "int", 0, min=0, doc="the channel axis of X for Scales[0]")],
    doc="Out = X * Scales[0][c] / max_range_0 (* Scales[1][0] / max_range_1): the inverse "
    "of fake_channel_wise_quantize_abs_max (and of the input's quantiser, for a layer's "
    "integer output).",
)
def _infer_channel_dequantize(ctx: InferContext) -> None:
    check_float(ctx, "X")
    xs = ctx.input_shape("X")
    n = ctx.input_count("Scales")
    bits = ctx.attr("quant_bits")
    ctx.check(n in (1, 2) and len(bits) == n,
              f"give one or two Scales and as many quant_bits, got {n} and {bits}")
    axis = ctx.attr("quant_axis")
    ctx.check(axis < len(xs), f"quant_axis {axis} is not an axis of X {xs}")
    s0 = ctx.input_shape("Scales", 0)
    ctx.check(len(s0) == 1 and merge_dim(s0[0], xs[axis]) is not None,
              f"Scales[0] must have shape [{xs[axis]}] (X's axis {axis}), got {s0}")
    if n == 2:
        s1 = ctx.input_shape("Scales", 1)
        ctx.check(len(s1) == 1 and merge_dim(s1[0], 1) is not None,
                  f"Scales[1] must have shape [1], got {s1}")
    ctx.share("X", "Out")


#: every fake-quantise op, and the quantise-dequantise forms the QAT pass inserts
FAKE_QUANT_OPS = (
    "fake_quantize_abs_max", "fake_quantize_dequantize_abs_max",
    "fake_channel_wise_quantize_abs_max", "fake_channel_wise_quantize_dequantize_abs_max",
    "fake_quantize_moving_average_abs_max", "fake_quantize_dequantize_moving_average_abs_max",
    "fake_dequantize_max_abs", "fake_quantize_dequantize_bias",
    "fake_channel_wise_dequantize_max_abs")
QUANT_DEQUANT_OPS = ("fake_quantize_dequantize_abs_max",
                     "fake_channel_wise_quantize_dequantize_abs_max",
                     "fake_quantize_dequantize_moving_average_abs_max")


def _declare_grads() -> None:
    from ..grad import define_default_grad

    for t in FAKE_QUANT_OPS[:-3]:
        define_default_grad(t, uses=("X", "OutScale"), out_grads=("Out",), in_grads=("X",))
    define_default_grad("fake_dequantize_max_abs", uses=("Scale",), out_grads=("Out",),
                        in_grads=("X",))
    define_default_grad("fake_quantize_dequantize_bias", uses=(), out_grads=("Out",),
                        in_grads=("X",))
    define_default_grad("fake_channel_wise_dequantize_max_abs", uses=("Scales",),
                        out_grads=("Out",), in_grads=("X",))


_declare_grads()

__all__ = ["FAKE_QUANT_OPS", "KINDS", "QUANT_DEQUANT_OPS", "bias_grid", "grid",
           "quantize_values", "statistic", "step_of"]
