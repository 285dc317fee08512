"""Pruning a program down to what computes a set of targets.

Used by ``io.save_inference_model`` and by the ``prune`` pass.  Ops with
sub-blocks are kept or dropped whole; their sub-blocks are never edited.
"""

from __future__ import annotations

from collections.abc import Iterable

from .program import Block, Operator, Program


def _reads(program: Program, op: Operator) -> set[str]:
    """Every name ``op`` may read, including names its sub-blocks read from outside."""
    names = set(op.input_arg_names)
    for bi in op.sub_block_indices():
        names |= _block_reads(program.block(bi))
    return names


def _block_reads(block: Block) -> set[str]:
    reads: set[str] = set()
    for op in block.ops:
        reads |= _reads(block.program, op)
    return reads


def prune(program: Program, feed_names: Iterable[str], targets: Iterable[str]) -> Program:
    """A copy of ``program`` whose global block holds only the ops that ``targets``
    need, given that ``feed_names`` are fed; unused global variables are dropped."""
    p = program.clone()
    gb = p.global_block()
    feeds = set(feed_names)
    needed = set(targets)
    keep: list[bool] = [False] * len(gb.ops)
    for i in range(len(gb.ops) - 1, -1, -1):
        op = gb.ops[i]
        if op.type in ("feed", "fetch"):
            continue
        outs = set(op.output_arg_names)
        if outs & (needed - feeds):
            keep[i] = True
            needed |= _reads(p, op)
    for i in range(len(gb.ops) - 1, -1, -1):
        if not keep[i]:
            gb._remove_op(i)
    used = set(needed) | feeds
    for op in gb.ops:
        used |= set(op.output_arg_names)
    for b in p.blocks[1:]:
        used |= _block_reads(b)
        for op in b.ops:
            used |= set(op.output_arg_names)
    for name in [n for n in gb.vars if n not in used]:
        gb._remove_var(name)
    return p
