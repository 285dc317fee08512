"""More element-wise activations of Paddle 1.5 (issue 20): Out has X's shape and dtype.

``elu``, ``relu6``, ``selu``, ``swish``, ``brelu``, ``soft_relu``, ``softplus``,
``softsign``, ``logsigmoid``, ``rsqrt``, ``stanh``, ``tanh_shrink``, ``softshrink``,
``hard_shrink``, ``thresholded_relu``, ``pow``, and
``prelu`` (a learned slope: input ``Alpha``).  The math is in the CPU kernels
(``backends/cpu/kernels/activation_more.py``).  The layers ``atan``, ``acos`` and
``asin`` use the ops of ``onnx_extra.py``."""

from __future__ import annotations

from ..registry import Attr, InferContext, define_op

#: op type -> its attributes (Paddle 1.5's names and defaults)
ACTIVATIONS: dict[str, tuple[Attr, ...]] = {
    "elu": (Attr("alpha", "float", 1.0),),
    "relu6": (Attr("threshold", "float", 6.0),),
    "selu": (Attr("scale", "float", 1.0507009873554804934193349852946),
             Attr("alpha", "float", 1.6732632423543772848170429916717)),
    "swish": (Attr("beta", "float", 1.0),),
    "brelu": (Attr("t_min", "float", 0.0), Attr("t_max", "float", 24.0)),
    "soft_relu": (Attr("threshold", "float", 40.0, min=0.0),),
    "softplus": (),
    "softsign": (),
    "logsigmoid": (),
    "rsqrt": (),
    "stanh": (Attr("scale_a", "float", 2.0 / 3.0), Attr("scale_b", "float", 1.7159)),
    "tanh_shrink": (),
    "softshrink": (Attr("lambda", "float", 0.5, min=0.0),),
    "hard_shrink": (Attr("threshold", "float", 0.5, min=0.0),),
    "thresholded_relu": (Attr("threshold", "float", 1.0),),
    "pow": (Attr("factor", "float", 1.0),),
}

#: activations whose gradient reads the forward output rather than the input
GRAD_USES_OUT = ("rsqrt",)


def _same(ctx: InferContext) -> None:
    ctx.share("X", "Out")


for _name, _attrs in ACTIVATIONS.items():
    define_op(_name, ["X"], ["Out"], _attrs,
              doc=f"Paddle 1.5's {_name} activation, element-wise.")(_same)


@define_op("prelu", ["X", "Alpha"], ["Out"],
           [Attr("mode", "string", "all", allowed=("all", "channel", "element"))],
           doc="max(0, X) + Alpha * min(0, X); Alpha has one value ('all'), one per "
               "channel (dim 1, 'channel') or one per element of an example ('element').")
def _prelu(ctx: InferContext) -> None:
    x = ctx.input_shape("X")
    a = ctx.input_shape("Alpha")
    mode = ctx.attr("mode")
    n = 1
    for d in a:
        n *= d
    if mode == "all":
        ctx.check(n == 1, f"mode 'all' takes one Alpha value, got shape {a}")
    elif mode == "channel":
        ctx.check(len(x) >= 2 and (x[1] < 0 or n == x[1]),
                  f"mode 'channel' takes one Alpha per channel (dim 1 of X {x}), got shape {a}")
    else:
        per = 1
        for d in x[1:]:
            per *= d
        ctx.check(per < 0 or n == per,
                  f"mode 'element' takes one Alpha per element of an example "
                  f"({x[1:]}), got shape {a}")
    ctx.share("X", "Out")


def _declare() -> None:
    from ..grad import define_default_grad
    from ..registry import mark_category

    mark_category("elementwise", *ACTIVATIONS)
    for t in ACTIVATIONS:
        define_default_grad(t, uses=("Out",) if t in GRAD_USES_OUT else ("X",))
    define_default_grad("prelu", uses=("X", "Alpha"))


_declare()
