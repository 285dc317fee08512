"""Neural-network ops: conv2d, depthwise_conv2d, pool2d, batch_norm, dropout, lookup_table.

The window geometry of convolution and pooling (:func:`window_geometry`) lives
here so that shape inference and the kernels compute output sizes and paddings
with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from ...errors import OpAttrError, ShapeError
from .. import dtypes
from ..registry import Attr, InferContext, Slot, define_op
from .common import merge_dim

if TYPE_CHECKING:
    from ..program import Operator

PADDING_ALGORITHMS = ("EXPLICIT", "SAME", "VALID")


def attr_fail(ctx: InferContext, msg: str) -> NoReturn:
    """Raise :class:`OpAttrError` naming the op and its outputs (an attr has a bad value)."""
    outs = ", ".join(ctx.op.output_arg_names) or "no outputs"
    raise OpAttrError(f"op {ctx.op.type} (-> {outs}): {msg}")


def check_float(ctx: InferContext, slot: str) -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype in dtypes.FLOAT_DTYPES,
              f"input {slot} must be float16/32/64, got {v.dtype_name}")


def _check_ints(ctx: InferContext, name: str, n: int | tuple[int, ...], minimum: int) -> list[int]:
    vals = list(ctx.attr(name))
    lens = (n,) if isinstance(n, int) else n
    if len(vals) not in lens:
        attr_fail(ctx, f"attribute {name} must have {' or '.join(map(str, lens))} values, "
                       f"got {vals}")
    if any(v < minimum for v in vals):
        attr_fail(ctx, f"attribute {name} must be >= {minimum}, got {vals}")
    return vals


def window_geometry(
    in_hw: Sequence[int], ksize: Sequence[int], strides: Sequence[int],
    paddings: Sequence[int], dilations: Sequence[int] = (1, 1),
    algorithm: str = "EXPLICIT", ceil_mode: bool = False,
) -> tuple[list[int], list[int], list[int]]:
    """Output size, paddings ``[top, bottom, left, right]`` and dilations of a 2-D window op.

    Follows Fluid's ``UpdatePaddingAndDilation`` / ``ConvOutputSize`` / ``PoolOutputSize``:
    two paddings mean ``[pad_h, pad_w]`` (symmetric), four mean
    ``[top, bottom, left, right]``.  ``SAME`` gives ``ceil(in / stride)`` outputs
    with the padding split evenly (the extra cell at the bottom/right) and, as in
    Fluid, treats dilation as 1; ``VALID`` means no padding.  With ``ceil_mode``
    (pooling) the last window may hang over the bottom/right edge.  An unknown
    (-1) input extent gives an unknown output extent.  Raises ShapeError when a
    window does not fit into the padded input.
    """
    pads = list(paddings)
    if len(pads) == 2:
        pads = [pads[0], pads[0], pads[1], pads[1]]
    dil = list(dilations)
    out: list[int] = []
    for i in range(2):
        size, k, s = in_hw[i], ksize[i], strides[i]
        if algorithm == "VALID":
            pads[2 * i] = pads[2 * i + 1] = 0
        elif algorithm == "SAME":
            dil[i] = 1
            if size != -1:
                o = (size + s - 1) // s
                total = max((o - 1) * s + k - size, 0)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
        if size == -1:
            out.append(-1)
            continue
        eff_k = dil[i] * (k - 1) + 1
        room = size + pads[2 * i] + pads[2 * i + 1] - eff_k
        if room < 0:
            dim = "height" if i == 0 else "width"
            raise ShapeError(
                f"the window ({eff_k} input cells along the {dim}: kernel {k}, dilation "
                f"{dil[i]}) is larger than the padded input {dim} "
                f"{size} + {pads[2 * i]} + {pads[2 * i + 1]}"
            )
        out.append((room + (s - 1 if ceil_mode else 0)) // s + 1)
    return out, pads, dil


def _geometry(ctx: InferContext, *args: object, **kw: object) -> tuple[list[int], ...]:
    """window_geometry, its ShapeError reported through ``ctx.fail`` (naming op and inputs)."""
    try:
        return window_geometry(*args, **kw)  # type: ignore[arg-type]
    except ShapeError as e:
        msg = str(e)
    ctx.fail(msg)
    raise AssertionError("unreachable")  # ctx.fail raises


# -- convolution -------------------------------------------------------------

_CONV_ATTRS = (
    Attr("strides", "ints", [1, 1], doc="[stride_h, stride_w]", min=1),
    Attr("paddings", "ints", [0, 0],
         doc="[pad_h, pad_w] or [top, bottom, left, right] (EXPLICIT only)", min=0),
    Attr("dilations", "ints", [1, 1], doc="[dilation_h, dilation_w]", min=1),
    Attr("groups", "int", 1, doc="input and output channels are split into this many groups",
         min=1),
    Attr("padding_algorithm", "string", "EXPLICIT", allowed=PADDING_ALGORITHMS),
    Attr("data_format", "string", "NCHW", allowed=("NCHW", "AnyLayout"),
         doc="only NCHW is implemented (AnyLayout means NCHW); transpose NHWC data first"),
    Attr("use_cudnn", "bool", False, doc="a hint for GPU back ends; no effect on the result"),
)

_CONV_DOC = """Output = conv(Input, Filter), NCHW, cross-correlation as in every DL framework.

