"""The parts of a DynamicRNN / StaticRNN loop (the frontend's bookkeeping ops around and
inside the ``while``'s sub-block) and the linear maps (fcs) of its body, for
``rnn_loop_to_sequence`` (:mod:`.quantize_rnn_loop`).  Anything that is not the
frontend's exact pattern raises :class:`NotALoopCell` with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import NotALoopCell
from ..ir.program import Block, Operator, Program
from .base import get_value

__all__ = ["Affine", "Body", "Loop", "NotALoopCell", "one", "parse_loop"]


@dataclass
class Loop:
    """A DynamicRNN's parts: global op indices and body names."""

    index: int                      # the while op
    body: Block
    x: str                          # the LoD sequence (StaticRNN: [T, N, D]) stepped over
    word: str                       # the step input in the body
    static: bool = False            # a StaticRNN (time-major dense input)
    mems: dict[str, str | None] = field(default_factory=dict)  # body memory -> H0 / None
    updates: dict[str, str] = field(default_factory=dict)      # body memory -> new value
    outputs: dict[str, str] = field(default_factory=dict)      # body value -> global var
    out_ops: list[int] = field(default_factory=list)           # array_to_lod_tensor ops
    compute: list[Operator] = field(default_factory=list)      # the body's cell ops


def one(op: Operator, slot: str) -> str:
    names = op.input(slot) or op.output(slot)
    if len(names) != 1:
        raise NotALoopCell(f"{op.type} has {len(names)} {slot} values")
    return names[0]


def _global_producers(block: Block) -> dict[str, list[tuple[int, Operator]]]:
    out: dict[str, list[tuple[int, Operator]]] = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            out.setdefault(n, []).append((i, op))
    return out


def _global_readers(block: Block, name: str) -> list[tuple[int, Operator]]:
    return [(i, op) for i, op in enumerate(block.ops) if name in op.input_arg_names]


def _memory_init(prods: dict[str, list[tuple[int, Operator]]], init: str, rt: str
                 ) -> str | None:
    """H0 of a memory from its initial value: None (zero), or the value a
    ``reorder_lod_tensor_by_rank`` puts in rank order (``need_reorder=True``)."""
    ps = prods.get(init, [])
    op = ps[0][1] if len(ps) == 1 else None
    if not rt and (op is None or op.type != "fill_constant_batch_size_like"):
        return init  # StaticRNN: rows in the batch's order, as H0 takes them
    if op is not None and op.type == "fill_constant_batch_size_like":
        if float(op.attr("value")) != 0.0:
            raise NotALoopCell(f"memory {init!r} starts at {op.attr('value')}, not 0 (the "
                               "recurrences start at 0 or at H0)")
        return None
    if op is not None and op.type == "reorder_lod_tensor_by_rank" and \
            op.input("RankTable") == [rt]:
        return one(op, "X")
    raise NotALoopCell(f"memory {init!r} is initialised in rank order (memory(init=..., "
                       "need_reorder=False)); give it with need_reorder=True (one row per "
                       "sequence in the input's order)")


