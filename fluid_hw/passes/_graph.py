"""Def-use facts about a program's global block, shared by the passes.

Reads and writes of an op that holds sub-blocks include everything its sub-blocks
read and write: such an op is one opaque node.  Every variable a sub-block
touches is *protected*: no pass renames, removes or fuses it away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FluidError
from ..ir import framework_pb2 as pb
from ..ir.grad import EMPTY_VAR_NAME
from ..ir.program import Block, Operator, Program, Variable, VarType
from ..ir.scope import Scope
from .base import ParamStore, PassContext, get_value, set_value

#: op types whose running has an effect besides their outputs
SIDE_EFFECT_OPS = frozenset({"feed", "fetch", "print", "save", "load", "save_combine",
                             "load_combine", "send", "recv", "send_barrier", "fetch_barrier",
                             "listen_and_serv", "increment"})
#: variable kinds that carry data between executor and program, never touched
IO_KINDS = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST)


def _block_access(program: Program, block: Block) -> tuple[set[str], set[str]]:
    reads: set[str] = set()
    writes: set[str] = set()
    for op in block.ops:
        r, w = op_access(program, op)
        reads |= r
        writes |= w
    return reads, writes


def op_access(program: Program, op: Operator) -> tuple[set[str], set[str]]:
    """(names ``op`` may read, names it may write), sub-blocks included."""
    reads = set(op.input_arg_names)
    writes = {n for n in op.output_arg_names if n != EMPTY_VAR_NAME}
    for bi in op.sub_block_indices():
        r, w = _block_access(program, program.block(bi))
        reads |= r
        writes |= w
    return reads, writes


def sub_block_names(program: Program) -> set[str]:
    """Every name an op holding a sub-block (or any op inside one) reads or writes."""
    names: set[str] = set()
    for b in program.blocks:
        for op in b.ops:
            if b.idx > 0 or op.sub_block_indices():
                r, w = op_access(program, op)
                names |= r | w
    return names


def fetch_targets(program: Program, ctx: PassContext) -> list[str] | None:
    """The program's outputs: ``ctx.fetch_names``, else its fetch ops; None if unknown."""
    if ctx.fetch_names is not None:
        return list(ctx.fetch_names)
    return program.get_fetch_target_names() or None


def feed_targets(program: Program, ctx: PassContext) -> list[str]:
    if ctx.feed_names is not None:
        return list(ctx.feed_names)
    return program.get_feed_target_names()


def protected_names(program: Program, ctx: PassContext) -> set[str]:
    """Names no pass may rename or remove: inputs, outputs, sub-block variables."""
    out = (set(program.get_feed_target_names()) | set(program.get_fetch_target_names())
           | sub_block_names(program))
    out |= set(ctx.feed_names or ()) | set(ctx.fetch_names or ())
    out |= {v.name for v in program.global_block().vars.values() if v.type in IO_KINDS}
    return out


def has_side_effect(op: Operator) -> bool:
    """Feed/fetch and I/O ops, ops holding sub-blocks, ops drawing from the executor's
    random stream, and ops that change persistable state."""
    if op.type in SIDE_EFFECT_OPS or op.sub_block_indices():
        return True
    attrs = op.all_attrs()
    if "seed" in attrs and not attrs.get("is_test", False):
        return True
    ins = set(op.input_arg_names)
    for n in op.output_arg_names:
        v = op.block._find_var_recursive(n)
        # a test-mode op passing its own persistable input through changes nothing
        if v is not None and v.persistable and v.type not in IO_KINDS and \
                not (attrs.get("is_test", False) and n in ins):
            return True
    return False


