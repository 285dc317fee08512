"""``memory_reuse``: temporaries whose lifetimes do not overlap share one name, hence one
buffer in the scope (Fluid's ``memory_optimize``).

The CPU executor keeps every variable's latest value in the scope until the run
ends, so a program holds one buffer per temporary name.  Walking the global
block in order, a temporary is live from the op that writes it to the last op
that reads it.  When it dies its name goes to a free pool (after the op's own
outputs are placed, so an op never writes over its own input); an output of a
later op with the same dtype, shape and LoD level takes a pooled name instead of
its own.  Kernels never write into their inputs, so rebinding a name never
changes a value someone still reads.

Never renamed: feed and fetch targets, persistable variables, names a sub-block
reads or writes (the ops holding sub-blocks are opaque), variables written by
more than one op or written by an op that also reads them, non-tensor kinds.

The plan (peak bytes before and after, the renames) is left in
``ctx.reports["memory_reuse"]`` as a :class:`MemoryPlan`.  Unknown (-1) dims
count as ``batch_size`` (an option, default 1) for the byte figures only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir import dtypes
from ..ir.program import Program, Variable, VarType
from ._graph import BlockGraph, op_access
from .base import Pass, PassContext, register_pass


@dataclass
class MemoryPlan:
    """Bytes the scope holds at the end of a run (the executor's peak) before and after."""

    peak_bytes_before: int
    peak_bytes_after: int
    renames: dict[str, str] = field(default_factory=dict)  # old name -> shared name
    batch_size: int = 1

    @property
    def ratio(self) -> float:
        return self.peak_bytes_after / self.peak_bytes_before if self.peak_bytes_before else 1.0

    def __str__(self) -> str:
        return (f"memory_reuse: {len(self.renames)} temporaries share buffers; peak "
                f"{self.peak_bytes_before} -> {self.peak_bytes_after} bytes "
                f"({self.ratio:.2f}x, batch {self.batch_size})")


def var_bytes(v: Variable, batch_size: int) -> int:
    if v.dtype not in dtypes.TENSOR_DTYPES:
        return 0
    n = math.prod(batch_size if d < 0 else d for d in v.shape) if v.shape else 1
    return n * dtypes.to_numpy(v.dtype).itemsize


def _key(v: Variable) -> tuple[int, tuple[int, ...], int]:
    return v.dtype, tuple(v.shape), v.lod_level


def plan_memory(program: Program, ctx: PassContext, batch_size: int = 1) -> MemoryPlan:
    """The renames memory_reuse would make, and the bytes before and after."""
    g = BlockGraph(program, ctx)
    gb = g.block
    ops = gb.ops
    last_use: dict[str, int] = {}
    for i, op in enumerate(ops):
        reads, writes = op_access(program, op)
        for n in reads | writes:
            last_use[n] = i
    movable: set[str] = set()
    for n, prods in g.producers.items():
        v = gb.vars.get(n)
        if v is None or v.persistable or v.type != VarType.LOD_TENSOR or n in g.protected:
            continue
        if len(prods) != 1 or n in op_access(program, ops[prods[0]])[0]:
            continue
        movable.add(n)
    dies_at: dict[int, list[str]] = {}
    for n in sorted(movable):
        dies_at.setdefault(last_use[n], []).append(n)
    pool: dict[tuple[int, tuple[int, ...], int], list[str]] = {}
    renames: dict[str, str] = {}
    for i, op in enumerate(ops):
        _, writes = op_access(program, op)
        for n in sorted(writes & movable):
            free = pool.get(_key(gb.vars[n]))
            if free:
                renames[n] = free.pop()
        for n in dies_at.get(i, []):  # free only after this op's outputs are placed
            pool.setdefault(_key(gb.vars[n]), []).append(renames.get(n, n))
    before = sum(var_bytes(v, batch_size) for n, v in gb.vars.items()
                 if not v.persistable and (n in g.producers or n in g.consumers))
    after = before - sum(var_bytes(gb.vars[n], batch_size) for n in renames)
    return MemoryPlan(before, after, renames, batch_size)


@register_pass
class MemoryReuse(Pass):
    name = "memory_reuse"

    def __init__(self, batch_size: int = 1) -> None:
        self.batch_size = batch_size

    def run(self, program: Program, ctx: PassContext) -> bool:
        plan = plan_memory(program, ctx, self.batch_size)
        ctx.reports[self.name] = plan
        gb = program.global_block()
        for op in gb.ops:
            for old, new in plan.renames.items():
                if old in op.input_arg_names:
                    op._rename_input(old, new)
                if old in op.output_arg_names:
                    op._rename_output(old, new)
        for old in plan.renames:
            gb._remove_var(old)
        return bool(plan.renames)
