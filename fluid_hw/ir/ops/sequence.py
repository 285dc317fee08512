"""Sequence ops: they work on LoD tensors directly, a batch of variable-length
sequences concatenated along dim 0, with no padding.

Pooling, softmax, expansion, concatenation, reshaping and context convolution of
sequences; the recurrent units ``lstm_unit`` / ``gru_unit`` (one step, for
DynamicRNN bodies) and the whole-sequence recurrences ``lstm`` / ``gru`` (Fluid's
op types behind the ``dynamic_lstm`` / ``dynamic_gru`` layers), which batch the
active sequences of each time step (longest first) instead of padding them.
``sequence_pad`` / ``sequence_unpad`` / ``sequence_mask`` convert to and from
padded tensors, for interoperation only.

Gate layouts follow Fluid: ``lstm`` gates are ``[candidate, input, forget,
output]`` (bias ``[1, 4D]``, or ``[1, 7D]`` with the peephole weights ``W_ic,
W_fc, W_oc`` appended); ``lstm_unit`` gates are ``[input, forget, output,
candidate]``; ``gru`` / ``gru_unit`` gates are ``[update, reset, candidate]``.
"""

from __future__ import annotations

from .. import dtypes
from ..grad import define_default_grad, no_grad
from ..registry import Attr, InferContext, Slot, define_op

VarType = dtypes.VarType
_INT64 = VarType.INT64

POOL_TYPES = ("AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST")
ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity")
#: gru_unit's integer activation codes (Fluid's)
GRU_UNIT_ACTS = {0: "identity", 1: "sigmoid", 2: "tanh", 3: "relu"}


def _need_lod(ctx: InferContext, slot: str = "X") -> int:
    v = ctx.input_var(slot)
    ctx.check(v.lod_level > 0, f"{slot} {v.name!r} has lod_level 0; {ctx.op.type} needs a "
              "LoD tensor (declare the input with lod_level=1)")
    return v.lod_level


def _tail(ctx: InferContext, slot: str = "X") -> list[int]:
    return list(ctx.input_shape(slot)[1:])


# -- pooling, softmax ------------------------------------------------------------------

@define_op("sequence_pool", ["X"], ["Out", Slot("MaxIndex", intermediate=True)],
           [Attr("pooltype", "string", "AVERAGE", allowed=POOL_TYPES),
            Attr("pad_value", "float", 0.0, doc="the result for an empty sequence"),
            Attr("is_test", "bool", False)],
           doc="Out[i] = pool of the rows of sequence i (last LoD level): sum, average, "
           "sum / sqrt(length), max, first or last row.")
def _sequence_pool(ctx: InferContext) -> None:
    lvl = _need_lod(ctx)
    x = ctx.input_var("X")
    ctx.set_output("Out", [-1, *_tail(ctx)], x.dtype, lod_level=lvl - 1)
    ctx.set_output("MaxIndex", [-1, *_tail(ctx)], VarType.INT32)


@define_op("sequence_softmax", ["X"], ["Out"],
           doc="Softmax over the rows of each sequence of X ([T] or [T, 1]).")
def _sequence_softmax(ctx: InferContext) -> None:
    _need_lod(ctx)
    shape = ctx.input_shape("X")
    ctx.check(len(shape) == 1 or (len(shape) == 2 and shape[1] in (1, -1)),
              f"X must be [T] or [T, 1], has shape {shape}")
    ctx.share("X", "Out")


# -- expansion, concatenation, reshape ---------------------------------------------------

@define_op("sequence_expand", ["X", "Y"], ["Out"], [Attr("ref_level", "int", -1)],
           doc="Sequence i of X (a row when X has no LoD) repeated as many times as "
           "sequence i of Y's LoD level ref_level has elements.")
def _sequence_expand(ctx: InferContext) -> None:
    _need_lod(ctx, "Y")
    x = ctx.input_var("X")
    ctx.check(x.lod_level <= 1, f"X {x.name!r} may have at most one LoD level, has "
              f"{x.lod_level}")
    ctx.set_output("Out", [-1, *_tail(ctx)], x.dtype, lod_level=1)


@define_op("sequence_concat", [Slot("X", duplicable=True)], ["Out"],
           doc="Out sequence i = sequence i of X[0], then of X[1], ...")
