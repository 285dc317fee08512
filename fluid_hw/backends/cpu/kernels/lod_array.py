"""Kernels of tensor arrays, rank tables and LoD routing (see ``ir/ops/lod_array.py``).

A tensor array is a Python list of arrays (``LoDTensor`` where an entry has LoD);
``None`` marks an entry nobody wrote.  Writers update the list in place (the
executor empties the global block's arrays at the start of each run, and
sub-block arrays live in fresh step scopes).  Gradient arrays are accumulated in
place, entry by entry; a missing gradient entry is zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....ir import dtypes
from ....ir.lod import LoDRankTable, LoDTensor, lengths_to_offsets, offsets_to_lengths, sub_lod
from ..context import KernelContext
from . import register_kernel

Lod = list[list[int]]


def _index(ctx: KernelContext, slot: str = "I") -> int:
    a = np.asarray(ctx.input(slot)).reshape(-1)
    if a.size != 1:
        raise ValueError(f"index {slot} must hold one integer, has {a.size} values")
    i = int(a[0])
    if i < 0:
        raise ValueError(f"index {slot} is {i}; array indices start at 0")
    return i


def _data(v: Any) -> np.ndarray:
    return np.asarray(v.data if isinstance(v, LoDTensor) else v)


def _split(v: Any) -> tuple[np.ndarray, Lod]:
    if isinstance(v, LoDTensor):
        return np.asarray(v.data), v._lod
    return np.asarray(v), []


def _array_in(ctx: KernelContext, slot: str = "X") -> list[Any]:
    v = ctx.input_value(slot)
    if not isinstance(v, list):
        raise ValueError(f"input {slot} {ctx.in_names[slot][0]!r} is not a tensor array "
                         f"(holds {type(v).__name__})")
    return v


def _grad_array_in(ctx: KernelContext, slot: str) -> list[Any]:
    """An incoming array gradient; absent or never written means all zeros."""
    names = ctx.in_names.get(slot)
    if not names:
        return []
    v = ctx.scope.find_value(names[0])
    return v if isinstance(v, list) else []


def _array_out(ctx: KernelContext, slot: str) -> list[Any]:
    """The array an op updates in place (a new one when the variable holds none)."""
    v = ctx.output_value(slot)
    return v if isinstance(v, list) else []


def _entry(arr: list[Any], i: int) -> Any:
    return arr[i] if i < len(arr) else None


def _put(arr: list[Any], i: int, value: Any) -> None:
    if len(arr) <= i:
        arr.extend([None] * (i + 1 - len(arr)))
    arr[i] = value


def _accumulate(arr: list[Any], i: int, g: np.ndarray) -> None:
    cur = _entry(arr, i)
    _put(arr, i, np.array(g, copy=True) if cur is None else _data(cur) + g)


def _wrap(data: np.ndarray, lod: Lod) -> Any:
    return LoDTensor(data, lod) if lod else data


# -- tensor arrays ------------------------------------------------------------------------

@register_kernel("write_to_array")
def write_to_array(ctx: KernelContext) -> None:
    arr = _array_out(ctx, "Out")
    x, lod = ctx.input_with_lod("X")
    _put(arr, _index(ctx), _wrap(x, lod or []))
    ctx.set_output("Out", arr)


@register_kernel("read_from_array")
def read_from_array(ctx: KernelContext) -> None:
    arr = _array_in(ctx)
    i = _index(ctx)
    v = _entry(arr, i)
    if v is None:
        raise IndexError(f"array {ctx.in_names['X'][0]!r} has {len(arr)} entries; entry {i} "
                         "was never written")
    data, lod = _split(v)
    ctx.set_output("Out", data, lod=lod or None)


@register_kernel("lod_array_length")
def lod_array_length(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.array([len(_array_in(ctx))], np.int64))


@register_kernel("write_to_array_grad")
def write_to_array_grad(ctx: KernelContext) -> None:
    garr = _grad_array_in(ctx, "Out@GRAD")
    i = _index(ctx)
    g = _entry(garr, i)
    if ctx.has_output("X@GRAD"):
        x, lod = ctx.input_with_lod("X")
        ctx.set_output("X@GRAD", np.zeros_like(x) if g is None else
                       _data(g).astype(x.dtype, copy=False).reshape(x.shape), lod=lod or None)
    if g is not None and ctx.has_output("Out@GRAD"):
        # the write replaced entry i: its earlier value (written before, read before)
        # gets none of the gradient that reached the entry after the write
        garr[i] = None
        ctx.set_output("Out@GRAD", garr)


@register_kernel("read_from_array_grad")
def read_from_array_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    arr = _array_out(ctx, "X@GRAD")
    _accumulate(arr, _index(ctx), ctx.input("Out@GRAD"))
    ctx.set_output("X@GRAD", arr)


# -- rank tables and the step layout of a batch ---------------------------------------------

def _table(ctx: KernelContext) -> LoDRankTable:
    t = ctx.input_value("RankTable")
    if not isinstance(t, LoDRankTable):
        raise ValueError(f"RankTable {ctx.in_names['RankTable'][0]!r} holds "
                         f"{type(t).__name__}, not a rank table")
    return t


@register_kernel("lod_rank_table")
def lod_rank_table(ctx: KernelContext) -> None:
    _, lod = ctx.input_with_lod("X")
    if not lod:
        raise ValueError(f"X {ctx.in_names['X'][0]!r} has no LoD; a rank table needs a "
                         "batch of sequences (feed a LoDTensor)")
    ctx.set_output("Out", LoDRankTable(lod, ctx.attrs["level"]))


@register_kernel("max_sequence_len")
def max_sequence_len(ctx: KernelContext) -> None:
    ctx.set_output("Out", np.array([_table(ctx).max_len], np.int64))


def _check_lod(table: LoDRankTable, lod: Lod, what: str) -> None:
    if len(lod) <= table.level or len(lod[table.level]) - 1 != len(table.items):
        n = len(lod[table.level]) - 1 if len(lod) > table.level else 0
        raise ValueError(f"{what} has {n} sequences at LoD level {table.level}; the rank "
                         f"table has {len(table.items)}")


def step_rows(table: LoDRankTable, lod: Lod) -> list[tuple[np.ndarray, Lod]]:
    """For each time step: the rows of the batch that make up its entry (the step-th
    element of each active sequence, in rank order) and the entry's LoD."""
    level = table.level
    order = np.array([i for i, _ in table.items], np.int64)
    starts = np.asarray(lod[level], np.int64)[order] if len(order) else order
    out: list[tuple[np.ndarray, Lod]] = []
    bottom = level + 1 == len(lod)
    for t in range(table.max_len):
        n = table.active(t)
        elems = starts[:n] + t
        if bottom:
            out.append((elems, []))
            continue
        pieces = [sub_lod(lod, level + 1, int(e), int(e) + 1) for e in elems]
        rows = np.concatenate([np.arange(a, b) for _, (a, b) in pieces]) if pieces else \
            np.zeros(0, np.int64)
        depth = len(lod) - level - 1
        lens = [[n for p in pieces for n in p[0][k]] for k in range(depth)]
        out.append((rows, [lengths_to_offsets(lv) for lv in lens]))
    return out