class BlockGraph:
    """Producers and consumers of every name in the global block (indices into its ops)."""

    def __init__(self, program: Program, ctx: PassContext) -> None:
        self.program = program
        self.block = program.global_block()
        self.protected = protected_names(program, ctx)
        self.producers: dict[str, list[int]] = {}
        self.consumers: dict[str, list[int]] = {}
        for i, op in enumerate(self.block.ops):
            r, w = op_access(program, op)
            for n in r:
                self.consumers.setdefault(n, []).append(i)
            for n in w:
                self.producers.setdefault(n, []).append(i)

    def var(self, name: str) -> Variable | None:
        return self.block._find_var_recursive(name)

    def op(self, i: int) -> Operator:
        return self.block.ops[i]

    def only_consumer(self, name: str) -> int | None:
        c = self.consumers.get(name, [])
        return c[0] if len(c) == 1 else None

    def is_internal(self, name: str) -> bool:
        """A temporary no one outside the program sees: one producer, not persistable,
        not protected, declared in the global block."""
        v = self.block.vars.get(name)
        return (v is not None and not v.persistable and name not in self.protected
                and len(self.producers.get(name, [])) == 1)

    def fusable_link(self, name: str, consumer: int) -> bool:
        """``name`` only carries a value to op ``consumer``: it can disappear in a fusion."""
        return self.is_internal(name) and self.consumers.get(name, []) == [consumer]

    def unused(self, name: str) -> bool:
        return not self.consumers.get(name) and name not in self.protected

    def is_constant_param(self, name: str, store: ParamStore | None) -> bool:
        """A persistable variable with a value in ``store`` that no op writes."""
        v = self.var(name)
        return (v is not None and v.persistable and store is not None
                and get_value(store, name) is not None and not self.producers.get(name)
                and name not in self.protected)


@dataclass
class OpSpec:
    """A new op for :func:`rebuild_block`."""

    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict[str, Any]


def rebuild_block(block: Block, items: Sequence[pb.OpDesc | OpSpec]) -> None:
    """Replace the block's ops by ``items``: existing descs are copied verbatim, new
    specs are appended (attributes checked, output shapes inferred)."""
    saved = [pb.OpDesc.FromString(d.SerializeToString()) if isinstance(d, pb.OpDesc) else d
             for d in items]
    del block.desc.ops[:]
    block.ops.clear()
    for it in saved:
        if isinstance(it, OpSpec):
            block.append_op(it.type, it.inputs, it.outputs, it.attrs)
        else:
            d = block.desc.ops.add()
            d.CopyFrom(it)
            block.ops.append(Operator(block, d))
    block.program._bump()


def replace_reads(block: Block, old: str, new: str, start: int = 0) -> None:
    """Ops from ``start`` on read ``new`` wherever they read ``old``."""
    for op in block.ops[start:]:
        if old in op.input_arg_names:
            op._rename_input(old, new)


def remove_unused_vars(program: Program, ctx: PassContext,
                       candidates: Iterable[str] | None = None) -> list[str]:
    """Drop global variables no op of any block references (and not protected).
    ``candidates`` limits the check to those names.  Returns the removed names."""
    gb = program.global_block()
    used: set[str] = set()
    for b in program.blocks:
        for op in b.ops:
            used |= set(op.input_arg_names) | set(op.output_arg_names)
    keep = protected_names(program, ctx)
    names = list(gb.vars) if candidates is None else [n for n in candidates if n in gb.vars]
    removed = []
    for n in names:
        v = gb.vars[n]
        if n in used or n in keep or v.type in IO_KINDS:
            continue
        gb._remove_var(n)
        removed.append(n)
    return removed


def fresh_name(block: Block, base: str, store: ParamStore | None = None,
               value: np.ndarray | None = None) -> str:
    """``base`` (or ``base_1``, ...) that no variable of the block has and that the
    store holds no different value under."""
    i = 0
    while True:
        name = base if i == 0 else f"{base}_{i}"
        taken = block._find_var_recursive(name) is not None
        if not taken and store is not None:
            old = get_value(store, name)
            taken = old is not None and (value is None or old.shape != value.shape
                                         or old.dtype != value.dtype
                                         or not np.array_equal(old, value))
        if not taken:
            return name
        i += 1


def drop_value(store: ParamStore, name: str) -> None:
    """Remove ``name``'s value from ``store`` (a Scope or a dict)."""
    if isinstance(store, Scope):
        store.vars.pop(name, None)
    else:
        store.pop(name, None)