def _sequence_concat(ctx: InferContext) -> None:
    xs = ctx.input_vars("X")
    for v in xs:
        ctx.check(v.lod_level > 0, f"X {v.name!r} has lod_level 0; sequence_concat needs "
                  "LoD tensors")
        ctx.check(list(v.shape[1:]) == list(xs[0].shape[1:]),
                  f"inputs must agree beyond dim 0: {list(v.shape)} vs {list(xs[0].shape)}")
    ctx.set_output("Out", [-1, *xs[0].shape[1:]], xs[0].dtype, lod_level=xs[0].lod_level)


@define_op("sequence_reshape", ["X"], ["Out"], [Attr("new_dim", "int", min=1)],
           doc="Each sequence's data re-cut into rows of new_dim columns (its length "
           "scales by width / new_dim).")
def _sequence_reshape(ctx: InferContext) -> None:
    _need_lod(ctx)
    shape = ctx.input_shape("X")
    ctx.check(len(shape) == 2, f"X must be 2-D, has shape {shape}")
    ctx.check(ctx.attr("new_dim") > 0, f"new_dim must be positive, is {ctx.attr('new_dim')}")
    ctx.set_output("Out", [-1, ctx.attr("new_dim")], ctx.input_dtype("X"), lod_level=1)


# -- context convolution -------------------------------------------------------------------

@define_op("sequence_conv", ["X", "Filter", Slot("PaddingData", dispensable=True)], ["Out"],
           [Attr("contextLength", "int", min=1), Attr("contextStart", "int", 0),
            Attr("contextStride", "int", 1, allowed=(1,)),
            Attr("paddingTrainable", "bool", False)],
           doc="Out[t] = concat(X[t + contextStart .. t + contextStart + contextLength - 1]) "
           "@ Filter, within each sequence; context rows outside the sequence are zero "
           "(or rows of PaddingData when paddingTrainable).")
def _sequence_conv(ctx: InferContext) -> None:
    _need_lod(ctx)
    xs, fs = ctx.input_shape("X"), ctx.input_shape("Filter")
    n = ctx.attr("contextLength")
    ctx.check(len(xs) == 2 and len(fs) == 2, f"X {xs} and Filter {fs} must be 2-D")
    ctx.check(n > 0, f"contextLength must be positive, is {n}")
    ctx.check(xs[1] == -1 or fs[0] == -1 or fs[0] == n * xs[1],
              f"Filter has {fs[0]} rows; contextLength {n} x {xs[1]} columns needs {n * xs[1]}")
    if ctx.attr("paddingTrainable"):
        ctx.check(ctx.has_input("PaddingData"), "paddingTrainable needs PaddingData")
    ctx.set_output("Out", [-1, fs[1]], ctx.input_dtype("X"),
                   lod_level=ctx.input_var("X").lod_level)


# -- padding interop --------------------------------------------------------------------------

@define_op("sequence_mask", ["X", Slot("MaxLenTensor", dispensable=True)], ["Y"],
           [Attr("maxlen", "int", -1), Attr("out_dtype", "int", int(_INT64))],
           doc="Y[..., j] = j < X[...]: a mask from integer lengths (maxlen -1: the largest "
           "length).")
def _sequence_mask(ctx: InferContext) -> None:
    x = ctx.input_var("X")
    ctx.check(x.dtype in dtypes.INT_DTYPES,
              f"X {x.name!r} must hold integer lengths, got {x.dtype_name}")
    m = ctx.attr("maxlen")
    ctx.set_output("Y", [*x.shape, m if m > 0 else -1], ctx.attr("out_dtype"))


@define_op("sequence_pad", ["X", "PadValue"], ["Out", "Length"],
           [Attr("padded_length", "int", -1)],
           doc="Out[i] = sequence i of X padded with PadValue to padded_length rows (-1: the "
           "longest); Length = the sequence lengths (int64).")
def _sequence_pad(ctx: InferContext) -> None:
    _need_lod(ctx)
    n = ctx.attr("padded_length")
    ctx.set_output("Out", [-1, n if n > 0 else -1, *_tail(ctx)], ctx.input_dtype("X"))
    ctx.set_output("Length", [-1], _INT64)


@define_op("sequence_unpad", ["X", "Length"], ["Out"],
           doc="Out = the first Length[i] rows of X[i] for each i, as one LoD tensor.")