def merge_plan(table: LoDRankTable, entries: list[tuple[int, Lod]]) -> tuple[list[np.ndarray],
                                                                            Lod, int]:
    """Where the rows of each step entry go when the steps are put back into the
    original order: per entry the output row of each of its rows, the output LoD and the
    output row count.  ``entries`` gives each entry's row count and LoD (a piece is one
    row when the entry has no LoD, else one sequence of the entry's first level)."""
    level, lod = table.level, table.lod
    active = [table.active(t) for t in range(len(entries))]
    if level + 1 == len(lod) and all(not el and n == a for (n, el), a in zip(entries, active)):
        order = np.array([i for i, _ in table.items], np.int64)
        starts = np.asarray(lod[level], np.int64)[order] if len(order) else order
        return ([starts[:a] + t for t, a in enumerate(active)], [list(lv) for lv in lod],
                int(lod[level][-1]))
    pos = {idx: r for r, (idx, _) in enumerate(table.items)}
    lengths = offsets_to_lengths(lod[level])
    idx = [np.zeros(n, np.int64) for n, _ in entries]
    depth = max((len(el) for _, el in entries), default=0)
    lower: list[list[int]] = [[] for _ in range(depth)]
    cursor = 0
    for j, length in enumerate(lengths):
        r = pos[j]
        for t in range(length):
            el = entries[t][1]
            if el:
                lens, (a, b) = sub_lod(el, 0, r, r + 1)
                for k, lv in enumerate(lens):
                    lower[k].extend(lv)
            else:
                a, b = r, r + 1
            idx[t][a:b] = np.arange(cursor, cursor + b - a)
            cursor += b - a
    out_lod = [list(lv) for lv in lod[:level]] + [lengths_to_offsets(lengths)]
    out_lod += [lengths_to_offsets(lv) for lv in lower]
    return idx, out_lod, cursor