def add_param(block: Block, store: ParamStore, base: str, value: np.ndarray,
              like: Variable | None = None, exact: bool = False, parameter: bool = True) -> str:
    """A new persistable variable holding ``value`` (written into ``store``), named
    ``base`` (exactly, with ``exact``; else a fresh variant of it).  Its flags come from
    ``like``; without one it is a non-trainable parameter (or, with ``parameter=False``,
    a plain persistable)."""
    name = base if exact else fresh_name(block, base, store, value)
    block.create_var(name=name, shape=list(value.shape), dtype=value.dtype, persistable=True,
                     is_parameter=parameter if like is None else like.is_parameter,
                     trainable=False if like is None else like.trainable,
                     stop_gradient=True if like is None else like.stop_gradient)
    set_value(store, name, value)
    return name


def attrs_of(op: Operator, drop: Iterable[str] = ()) -> dict[str, Any]:
    """An op's attributes minus ``drop`` (annotations like op_role included)."""
    d = set(drop)
    return {k: v for k, v in op.all_attrs().items() if k not in d}


@dataclass
class Match:
    """What a pattern matcher found: the matched ops (indices), the ops replacing them
    (placed where the last matched op was) and new parameters those read."""

    ops: list[int]
    specs: list[OpSpec]
    #: (name, value, variable to copy flags from): created only when the match is applied
    new_params: list[tuple[str, np.ndarray, Variable | None]] = field(default_factory=list)


#: finds a pattern at op i, or None
Matcher = Callable[[BlockGraph, int], Match | None]


def _replaceable(g: BlockGraph, m: Match) -> bool:
    """The matched ops can become the specs at the last of them: what they write and the
    specs do not is read by them alone (or is an op's own input written back unchanged,
    as a test-mode batch_norm does with its statistics), and no input of the specs
    changes in between."""
    kept_out = {n for s in m.specs for ns in s.outputs.values() for n in ns}
    for k in m.ops:
        op = g.op(k)
        passthrough = not has_side_effect(op)
        for n in op.output_arg_names:
            if n in kept_out or (passthrough and n in op.input_arg_names):
                continue
            v = g.var(n)
            if n in g.protected or (v is not None and v.persistable) or \
                    not set(g.consumers.get(n, [])) <= set(m.ops):
                return False
    first, last = min(m.ops), max(m.ops)
    for s in m.specs:
        for ns in s.inputs.values():
            for n in ns:
                if any(first <= p < last and p not in m.ops for p in g.producers.get(n, [])):
                    return False
    return True


def _apply_match(g: BlockGraph, m: Match, ctx: PassContext) -> bool:
    """Put ``m``'s specs in place of its ops.  When the specs cannot be built (their
    attributes or shape inference refuse what the program declares: the verifier does
    not re-infer shapes, so a program it accepts may be inconsistent), the block and the
    scope are left as they were and False is returned: the match is skipped."""
    block = g.block
    saved = pb.BlockDesc.FromString(block.desc.SerializeToString())
    added = [n for n, _, _ in m.new_params
             if ctx.scope is not None and get_value(ctx.scope, n) is None]
    try:
        for name, value, like in m.new_params:
            assert ctx.scope is not None
            add_param(block, ctx.scope, name, value, like, exact=True)
        last = max(m.ops)
        items: list = []
        for k, op in enumerate(block.ops):
            if k == last:
                items += m.specs
            elif k not in m.ops:
                items.append(op.desc)
        rebuild_block(block, items)
    except FluidError:
        block.desc.CopyFrom(saved)
        block._sync_with_desc()
        for n in added:
            drop_value(ctx.scope, n)  # type: ignore[arg-type]
        return False
    return True


def fuse_matches(program: Program, ctx: PassContext, matcher: Matcher) -> bool:
    """Replace every match of ``matcher`` (tried at each op in turn) by its specs."""
    changed = False
    dropped: set[str] = set()
    i = 0
    while True:
        g = BlockGraph(program, ctx)
        if i >= len(g.block.ops):
            break
        m = matcher(g, i)
        if m is None or not _replaceable(g, m):
            i += 1
            continue
        kept = {n for s in m.specs for ns in s.outputs.values() for n in ns}
        gone = {n for k in m.ops for n in g.op(k).output_arg_names} - kept
        gone |= {n for k in m.ops for n in g.op(k).input_arg_names}
        if not _apply_match(g, m, ctx):
            i += 1
            continue
        dropped |= gone
        changed = True
    remove_unused_vars(program, ctx, dropped)
    return changed