def _sequence_unpad(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) >= 2, f"X must be [N, L, ...], has shape {xs}")
    ctx.check(ctx.input_dtype("Length") == _INT64, "Length must be int64")
    ctx.set_output("Out", [-1, *xs[2:]], ctx.input_dtype("X"), lod_level=1)


# -- recurrent units -------------------------------------------------------------------------

def _check_width(ctx: InferContext, slot: str, k: int, d: int, what: str) -> None:
    s = ctx.input_shape(slot)
    ctx.check(len(s) == 2 and (s[1] == -1 or d == -1 or s[1] == k * d),
              f"{slot} {s} must be [N, {k} * {what}] with {what} = {d}")


@define_op("lstm_unit", ["X", "C_prev"], ["C", "H"], [Attr("forget_bias", "float", 0.0)],
           doc="One LSTM step on gate pre-activations X [N, 4D] = [i, f, o, g]: "
           "C = sigmoid(f + forget_bias) * C_prev + sigmoid(i) * tanh(g), "
           "H = sigmoid(o) * tanh(C).")
def _lstm_unit(ctx: InferContext) -> None:
    c = ctx.input_shape("C_prev")
    ctx.check(len(c) == 2, f"C_prev must be [N, D], has shape {c}")
    _check_width(ctx, "X", 4, c[1], "D")
    for slot in ("C", "H"):
        ctx.set_output(slot, c, ctx.input_dtype("X"))


@define_op("gru_unit", ["Input", "HiddenPrev", "Weight", Slot("Bias", dispensable=True)],
           [Slot("Gate", intermediate=True), Slot("ResetHiddenPrev", intermediate=True),
            "Hidden"],
           [Attr("activation", "int", 2, allowed=tuple(GRU_UNIT_ACTS)),
            Attr("gate_activation", "int", 1, allowed=tuple(GRU_UNIT_ACTS)),
            Attr("origin_mode", "bool", False)],
           doc="One GRU step: [u, r] = act_g(Input[:, :2D] + h @ W[:, :2D] + b), "
           "c = act(Input[:, 2D:] + (r * h) @ W[:, 2D:] + b), Hidden = u * c + (1 - u) * h "
           "(origin_mode: u * h + (1 - u) * c).  Activation codes: 0 identity, 1 sigmoid, "
           "2 tanh, 3 relu.")
def _gru_unit(ctx: InferContext) -> None:
    h = ctx.input_shape("HiddenPrev")
    w = ctx.input_shape("Weight")
    ctx.check(len(h) == 2 and len(w) == 2, f"HiddenPrev {h} and Weight {w} must be 2-D")
    d = h[1] if h[1] != -1 else w[0]
    ctx.check(w[0] in (-1, d) and w[1] in (-1, 3 * d), f"Weight must be [{d}, {3 * d}], is {w}")
    _check_width(ctx, "Input", 3, d, "D")
    dt = ctx.input_dtype("Input")
    n = ctx.input_shape("Input")[0]
    ctx.set_output("Gate", [n, 3 * d], dt)
    ctx.set_output("ResetHiddenPrev", [n, d], dt)
    ctx.set_output("Hidden", [n, d], dt)


@define_op("lstm",
           ["Input", Slot("H0", dispensable=True), Slot("C0", dispensable=True), "Weight",
            "Bias"],
           ["Hidden", "Cell", Slot("BatchGate", intermediate=True),
            Slot("BatchCellPreAct", intermediate=True)],
           [Attr("use_peepholes", "bool", True), Attr("is_reverse", "bool", False),
            Attr("gate_activation", "string", "sigmoid", allowed=ACTIVATIONS),
            Attr("cell_activation", "string", "tanh", allowed=ACTIVATIONS),
            Attr("candidate_activation", "string", "tanh", allowed=ACTIVATIONS)],
           doc="LSTM over each sequence of Input [T, 4D] (x already projected; gates "
           "[candidate, input, forget, output]); Hidden, Cell [T, D] share Input's LoD.  "
           "The dynamic_lstm layer.")