def parse_loop(program: Program, index: int) -> Loop:
    """The DynamicRNN loop of while op ``index``, its body split into the frontend's
    bookkeeping and the cell's ops."""
    gb = program.global_block()
    w = gb.ops[index]
    (bi,) = w.sub_block_indices()
    body = program.block(bi)
    prods = _global_producers(gb)
    step = None
    word: str | None = None
    x = rt = None
    mem_reads: dict[str, str] = {}   # read_from_array output -> mem array
    mems: dict[str, tuple[str, str]] = {}  # shrunk memory -> (array, raw read)
    writes: list[tuple[int, str, str]] = []  # (body position, value, array)
    inc_at = -1
    compute: list[Operator] = []
    for k, op in enumerate(body.ops):
        t = op.type
        if t == "read_from_array":
            arr, i = one(op, "X"), one(op, "I")
            step = step or i
            if i != step:
                raise NotALoopCell("the body reads arrays at two different indices")
            src = prods.get(arr, [])
            kind = src[0][1].type if len(src) == 1 else ""
            if kind == "lod_tensor_to_array" or (kind == "tensor_to_array" and
                                                 src[0][1].attr("axis") == 0):
                if word is not None:
                    raise NotALoopCell("the body has two step inputs")
                word, x = op.output("Out")[0], one(src[0][1], "X")
                rt = one(src[0][1], "RankTable") if kind == "lod_tensor_to_array" else ""
            else:
                mem_reads[op.output("Out")[0]] = arr
        elif t == "shrink_rnn_memory" and one(op, "X") in mem_reads:
            mems[op.output("Out")[0]] = (mem_reads.pop(one(op, "X")), one(op, "X"))
        elif t == "increment" and one(op, "X") == step:
            inc_at = k
        elif t == "less_than" and one(op, "X") == step:
            pass
        elif t == "write_to_array" and one(op, "I") == step:
            writes.append((k, one(op, "X"), op.output("Out")[0]))
        else:
            compute.append(op)
    if word is None or x is None or rt is None:
        raise NotALoopCell("no step input (DynamicRNN's lod_tensor_to_array or StaticRNN's "
                           "tensor_to_array, then read_from_array)")
    static = not rt
    if not static:
        _check_rank_table(gb, prods, rt, x)
    if mem_reads and not static:
        raise NotALoopCell(f"the body reads arrays {sorted(set(mem_reads.values()))} without "
                           "shrink_rnn_memory (not a DynamicRNN memory)")
    if static and mems:
        raise NotALoopCell("a StaticRNN body with shrink_rnn_memory")
    if static:
        mems = {m: (arr, m) for m, arr in mem_reads.items()}
    loop = Loop(index, body, x, word, static, compute=compute)
    by_array = {arr: m for m, (arr, _) in mems.items()}
    for k, value, arr in writes:
        if arr in by_array:
            if k < inc_at or by_array[arr] in loop.updates:
                raise NotALoopCell(f"memory array {arr!r} is written out of DynamicRNN's order")
            loop.updates[by_array[arr]] = value
            continue
        if k > inc_at:
            raise NotALoopCell(f"array {arr!r} is written after the step index moves")
        readers = [op for i, op in _global_readers(gb, arr) if i != index]
        if len(readers) != 1 or value in loop.outputs or not _gathers(gb, readers[0], rt):
            raise NotALoopCell(f"output array {arr!r} is not read by one "
                               f"{'tensor_array_to_tensor' if static else 'array_to_lod_tensor'}")
        loop.outputs[value] = readers[0].output("Out")[0]
        loop.out_ops.append(gb.ops.index(readers[0]))
    for m, (arr, _) in mems.items():
        if m not in loop.updates:
            raise NotALoopCell(f"memory {m!r} is never updated")
        init_ops = [op for _, op in prods.get(arr, [])
                    if op.type == "write_to_array" and op is not w]
        others = [op for i, op in _global_readers(gb, arr) if i != index]
        if len(init_ops) != 1 or others:
            raise NotALoopCell(f"memory array {arr!r} is used outside the loop")
        zero = prods.get(one(init_ops[0], "I"), [])
        if len(zero) != 1 or zero[0][1].type != "fill_constant" or \
                float(zero[0][1].attr("value")) != 0.0:
            raise NotALoopCell(f"memory array {arr!r} is not initialised at step 0")
        loop.mems[m] = _memory_init(prods, one(init_ops[0], "X"), rt)
    return loop


def _check_rank_table(gb: Block, prods: dict[str, list[tuple[int, Operator]]], rt: str,
                      x: str) -> None:
    """The steps are those of ``x``'s sequences: its rank table is ``x``'s at level 0 and
    ``x`` has one LoD level (what the whole-sequence ops step over)."""
    ps = prods.get(rt, [])
    xv = gb._find_var_recursive(x)
    if len(ps) != 1 or ps[0][1].type != "lod_rank_table" or ps[0][1].input("X") != [x] or \
            ps[0][1].attr("level") != 0:
        raise NotALoopCell(f"the rank table {rt!r} is not {x!r}'s at level 0")
    if xv is None or xv.lod_level != 1:
        raise NotALoopCell(f"the step input {x!r} has lod_level "
                           f"{xv.lod_level if xv else '?'}; the whole-sequence ops take 1")


