"""Specialised ops of Paddle 1.5's fluid.layers (issue 20): ``cvm`` (layers.
continuous_value_model), ``similarity_focus``, ``im2sequence`` and
``hierarchical_sigmoid`` (layers.hsigmoid, the default complete binary tree)."""

from __future__ import annotations

from ..dtypes import VarType
from ..registry import Attr, InferContext, Slot, define_op


@define_op("cvm", ["X", "CVM"], ["Y"], [Attr("use_cvm", "bool", True)],
           doc="X's first two columns are show and click counts: with use_cvm Y = X with "
               "them replaced by log(show + 1) and log(click + 1) - log(show + 1); without, "
               "Y = X without them.")
def _cvm(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 2 and (xs[1] < 0 or xs[1] > 2), f"X must be [N, 2 + features], got "
              f"{xs}")
    x = ctx.input_var("X")
    width = xs[1] if ctx.attr("use_cvm") or xs[1] < 0 else xs[1] - 2
    ctx.set_output("Y", [xs[0], width], x.dtype, lod_level=x.lod_level)


@define_op("similarity_focus", ["X"], ["Out"],
           [Attr("axis", "int", allowed=(1, 2, 3)), Attr("indexes", "ints")],
           doc="A 0/1 mask of X's shape [N, C, A, B]: for each index i of dim `axis`, the "
               "2-D slice's largest elements taken greedily, one per row and column, marked "
               "(broadcast along `axis`; the masks of the indexes or-ed).")
def _similarity_focus(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 4, f"X must be 4-D, got {xs}")
    ax = ctx.attr("axis")
    ctx.check(bool(ctx.attr("indexes")) and all(
        i >= 0 and (xs[ax] < 0 or i < xs[ax]) for i in ctx.attr("indexes")),
        f"indexes {ctx.attr('indexes')} must be non-empty positions of dim {ax} ({xs[ax]})")
    ctx.share("X", "Out")


@define_op("im2sequence", ["X"], ["Out"],
           [Attr("kernels", "ints"), Attr("strides", "ints", [1, 1]),
            Attr("paddings", "ints", [0, 0, 0, 0], doc="[up, left, down, right]")],
           doc="Out = every kh x kw patch of each image (NCHW) as a row [C*kh*kw], row "
               "order (oh, ow); one sequence of oh*ow rows per image.")
def _im2sequence(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 4, f"X must be NCHW, got {xs}")
    k = list(ctx.attr("kernels"))
    ctx.check(len(k) == 2 and min(k) >= 1, f"kernels must be [kh, kw] >= 1, got {k}")
    width = -1 if xs[1] < 0 else xs[1] * k[0] * k[1]
    s, p = list(ctx.attr("strides")), list(ctx.attr("paddings"))
    rows = -1
    if min(xs[0], xs[2], xs[3]) >= 0:
        oh = (xs[2] + p[0] + p[2] - k[0]) // s[0] + 1
        ow = (xs[3] + p[1] + p[3] - k[1]) // s[1] + 1
        ctx.check(oh >= 1 and ow >= 1, f"kernels {k} do not fit the padded image")
        rows = xs[0] * oh * ow
    ctx.set_output("Out", [rows, width], ctx.input_dtype("X"), lod_level=1)


@define_op("hierarchical_sigmoid", ["X", "W", "Label", Slot("Bias", dispensable=True)],
           ["Out", Slot("PreOut", intermediate=True)],
           [Attr("num_classes", "int", min=2)],
           doc="Out[i] = sum over the nodes j on label i's path of a complete binary tree "
               "of softplus(p_j) - bit_j * p_j, p_j = clip(X[i] . W[node_j] + Bias[node_j], "
               "-40, 40) (Paddle's default tree: code = label + num_classes).")
def _hsigmoid(ctx: InferContext) -> None:
    xs, ws = ctx.input_shape("X"), ctx.input_shape("W")
    n = ctx.attr("num_classes")
    ctx.check(len(xs) == 2 and ws == [n - 1, xs[1]],
              f"W must be [num_classes - 1, {xs[1]}] = [{n - 1}, {xs[1]}], got {ws}")
    ctx.check(ctx.input_dtype("Label") in (VarType.INT32, VarType.INT64), "Label must be int")
    ctx.set_output("Out", [xs[0], 1], ctx.input_dtype("X"))
    depth = max(1, (2 * n - 1).bit_length() - 1)
    ctx.set_output("PreOut", [xs[0], depth], ctx.input_dtype("X"))


def _declare() -> None:
    from ..grad import define_default_grad, no_grad

    define_default_grad("cvm", uses=("X",), out_grads=["Y"], in_grads=["X"])
    no_grad("metric", "similarity_focus")
    define_default_grad("im2sequence", uses=("X",))
    define_default_grad("hierarchical_sigmoid", uses=("X", "W", "Label", "Bias"),
                        in_grads=["X", "W", "Bias"])


_declare()


@define_op("warpctc", ["Logits", "Label"], ["Loss", Slot("WarpCTCGrad", intermediate=True)],
           [Attr("blank", "int", 0, min=0), Attr("norm_by_times", "bool", False)],
           doc="Loss[i] = -log p(label i | logits of sequence i) under CTC (softmax over the "
               "classes, `blank` the blank class); norm_by_times divides the gradient by the "
               "sequence's length (as warp-ctc does, the loss is not divided).")
def _warpctc(ctx: InferContext) -> None:
    lg, lab = ctx.input_var("Logits"), ctx.input_var("Label")
    ctx.check(lg.lod_level > 0 and lab.lod_level > 0,
              "Logits and Label must be LoD tensors (one sequence per example)")
    ctx.check(lab.dtype in (VarType.INT32, VarType.INT64), "Label must be int class ids")
    ctx.set_output("Loss", [-1, 1], lg.dtype, lod_level=0)
    ctx.share("Logits", "WarpCTCGrad")


