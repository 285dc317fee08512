"""Fused float ops: what the fusion passes (``fluid_hw.passes``) rewrite op chains into.

Each fused op computes exactly what its unfused chain computes, in the same order
of float32 operations, so a fused program gives the same bits as the original
(``conv2d_fusion`` after ``conv_bn_fuse`` differs only by the folding itself).
They are the units a GPU kernel or an FPGA stage is generated from.

* ``fc``: ``act(flatten(Input, in_num_col_dims) @ W + Bias)`` (mul + elementwise_add
  [+ activation]).
* ``conv2d_fusion``: ``act(conv2d(Input, Filter) + Bias[m])`` (conv2d +
  elementwise_add(axis=1) [+ activation]).
* ``fused_elemwise_activation``: a binary elementwise op and a unary activation,
  composed in the order of ``functor_list`` (Fluid's convention, below).

They have gradients (``<type>_grad``), so a fused program can still be trained.
"""

from __future__ import annotations

from ...errors import ShapeError
from ..registry import Attr, InferContext, Slot, define_op
from .common import elementwise_shape, flatten_to_2d, merge_dim
from .nn import _CONV_ATTRS, _infer_conv, check_float

#: activations a fused op may apply, by name ("" / "identity": none)
FC_ACTIVATIONS = ("", "relu", "sigmoid", "tanh")
CONV_ACTIVATIONS = ("identity", "relu", "sigmoid", "tanh")

#: fused_elemwise_activation's functors: binary elementwise ops and unary ones
BINARY_FUNCTORS = ("elementwise_add", "elementwise_sub", "elementwise_mul",
                   "elementwise_max", "elementwise_min")
UNARY_FUNCTORS = ("relu", "sigmoid", "tanh", "scale")


def _check_bias(ctx: InferContext, channels: int, what: str) -> None:
    if not ctx.has_input("Bias"):
        return
    bs = ctx.input_shape("Bias")
    ctx.check(ctx.input_dtype("Bias") == ctx.input_dtype(what),
              f"Bias must have the dtype of {what} ({ctx.input_var(what).dtype_name}), "
              f"got {ctx.input_var('Bias').dtype_name}")
    size = bs[-1] if bs else -1
    ctx.check((len(bs) == 1 or (len(bs) == 2 and bs[0] == 1))
              and merge_dim(size, channels) is not None,
              f"Bias must have shape [{channels}] (or [1, {channels}]), got {bs}")


# -- fc ----------------------------------------------------------------------

@define_op(
    "fc",
    [Slot("Input", doc="[..., K...]: flattened to rows x K at in_num_col_dims"),
     Slot("W", doc="[K, C]"), Slot("Bias", dispensable=True, doc="[C] or [1, C]")],
    [Slot("Out", doc="Input.shape[:in_num_col_dims] + [C]")],
    [Attr("in_num_col_dims", "int", 1, doc="dims of Input before it become rows", min=1),
     Attr("activation_type", "string", "", allowed=FC_ACTIVATIONS,
          doc="applied last; '' for none")],
    doc="""Out = act(flatten(Input, in_num_col_dims) @ W + Bias): mul + elementwise_add
[+ activation] in one op (made by the fc_fuse pass; Fluid's fc op).  The float
operations and their order are those of the unfused chain, so results are identical.""",
)
def _infer_fc(ctx: InferContext) -> None:
    xs, ws = ctx.input_shape("Input"), ctx.input_shape("W")
    k = ctx.attr("in_num_col_dims")
    check_float(ctx, "Input")
    ctx.check(ctx.input_dtype("Input") == ctx.input_dtype("W"),
              f"Input and W must have the same dtype, got {ctx.input_var('Input').dtype_name} "
              f"and {ctx.input_var('W').dtype_name}")
    ctx.check(0 < k < len(xs) or (k == 1 and len(xs) == 1),
              f"in_num_col_dims={k} must be in 1..{len(xs) - 1} for Input of rank {len(xs)}")
    ctx.check(len(ws) == 2, f"W must be 2-D [K, C], got shape {ws}")
    _, cols = flatten_to_2d(xs, k)
    ctx.check(merge_dim(cols, ws[0]) is not None,
              f"Input flattened at in_num_col_dims={k} has {cols} columns, W {ws} has "
              f"{ws[0]} rows")
    _check_bias(ctx, ws[1], "W")
    ctx.set_output("Out", [*xs[:k], ws[1]], ctx.input_dtype("Input"),
                   lod_level=ctx.input_var("Input").lod_level)


# -- conv2d_fusion -------------------------------------------------------------

