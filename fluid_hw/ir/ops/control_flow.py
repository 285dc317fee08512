"""Ops with sub-blocks: ``while`` and ``conditional_block``, and their gradients.

A program is nested blocks, not a DAG.  ``while`` runs its ``sub_block`` again
and again while the one-element bool ``Condition`` is true, each step in a fresh
*step scope* (a child of the op's scope); the body updates ``Condition``.  The
step scopes are kept (output ``StepScopes``) so that ``while_grad`` can run the
gradient block in each of them, last step first.  ``conditional_block`` runs its
``sub_block`` once, in a child scope, when its condition holds: with
``is_scalar_condition`` when the one-element bool ``Cond`` is true, otherwise when
every ``Cond`` tensor has rows (``IfElse`` hands each branch just its rows).

Slots, as in Fluid: ``X``/``Input`` list the outer variables the body reads,
``Out`` the outer variables it writes.  The gradient block of a sub-block is
built by :func:`fluid_hw.frontend.backward.append_backward`; the makers here only
wrap it into the ``*_grad`` op (the context then carries ``grad_block``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import GradientError
from .. import dtypes
from ..grad import GradContext, GradMaker, GradOpSpec, NoGrad
from ..registry import Attr, InferContext, OpDef, Slot, register_op

if TYPE_CHECKING:
    from ..program import Operator

_BOOL = dtypes.VarType.BOOL
STEP_SCOPES = dtypes.VarType.STEP_SCOPES


def _check_sub_block(ctx: InferContext, name: str = "sub_block") -> None:
    idx = ctx.attr(name)
    program = ctx.op.block.program
    ctx.check(0 < idx < len(program.blocks) and idx != ctx.op.block.idx,
              f"attribute {name}={idx} is not a sub-block (program has "
              f"{len(program.blocks)} blocks)")
    parent = program.blocks[idx].parent_idx
    ctx.check(parent == ctx.op.block.idx,
              f"sub-block {idx} has parent block {parent}, but the op is in block "
              f"{ctx.op.block.idx}")


def _check_scalar_bool(ctx: InferContext, slot: str) -> None:
    v = ctx.input_var(slot)
    ctx.check(v.dtype == _BOOL, f"{slot} {v.name!r} must be bool, got {v.dtype_name}")
    ctx.check(math.prod(v.shape) in (1, -1),
              f"{slot} {v.name!r} must hold one element, has shape {list(v.shape)}")


def _check_scopes(ctx: InferContext, slot: str) -> None:
    for n in ctx.op.output(slot):
        v = ctx.op.block._var_recursive(n)
        ctx.check(v.type == STEP_SCOPES,
                  f"output {slot} {n!r} must be a STEP_SCOPES variable, is {v.type_name}")


def _while_infer(ctx: InferContext) -> None:
    _check_scalar_bool(ctx, "Condition")
    _check_sub_block(ctx)
    _check_scopes(ctx, "StepScopes")


def _cond_infer(ctx: InferContext) -> None:
    if ctx.attr("is_scalar_condition"):
        _check_scalar_bool(ctx, "Cond")
    _check_sub_block(ctx)
    _check_scopes(ctx, "Scope")


def _grad_infer(ctx: InferContext) -> None:
    _check_sub_block(ctx)


def _grad_block(g: GradContext, op_type: str) -> int:
    blk = getattr(g, "grad_block", None)
    if blk is None:
        raise GradientError(f"op {op_type} has a sub-block; its gradient is built by "
                            "append_backward, which creates the gradient block")
    return int(blk)


def _make_while_grad(g: GradContext) -> list[GradOpSpec]:
    blk = _grad_block(g, "while")
    ins = {"X": g.input("X"), "Out": g.output("Out"), "StepScopes": g.output("StepScopes")}
    og = g.output_grad("Out")
    if og:
        ins["Out@GRAD"] = og
    attrs = {**g.attrs(), "sub_block": blk}
    return [GradOpSpec("while_grad", ins, {"X@GRAD": g.input_grad("X")}, attrs)]


def _make_cond_grad(g: GradContext) -> list[GradOpSpec]:
    blk = _grad_block(g, "conditional_block")
    ins = {"Cond": g.input("Cond"), "Input": g.input("Input"), "Out": g.output("Out"),
           "Scope": g.output("Scope")}
    og = g.output_grad("Out")
    if og:
        ins["Out@GRAD"] = og
    attrs = {**g.attrs(), "sub_block": blk}
    return [GradOpSpec("conditional_block_grad", ins, {"Input@GRAD": g.input_grad("Input")},
                       attrs)]



def _dup(name: str, doc: str = "") -> Slot:
    """A slot taking any number of variables, possibly none."""
    return Slot(name, duplicable=True, dispensable=True, doc=doc)


register_op(OpDef(
    "while",
    inputs=(_dup("X", "outer variables the body reads"),
            Slot("Condition", doc="one-element bool; the body updates it")),
    outputs=(_dup("Out", "outer variables the body writes"),
             Slot("StepScopes", doc="the step scopes, kept for while_grad")),
    attrs=(Attr("sub_block", "block", doc="the loop body"),
           Attr("is_test", "bool", False, doc="inference: step scopes are not kept")),
    infer=_while_infer,
    doc="Run sub_block while Condition holds, each step in a fresh child scope.",
    grad=GradMaker(("Out",), ("X",), _make_while_grad),
))

register_op(OpDef(
    "while_grad",
    inputs=(_dup("X"), _dup("Out"), Slot("StepScopes"), _dup("Out@GRAD")),
    outputs=(_dup("X@GRAD"),),
    attrs=(Attr("sub_block", "block", doc="the gradient block of the loop body"),
           Attr("is_test", "bool", False)),
    infer=_grad_infer,
    doc="Run the gradient block in each step scope of the forward loop, last step "
    "first; X@GRAD sums the per-step gradients of the outer tensors (tensor-array "
    "gradients are accumulated in place by the gradient block).",
    grad=NoGrad("backward"),
))

register_op(OpDef(
    "conditional_block",
    inputs=(Slot("Cond", duplicable=True,
                 doc="one-element bool (is_scalar_condition) or tensors that must all "
                 "have rows"),
            _dup("Input", "outer variables the block reads")),
    outputs=(_dup("Out", "outer variables the block writes"),
             Slot("Scope", doc="the scope the block ran in (empty when it did not run)")),
    attrs=(Attr("sub_block", "block"),
           Attr("is_scalar_condition", "bool", False)),
    infer=_cond_infer,
    doc="Run sub_block once, in a child scope, when the condition holds.",
    grad=GradMaker(("Out",), ("Input",), _make_cond_grad),
))

register_op(OpDef(
    "conditional_block_grad",
    inputs=(Slot("Cond", duplicable=True), _dup("Input"), _dup("Out"), Slot("Scope"),
            _dup("Out@GRAD")),
    outputs=(_dup("Input@GRAD"),),
    attrs=(Attr("sub_block", "block"), Attr("is_scalar_condition", "bool", False)),
    infer=_grad_infer,
    doc="Run the gradient block in the forward block's scope (zeros when the forward "
    "block did not run).",
    grad=NoGrad("backward"),
))


# -- what append_backward needs to know about sub-block ops -----------------------------

@dataclass(frozen=True)
class SubBlockSpec:
    """How an op with a sub-block is differentiated: the slots listing the outer
    variables the block reads and writes, and whether the block may run many times
    (then the gradient block runs once per step scope, last step first)."""

    inputs: str
    outputs: str
    loop: bool


SUB_BLOCK_OPS: dict[str, SubBlockSpec] = {
    "while": SubBlockSpec("X", "Out", loop=True),
    "conditional_block": SubBlockSpec("Input", "Out", loop=False),
}


def _undo_increment(op: Operator) -> GradOpSpec:
    x, out = op.input("X")[0], op.output("Out")[0]
    return GradOpSpec("increment", {"X": [out]}, {"Out": [x]}, {"step": -op.attr("step")})


#: ops that update an outer counter in place inside a loop body, and the op that
#: undoes one step: the gradient block replays them backwards so that, at each step,
#: it reads the counter value the forward step saw (Fluid's increment trick)
REVERSIBLE_OPS: dict[str, Callable[[Operator], GradOpSpec]] = {
    "increment": _undo_increment,
}
