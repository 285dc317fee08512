"""Kernels of the ops with sub-blocks: ``while``, ``conditional_block`` and their grads.

A sub-block runs through :meth:`Executor.run_block` (bound to kernels once per
program version) in a child scope of the op's scope, so variables declared in the
sub-block live in that child scope and outer variables are read and written where
they live (see :meth:`KernelContext.owner_scope`).

``while`` keeps one scope per step; ``while_grad`` runs the gradient block in
each of them, last step first.  Gradients of outer *tensors* (parameters, inputs
read by the body) are computed per step under ``<name>@GRAD`` inside the step
scope and summed into the op's ``X@GRAD`` outputs; gradients of outer *tensor
arrays* are accumulated in place, entry by entry, by the gradient block itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import ExecutionError
from ....ir.grad import EMPTY_VAR_NAME, grad_var_name
from ....ir.lod import LoDTensor
from ....ir.program import Block, VarType
from ....ir.scope import Scope
from ..context import KernelContext
from . import register_kernel


def _sub_block(ctx: KernelContext) -> Block:
    return ctx.op.block.program.block(ctx.attrs["sub_block"])


def _executor(ctx: KernelContext) -> Any:
    if ctx.executor is None:
        raise ExecutionError(f"op {ctx.op_type} #{ctx.op_index}: a sub-block needs an "
                             "executor to run it; run the program with Executor.run")
    return ctx.executor


def _truth(value: Any, what: str) -> bool:
    a = np.asarray(value.data if isinstance(value, LoDTensor) else value)
    if a.size != 1:
        raise ValueError(f"{what} must hold one bool, has shape {list(a.shape)}")
    return bool(a.reshape(()))


def _run(ctx: KernelContext, block: Block, scope: Scope, what: str) -> None:
    try:
        _executor(ctx).run_block(block, scope)
    except ExecutionError as e:
        raise ExecutionError(f"{ctx.op_type} (block {ctx.block_idx}, op #{ctx.op_index}), "
                             f"{what}: {e}") from e


# -- forward ---------------------------------------------------------------------------

@register_kernel("while")
def while_(ctx: KernelContext) -> None:
    block = _sub_block(ctx)
    keep = not ctx.attrs["is_test"]
    cond = ctx.in_names["Condition"][0]
    scopes: list[Scope] = []
    step = 0
    limit = getattr(ctx.executor, "max_while_steps", None)
    while _truth(ctx.input("Condition"), f"Condition {cond!r}"):
        if limit is not None and step >= limit:
            raise ExecutionError(f"while (block {ctx.block_idx}, op #{ctx.op_index}): "
                                 f"Condition {cond!r} still true after {limit} steps "
                                 "(Executor.max_while_steps); does the body update it?")
        scope = Scope(ctx.scope)
        _run(ctx, block, scope, f"step {step}")
        if keep:
            scopes.append(scope)
        step += 1
    ctx.set_output("StepScopes", scopes)


@register_kernel("conditional_block")
def conditional_block(ctx: KernelContext) -> None:
    if ctx.attrs["is_scalar_condition"]:
        run = _truth(ctx.input("Cond"), f"Cond {ctx.in_names['Cond'][0]!r}")
    else:
        run = all(np.asarray(c).size > 0 for c in ctx.inputs("Cond"))
    scopes: list[Scope] = []
    if run:
        scope = Scope(ctx.scope)
        _run(ctx, _sub_block(ctx), scope, "block")
        scopes.append(scope)
    ctx.set_output("Scope", scopes)


# -- gradients ---------------------------------------------------------------------------

def _tensor_grads(ctx: KernelContext, slot: str) -> list[tuple[int, str]]:
    """``(j, inner name)`` for each input ``slot[j]`` that is a tensor whose gradient is
    wanted (arrays are accumulated in place by the gradient block).  Cached per op."""
    cache = ctx.__dict__.get("_grad_plan")
    if cache is None:
        cache = []
        grads = ctx.out_names.get(f"{slot}@GRAD", [])
        for j, (x, g) in enumerate(zip(ctx.in_names.get(slot, []), grads)):
            if g == EMPTY_VAR_NAME:
                continue
            v = ctx.op.block._find_var_recursive(x)
            if v is not None and v.type == VarType.LOD_TENSOR_ARRAY:
                continue
            cache.append((j, grad_var_name(x)))
        ctx.__dict__["_grad_plan"] = cache
    return cache


def _data(v: Any) -> np.ndarray:
    return np.asarray(v.data if isinstance(v, LoDTensor) else v)


def _set_grads(ctx: KernelContext, slot: str, plan: list[tuple[int, str]],
               totals: dict[int, np.ndarray]) -> None:
    for j, _ in plan:
        g = totals.get(j)
        if g is None:
            g = np.zeros_like(ctx.input(slot, j))
        ctx.set_output(f"{slot}@GRAD", g, j)


@register_kernel("while_grad")
def while_grad(ctx: KernelContext) -> None:
    block = _sub_block(ctx)
    scopes = ctx.input_value("StepScopes")
    plan = _tensor_grads(ctx, "X")
    totals: dict[int, np.ndarray] = {}
    for k in range(len(scopes) - 1, -1, -1):
        scope = scopes[k]
        _run(ctx, block, scope, f"gradient of step {k}")
        for j, inner in plan:
            v = scope.vars.get(inner)
            if v is None:
                continue
            v = _data(v)
            totals[j] = v.copy() if j not in totals else totals[j] + v
    _set_grads(ctx, "X", plan, totals)


@register_kernel("conditional_block_grad")
def conditional_block_grad(ctx: KernelContext) -> None:
    scopes = ctx.input_value("Scope")
    plan = _tensor_grads(ctx, "Input")
    totals: dict[int, np.ndarray] = {}
    if scopes:
        scope = scopes[0]
        _run(ctx, _sub_block(ctx), scope, "gradient block")
        for j, inner in plan:
            v = scope.vars.get(inner)
            if v is not None:
                totals[j] = _data(v)
    _set_grads(ctx, "Input", plan, totals)