def _lstm(ctx: InferContext) -> None:
    lvl = _need_lod(ctx, "Input")
    w = ctx.input_shape("Weight")
    ctx.check(len(w) == 2 and w[1] in (-1, 4 * w[0]), f"Weight must be [D, 4D], is {w}")
    d = w[0]
    _check_width(ctx, "Input", 4, d, "D")
    b = ctx.input_shape("Bias")
    k = 7 if ctx.attr("use_peepholes") else 4
    ctx.check(b in ([1, k * d], [k * d]),
              f"Bias must be [1, {k * d}] ({k}D{' with peepholes' if k == 7 else ''}), is {b}")
    for slot in ("H0", "C0"):
        if ctx.has_input(slot):
            s = ctx.input_shape(slot)
            ctx.check(len(s) == 2 and s[1] in (-1, d), f"{slot} must be [N, {d}], is {s}")
    dt = ctx.input_dtype("Input")
    for slot in ("Hidden", "Cell", "BatchCellPreAct"):
        ctx.set_output(slot, [-1, d], dt, lod_level=lvl)
    ctx.set_output("BatchGate", [-1, 4 * d], dt, lod_level=lvl)


@define_op("gru",
           ["Input", Slot("H0", dispensable=True), "Weight", Slot("Bias", dispensable=True)],
           ["Hidden", Slot("BatchGate", intermediate=True),
            Slot("BatchResetHiddenPrev", intermediate=True),
            Slot("BatchHidden", intermediate=True)],
           [Attr("activation", "string", "tanh", allowed=ACTIVATIONS),
            Attr("gate_activation", "string", "sigmoid", allowed=ACTIVATIONS),
            Attr("is_reverse", "bool", False), Attr("origin_mode", "bool", False)],
           doc="GRU over each sequence of Input [T, 3D] (x already projected; gates "
           "[update, reset, candidate]); Hidden [T, D] shares Input's LoD.  The dynamic_gru "
           "layer.")
def _gru(ctx: InferContext) -> None:
    lvl = _need_lod(ctx, "Input")
    w = ctx.input_shape("Weight")
    ctx.check(len(w) == 2 and w[1] in (-1, 3 * w[0]), f"Weight must be [D, 3D], is {w}")
    d = w[0]
    _check_width(ctx, "Input", 3, d, "D")
    if ctx.has_input("Bias"):
        b = ctx.input_shape("Bias")
        ctx.check(b in ([1, 3 * d], [3 * d]), f"Bias must be [1, {3 * d}], is {b}")
    if ctx.has_input("H0"):
        s = ctx.input_shape("H0")
        ctx.check(len(s) == 2 and s[1] in (-1, d), f"H0 must be [N, {d}], is {s}")
    dt = ctx.input_dtype("Input")
    for slot in ("Hidden", "BatchResetHiddenPrev", "BatchHidden"):
        ctx.set_output(slot, [-1, d], dt, lod_level=lvl)
    ctx.set_output("BatchGate", [-1, 3 * d], dt, lod_level=lvl)


# -- gradients ---------------------------------------------------------------------------------

define_default_grad("sequence_pool", uses=("X", "MaxIndex"), out_grads=("Out",))
define_default_grad("sequence_softmax", uses=("Out",))
define_default_grad("sequence_expand", uses=("X", "Y"), in_grads=("X",))
define_default_grad("sequence_concat", uses=("X",))
define_default_grad("sequence_reshape", uses=("X",))
define_default_grad("sequence_conv", uses=("X", "Filter", "PaddingData"))
define_default_grad("sequence_pad", uses=("X",), out_grads=("Out",), in_grads=("X",))
define_default_grad("sequence_unpad", uses=("X", "Length"), in_grads=("X",))
define_default_grad("lstm_unit", uses=("X", "C_prev", "C"))
define_default_grad("gru_unit", uses=("Input", "HiddenPrev", "Weight", "Bias", "Gate",
                                      "ResetHiddenPrev"), out_grads=("Hidden",))
define_default_grad("lstm", uses=("Input", "H0", "C0", "Weight", "Bias", "Hidden", "Cell",
                                  "BatchGate"), out_grads=("Hidden", "Cell"))
define_default_grad("gru", uses=("Input", "H0", "Weight", "Bias", "Hidden", "BatchGate",
                                 "BatchResetHiddenPrev", "BatchHidden"), out_grads=("Hidden",))

no_grad("integer", "sequence_mask")