def _gathers(gb: Block, op: Operator, rt: str) -> bool:
    """``op`` turns an output array back into a tensor as the RNN's ``__call__`` does:
    ``array_to_lod_tensor`` by the rank table (DynamicRNN), ``tensor_array_to_tensor``
    stacking along axis 0 with its OutIndex unread (StaticRNN)."""
    if rt:
        return op.type == "array_to_lod_tensor" and op.input("RankTable") == [rt]
    return (op.type == "tensor_array_to_tensor" and op.attr("axis") == 0 and
            bool(op.attr("use_stack")) and
            not any(n in o.input_arg_names for o in gb.ops for n in op.output("OutIndex")))


# -- the cell's ops ------------------------------------------------------------------------

@dataclass
class Affine:
    """A linear map of the step input and the memories: ``sum_src src @ W[src] + b``."""

    weights: dict[str, np.ndarray | None]  # source (word or memory) -> its rows of W
    names: dict[str, str]           # source -> W's name when W is exactly its rows
    bias: np.ndarray | None
    bias_name: str | None
    ops: list[Operator]


class Body:
    def __init__(self, loop: Loop, scope: Any) -> None:
        self.loop = loop
        self.scope = scope
        self.prod = {n: op for op in loop.compute for n in op.output_arg_names}

    def param(self, name: str, ndim: int) -> np.ndarray:
        v = self.loop.body._find_var_recursive(name)
        val = get_value(self.scope, name) if self.scope is not None else None
        if v is None or not v.persistable or val is None or np.ndim(val) not in (ndim, 2):
            raise NotALoopCell(f"{name!r} is not a constant parameter with a value in the "
                               "scope")
        return np.asarray(val)

    def width(self, name: str) -> int:
        v = self.loop.body._find_var_recursive(name)
        if v is None or len(v.shape) != 2 or v.shape[1] <= 0:
            raise NotALoopCell(f"{name!r} needs a known [N, width] shape")
        return int(v.shape[1])

    def affine(self, out: str, sources: set[str]) -> Affine:
        aff = Affine({}, {}, None, None, [])
        op = self.prod.get(out)
        if op is not None and op.type == "elementwise_add" and op.attr("axis") in (-1, 1):
            b = one(op, "Y")
            aff.bias, aff.bias_name = self.param(b, 1).reshape(-1), b
            aff.ops.append(op)
            out = one(op, "X")
            op = self.prod.get(out)
        terms = [out]
        if op is not None and op.type == "sum":
            aff.ops.append(op)
            terms = op.input("X")
        for t in terms:
            if t in sources:
                self._add(aff, t, None, None)
                continue
            m = self.prod.get(t)
            if m is None or m.type != "mul" or m.attr("x_num_col_dims") != 1 or \
                    m.attr("y_num_col_dims") != 1:
                raise NotALoopCell(f"{t!r} is not a product of the step input or a memory "
                                   "with a weight (an fc)")
            aff.ops.append(m)
            src, wname = one(m, "X"), one(m, "Y")
            wv = self.param(wname, 2)
            if src in sources:
                self._add(aff, src, wv, wname)
                continue
            cat = self.prod.get(src)
            if cat is None or cat.type != "concat" or cat.attr("axis") not in (1, -1) or \
                    not set(cat.input("X")) <= sources:
                raise NotALoopCell(f"the fc input {src!r} is not the step input, a memory "
                                   "or their concat")
            aff.ops.append(cat)
            row = 0
            for s in cat.input("X"):
                n = self.width(s)
                self._add(aff, s, wv[row:row + n], None)
                row += n
            if row != wv.shape[0]:
                raise NotALoopCell(f"{wname!r} has {wv.shape[0]} rows for {row} inputs")
        return aff

    @staticmethod
    def _add(aff: Affine, src: str, w: np.ndarray | None, name: str | None) -> None:
        if src in aff.weights:
            raise NotALoopCell(f"{src!r} enters the fc twice")
        aff.weights[src] = w  # None: the identity
        if name is not None:
            aff.names[src] = name