@define_op("grid_sampler", ["X", "Grid"], ["Output"],
           doc="Output[n, c, i, j] = X[n, c] sampled bilinearly at Grid[n, i, j] = (x, y) in "
               "[-1, 1] (corners aligned: -1 the first pixel, 1 the last; zero outside).")
def _grid_sampler(ctx: InferContext) -> None:
    xs, gs = ctx.input_shape("X"), ctx.input_shape("Grid")
    ctx.check(len(xs) == 4 and len(gs) == 4 and gs[3] == 2,
              f"X must be NCHW and Grid [N, H_out, W_out, 2], got {xs} and {gs}")
    ctx.set_output("Output", [xs[0], xs[1], gs[1], gs[2]], ctx.input_dtype("X"))


def _declare_more() -> None:
    from ..grad import define_default_grad

    define_default_grad("warpctc", uses=("WarpCTCGrad",), out_grads=["Loss"],
                        in_grads=["Logits"])
    define_default_grad("grid_sampler", uses=("X", "Grid"))


_declare_more()


NCE_SAMPLERS = ("uniform", "log_uniform", "custom_dist")


@define_op("nce", ["Input", "Label", "Weight", Slot("Bias", dispensable=True),
                   Slot("SampleWeight", dispensable=True),
                   Slot("CustomDistProbs", dispensable=True)],
           ["Cost", Slot("SampleLogits", intermediate=True),
            Slot("SampleLabels", intermediate=True)],
           [Attr("num_total_classes", "int", min=1), Attr("num_neg_samples", "int", 10, min=1),
            Attr("seed", "int", 0), Attr("sampler", "string", "uniform", allowed=NCE_SAMPLERS),
            Attr("custom_neg_classes", "ints", [],
                 doc="the negative classes of every row (instead of sampling; for tests)"),
            Attr("is_sparse", "bool", False)],
           doc="Noise-contrastive estimation: per row, with o = sigmoid(x . w_k + b_k) and "
               "B = num_neg_samples * q(k) (q the sampler's probability), Cost = "
               "sum over true k of -log(o / (o + B)) + sum over sampled k of "
               "-log(B / (o + B)), times SampleWeight.")
def _nce(ctx: InferContext) -> None:
    xs, ls, ws = (ctx.input_shape(s) for s in ("Input", "Label", "Weight"))
    n = ctx.attr("num_total_classes")
    ctx.check(len(xs) == 2 and ws == [n, xs[1]],
              f"Weight must be [num_total_classes, {xs[1]}] = [{n}, {xs[1]}], got {ws}")
    ctx.check(len(ls) == 2, f"Label must be [N, num_true], got {ls}")
    ctx.check(ctx.input_dtype("Label") == VarType.INT64, "Label must be int64 class ids")
    if ctx.attr("sampler") == "custom_dist":
        ctx.check(ctx.has_input("CustomDistProbs"), "sampler custom_dist needs CustomDistProbs")
    k = ls[1] + (len(ctx.attr("custom_neg_classes")) or ctx.attr("num_neg_samples"))
    ctx.set_output("Cost", [xs[0], 1], ctx.input_dtype("Input"))
    ctx.set_output("SampleLogits", [xs[0], k], ctx.input_dtype("Input"))
    ctx.set_output("SampleLabels", [xs[0], k], VarType.INT64)


def _declare_nce() -> None:
    from ..grad import define_default_grad

    define_default_grad("nce", uses=("Input", "Weight", "Bias", "SampleWeight",
                                     "CustomDistProbs", "SampleLabels", "SampleLogits",
                                     "Label"),
                        out_grads=["Cost"], in_grads=["Input", "Weight", "Bias"])


_declare_nce()


@define_op("teacher_student_sigmoid_loss", ["X", "Label"], ["Y"],
           [Attr("soft_max_up_bound", "float", 15.0), Attr("soft_max_lower_bound", "float", -15.0)],
           doc="Paddle's distillation loss of logits X [N, 1]; Label encodes click z and teacher "
               "score z': -2 (z 0, no z'), -1 (z 1, no z'), z' in [0, 1) (z 0), 1 + z' (z 1). "
               "Y = sce(X, z) (+ sce(X, z') when z' exists), sce(x, t) = max(x, 0) - x t + "
               "log(1 + exp(-|x|)); the gradient is 0 where X is outside the bounds.")
def _ts_loss(ctx: InferContext) -> None:
    xs = ctx.input_shape("X")
    ctx.check(len(xs) == 2 and xs[1] == 1, f"X must be [N, 1], got {xs}")
    ctx.check(ctx.input_shape("Label")[-1:] == [1], "Label must be [N, 1]")
    ctx.share("X", "Y")


def _declare_ts() -> None:
    from ..grad import define_default_grad

    define_default_grad("teacher_student_sigmoid_loss", uses=("X", "Label"),
                        out_grads=["Y"], in_grads=["X"])


_declare_ts()


@define_op("where_index", ["Condition"], ["Out"],
           doc="Out = the coordinates of the true elements of Condition (int64 [M, rank], "
               "row-major order): Paddle 1.5's one-argument layers.where.")
def _where_index(ctx: InferContext) -> None:
    c = ctx.input_var("Condition")
    ctx.check(c.dtype == VarType.BOOL, f"Condition {c.name!r} must be bool, is {c.dtype_name}")
    ctx.set_output("Out", [-1, len(c.shape)], VarType.INT64)


def _declare_where() -> None:
    from ..grad import no_grad

    no_grad("integer", "where_index")


_declare_where()
