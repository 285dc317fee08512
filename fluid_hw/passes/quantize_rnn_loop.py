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

from typing import Any

import numpy as np

from ..errors import FluidError
from ..ir import dtypes
from ..ir.program import Operator, Program
from ..tools import logger
from ._graph import OpSpec, add_param, fresh_name, rebuild_block
from .base import Pass, PassContext, register_pass, set_value
from .quantize_rnn_loop_parse import Affine, Body, Loop, NotALoopCell, one, parse_loop

__all__ = ["LoopToSequence", "NotALoopCell"]

log = logger("quantize")
#: gru_unit's activation codes that the quantised GRU takes (tanh, sigmoid)
_GRU_ACTS = {"activation": 2, "gate_activation": 1}
#: activations of a plain fc recurrence (simple_rnn / quantized_rnn)
_PLAIN_ACTS = ("tanh", "sigmoid", "relu")


# -- the rewrite ----------------------------------------------------------------------------

class _Emit:
    """New global ops and parameters for one loop."""

    def __init__(self, program: Program, scope: Any, staging: dict[str, np.ndarray],
                 loop: Loop) -> None:
        self.gb = program.global_block()
        self.scope = scope
        self.staging = staging
        self.loop = loop
        self.specs: list[OpSpec] = []
        xv = self.gb._find_var_recursive(loop.x)
        if xv is None:
            raise NotALoopCell(f"the stepped input {loop.x!r} is not declared")
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

    def project(self, aff: Affine, width: int, bias: bool = True) -> str:
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
            bv = self.gb._find_var_recursive(aff.bias_name)
            bname = aff.bias_name if bv is not None and list(bv.shape) == [width] else \
                self.param(f"{self.loop.x}.proj.b", aff.bias)
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


def _only_memory_source(aff: Affine, word: str, mem: str) -> None:
    extra = set(aff.weights) - {word, mem}
    if extra or word not in aff.weights:
        raise NotALoopCell("the fc must read the step input (and the hidden memory)")


def _rewrite_gru(em: _Emit, body: Body, cell: Operator) -> None:
    loop = em.loop
    h_prev, h_new = one(cell, "HiddenPrev"), cell.output("Hidden")[0]
    for attr, code in _GRU_ACTS.items():
        if cell.attr(attr) != code:
            raise NotALoopCell(f"gru_unit {attr} is code {cell.attr(attr)}; the quantised GRU "
                               "takes activation tanh (2) and gate_activation sigmoid (1)")
    if loop.updates.get(h_prev) != h_new or set(loop.mems) != {h_prev}:
        raise NotALoopCell("the memory must be gru_unit's HiddenPrev, updated with its Hidden")
    if set(loop.outputs) - {h_new}:
        raise NotALoopCell("the loop may output gru_unit's Hidden only")
    aff = body.affine(one(cell, "Input"), {loop.word})
    _only_memory_source(aff, loop.word, "")
    d = body.width(h_prev)
    used = {id(o) for o in aff.ops} | {id(cell)}
    _check_all_used(loop, used)
    proj = em.project(aff, 3 * d)
    ins = {"Input": [proj], "Weight": [one(cell, "Weight")]}
    if cell.input("Bias"):
        ins["Bias"] = cell.input("Bias")
    if (h0 := loop.mems[h_prev]) is not None:
        ins["H0"] = [h0]
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


def _rewrite_lstm(em: _Emit, body: Body, cell: Operator) -> None:
    loop = em.loop
    c_prev, c_new, h_new = one(cell, "C_prev"), cell.output("C")[0], cell.output("H")[0]
    hs = [m for m, v in loop.updates.items() if v == h_new]
    if len(hs) != 1 or loop.updates.get(c_prev) != c_new or len(loop.mems) != 2:
        raise NotALoopCell("the memories must be lstm_unit's C_prev (updated with its C) "
                           "and the hidden state (updated with its H)")
    h_prev = hs[0]
    if set(loop.outputs) - {h_new, c_new}:
        raise NotALoopCell("the loop may output lstm_unit's H and C only")
    aff = body.affine(one(cell, "X"), {loop.word, h_prev})
    _only_memory_source(aff, loop.word, h_prev)
    wh = _through_weight(aff, h_prev, "lstm_unit's fc", "hidden memory")
    _check_all_used(loop, {id(o) for o in aff.ops} | {id(cell)})
    if loop.mems[h_prev] is not None or loop.mems[c_prev] is not None:
        h0, c0 = loop.mems[h_prev], loop.mems[c_prev]
        if h0 is None or c0 is None:
            raise NotALoopCell("give both memories an initial value, or neither")
    d = body.width(c_prev)
    wx = _through_weight(aff, loop.word, "lstm_unit's fc", "step input")
    bias = np.zeros(4 * d) if aff.bias is None else aff.bias.astype(np.float64)
    bias[d:2 * d] += float(cell.attr("forget_bias"))
    proj = em.project(Affine({loop.word: _reorder(wx, d)}, {}, None, None, []), 4 * d)
    ins = {"Input": [proj], "Weight": [em.param(f"{h_new}.w", _reorder(wh, d))],
           "Bias": [em.param(f"{h_new}.b", _reorder(bias, d).reshape(1, -1))]}
    h0, c0 = loop.mems[h_prev], loop.mems[c_prev]
    if h0 is not None and c0 is not None:
        ins["H0"], ins["C0"] = [h0], [c0]
    outs = {"Hidden": [em.output(h_new, f"{h_new}.seq", d)],
            "Cell": [em.output(c_new, f"{c_new}.seq", d)],
            "BatchGate": [em.var(f"{h_new}.BatchGate", 4 * d)],
            "BatchCellPreAct": [em.var(f"{h_new}.BatchCellPreAct", d)]}
    em.specs.append(OpSpec("lstm", ins, outs,
                           {"use_peepholes": False, "is_reverse": False,
                            "gate_activation": "sigmoid", "cell_activation": "tanh",
                            "candidate_activation": "tanh"}))


def _rewrite_plain(em: _Emit, body: Body) -> None:
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
    aff = body.affine(one(act, "X"), {loop.word, h_prev})
    _only_memory_source(aff, loop.word, h_prev)
    wh = _through_weight(aff, h_prev, "the fc", "hidden memory")
    _check_all_used(loop, {id(o) for o in aff.ops} | {id(act)})
    d = body.width(h_prev)
    proj = em.project(aff, d, bias=aff.weights[loop.word] is not None)
    ins = {"Input": [proj],
           "Weight": [aff.names.get(h_prev) or em.param(f"{h_new}.w", wh)]}
    if aff.bias is not None and aff.weights[loop.word] is None:
        ins["Bias"] = [em.param(f"{h_new}.b", aff.bias.reshape(1, -1))]
    if (h0 := loop.mems[h_prev]) is not None:
        ins["H0"] = [h0]
    em.specs.append(OpSpec("simple_rnn", ins,
                           {"Hidden": [em.output(h_new, f"{h_new}.seq", d)]},
                           {"activation": act.type, "is_reverse": False}))


def _through_weight(aff: Affine, src: str, who: str, what: str) -> np.ndarray:
    w = aff.weights.get(src)
    if w is None:
        raise NotALoopCell(f"{who} must read the {what} through a weight")
    return w


def _check_all_used(loop: Loop, used: set[int]) -> None:
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
    body = Body(loop, scope)
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