@register_kernel("lod_tensor_to_array")
def lod_tensor_to_array(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    table = _table(ctx)
    _check_lod(table, lod or [], "X")
    arr = [_wrap(x[rows], el) for rows, el in step_rows(table, lod or [])]
    ctx.set_output("Out", arr)


@register_kernel("lod_tensor_to_array_grad")
def lod_tensor_to_array_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, lod = ctx.input_with_lod("X")
    garr = _grad_array_in(ctx, "Out@GRAD")
    g = np.zeros_like(x)
    for t, (rows, _) in enumerate(step_rows(_table(ctx), lod or [])):
        d = _entry(garr, t)
        if d is not None:
            g[rows] = _data(d)
    ctx.set_output("X@GRAD", g, lod=lod or None)


def _entries(arr: list[Any], name: str) -> list[tuple[np.ndarray, Lod]]:
    out = []
    for t, v in enumerate(arr):
        if v is None:
            raise ValueError(f"array {name!r}: entry {t} was never written")
        out.append(_split(v))
    return out


@register_kernel("array_to_lod_tensor")
def array_to_lod_tensor(ctx: KernelContext) -> None:
    name = ctx.in_names["X"][0]
    entries = _entries(_array_in(ctx), name)
    table = _table(ctx)
    if len(entries) != table.max_len:
        raise ValueError(f"array {name!r} has {len(entries)} entries; the rank table's "
                         f"longest sequence has {table.max_len} steps")
    idx, lod, rows = merge_plan(table, [(len(d), el) for d, el in entries])
    if not entries:
        raise ValueError(f"array {name!r} is empty")
    first = entries[0][0]
    out = np.empty((rows, *first.shape[1:]), first.dtype)
    for (d, _), where in zip(entries, idx):
        out[where] = d
    ctx.set_output("Out", out, lod=lod)


@register_kernel("array_to_lod_tensor_grad")
def array_to_lod_tensor_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    entries = _entries(_array_in(ctx), ctx.in_names["X"][0])
    idx, _, _ = merge_plan(_table(ctx), [(len(d), el) for d, el in entries])
    d = ctx.input("Out@GRAD")
    arr = _array_out(ctx, "X@GRAD")
    for t, where in enumerate(idx):
        _accumulate(arr, t, d[where])
    ctx.set_output("X@GRAD", arr)


# -- shrinking and reordering -------------------------------------------------------------

def _shrunk_rows(x: np.ndarray, lod: Lod | None, n: int) -> tuple[int, Lod]:
    """Rows (and LoD) of the first ``n`` rows, or level-0 sequences when ``lod``."""
    if lod and len(lod[0]) - 1 > n:
        lens, (_, end) = sub_lod(lod, 0, 0, n)
        return end, [lengths_to_offsets(lv) for lv in lens]
    if lod:
        return x.shape[0], lod
    return min(n, x.shape[0]), []


@register_kernel("shrink_rnn_memory")
def shrink_rnn_memory(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    rows, out_lod = _shrunk_rows(x, lod, _table(ctx).active(_index(ctx)))
    ctx.set_output("Out", x[:rows], lod=out_lod or None)


@register_kernel("shrink_rnn_memory_grad")
def shrink_rnn_memory_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, lod = ctx.input_with_lod("X")
    d = ctx.input("Out@GRAD")
    g = np.zeros_like(x)
    g[: d.shape[0]] = d
    ctx.set_output("X@GRAD", g, lod=lod or None)


def _rank_permutation(table: LoDRankTable, x: np.ndarray, lod: Lod | None,
                      what: str) -> tuple[np.ndarray, Lod]:
    """Rows of ``x`` in rank order (whole level-0 sequences when ``x`` has LoD)."""
    order = [i for i, _ in table.items]
    n = len(lod[0]) - 1 if lod else x.shape[0]
    if n != len(order):
        unit = "level-0 sequences" if lod else "rows"
        raise ValueError(f"{what} has {n} {unit}; the rank table orders {len(order)} "
                         "sequences")
    if not lod:
        return np.array(order, np.int64), []
    pieces = [sub_lod(lod, 0, i, i + 1) for i in order]
    rows = np.concatenate([np.arange(a, b) for _, (a, b) in pieces]) if pieces else \
        np.zeros(0, np.int64)
    lens = [[v for p in pieces for v in p[0][k]] for k in range(len(lod))]
    return rows, [lengths_to_offsets(lv) for lv in lens]


@register_kernel("reorder_lod_tensor_by_rank")
def reorder_lod_tensor_by_rank(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    rows, out_lod = _rank_permutation(_table(ctx), x, lod, f"X {ctx.in_names['X'][0]!r}")
    ctx.set_output("Out", x[rows], lod=out_lod or None)


@register_kernel("reorder_lod_tensor_by_rank_grad")
def reorder_lod_tensor_by_rank_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, lod = ctx.input_with_lod("X")
    rows, _ = _rank_permutation(_table(ctx), x, lod, f"X {ctx.in_names['X'][0]!r}")
    g = np.zeros_like(x)
    g[rows] = ctx.input("Out@GRAD")
    ctx.set_output("X@GRAD", g, lod=lod or None)


# -- routing by mask (IfElse) -------------------------------------------------------------

def _mask(ctx: KernelContext) -> np.ndarray:
    mask = np.asarray(ctx.input("Mask"))
    if mask.dtype != np.bool_:
        raise ValueError(f"Mask must be bool, got {mask.dtype}; make it with a comparison "
                         "(less_than, equal, ...) or cast it to bool")
    return mask.reshape(-1)


def _split_plan(x: np.ndarray, lod: Lod | None, mask: np.ndarray,
                level: int) -> list[tuple[np.ndarray, Lod]]:
    """(rows, LoD) of the true part and of the false part."""
    if not lod:
        if mask.size != x.shape[0]:
            raise ValueError(f"Mask has {mask.size} entries, X has {x.shape[0]} rows")
        return [(np.flatnonzero(mask), []), (np.flatnonzero(~mask), [])]
    if level >= len(lod):
        raise ValueError(f"level {level} is out of range for X's {len(lod)} LoD level(s)")
    n = len(lod[level]) - 1
    if mask.size != n:
        raise ValueError(f"Mask has {mask.size} entries, X has {n} sequences at LoD level "
                         f"{level}")
    out = []
    for want in (True, False):
        pieces = [sub_lod(lod, level, int(i), int(i) + 1)
                  for i in np.flatnonzero(mask == want)]
        rows = np.concatenate([np.arange(a, b) for _, (a, b) in pieces]) if pieces else \
            np.zeros(0, np.int64)
        lens = [[v for p in pieces for v in p[0][k]] for k in range(len(lod) - level)]
        out.append((rows, [lengths_to_offsets(lv) for lv in lens]))
    return out


@register_kernel("split_lod_tensor")
def split_lod_tensor(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    (rt, lt), (rf, lf) = _split_plan(x, lod, _mask(ctx), ctx.attrs["level"])
    ctx.set_output("OutTrue", x[rt], lod=lt or None)
    ctx.set_output("OutFalse", x[rf], lod=lf or None)


@register_kernel("split_lod_tensor_grad")
def split_lod_tensor_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, lod = ctx.input_with_lod("X")
    plan = _split_plan(x, lod, _mask(ctx), ctx.attrs["level"])
    g = np.zeros_like(x)
    for (rows, _), slot in zip(plan, ("OutTrue@GRAD", "OutFalse@GRAD")):
        if ctx.has_input(slot) and rows.size:
            g[rows] = ctx.input(slot)
    ctx.set_output("X@GRAD", g, lod=lod or None)


def _merge_plan(ctx: KernelContext, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, Lod,
                                                                 int]:
    """Output rows of InTrue's rows, of InFalse's rows, the output LoD and row count."""
    x, lod = ctx.input_with_lod("X")
    level = ctx.attrs["level"]
    if not lod:
        if mask.size != x.shape[0]:
            raise ValueError(f"Mask has {mask.size} entries, X has {x.shape[0]} rows")
        return np.flatnonzero(mask), np.flatnonzero(~mask), [], mask.size
    srcs = {True: ctx.input_lod("InTrue") if mask.any() else [],
            False: ctx.input_lod("InFalse") if not mask.all() else []}
    where: dict[bool, list[np.ndarray]] = {True: [], False: []}
    taken = {True: 0, False: 0}
    lower: list[list[int]] = []
    cursor = 0
    for m in mask:
        m = bool(m)
        k = taken[m]
        if srcs[m]:
            lens, (a, b) = sub_lod(srcs[m], 0, k, k + 1)
            while len(lower) < len(lens):
                lower.append([])
            for lv, ln in zip(lower, lens):
                lv.extend(ln)
        else:
            a, b = k, k + 1
            if not lower:
                lower.append([])
            lower[0].append(1)
        where[m].append(np.arange(cursor, cursor + b - a))
        cursor += b - a
        taken[m] += 1
    out_lod = [list(lv) for lv in lod[:level]] + [lengths_to_offsets(lv) for lv in lower]

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    return cat(where[True]), cat(where[False]), out_lod, cursor


@register_kernel("merge_lod_tensor")
def merge_lod_tensor(ctx: KernelContext) -> None:
    mask = _mask(ctx)
    pt, pf, lod, rows = _merge_plan(ctx, mask)
    parts = [(p, ctx.input(s)) for p, s in ((pt, "InTrue"), (pf, "InFalse")) if p.size]
    if not parts:  # an empty batch: shape from whichever branch output exists
        ref = ctx.input("InTrue" if ctx.has_input("InTrue") else "InFalse")
        ctx.set_output("Out", np.zeros((0, *ref.shape[1:]), ref.dtype))
        return
    first = parts[0][1]
    out = np.empty((rows, *first.shape[1:]), first.dtype)
    for p, d in parts:
        if d.shape[0] != p.size:
            raise ValueError(f"a branch gave {d.shape[0]} rows where the mask selects "
                             f"{p.size}")
        out[p] = d
    ctx.set_output("Out", out, lod=lod or None)


@register_kernel("merge_lod_tensor_grad")
def merge_lod_tensor_grad(ctx: KernelContext) -> None:
    mask = _mask(ctx)
    pt, pf, _, _ = _merge_plan(ctx, mask)
    d = ctx.input("Out@GRAD")
    for p, slot, src in ((pt, "InTrue@GRAD", "InTrue"), (pf, "InFalse@GRAD", "InFalse")):
        if ctx.has_output(slot):
            # a branch that did not run has no value (and gets no rows)
            v = ctx.scope.find_value(ctx.in_names[src][0]) if ctx.has_input(src) else None
            ctx.set_output(slot, d[p], lod=(v._lod or None) if isinstance(v, LoDTensor)
                           else None)


# -- arrays <-> tensors along an axis -------------------------------------------------------

@register_kernel("tensor_to_array")
def tensor_to_array(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", list(np.moveaxis(x, ctx.attrs["axis"], 0)))


@register_kernel("tensor_to_array_grad")
def tensor_to_array_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X")
    axis = ctx.attrs["axis"]
    garr = _grad_array_in(ctx, "Out@GRAD")
    g = np.zeros_like(x)
    gv = np.moveaxis(g, axis, 0)  # a view: writes land in g
    for t in range(x.shape[axis]):
        d = _entry(garr, t)
        if d is not None:
            gv[t] = _data(d)
    ctx.set_output("X@GRAD", g)


@register_kernel("tensor_array_to_tensor")
def tensor_array_to_tensor(ctx: KernelContext) -> None:
    entries = [d for d, _ in _entries(_array_in(ctx), ctx.in_names["X"][0])]
    if not entries:
        raise ValueError(f"array {ctx.in_names['X'][0]!r} is empty")
    axis = ctx.attrs["axis"]
    if ctx.attrs["use_stack"]:
        out = np.stack(entries, axis)
        sizes = [1] * len(entries)
    else:
        out = np.concatenate(entries, axis)
        sizes = [e.shape[axis] for e in entries]
    ctx.set_output("Out", out)
    ctx.set_output("OutIndex", np.array(sizes, np.int32))


@register_kernel("tensor_array_to_tensor_grad")
def tensor_array_to_tensor_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    entries = [d for d, _ in _entries(_array_in(ctx), ctx.in_names["X"][0])]
    axis = ctx.attrs["axis"]
    d = ctx.input("Out@GRAD")
    arr = _array_out(ctx, "X@GRAD")
    if ctx.attrs["use_stack"]:
        parts = [np.take(d, t, axis) for t in range(len(entries))]
    else:
        cuts = np.cumsum([e.shape[axis] for e in entries])[:-1]
        parts = np.split(d, cuts, axis)
    for t, p in enumerate(parts):
        _accumulate(arr, t, p)
    ctx.set_output("X@GRAD", arr)


# -- batch-sized constants ---------------------------------------------------------------------

@register_kernel("fill_constant_batch_size_like")
def fill_constant_batch_size_like(ctx: KernelContext) -> None:
    a = ctx.attrs
    shape = list(a["shape"])
    shape[a["output_dim_idx"]] = ctx.input("Input").shape[a["input_dim_idx"]]
    ctx.set_output("Out", np.full(shape, a["value"], dtypes.to_numpy(a["dtype"])))