@define_op(
    "conv2d_fusion",
    [Slot("Input", doc="[N, C, H, W]"), Slot("Filter", doc="[M, C/groups, kh, kw]"),
     Slot("Bias", dispensable=True, doc="[M]")],
    [Slot("Output", doc="[N, M, OH, OW]")],
    [*_CONV_ATTRS,
     Attr("activation", "string", "identity", allowed=CONV_ACTIVATIONS,
          doc="applied after the bias")],
    doc="""Output = act(conv2d(Input, Filter) + Bias[m]): conv2d + elementwise_add(axis=1)
[+ activation] in one op (made by conv_elementwise_add_act_fuse; Fluid's conv2d_fusion).
conv2d's attributes and geometry; the float operations are those of the unfused chain.""",
)
def _infer_conv2d_fusion(ctx: InferContext) -> None:
    _infer_conv(ctx)
    _check_bias(ctx, ctx.input_shape("Filter")[0], "Filter")


# -- fused_elemwise_activation ---------------------------------------------------

def functor_form(functors: list[str]) -> str:
    """``"binary_of_unary"``: Out = f0(X, f1(Y)); ``"unary_of_binary"``: Out = f0(f1(X, Y)).

    Raises ValueError naming the known functors when the list is not one binary and
    one unary functor.
    """
    if len(functors) == 2:
        f0, f1 = functors
        if f0 in BINARY_FUNCTORS and f1 in UNARY_FUNCTORS:
            return "binary_of_unary"
        if f0 in UNARY_FUNCTORS and f1 in BINARY_FUNCTORS:
            return "unary_of_binary"
    raise ValueError(f"functor_list {functors} must be one binary functor "
                     f"({', '.join(BINARY_FUNCTORS)}) and one unary functor "
                     f"({', '.join(UNARY_FUNCTORS)}), in either order")


@define_op(
    "fused_elemwise_activation",
    ["X", "Y"],
    ["Out", Slot("IntermediateOut", intermediate=True,
                 doc="the inner functor's result: f1(Y) or f1(X, Y)")],
    [Attr("functor_list", "strings", doc="[outer, inner] functor names (see doc)"),
     Attr("axis", "int", -1, doc="elementwise broadcast axis, as in elementwise_*"),
     Attr("scale", "float", 0.0, doc="the factor of the 'scale' functor (x * scale)"),
     Attr("save_intermediate_out", "bool", False,
          doc="write IntermediateOut (for training)")],
    doc="""A binary elementwise op and a unary activation in one op (Fluid's convention):

* functor_list = [binary, unary]: Out = binary(X, unary(Y)), IntermediateOut = unary(Y)
* functor_list = [unary, binary]: Out = unary(binary(X, Y)), IntermediateOut = binary(X, Y)

binary: elementwise_{add,sub,mul,max,min} with the elementwise `axis` broadcasting;
unary: relu, sigmoid, tanh, scale (x * `scale`).  Made by the fuse_elewise_act pass:
the unit a generated GPU kernel or an FPGA stage computes.""",
)
def _infer_fused_elemwise(ctx: InferContext) -> None:
    try:
        form = functor_form(list(ctx.attr("functor_list")))
    except ValueError as e:
        ctx.fail(str(e))
    check_float(ctx, "X")
    ctx.check(ctx.input_dtype("X") == ctx.input_dtype("Y"),
              f"X and Y must have the same dtype, got {ctx.input_var('X').dtype_name} "
              f"and {ctx.input_var('Y').dtype_name}")
    xs, ys = ctx.input_shape("X"), ctx.input_shape("Y")
    try:
        out = elementwise_shape(xs, ys, ctx.attr("axis"))
    except ShapeError as e:
        ctx.fail(str(e))
    big = "X" if len(xs) >= len(ys) else "Y"
    dt = ctx.input_dtype("X")
    ctx.set_output("Out", out, dt, lod_level=ctx.input_var(big).lod_level)
    ctx.set_output("IntermediateOut", ys if form == "binary_of_unary" else out, dt)


# -- gradients -----------------------------------------------------------------

def _declare_grads() -> None:
    """fc / conv2d_fusion: the activation's derivative from Out, then the bias and
    the product (conv) gradients; fused_elemwise_activation recomputes the inner
    functor from X and Y."""
    from ..grad import define_default_grad

    define_default_grad("fc", uses=("Input", "W", "Bias", "Out"))
    define_default_grad("conv2d_fusion", uses=("Input", "Filter", "Bias", "Output"))
    define_default_grad("fused_elemwise_activation", uses=("X", "Y"), out_grads=("Out",))


_declare_grads()


def _declare_layer_category() -> None:
    from ..registry import mark_category

    mark_category("layer", "fc", "conv2d_fusion")


_declare_layer_category()