Input [N, C, H, W], Filter [M, C/groups, kh, kw] -> Output [N, M, OH, OW] with
OH = (H + pad_top + pad_bottom - (dilation_h * (kh - 1) + 1)) / stride_h + 1
(floor).  Input channel group g sees filters g*M/groups .. (g+1)*M/groups - 1.
No bias: the conv2d layer adds one with elementwise_add(axis=1)."""


def _infer_conv(ctx: InferContext) -> None:
    xs, ws = ctx.input_shape("Input"), ctx.input_shape("Filter")
    ctx.check(len(xs) == 4, f"Input must be 4-D NCHW, got shape {xs}")
    ctx.check(len(ws) == 4, f"Filter must be 4-D [out_channels, in_channels/groups, kh, kw], "
                            f"got shape {ws}")
    check_float(ctx, "Input")
    ctx.check(ctx.input_dtype("Input") == ctx.input_dtype("Filter"),
              f"Input and Filter must have the same dtype, got "
              f"{ctx.input_var('Input').dtype_name} and {ctx.input_var('Filter').dtype_name}")
    ctx.set_output("Output", conv_output_shape(ctx, xs, ws), ctx.input_dtype("Input"))


def conv_output_shape(ctx: InferContext, xs: list[int], ws: list[int]) -> list[int]:
    """The attribute, channel and window checks of a 2-D convolution (conv2d,
    depthwise_conv2d, conv2d_fusion, quantized_conv2d) with 4-D Input ``xs`` and
    Filter ``ws``; returns the Output shape ``[N, M, OH, OW]``."""
    strides = _check_ints(ctx, "strides", 2, 1)
    dilations = _check_ints(ctx, "dilations", 2, 1)
    paddings = _check_ints(ctx, "paddings", (2, 4), 0)
    groups = ctx.attr("groups")
    if groups < 1:
        attr_fail(ctx, f"groups must be >= 1, got {groups}")
    m, cg, kh, kw = ws  # -1 (unknown until run time) skips the checks it takes part in
    c = xs[1]
    ctx.check(c == -1 or cg == -1 or c == cg * groups,
              f"input has {c} channels, filter expects {cg * groups} "
              f"({cg} per group x groups={groups})")
    ctx.check(m == -1 or m % groups == 0,
              f"the {m} filters (Filter {ws}) do not split into groups={groups}")
    if ctx.op.type == "depthwise_conv2d":
        ctx.check(c == -1 or groups == c,
                  f"depthwise_conv2d needs groups == input channels, got groups={groups} "
                  f"for Input {xs}")
    if kh == -1 or kw == -1:
        out_hw = [-1, -1]
    else:
        out_hw, _, _ = _geometry(ctx, xs[2:], [kh, kw], strides, paddings, dilations,
                                 ctx.attr("padding_algorithm"))
    return [xs[0], m, *out_hw]


for _conv in ("conv2d", "depthwise_conv2d"):
    define_op(
        _conv, [Slot("Input", doc="[N, C, H, W]"), Slot("Filter", doc="[M, C/groups, kh, kw]")],
        [Slot("Output", doc="[N, M, OH, OW]")], _CONV_ATTRS,
        doc=_CONV_DOC if _conv == "conv2d" else
        "conv2d with groups == input channels (each channel convolved with its own "
        "M/C filters); same attributes and shapes as conv2d.",
    )(_infer_conv)


# -- pooling -----------------------------------------------------------------


def verify_pool_ksize(op: Operator) -> None:
    """ksize >= 1 unless global_pooling (Fluid's layer then stores [-1, -1]): checked
    by the verifier, so a loaded program with a zero window never reaches a kernel."""
    ksize = op.attr("ksize")
    if not op.attr("global_pooling") and any(k < 1 for k in ksize):
        raise OpAttrError(f"op {op.type}: attribute 'ksize' = {ksize} is out of range: "
                          "each element of ksize must be >= 1 (unless global_pooling)")


@define_op(
    "pool2d", [Slot("X", doc="[N, C, H, W]")], [Slot("Out", doc="[N, C, OH, OW]")],
    [
        Attr("pooling_type", "string", "max", allowed=("max", "avg")),
        Attr("ksize", "ints", doc="[kh, kw]; the output size when adaptive (>= 1 unless "
             "global_pooling)"),
        Attr("global_pooling", "bool", False, doc="pool the whole H x W (ksize, paddings ignored)"),
        Attr("strides", "ints", [1, 1], min=1),
        Attr("paddings", "ints", [0, 0], doc="[pad_h, pad_w] or [top, bottom, left, right]",
             min=0),
        Attr("exclusive", "bool", True, doc="avg: divide by the real (unpadded) cells only"),
        Attr("adaptive", "bool", False, doc="ksize is the output size; bins as in Fluid"),
        Attr("ceil_mode", "bool", False, doc="round the output size up"),
        Attr("padding_algorithm", "string", "EXPLICIT", allowed=PADDING_ALGORITHMS),
        Attr("data_format", "string", "NCHW", allowed=("NCHW", "AnyLayout"),
             doc="only NCHW is implemented"),
        Attr("use_cudnn", "bool", False, doc="a hint for GPU back ends; no effect"),
    ],
    verify=verify_pool_ksize,
    doc="""Max or average pooling over kh x kw windows, NCHW.

Padded cells never win a max.  Average pooling with ``exclusive`` (Fluid's
default) divides by the number of real cells in the window; without it, by
kh * kw (also for windows that ceil_mode lets hang over the edge).  A window
with no real cell (ceil_mode, stride > kernel) gives 0 (avg) or the dtype's
lowest finite value (max: Fluid's -FLT_MAX).  ``adaptive``
makes ksize the output size: output cell i along H pools rows
floor(i*H/OH) .. ceil((i+1)*H/OH) - 1.""",
)
def _infer_pool(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 4, f"X must be 4-D NCHW, got shape {xs}")
    check_float(ctx, "X")
    ctx.set_output("Out", pool_output_shape(ctx, xs, ctx.attr("adaptive")),
                   ctx.input_dtype("X"))


def pool_output_shape(ctx: InferContext, xs: list[int], adaptive: bool = False) -> list[int]:
    """The attribute and window checks of 2-D pooling (pool2d, quantized_pool2d) over
    4-D X ``xs``; returns the Out shape ``[N, C, OH, OW]`` (``adaptive``: ksize is
    the output size)."""
    if ctx.attr("global_pooling"):
        out_hw = [1, 1]
    else:
        ksize = _check_ints(ctx, "ksize", 2, 1)
        _check_ints(ctx, "paddings", (2, 4), 0)
        strides = _check_ints(ctx, "strides", 2, 1)
        if adaptive:
            out_hw = ksize
        else:
            out_hw, _, _ = _geometry(ctx, xs[2:], ksize, strides, ctx.attr("paddings"),
                                     algorithm=ctx.attr("padding_algorithm"),
                                     ceil_mode=ctx.attr("ceil_mode"))
    return [xs[0], xs[1], *out_hw]


# -- batch_norm --------------------------------------------------------------


@define_op(
    "batch_norm",
    [Slot("X", doc="[N, C] or [N, C, ...] (NCHW) / [N, ..., C] (NHWC)"),
     Slot("Scale", doc="[C]"), Slot("Bias", doc="[C]"),
     Slot("Mean", doc="[C] running mean"), Slot("Variance", doc="[C] running variance")],
    [Slot("Y"),
     Slot("MeanOut", doc="updated running mean (Fluid: the same variable as Mean)"),
     Slot("VarianceOut", doc="updated running variance (the same variable as Variance)"),
     Slot("SavedMean", intermediate=True, doc="batch mean, for the backward pass"),
     Slot("SavedVariance", intermediate=True, doc="1/sqrt(batch var + epsilon), for backward")],
    [
        Attr("momentum", "float", 0.9),
        Attr("epsilon", "float", 1e-5, doc="0 <= epsilon <= 1e-3, as Fluid enforces",
             min=0.0, max=1e-3),
        Attr("is_test", "bool", False, doc="use the running statistics; Program.clone(for_test) "
                                          "sets it"),
        Attr("data_layout", "string", "NCHW", allowed=("NCHW", "NHWC", "AnyLayout")),
        Attr("use_global_stats", "bool", False,
             doc="normalise with the running statistics even when training"),
    ],
    doc="""Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias, per channel.

Training (is_test and use_global_stats false): mean and var are the batch
statistics over every axis but the channel axis; var is the *biased* batch
variance (divided by the element count, as Fluid computes it), both for
normalising and for the running update
    MeanOut = momentum * Mean + (1 - momentum) * batch_mean
    VarianceOut = momentum * Variance + (1 - momentum) * batch_var.
Otherwise the running Mean/Variance normalise and MeanOut/VarianceOut equal them.
The kernel writes new arrays; it never changes its inputs in place.""",
)
def _infer_batch_norm(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(2 <= len(xs) <= 5, f"X must have rank 2 to 5, got shape {xs}")
    check_float(ctx, "X")
    eps = ctx.attr("epsilon")
    if not 0.0 <= eps <= 1e-3:
        attr_fail(ctx, f"epsilon must be between 0 and 0.001 (Fluid's limit), got {eps}")
    c = xs[-1] if ctx.attr("data_layout") == "NHWC" else xs[1]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        s = ctx.input_shape(slot)
        ctx.check(len(s) == 1 and merge_dim(s[0], c) is not None,
                  f"{slot} must have shape [{c}] (one value per channel of X {xs}, "
                  f"layout {ctx.attr('data_layout')}), got {s}")
        check_float(ctx, slot)
    pdt = ctx.input_dtype("Mean")
    ctx.set_output("Y", xs, ctx.input_dtype("X"), lod_level=ctx.input_var("X").lod_level)
    ctx.set_output("MeanOut", [c], pdt)
    ctx.set_output("VarianceOut", [c], ctx.input_dtype("Variance"))
    ctx.set_output("SavedMean", [c], pdt)
    ctx.set_output("SavedVariance", [c], pdt)


# -- dropout -----------------------------------------------------------------


@define_op(
    "dropout", ["X"], ["Out", Slot("Mask", intermediate=True, doc="uint8, 1 = kept")],
    [
        Attr("dropout_prob", "float", 0.5, doc="probability of dropping a cell, in [0, 1]",
             min=0.0, max=1.0),
        Attr("is_test", "bool", False),
        Attr("fix_seed", "bool", False, doc="use `seed`; else the executor's random stream"),
        Attr("seed", "int", 0),
        Attr("dropout_implementation", "string", "downgrade_in_infer",
             allowed=("downgrade_in_infer", "upscale_in_train")),
    ],
    doc="""Randomly zero cells of X with probability dropout_prob.

downgrade_in_infer (Fluid's default): train Out = X * Mask, test Out = X * (1 - p).
upscale_in_train: train Out = X * Mask / (1 - p) (all zeros when p == 1), test Out = X.
With fix_seed and a non-zero seed the masks are reproducible: they depend on
the seed, the op's position and how many times the program ran (so each run
draws a new mask).  Mask is only written in training.""",
)
def _infer_dropout(ctx: InferContext) -> None:
    p = ctx.attr("dropout_prob")
    if not 0.0 <= p <= 1.0:
        attr_fail(ctx, f"dropout_prob must be in [0, 1], got {p}")
    check_float(ctx, "X")
    ctx.share("X", "Out")
    ctx.set_output("Mask", ctx.input_shape("X"), "uint8")


# -- lookup_table ------------------------------------------------------------


@define_op(
    "lookup_table", [Slot("W", doc="[V, D] table"), Slot("Ids", doc="int64 [..., 1]")],
    [Slot("Out", doc="[..., D]")],
    [
        Attr("padding_idx", "long", -1, doc="-1: none; else rows with this id come out as zeros"),
        Attr("is_sparse", "bool", False, doc="gradient format hint; no effect on the forward"),
        Attr("is_distributed", "bool", False),
        Attr("remote_prefetch", "bool", False),
    ],
    doc="Out[i] = W[Ids[i]] (zeros where Ids[i] == padding_idx); the Ids' last dim (1) "
    "is replaced by D and Out keeps the Ids' LoD.  Ids outside [0, V) are an error.",
)
def _infer_lookup_table(ctx: InferContext) -> None:
    ws, ids = ctx.input_shape("W"), ctx.input_shape("Ids")
    ctx.check(len(ws) == 2, f"W must be a 2-D table [V, D], got shape {ws}")
    # the Ids' dtype is checked when the op runs, as Fluid's (a program that is only
    # transpiled may declare them otherwise)
    ctx.check(len(ids) >= 1 and merge_dim(ids[-1], 1) is not None,
              f"the last dimension of Ids must be 1, got Ids shape {ids}")
    pad = ctx.attr("padding_idx")
    if pad != -1 and not (pad >= 0 and (ws[0] == -1 or pad < ws[0])):
        attr_fail(ctx, f"padding_idx {pad} must be -1 (none) or a row of W {ws}")
    ctx.set_output("Out", [*ids[:-1], ws[1]], ctx.input_dtype("W"),
                   lod_level=ctx.input_var("Ids").lod_level)


# -- gradients -----------------------------------------------------------------


def _declare_grads() -> None:
    """conv2d/depthwise_conv2d: dInput, dFilter (col2im of the same windows);
    pool2d: dX routed to each window's first max / spread over its cells (avg);
    batch_norm: dX, dScale, dBias from dY only (the running statistics get none);
    dropout: dX = dOut * the forward's factor; lookup_table: a dense dW (Ids never)."""
    from ..grad import define_default_grad

    for conv in ("conv2d", "depthwise_conv2d"):
        define_default_grad(conv, uses=("Input", "Filter"))
    define_default_grad("pool2d", uses=("X",))
    define_default_grad(
        "batch_norm",
        uses=("X", "Scale", "Bias", "Mean", "Variance", "SavedMean", "SavedVariance"),
        out_grads=("Y",), in_grads=("X", "Scale", "Bias"))
    define_default_grad("dropout", uses=("Mask",))
    define_default_grad("lookup_table", uses=("W", "Ids"), in_grads=("W",))


_declare_grads()


def _declare_layer_category() -> None:
    from ..registry import mark_category

    mark_category("layer", "conv2d", "depthwise_conv2d")


_declare_layer_category()
