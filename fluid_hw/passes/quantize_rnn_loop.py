"""``rnn_loop_to_sequence``: a DynamicRNN (or StaticRNN) loop whose body is one cell
recurrence becomes the equivalent whole-sequence float op, which the quantiser then takes like a
``dynamic_gru`` / ``dynamic_lstm`` (docs/fixed_point.md, "Recurrences written as
loops"): calibration sees every time step, the cell becomes ``quantized_gru`` /
``quantized_lstm`` / ``quantized_rnn``, and the hardware's recurrent stage takes the
first two as it takes the layers'.

Recognised bodies (``x`` the step input, ``h`` / ``c`` memories starting at 0, or at a
per-sequence value given with ``need_reorder=True``; every fc is one ``fc`` over
``[x, h]``, an ``fc`` over ``concat([x, h])``, or either without a bias)::

    gru_unit(fc(x, 3D), h)                  -> fc over the sequence + gru
    gru_unit(x, h)      (x projected before the loop)          -> gru
    lstm_unit(fc([x, h], 4D), c, forget_bias)                  -> fc + lstm (no peepholes;
                                                  gates [i, f, o, g] reordered [g, i, f, o])
    fc([x, h], D, act=tanh | sigmoid | relu)                   -> fc + simple_rnn

with ``update_memory`` of the cell's new ``h`` (and ``c``) and ``output`` of ``h`` (and,
for the LSTM, ``c``).  Each is the same float arithmetic, reordered (sums of products
grouped differently: agreement to float rounding).  A loop that is anything else -- a
second cell, a ``static_input``, another op in the body, an activation the quantised
cells lack, a memory initialised in rank order -- stays as it is, and the reason is
logged (``fluid_hw.quantize``, warning) and kept in ``ctx.reports[name]``.

A StaticRNN's time-major ``[T, N, D]`` input becomes N sequences of T steps
(``transpose2``, ``sequence_unpad``) and each output is stacked back (``reshape2``,
``transpose2``); its memory ``init`` (batch order) is the op's H0.

The loop's now-unused set-up ops (rank table, arrays) are left to
``dead_code_elimination``; the loop's sub-block is emptied (the block stays, so other
blocks keep their indices).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FluidError
from ..ir import dtypes
from ..ir.program import Block, Operator, Program
from ..tools import logger
from ._graph import OpSpec, add_param, fresh_name, rebuild_block
from .base import Pass, PassContext, get_value, register_pass, set_value

__all__ = ["LoopToSequence", "NotALoopCell"]

log = logger("quantize")
#: gru_unit's activation codes that the quantised GRU takes (tanh, sigmoid)
_GRU_ACTS = {"activation": 2, "gate_activation": 1}
#: activations of a plain fc recurrence (simple_rnn / quantized_rnn)
_PLAIN_ACTS = ("tanh", "sigmoid", "relu")


class NotALoopCell(Exception):
    """Why a loop is not one cell recurrence (it then stays a loop)."""


@dataclass
class _Loop:
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


def _one(op: Operator, slot: str) -> str:
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


def _producer(prods: dict[str, list[tuple[int, Operator]]], name: str, want: str
              ) -> Operator:
    ps = prods.get(name, [])
    if len(ps) != 1 or ps[0][1].type != want:
        raise NotALoopCell(f"{name!r} is not made by one {want} op (DynamicRNN's)")
    return ps[0][1]


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
        return _one(op, "X")
    raise NotALoopCell(f"memory {init!r} is initialised in rank order (memory(init=..., "
                       "need_reorder=False)); give it with need_reorder=True (one row per "
                       "sequence in the input's order)")


def parse_loop(program: Program, index: int) -> _Loop:
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
            arr, i = _one(op, "X"), _one(op, "I")
            step = step or i
            if i != step:
                raise NotALoopCell("the body reads arrays at two different indices")
            src = prods.get(arr, [])
            kind = src[0][1].type if len(src) == 1 else ""
            if kind == "lod_tensor_to_array" or (kind == "tensor_to_array" and
                                                 src[0][1].attr("axis") == 0):
                if word is not None:
                    raise NotALoopCell("the body has two step inputs")
                word, x = op.output("Out")[0], _one(src[0][1], "X")
                rt = _one(src[0][1], "RankTable") if kind == "lod_tensor_to_array" else ""
            else:
                mem_reads[op.output("Out")[0]] = arr
        elif t == "shrink_rnn_memory" and _one(op, "X") in mem_reads:
            mems[op.output("Out")[0]] = (mem_reads.pop(_one(op, "X")), _one(op, "X"))
        elif t == "increment" and _one(op, "X") == step:
            inc_at = k
        elif t == "less_than" and _one(op, "X") == step:
            pass
        elif t == "write_to_array" and _one(op, "I") == step:
            writes.append((k, _one(op, "X"), op.output("Out")[0]))
        else:
            compute.append(op)
    if word is None or x is None or rt is None:
        raise NotALoopCell("no step input (DynamicRNN's lod_tensor_to_array or StaticRNN's "
                           "tensor_to_array, then read_from_array)")
    static = not rt
    if mem_reads and not static:
        raise NotALoopCell(f"the body reads arrays {sorted(set(mem_reads.values()))} without "
                           "shrink_rnn_memory (not a DynamicRNN memory)")
    if static and mems:
        raise NotALoopCell("a StaticRNN body with shrink_rnn_memory")
    if static:
        mems = {m: (arr, m) for m, arr in mem_reads.items()}
    loop = _Loop(index, body, x, word, static, compute=compute)
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
        loop.mems[m] = _memory_init(prods, _one(init_ops[0], "X"), rt)
    return loop


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
class _Affine:
    """A linear map of the step input and the memories: ``sum_src src @ W[src] + b``."""

    weights: dict[str, np.ndarray]  # source (word or a memory) -> its rows of W
    names: dict[str, str]           # source -> W's name when W is exactly its rows
    bias: np.ndarray | None
    bias_name: str | None
    ops: list[Operator]


class _Body:
    def __init__(self, loop: _Loop, scope: Any) -> None:
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

    def affine(self, out: str, sources: set[str]) -> _Affine:
        aff = _Affine({}, {}, None, None, [])
        op = self.prod.get(out)
        if op is not None and op.type == "elementwise_add" and op.attr("axis") in (-1, 1):
            b = _one(op, "Y")
            aff.bias, aff.bias_name = self.param(b, 1).reshape(-1), b
            aff.ops.append(op)
            out = _one(op, "X")
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
            src, wname = _one(m, "X"), _one(m, "Y")
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
    def _add(aff: _Affine, src: str, w: np.ndarray | None, name: str | None) -> None:
        if src in aff.weights:
            raise NotALoopCell(f"{src!r} enters the fc twice")
        aff.weights[src] = w  # type: ignore[assignment]  # None: the identity
        if name is not None:
            aff.names[src] = name


# -- the rewrite ----------------------------------------------------------------------------

class _Emit:
    """New global ops and parameters for one loop."""

    def __init__(self, program: Program, scope: Any, staging: dict[str, np.ndarray],
                 loop: _Loop) -> None:
        self.gb = program.global_block()
        self.scope = scope
        self.staging = staging
        self.loop = loop
        self.specs: list[OpSpec] = []
        xv = self.gb._find_var_recursive(loop.x)
        self.dtype = xv.dtype
        self.seq = loop.x            # the LoD sequence the whole-sequence op reads
        self.width = int(xv.shape[-1])
        self.steps = 0
        self.restack: list[tuple[str, str, int]] = []  # (LoD output, [T, N, W] var, W)
        if loop.static:
            self._unstack(xv)

    def _unstack(self, xv: Any) -> None:
        """StaticRNN: the time-major ``[T, N, D]`` input as N sequences of T steps, a LoD
        tensor (transpose2, then sequence_unpad with every length T)."""
        if len(xv.shape) != 3 or xv.shape[0] <= 0 or xv.shape[2] <= 0:
            raise NotALoopCell(f"StaticRNN input {xv.name!r} {list(xv.shape)}: the rewrite "
                               "takes [T, N, D] with T and D known")
        self.steps = int(xv.shape[0])
        bt = self.var(f"{xv.name}.batch_major", self.width, 0, [-1, self.steps, self.width])
        self.specs.append(OpSpec("transpose2", {"X": [xv.name]},
                                 {"Out": [bt], "XShape": [self.var(f"{bt}.xshape", 0, 0)]},
                                 {"axis": [1, 0, 2]}))
        lens = fresh_name(self.gb, f"{xv.name}.lengths")
        self.gb.create_var(name=lens, shape=[-1], dtype="int64")
        self.specs.append(OpSpec("fill_constant_batch_size_like", {"Input": [xv.name]},
                                 {"Out": [lens]},
                                 {"shape": [-1], "dtype": dtypes.to_enum("int64"),
                                  "value": float(self.steps), "input_dim_idx": 1,
                                  "output_dim_idx": 0}))
        self.seq = self.var(f"{xv.name}.seq", self.width)
        self.specs.append(OpSpec("sequence_unpad", {"X": [bt], "Length": [lens]},
                                 {"Out": [self.seq]}, {}))

    def finish(self) -> None:
        """StaticRNN: each LoD output back to the time-major ``[T, N, W]`` tensor the loop
        gave (reshape2 to [N, T, W], transpose2)."""
        for seq, out, width in self.restack:
            bt = self.var(f"{out}.batch_major", width, 0, [-1, self.steps, width])
            self.specs.append(OpSpec("reshape2", {"X": [seq]},
                                     {"Out": [bt], "XShape": [self.var(f"{bt}.xshape", 0, 0)]},
                                     {"shape": [-1, self.steps, width]}))
            self.specs.append(OpSpec("transpose2", {"X": [bt]},
                                     {"Out": [out], "XShape": [self.var(f"{out}.xshape", 0,
                                                                        0)]},
                                     {"axis": [1, 0, 2]}))

    def var(self, base: str, width: int, lod: int = 1, shape: list[int] | None = None
            ) -> str:
        name = fresh_name(self.gb, base)
        self.gb.create_var(name=name, shape=shape or [-1, width], dtype=self.dtype,
                           lod_level=lod)
        return name

    def param(self, base: str, value: np.ndarray) -> str:
        """A new constant parameter (its value staged; the name clashes with nothing in the
        program or the scope)."""
        v = np.ascontiguousarray(value, dtypes.to_numpy(self.dtype))
        name = fresh_name(self.gb, base, self.scope, v)
        while name in self.staging:
            name = fresh_name(self.gb, f"{name}_", self.scope, v)
        return add_param(self.gb, self.staging, name, v, exact=True)

    def project(self, aff: _Affine, width: int, bias: bool = True) -> str:
        """The input projection over the whole sequence (mul [+ elementwise_add]), or the
        sequence itself when the step input enters unprojected."""
        word = self.loop.word
        w = aff.weights[word]
        if w is None:
            if width != self.width:
                raise NotALoopCell("the step input's width is not the cell's")
            if bias and aff.bias is not None:
                raise NotALoopCell("a bias is added to the unprojected step input")
            return self.seq
        wname = aff.names.get(word) or self.param(f"{self.loop.x}.proj.w", w)
        out = self.var(f"{self.loop.x}.proj", width)
        self.specs.append(OpSpec("mul", {"X": [self.seq], "Y": [wname]}, {"Out": [out]},
                                 {"x_num_col_dims": 1, "y_num_col_dims": 1}))
        if bias and aff.bias is not None:
            assert aff.bias_name is not None
            biased = self.var(f"{self.loop.x}.proj", width)
            bname = aff.bias_name if list(self.gb._find_var_recursive(aff.bias_name).shape) \
                == [width] else self.param(f"{self.loop.x}.proj.b", aff.bias)
            self.specs.append(OpSpec("elementwise_add", {"X": [out], "Y": [bname]},
                                     {"Out": [biased]}, {"axis": 1}))
            out = biased
        return out

    def output(self, value: str, base: str, width: int) -> str:
        """The whole-sequence op's output for body value ``value`` (the loop's output var,
        or a fresh one when the loop does not output it)."""
        out = self.loop.outputs.get(value)
        if out is None or not self.loop.static:
            return out or self.var(base, width)
        seq = self.var(base, width)
        self.restack.append((seq, out, width))
        return seq


def _only_memory_source(aff: _Affine, word: str, mem: str) -> None:
    extra = set(aff.weights) - {word, mem}
    if extra or word not in aff.weights:
        raise NotALoopCell("the fc must read the step input (and the hidden memory)")


def _rewrite_gru(em: _Emit, body: _Body, cell: Operator) -> None:
    loop = em.loop
    h_prev, h_new = _one(cell, "HiddenPrev"), cell.output("Hidden")[0]
    for attr, code in _GRU_ACTS.items():
        if cell.attr(attr) != code:
            raise NotALoopCell(f"gru_unit {attr} is code {cell.attr(attr)}; the quantised GRU "
                               "takes activation tanh (2) and gate_activation sigmoid (1)")
    if loop.updates.get(h_prev) != h_new or set(loop.mems) != {h_prev}:
        raise NotALoopCell("the memory must be gru_unit's HiddenPrev, updated with its Hidden")
    if set(loop.outputs) - {h_new}:
        raise NotALoopCell("the loop may output gru_unit's Hidden only")
    aff = body.affine(_one(cell, "Input"), {loop.word})
    _only_memory_source(aff, loop.word, "")
    d = body.width(h_prev)
    used = {id(o) for o in aff.ops} | {id(cell)}
    _check_all_used(loop, used)
    proj = em.project(aff, 3 * d)
    ins = {"Input": [proj], "Weight": [_one(cell, "Weight")]}
    if cell.input("Bias"):
        ins["Bias"] = cell.input("Bias")
    if loop.mems[h_prev]:
        ins["H0"] = [loop.mems[h_prev]]  # type: ignore[list-item]
    outs = {"Hidden": [em.output(h_new, f"{h_new}.seq", d)]}
    for slot, width in (("BatchGate", 3 * d), ("BatchResetHiddenPrev", d),
                        ("BatchHidden", d)):
        outs[slot] = [em.var(f"{h_new}.{slot}", width)]
    em.specs.append(OpSpec("gru", ins, outs,
                           {"activation": "tanh", "gate_activation": "sigmoid",
                            "is_reverse": False, "origin_mode": cell.attr("origin_mode")}))


#: lstm_unit's gate blocks [i, f, o, g] in lstm's order [g, i, f, o]
_LSTM_ORDER = (3, 0, 1, 2)


def _reorder(a: np.ndarray, d: int) -> np.ndarray:
    return np.concatenate([a[..., k * d:(k + 1) * d] for k in _LSTM_ORDER], axis=-1)


def _rewrite_lstm(em: _Emit, body: _Body, cell: Operator) -> None:
    loop = em.loop
    c_prev, c_new, h_new = _one(cell, "C_prev"), cell.output("C")[0], cell.output("H")[0]
    hs = [m for m, v in loop.updates.items() if v == h_new]
    if len(hs) != 1 or loop.updates.get(c_prev) != c_new or len(loop.mems) != 2:
        raise NotALoopCell("the memories must be lstm_unit's C_prev (updated with its C) "
                           "and the hidden state (updated with its H)")
    h_prev = hs[0]
    if set(loop.outputs) - {h_new, c_new}:
        raise NotALoopCell("the loop may output lstm_unit's H and C only")
    aff = body.affine(_one(cell, "X"), {loop.word, h_prev})
    _only_memory_source(aff, loop.word, h_prev)
    if aff.weights.get(h_prev) is None:
        raise NotALoopCell("lstm_unit's fc must read the hidden memory through a weight")
    _check_all_used(loop, {id(o) for o in aff.ops} | {id(cell)})
    if loop.mems[h_prev] is not None or loop.mems[c_prev] is not None:
        h0, c0 = loop.mems[h_prev], loop.mems[c_prev]
        if h0 is None or c0 is None:
            raise NotALoopCell("give both memories an initial value, or neither")
    d = body.width(c_prev)
    wx = aff.weights[loop.word]
    if wx is None:
        raise NotALoopCell("lstm_unit's fc must read the step input through a weight")
    bias = np.zeros(4 * d) if aff.bias is None else aff.bias.astype(np.float64)
    bias[d:2 * d] += float(cell.attr("forget_bias"))
    proj = em.project(_Affine({loop.word: _reorder(wx, d)}, {}, None, None, []), 4 * d)
    ins = {"Input": [proj], "Weight": [em.param(f"{h_new}.w", _reorder(aff.weights[h_prev], d))],
           "Bias": [em.param(f"{h_new}.b", _reorder(bias, d).reshape(1, -1))]}
    if loop.mems[h_prev] is not None:
        ins["H0"], ins["C0"] = [loop.mems[h_prev]], [loop.mems[c_prev]]  # type: ignore
    outs = {"Hidden": [em.output(h_new, f"{h_new}.seq", d)],
            "Cell": [em.output(c_new, f"{c_new}.seq", d)],
            "BatchGate": [em.var(f"{h_new}.BatchGate", 4 * d)],
            "BatchCellPreAct": [em.var(f"{h_new}.BatchCellPreAct", d)]}
    em.specs.append(OpSpec("lstm", ins, outs,
                           {"use_peepholes": False, "is_reverse": False,
                            "gate_activation": "sigmoid", "cell_activation": "tanh",
                            "candidate_activation": "tanh"}))


def _rewrite_plain(em: _Emit, body: _Body) -> None:
    loop = em.loop
    if len(loop.mems) != 1:
        raise NotALoopCell(f"{len(loop.mems)} memories and no gru_unit / lstm_unit: a plain "
                           "recurrence has one")
    (h_prev,) = loop.mems
    h_new = loop.updates[h_prev]
    act = body.prod.get(h_new)
    if act is None or act.type not in _PLAIN_ACTS:
        raise NotALoopCell(f"the memory's new value {h_new!r} is not an fc's "
                           f"{' / '.join(_PLAIN_ACTS)} (is {act.type if act else 'no op'})")
    if set(loop.outputs) - {h_new}:
        raise NotALoopCell("the loop may output the new hidden state only")
    aff = body.affine(_one(act, "X"), {loop.word, h_prev})
    _only_memory_source(aff, loop.word, h_prev)
    if aff.weights.get(h_prev) is None:
        raise NotALoopCell("the fc must read the hidden memory through a weight")
    _check_all_used(loop, {id(o) for o in aff.ops} | {id(act)})
    d = body.width(h_prev)
    proj = em.project(aff, d, bias=aff.weights[loop.word] is not None)
    ins = {"Input": [proj],
           "Weight": [aff.names.get(h_prev) or em.param(f"{h_new}.w", aff.weights[h_prev])]}
    if aff.bias is not None and aff.weights[loop.word] is None:
        ins["Bias"] = [em.param(f"{h_new}.b", aff.bias.reshape(1, -1))]
    if loop.mems[h_prev]:
        ins["H0"] = [loop.mems[h_prev]]  # type: ignore[list-item]
    em.specs.append(OpSpec("simple_rnn", ins,
                           {"Hidden": [em.output(h_new, f"{h_new}.seq", d)]},
                           {"activation": act.type, "is_reverse": False}))


def _check_all_used(loop: _Loop, used: set[int]) -> None:
    extra = [op.type for op in loop.compute if id(op) not in used]
    if extra:
        raise NotALoopCell(f"the body has ops besides the cell: {extra}")


def rewrite_loop(program: Program, scope: Any, index: int,
                 staging: dict[str, np.ndarray]) -> str:
    """Replace DynamicRNN while op ``index`` of ``program`` by its whole-sequence form
    (new parameter values go into ``staging``, the parameters read come from ``scope``);
    returns the op type made.  Raises :class:`NotALoopCell` when the loop is not one
    cell (``program`` may then be half rewritten: work on a copy)."""
    loop = parse_loop(program, index)
    body = _Body(loop, scope)
    cells = [op for op in loop.compute if op.type in ("gru_unit", "lstm_unit")]
    if len(cells) > 1:
        raise NotALoopCell(f"the body holds {len(cells)} cells")
    em = _Emit(program, scope, staging, loop)
    if cells and cells[0].type == "gru_unit":
        _rewrite_gru(em, body, cells[0])
    elif cells:
        _rewrite_lstm(em, body, cells[0])
    else:
        _rewrite_plain(em, body)
    made = em.specs[-1].type
    em.finish()
    gb = program.global_block()
    items: list[Any] = []
    for i, op in enumerate(gb.ops):
        if i == index:
            items += em.specs
        elif i not in loop.out_ops:
            items.append(op.desc)
    try:
        rebuild_block(gb, items)
    except FluidError as e:
        raise NotALoopCell(f"its whole-sequence form does not build: {e}") from None
    del loop.body.desc.ops[:]
    del loop.body.desc.vars[:]
    loop.body._sync_with_desc()
    return made


@register_pass
class LoopToSequence(Pass):
    """Each DynamicRNN loop of the global block that is one cell recurrence becomes its
    whole-sequence float op (see the module docstring); ``exclude`` (QuantConfig's) keeps
    a loop whose target op type, ``"while"``, or output name it lists."""

    name = "rnn_loop_to_sequence"
    handles_sub_blocks = True
    requires = ("scope",)

    def __init__(self, exclude: tuple[str, ...] = ()) -> None:
        self.exclude = tuple(exclude)

    def run(self, program: Program, ctx: PassContext) -> bool:
        notes: list[str] = ctx.reports.setdefault(self.name, [])
        changed = False
        i = 0
        while i < len(program.global_block().ops):
            op = program.global_block().ops[i]
            if op.type != "while" or "while" in self.exclude:
                i += 1
                continue
            outs = sorted(op.output_arg_names)
            trial = program.clone()
            staging: dict[str, np.ndarray] = {}
            try:
                made = rewrite_loop(trial, ctx.scope, i, staging)
            except NotALoopCell as e:
                msg = (f"the loop (while op {i}, writing {outs[:3]}) stays a float loop on "
                       f"the host: {e}")
                log.warning("%s", msg)
                notes.append(msg)
                i += 1
                continue
            if made in self.exclude or set(outs) & set(self.exclude):
                notes.append(f"while op {i}: a {made} recurrence, left as a loop (excluded)")
                i += 1
                continue
            program.desc.CopyFrom(trial.desc)
            program._sync_with_cpp()
            assert ctx.scope is not None
            for n, v in staging.items():
                set_value(ctx.scope, n, v)
            notes.append(f"while op {i}: a cell recurrence -> {made}")
            changed = True
        return changed
