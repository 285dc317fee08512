"""Gradient makers: how each op's backward ops are built, declared as data.

An op definition's ``grad`` field holds a :class:`GradMaker`; ``append_backward``
asks it for the grad ops of one forward op.  The common case is one
``<type>_grad`` op that reads some of the forward inputs/outputs and the
gradients of the outputs, and writes the gradients of the inputs::

    define_default_grad("relu", uses=("Out",))

registers ``relu_grad`` (slots ``Out``, ``Out@GRAD`` -> ``X@GRAD``, the forward
attributes) and sets ``relu``'s maker.  Ops that legitimately have no gradient
say why with ``no_grad``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .registry import InferContext, OpDef, Slot, get_op, register_op

if TYPE_CHECKING:
    from .program import Operator

GRAD_SUFFIX = "@GRAD"
EMPTY_VAR_NAME = "@EMPTY@"

#: why an op may have no gradient (the only accepted reasons)
NO_GRAD_REASONS = {
    "io": "moves data in or out of the program (feed, fetch)",
    "creation": "creates a tensor from attributes only (fill_constant, random)",
    "metric": "an evaluation result, not a training signal (accuracy, top_k, arg_max)",
    "integer": "produces integers or booleans only (comparisons, logical ops, increment)",
    "backward": "is itself part of the backward pass (grad ops, fill_zeros_like, sum of grads)",
    "optimize": "updates parameters after the backward pass (optimizer and lr-schedule ops)",
}


def grad_var_name(name: str) -> str:
    return name + GRAD_SUFFIX


@dataclass(frozen=True)
class GradOpSpec:
    """One grad op to append: what a maker returns."""

    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict[str, Any] = field(default_factory=dict)


class GradContext:
    """What a maker sees: the forward op and the names of the gradients involved.

    ``input_grad(slot)`` gives, per input variable, its gradient name or
    :data:`EMPTY_VAR_NAME` where no gradient is wanted (stop_gradient,
    no_grad_set, integer); ``output_grad(slot)`` the gradients flowing in.
    """

    def __init__(self, op: Operator, input_grad_names: dict[str, list[str]],
                 output_grad_names: dict[str, list[str]]) -> None:
        self.op = op
        self._in_grads = input_grad_names
        self._out_grads = output_grad_names

    def input(self, slot: str) -> list[str]:
        return self.op.input(slot)

    def output(self, slot: str) -> list[str]:
        return self.op.output(slot)

    def input_grad(self, slot: str) -> list[str]:
        return self._in_grads.get(slot, [EMPTY_VAR_NAME] * len(self.op.input(slot)))

    def output_grad(self, slot: str) -> list[str]:
        return self._out_grads.get(slot, [])

    def attrs(self) -> dict[str, Any]:
        return {k: v for k, v in self.op.all_attrs().items() if not k.startswith("op_")}


MakerFn = Callable[[GradContext], list[GradOpSpec]]


@dataclass(frozen=True)
class GradMaker:
    """How an op's gradient is built.

    ``out_grads``: output slots whose gradients the grad ops read;
    ``in_grads``: input slots the grad ops produce gradients for (the others,
    e.g. integer labels, never get one); ``make`` builds the grad op specs.
    """

    out_grads: tuple[str, ...]
    in_grads: tuple[str, ...]
    make: MakerFn


@dataclass(frozen=True)
class NoGrad:
    """Marks an op that has no gradient, with one of :data:`NO_GRAD_REASONS`."""

    reason: str

    def __post_init__(self) -> None:
        if self.reason not in NO_GRAD_REASONS:
            raise ValueError(f"unknown no-grad reason {self.reason!r}; "
                             f"known: {sorted(NO_GRAD_REASONS)}")


def no_grad(reason: str, *op_types: str) -> None:
    """Declare ``op_types`` as having no gradient, for ``reason``."""
    for t in op_types:
        get_op(t).grad = NoGrad(reason)


def _noop_infer(ctx: InferContext) -> None:
    """Grad vars are created by append_backward with their forward var's shape."""


def define_default_grad(
    fwd_type: str,
    uses: Sequence[str] = ("X",),
    out_grads: Sequence[str] | None = None,
    in_grads: Sequence[str] | None = None,
    grad_type: str | None = None,
    infer: Callable[[InferContext], None] | None = None,
    updates: Sequence[str] = (),
) -> OpDef:
    """Give ``fwd_type`` the standard maker and register its ``<type>_grad`` op.

    ``uses``: forward input/output slots the grad kernel reads.  ``out_grads``
    defaults to the forward op's non-intermediate outputs, ``in_grads`` to all of
    its inputs.  ``updates``: output slots whose gradient the grad op also writes,
    in place (a tensor-array gradient it consumes: ``write_to_array`` replaces an
    entry, so the entry's earlier value gets none of the gradient that reached it).
    The grad op has the forward op's attributes.
    """
    fwd = get_op(fwd_type)
    gtype = grad_type or f"{fwd_type}_grad"
    og = tuple(out_grads if out_grads is not None
               else [s.name for s in fwd.outputs if not s.intermediate])
    ig = tuple(in_grads if in_grads is not None else [s.name for s in fwd.inputs])
    slots_by_name = {s.name: s for s in (*fwd.inputs, *fwd.outputs)}
    for u in uses:
        if u not in slots_by_name:
            raise ValueError(f"{fwd_type}: grad uses unknown slot {u!r}")
    for u in updates:
        if u not in og:
            raise ValueError(f"{fwd_type}: grad updates {u!r}, which is not one of the "
                             f"output gradients it reads {list(og)}")

    def dup(name: str) -> bool:
        s = slots_by_name.get(name)
        return bool(s and s.duplicable)

    gdef = OpDef(
        gtype,
        inputs=tuple(Slot(u, duplicable=dup(u), dispensable=True) for u in uses)
        + tuple(Slot(grad_var_name(s), duplicable=dup(s), dispensable=True) for s in og),
        outputs=tuple(Slot(grad_var_name(s), duplicable=dup(s), dispensable=True)
                      for s in (*ig, *updates)),
        attrs=fwd.attrs,
        infer=infer or _noop_infer,
        doc=f"Gradient of {fwd_type}.",
        grad=NoGrad("backward"),
    )
    register_op(gdef)

    def make(g: GradContext) -> list[GradOpSpec]:
        ins: dict[str, list[str]] = {}
        for u in uses:
            names = g.input(u) or g.output(u)
            if names:
                ins[u] = names
        for s in og:
            if g.output_grad(s):
                ins[grad_var_name(s)] = g.output_grad(s)
        outs = {grad_var_name(s): g.input_grad(s) for s in ig if g.input(s)}
        for s in updates:
            if g.output_grad(s):
                outs[grad_var_name(s)] = g.output_grad(s)
        return [GradOpSpec(gtype, ins, outs, g.attrs())]

    fwd.grad = GradMaker(og, ig, make)
    return gdef
