"""Sequence kernels: numpy over LoD tensors, no padding (see ``ir/ops/sequence.py``).

Segment reductions use ``ufunc.reduceat`` over the non-empty sequences; the
recurrences (``lstm``, ``gru``) process time step ``t`` as one matrix product over
the sequences still active at ``t``, longest first, so the batch shrinks instead
of being padded.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....ir import dtypes
from ....ir.lod import LoDTensor, lengths_to_offsets
from ....ir.ops.sequence import GRU_UNIT_ACTS
from ..context import KernelContext
from . import register_kernel

Lod = list[list[int]]


def _lod_of(ctx: KernelContext, slot: str = "X", i: int = 0) -> tuple[np.ndarray, Lod]:
    x, lod = ctx.input_with_lod(slot, i)
    if not lod:
        raise ValueError(f"{slot} {ctx.in_names[slot][i]!r} has no LoD; {ctx.op_type} needs a "
                         "batch of sequences (feed a LoDTensor)")
    return x, lod


def _segments(offs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, the sequence index of each row)."""
    o = np.asarray(offs, np.int64)
    lens = np.diff(o)
    return lens, np.repeat(np.arange(lens.size), lens)


# -- activations (value and derivative from the output) ------------------------------------

def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


_ACT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "identity": lambda x: x,
}
_DACT: dict[str, Callable[[np.ndarray], np.ndarray]] = {  # d act / d input, from the output
    "sigmoid": lambda y: y * (1 - y),
    "tanh": lambda y: 1 - y * y,
    "relu": lambda y: (y > 0).astype(y.dtype),
    "identity": lambda y: np.ones_like(y),
}


# -- sequence_pool -------------------------------------------------------------------------

def _pool_layout(x: np.ndarray, lod: Lod) -> tuple[np.ndarray, np.ndarray, np.ndarray, Lod]:
    offs = lod[-1]
    if offs[-1] != x.shape[0]:
        raise ValueError(f"LoD ends at {offs[-1]} but X has {x.shape[0]} rows")
    lens, seg = _segments(offs)
    starts = np.asarray(offs[:-1], np.int64)
    return lens, seg, starts, [list(lv) for lv in lod[:-1]]


@register_kernel("sequence_pool")
def sequence_pool(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx)
    kind = ctx.attrs["pooltype"]
    lens, _, starts, out_lod = _pool_layout(x, lod)
    n = lens.size
    full = lens > 0
    out = np.full((n, *x.shape[1:]), ctx.attrs["pad_value"], x.dtype)
    index = np.full((n, *x.shape[1:]), -1, np.int32)
    if full.any():
        s = starts[full]
        if kind in ("SUM", "AVERAGE", "SQRT"):
            tot = np.add.reduceat(x, s, axis=0)
            shape = (-1,) + (1,) * (x.ndim - 1)
            if kind == "AVERAGE":
                tot = tot / lens[full].reshape(shape).astype(x.dtype)
            elif kind == "SQRT":
                tot = tot / np.sqrt(lens[full].astype(x.dtype)).reshape(shape)
            out[full] = tot
        elif kind == "MAX":
            m = np.maximum.reduceat(x, s, axis=0)
            out[full] = m
            rows = np.arange(x.shape[0]).reshape((-1,) + (1,) * (x.ndim - 1))
            _, seg = _segments(lod[-1])
            cand = np.where(x == out[seg], rows, x.shape[0])
            index[full] = np.minimum.reduceat(cand, s, axis=0)
        elif kind == "FIRST":
            out[full] = x[s]
        else:  # LAST
            out[full] = x[s + lens[full] - 1]
    ctx.set_output("Out", out, lod=out_lod or None)
    ctx.set_output("MaxIndex", index)


@register_kernel("sequence_pool_grad")
def sequence_pool_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, lod = _lod_of(ctx)
    kind = ctx.attrs["pooltype"]
    d = ctx.input("Out@GRAD")
    lens, seg, starts, _ = _pool_layout(x, lod)
    full = lens > 0
    g = np.zeros_like(x)
    shape = (-1,) + (1,) * (x.ndim - 1)
    if kind == "SUM":
        g = d[seg].astype(x.dtype, copy=True)
    elif kind == "AVERAGE":
        g = (d[seg] / lens[seg].reshape(shape).astype(x.dtype)).astype(x.dtype)
    elif kind == "SQRT":
        g = (d[seg] / np.sqrt(lens[seg].astype(x.dtype)).reshape(shape)).astype(x.dtype)
    elif kind == "MAX":
        idx = ctx.input("MaxIndex")[full].astype(np.int64)
        flat = g.reshape(x.shape[0], -1)
        np.put_along_axis(flat, idx.reshape(idx.shape[0], -1),
                          d[full].reshape(idx.shape[0], -1), axis=0)
    elif kind == "FIRST":
        g[starts[full]] = d[full]
    else:  # LAST
        g[starts[full] + lens[full] - 1] = d[full]
    ctx.set_output("X@GRAD", g)


# -- sequence_softmax ----------------------------------------------------------------------

def _seq_softmax(x: np.ndarray, offs: list[int]) -> np.ndarray:
    lens, seg = _segments(offs)
    flat = x.reshape(-1)
    if flat.size != len(seg):
        raise ValueError(f"X has {flat.size} values; its LoD covers {len(seg)} rows")
    s = np.asarray(offs[:-1], np.int64)[lens > 0]
    if not s.size:
        return x.copy()
    m = np.maximum.reduceat(flat, s)
    full_idx = np.cumsum(lens > 0) - 1  # segment -> index among non-empty segments
    e = np.exp(flat - m[full_idx[seg]])
    tot = np.add.reduceat(e, s)
    return (e / tot[full_idx[seg]]).reshape(x.shape).astype(x.dtype, copy=False)


@register_kernel("sequence_softmax")
def sequence_softmax(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx)
    ctx.set_output("Out", _seq_softmax(x, lod[-1]), lod=lod)


@register_kernel("sequence_softmax_grad")
def sequence_softmax_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    out, lod = _lod_of(ctx, "Out")
    d = ctx.input("Out@GRAD")
    lens, seg = _segments(lod[-1])
    prod = (d * out).reshape(-1)
    tot = np.zeros(lens.size, prod.dtype)
    np.add.at(tot, seg, prod)
    g = out * (d - tot[seg].reshape(out.shape))
    ctx.set_output("X@GRAD", g.astype(out.dtype, copy=False))


# -- sequence_expand -----------------------------------------------------------------------

def _expand_plan(ctx: KernelContext) -> tuple[np.ndarray, Lod]:
    """Rows of X gathered into Out, and Out's LoD."""
    x, x_lod = ctx.input_with_lod("X")
    _, y_lod = _lod_of(ctx, "Y")
    ref = ctx.attrs["ref_level"]
    ref = len(y_lod) - 1 if ref == -1 else ref
    if not 0 <= ref < len(y_lod):
        raise ValueError(f"ref_level {ctx.attrs['ref_level']} is out of range for Y's "
                         f"{len(y_lod)} LoD level(s)")
    counts = np.diff(np.asarray(y_lod[ref], np.int64))
    x_offs = np.asarray(x_lod[0] if x_lod else np.arange(x.shape[0] + 1), np.int64)
    if x_offs.size - 1 != counts.size:
        unit = "sequences" if x_lod else "rows"
        raise ValueError(f"X has {x_offs.size - 1} {unit} but Y's LoD level {ref} has "
                         f"{counts.size} sequences")
    parts, pieces = [], []
    for i, c in enumerate(counts):
        seq = np.arange(x_offs[i], x_offs[i + 1])
        parts.extend([seq] * int(c))
        pieces.extend([seq.size] * int(c))
    rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    # X without LoD gives a plain tensor, as Fluid's (the beam search of the book's
    # machine translation expands its state this way and reads it as rows)
    lod = [lengths_to_offsets(pieces)] if x_lod else []
    return rows, lod


@register_kernel("sequence_expand")
def sequence_expand(ctx: KernelContext) -> None:
    rows, lod = _expand_plan(ctx)
    out = ctx.input("X")[rows]
    # without LoD, a LoDTensor holding none: the executor's LoD sharing must not
    # give Out the LoD of Y, whose rows it may happen to match
    if lod:
        ctx.set_output("Out", out, lod=lod)
    else:
        ctx.set_output("Out", LoDTensor(out))


@register_kernel("sequence_expand_grad")
def sequence_expand_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    rows, _ = _expand_plan(ctx)
    x = ctx.input("X")
    g = np.zeros_like(x)
    np.add.at(g, rows, ctx.input("Out@GRAD"))
    ctx.set_output("X@GRAD", g)


# -- sequence_concat -----------------------------------------------------------------------

def _concat_plan(ctx: KernelContext) -> tuple[list[np.ndarray], Lod, int]:
    """For each input, the output row of each of its rows; the output LoD; row count."""
    lods = [_lod_of(ctx, "X", i)[1][-1] for i in range(len(ctx.in_names["X"]))]
    n = len(lods[0]) - 1
    for k, offs in enumerate(lods):
        if len(offs) - 1 != n:
            raise ValueError(f"X[{k}] has {len(offs) - 1} sequences, X[0] has {n}")
    where = [np.zeros(offs[-1], np.int64) for offs in lods]
    lens, cursor = [], 0
    for i in range(n):
        start = cursor
        for k, offs in enumerate(lods):
            m = offs[i + 1] - offs[i]
            where[k][offs[i]:offs[i + 1]] = np.arange(cursor, cursor + m)
            cursor += m
        lens.append(cursor - start)
    return where, [lengths_to_offsets(lens)], cursor


@register_kernel("sequence_concat")
def sequence_concat(ctx: KernelContext) -> None:
    where, lod, rows = _concat_plan(ctx)
    xs = ctx.inputs("X")
    out = np.empty((rows, *xs[0].shape[1:]), xs[0].dtype)
    for w, x in zip(where, xs):
        out[w] = x
    ctx.set_output("Out", out, lod=lod)


@register_kernel("sequence_concat_grad")
def sequence_concat_grad(ctx: KernelContext) -> None:
    where, _, _ = _concat_plan(ctx)
    d = ctx.input("Out@GRAD")
    for i, w in enumerate(where):
        ctx.set_output("X@GRAD", d[w], i)


# -- sequence_reshape ----------------------------------------------------------------------

def _reshape_lod(x: np.ndarray, lod: Lod, new_dim: int) -> Lod:
    width = x.shape[1]
    out = []
    for o in lod[-1]:
        if (o * width) % new_dim:
            raise ValueError(f"a sequence ending at row {o} holds {o * width} values, not a "
                             f"multiple of new_dim {new_dim}")
        out.append(o * width // new_dim)
    return [out]


@register_kernel("sequence_reshape")
def sequence_reshape(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx)
    nd = ctx.attrs["new_dim"]
    lens = np.diff(np.asarray(lod[-1]))
    for ln in lens:
        if (ln * x.shape[1]) % nd:
            raise ValueError(f"a sequence of {ln} rows x {x.shape[1]} is not a multiple of "
                             f"new_dim {nd}")
    ctx.set_output("Out", x.reshape(-1, nd), lod=_reshape_lod(x, lod, nd))


@register_kernel("sequence_reshape_grad")
def sequence_reshape_grad(ctx: KernelContext) -> None:
    if ctx.has_output("X@GRAD"):
        x = ctx.input("X")
        ctx.set_output("X@GRAD", ctx.input("Out@GRAD").reshape(x.shape))


# -- sequence_conv -------------------------------------------------------------------------

def _conv_index(ctx: KernelContext, x: np.ndarray, lod: Lod) -> tuple[np.ndarray, int]:
    """[T, K] source row of each context slot in the extended matrix
    [X; PaddingData; zero row], and the number of padding rows."""
    k, s = ctx.attrs["contextLength"], ctx.attrs["contextStart"]
    t = x.shape[0]
    lens, seg = _segments(lod[-1])
    starts = np.asarray(lod[-1][:-1], np.int64)
    j = np.arange(t) - starts[seg]  # position within the sequence
    pos = j[:, None] + s + np.arange(k)[None, :]
    length = lens[seg][:, None]
    inside = (pos >= 0) & (pos < length)
    up = max(0, -s)
    n_pad = up + max(0, s + k - 1)
    if ctx.attrs["paddingTrainable"]:
        before = t + pos + up  # pos in [-up, -1]
        after = t + up + pos - length  # pos >= length
        outside = np.where(pos < 0, before, after)
        idx = np.where(inside, starts[seg][:, None] + pos, outside)
    else:
        idx = np.where(inside, starts[seg][:, None] + pos, t + n_pad)
    return idx, n_pad


def _extended(ctx: KernelContext, x: np.ndarray, n_pad: int) -> np.ndarray:
    pad = ctx.input("PaddingData") if ctx.attrs["paddingTrainable"] else \
        np.zeros((n_pad, x.shape[1]), x.dtype)
    if pad.shape[0] < n_pad:
        raise ValueError(f"PaddingData has {pad.shape[0]} rows; contextStart "
                         f"{ctx.attrs['contextStart']} and contextLength "
                         f"{ctx.attrs['contextLength']} need {n_pad}")
    return np.concatenate([x, pad[:n_pad], np.zeros((1, x.shape[1]), x.dtype)])


@register_kernel("sequence_conv")
def sequence_conv(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx)
    w = ctx.input("Filter")
    idx, n_pad = _conv_index(ctx, x, lod)
    col = _extended(ctx, x, n_pad)[idx].reshape(x.shape[0], -1)
    ctx.set_output("Out", (col @ w).astype(x.dtype, copy=False), lod=lod)


@register_kernel("sequence_conv_grad")
def sequence_conv_grad(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx)
    w = ctx.input("Filter")
    d = ctx.input("Out@GRAD")
    idx, n_pad = _conv_index(ctx, x, lod)
    ext = _extended(ctx, x, n_pad)
    if ctx.has_output("Filter@GRAD"):
        col = ext[idx].reshape(x.shape[0], -1)
        ctx.set_output("Filter@GRAD", (col.T @ d).astype(w.dtype, copy=False))
    if ctx.has_output("X@GRAD") or ctx.has_output("PaddingData@GRAD"):
        dcol = (d @ w.T).reshape(x.shape[0], idx.shape[1], x.shape[1])
        dext = np.zeros_like(ext)
        np.add.at(dext, idx, dcol)
        ctx.set_output("X@GRAD", dext[: x.shape[0]])
        if ctx.has_output("PaddingData@GRAD"):
            pad = ctx.input("PaddingData")
            gp = np.zeros_like(pad)
            gp[:n_pad] = dext[x.shape[0]: x.shape[0] + n_pad]
            ctx.set_output("PaddingData@GRAD", gp)


# -- padding interop -----------------------------------------------------------------------

@register_kernel("sequence_mask")
def sequence_mask(ctx: KernelContext) -> None:
    x = np.asarray(ctx.input("X"))
    m = ctx.attrs["maxlen"]
    if ctx.has_input("MaxLenTensor"):
        m = int(np.asarray(ctx.input("MaxLenTensor")).reshape(-1)[0])
    if m <= 0:
        m = int(x.max()) if x.size else 0
    y = np.arange(m) < x[..., None]
    ctx.set_output("Y", y.astype(dtypes.to_numpy(ctx.attrs["out_dtype"])))


def _pad_layout(ctx: KernelContext, lod: Lod) -> tuple[np.ndarray, np.ndarray, int]:
    """(lengths, flat index of each row in the [N * L] padded rows, L)."""
    lens, seg = _segments(lod[-1])
    width = ctx.attrs["padded_length"]
    longest = int(lens.max()) if lens.size else 0
    if width == -1:
        width = longest
    elif longest > width:
        raise ValueError(f"padded_length {width} is shorter than the longest sequence "
                         f"({longest} rows)")
    starts = np.asarray(lod[-1][:-1], np.int64)
    j = np.arange(seg.size) - starts[seg]
    return lens, seg * width + j, width


@register_kernel("sequence_pad")
def sequence_pad(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx)
    lens, where, width = _pad_layout(ctx, lod)
    pad = np.asarray(ctx.input("PadValue"), x.dtype)
    tail = x.shape[1:]
    out = np.empty((lens.size * width, *tail), x.dtype)
    out[...] = pad.reshape(tail) if pad.size > 1 else pad.reshape(())
    out[where] = x
    ctx.set_output("Out", out.reshape(lens.size, width, *tail))
    ctx.set_output("Length", lens.astype(np.int64))


@register_kernel("sequence_pad_grad")
def sequence_pad_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x, lod = _lod_of(ctx)
    _, where, _ = _pad_layout(ctx, lod)
    d = ctx.input("Out@GRAD")
    ctx.set_output("X@GRAD", d.reshape(-1, *x.shape[1:])[where])


def _unpad_index(x: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, list[int]]:
    lens = [int(v) for v in np.asarray(length).reshape(-1)]
    n, width = x.shape[0], x.shape[1]
    if len(lens) != n:
        raise ValueError(f"Length has {len(lens)} entries, X has {n} sequences")
    if any(v < 0 or v > width for v in lens):
        raise ValueError(f"Length {lens} must be within 0..{width}")
    idx = np.concatenate([i * width + np.arange(v) for i, v in enumerate(lens)]) if lens \
        else np.zeros(0, np.int64)
    return idx, lens


@register_kernel("sequence_unpad")
def sequence_unpad(ctx: KernelContext) -> None:
    x = ctx.input("X")
    idx, lens = _unpad_index(x, ctx.input("Length"))
    ctx.set_output("Out", x.reshape(-1, *x.shape[2:])[idx], lod=[lengths_to_offsets(lens)])


@register_kernel("sequence_unpad_grad")
def sequence_unpad_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X")
    idx, _ = _unpad_index(x, ctx.input("Length"))
    g = np.zeros((x.shape[0] * x.shape[1], *x.shape[2:]), x.dtype)
    g[idx] = ctx.input("Out@GRAD")
    ctx.set_output("X@GRAD", g.reshape(x.shape))


# -- lstm_unit / gru_unit ------------------------------------------------------------------

def _lstm_unit_gates(x: np.ndarray, forget_bias: float) -> tuple[np.ndarray, ...]:
    d = x.shape[1] // 4
    i = _sigmoid(x[:, :d])
    f = _sigmoid(x[:, d:2 * d] + x.dtype.type(forget_bias))
    o = _sigmoid(x[:, 2 * d:3 * d])
    g = np.tanh(x[:, 3 * d:])
    return i, f, o, g


@register_kernel("lstm_unit")
def lstm_unit(ctx: KernelContext) -> None:
    x, c_prev = ctx.input("X"), ctx.input("C_prev")
    i, f, o, g = _lstm_unit_gates(x, ctx.attrs["forget_bias"])
    c = f * c_prev + i * g
    ctx.set_output("C", c)
    ctx.set_output("H", o * np.tanh(c))


@register_kernel("lstm_unit_grad")
def lstm_unit_grad(ctx: KernelContext) -> None:
    x, c_prev, c = ctx.input("X"), ctx.input("C_prev"), ctx.input("C")
    i, f, o, g = _lstm_unit_gates(x, ctx.attrs["forget_bias"])
    dh = ctx.input("H@GRAD") if ctx.has_input("H@GRAD") else np.zeros_like(c)
    dc = ctx.input("C@GRAD") if ctx.has_input("C@GRAD") else np.zeros_like(c)
    tc = np.tanh(c)
    dc = dc + dh * o * (1 - tc * tc)
    dx = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                         dh * tc * o * (1 - o), dc * i * (1 - g * g)], axis=1)
    ctx.set_output("X@GRAD", dx.astype(x.dtype, copy=False))
    ctx.set_output("C_prev@GRAD", (dc * f).astype(x.dtype, copy=False))


def _gru_step(x: np.ndarray, h: np.ndarray, w: np.ndarray, act: str, gate_act: str,
              origin: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One GRU step on projected input x [N, 3D] (bias included): (gates [u, r, c],
    r * h, new h)."""
    d = h.shape[1]
    ur = _ACT[gate_act](x[:, :2 * d] + h @ w[:, :2 * d])
    u, r = ur[:, :d], ur[:, d:]
    rh = r * h
    c = _ACT[act](x[:, 2 * d:] + rh @ w[:, 2 * d:])
    new = u * h + (1 - u) * c if origin else u * c + (1 - u) * h
    return np.concatenate([ur, c], axis=1), rh, new


def _gru_step_grad(dh: np.ndarray, gate: np.ndarray, rh: np.ndarray, h: np.ndarray,
                   w: np.ndarray, act: str, gate_act: str,
                   origin: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d projected input [N, 3D], d previous h, d W) of one GRU step."""
    d = h.shape[1]
    u, r, c = gate[:, :d], gate[:, d:2 * d], gate[:, 2 * d:]
    if origin:
        du, dc, dh_prev = dh * (h - c), dh * (1 - u), dh * u
    else:
        du, dc, dh_prev = dh * (c - h), dh * u, dh * (1 - u)
    dc_pre = dc * _DACT[act](c)
    drh = dc_pre @ w[:, 2 * d:].T
    dr = drh * h
    dh_prev = dh_prev + drh * r
    dur_pre = np.concatenate([du * _DACT[gate_act](u), dr * _DACT[gate_act](r)], axis=1)
    dh_prev = dh_prev + dur_pre @ w[:, :2 * d].T
    dw = np.concatenate([h.T @ dur_pre, rh.T @ dc_pre], axis=1)
    return np.concatenate([dur_pre, dc_pre], axis=1), dh_prev, dw


def _bias(ctx: KernelContext, slot: str, width: int, dtype: np.dtype) -> np.ndarray:
    if ctx.has_input(slot):
        return ctx.input(slot).reshape(-1)[:width]
    return np.zeros(width, dtype)


@register_kernel("gru_unit")
def gru_unit(ctx: KernelContext) -> None:
    x, h, w = ctx.input("Input"), ctx.input("HiddenPrev"), ctx.input("Weight")
    a = ctx.attrs
    xb = x + _bias(ctx, "Bias", x.shape[1], x.dtype)
    gate, rh, new = _gru_step(xb, h, w, GRU_UNIT_ACTS[a["activation"]],
                              GRU_UNIT_ACTS[a["gate_activation"]], a["origin_mode"])
    ctx.set_output("Gate", gate.astype(x.dtype, copy=False))
    ctx.set_output("ResetHiddenPrev", rh.astype(x.dtype, copy=False))
    ctx.set_output("Hidden", new.astype(x.dtype, copy=False))


@register_kernel("gru_unit_grad")
def gru_unit_grad(ctx: KernelContext) -> None:
    x, h, w = ctx.input("Input"), ctx.input("HiddenPrev"), ctx.input("Weight")
    a = ctx.attrs
    dx, dh, dw = _gru_step_grad(ctx.input("Hidden@GRAD"), ctx.input("Gate"),
                                ctx.input("ResetHiddenPrev"), h, w,
                                GRU_UNIT_ACTS[a["activation"]],
                                GRU_UNIT_ACTS[a["gate_activation"]], a["origin_mode"])
    dt = x.dtype
    ctx.set_output("Input@GRAD", dx.astype(dt, copy=False))
    ctx.set_output("HiddenPrev@GRAD", dh.astype(dt, copy=False))
    ctx.set_output("Weight@GRAD", dw.astype(dt, copy=False))
    if ctx.has_output("Bias@GRAD"):
        b = ctx.input("Bias")
        ctx.set_output("Bias@GRAD", dx.sum(axis=0).reshape(b.shape).astype(dt, copy=False))


# -- lstm / gru over whole sequences -------------------------------------------------------

class _Steps:
    """The time-step layout of a batch: sequences longest first; at step t the first
    ``n[t]`` of them are active and ``rows[t]`` are their rows (reversed sequences
    with ``is_reverse``)."""

    def __init__(self, lod: Lod, reverse: bool) -> None:
        offs = np.asarray(lod[-1], np.int64)
        lens = np.diff(offs)
        self.order = np.argsort(-lens, kind="stable")
        sl = lens[self.order]
        self.count = lens.size
        self.n = [int(np.count_nonzero(sl > t)) for t in range(int(sl.max()) if sl.size else 0)]
        first = offs[:-1][self.order]
        last = offs[1:][self.order] - 1
        self.rows = [(last[:n] - t) if reverse else (first[:n] + t)
                     for t, n in enumerate(self.n)]

    def initial(self, ctx: KernelContext, slot: str, d: int, dtype: np.dtype) -> np.ndarray:
        """The initial state in step order (zeros when the slot is absent)."""
        if not ctx.has_input(slot):
            return np.zeros((self.count, d), dtype)
        v = ctx.input(slot)
        if v.shape != (self.count, d):
            raise ValueError(f"{slot} has shape {list(v.shape)}; the batch has {self.count} "
                             f"sequences of width {d}")
        return v[self.order]


@register_kernel("lstm")
def lstm(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    w = ctx.input("Weight")
    b = ctx.input("Bias").reshape(-1)
    a = ctx.attrs
    d = w.shape[0]
    steps = _Steps(lod, a["is_reverse"])
    act_g, act_c, act_n = _ACT[a["gate_activation"]], _ACT[a["cell_activation"]], \
        _ACT[a["candidate_activation"]]
    peep = a["use_peepholes"]
    w_ic, w_fc, w_oc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)
    h = steps.initial(ctx, "H0", d, x.dtype)
    c = steps.initial(ctx, "C0", d, x.dtype)
    hidden, cell = np.empty((x.shape[0], d), x.dtype), np.empty((x.shape[0], d), x.dtype)
    gates = np.empty((x.shape[0], 4 * d), x.dtype)
    for n, rows in zip(steps.n, steps.rows):
        hp, cp = h[:n], c[:n]
        g = x[rows] + hp @ w + b[:4 * d]
        cand = act_n(g[:, :d])
        ig = act_g(g[:, d:2 * d] + w_ic * cp)
        fg = act_g(g[:, 2 * d:3 * d] + w_fc * cp)
        cn = fg * cp + ig * cand
        og = act_g(g[:, 3 * d:] + w_oc * cn)
        hn = og * act_c(cn)
        hidden[rows], cell[rows] = hn, cn
        gates[rows] = np.concatenate([cand, ig, fg, og], axis=1)
        h[:n], c[:n] = hn, cn
    ctx.set_output("Hidden", hidden, lod=lod)
    ctx.set_output("Cell", cell, lod=lod)
    ctx.set_output("BatchGate", gates, lod=lod)
    ctx.set_output("BatchCellPreAct", cell, lod=lod)


@register_kernel("lstm_grad")
def lstm_grad(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    w = ctx.input("Weight")
    bias = ctx.input("Bias")
    b = bias.reshape(-1)
    a = ctx.attrs
    d = w.shape[0]
    steps = _Steps(lod, a["is_reverse"])
    dact_g, dact_c, dact_n = _DACT[a["gate_activation"]], _DACT[a["cell_activation"]], \
        _DACT[a["candidate_activation"]]
    act_c = _ACT[a["cell_activation"]]
    peep = a["use_peepholes"]
    w_ic, w_fc, w_oc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)
    cell, gates = ctx.input("Cell"), ctx.input("BatchGate")
    hidden = ctx.input("Hidden")
    zeros = np.zeros_like(hidden)
    dhid = ctx.input("Hidden@GRAD") if ctx.has_input("Hidden@GRAD") else zeros
    dcell = ctx.input("Cell@GRAD") if ctx.has_input("Cell@GRAD") else zeros
    h0 = steps.initial(ctx, "H0", d, x.dtype)
    c0 = steps.initial(ctx, "C0", d, x.dtype)
    dx = np.zeros_like(x)
    dw = np.zeros_like(w)
    db = np.zeros_like(b)
    dh_next = np.zeros((steps.count, d), x.dtype)
    dc_next = np.zeros((steps.count, d), x.dtype)
    for t in range(len(steps.n) - 1, -1, -1):
        n, rows = steps.n[t], steps.rows[t]
        if t:
            prev = steps.rows[t - 1][:n]
            hp, cp = hidden[prev], cell[prev]
        else:
            hp, cp = h0[:n], c0[:n]
        cand, ig, fg, og = (gates[rows, k * d:(k + 1) * d] for k in range(4))
        cn = cell[rows]
        tc = act_c(cn)
        dh = dhid[rows] + dh_next[:n]
        do_pre = dh * tc * dact_g(og)
        dc = dcell[rows] + dc_next[:n] + dh * og * dact_c(tc) + do_pre * w_oc
        di_pre = dc * cand * dact_g(ig)
        df_pre = dc * cp * dact_g(fg)
        dn_pre = dc * ig * dact_n(cand)
        dg = np.concatenate([dn_pre, di_pre, df_pre, do_pre], axis=1)
        dx[rows] = dg
        dw += hp.T @ dg
        db[:4 * d] += dg.sum(axis=0)
        if peep:
            db[4 * d:5 * d] += (di_pre * cp).sum(axis=0)
            db[5 * d:6 * d] += (df_pre * cp).sum(axis=0)
            db[6 * d:] += (do_pre * cn).sum(axis=0)
        dh_next[:n] = dg @ w.T
        dc_next[:n] = dc * fg + di_pre * w_ic + df_pre * w_fc
    ctx.set_output("Input@GRAD", dx)
    ctx.set_output("Weight@GRAD", dw)
    if ctx.has_output("Bias@GRAD"):
        ctx.set_output("Bias@GRAD", db.reshape(bias.shape))
    inv = np.argsort(steps.order, kind="stable")
    if ctx.has_output("H0@GRAD"):
        ctx.set_output("H0@GRAD", dh_next[inv])
    if ctx.has_output("C0@GRAD"):
        ctx.set_output("C0@GRAD", dc_next[inv])


def _gru_acts(ctx: KernelContext) -> tuple[str, str, bool]:
    a = ctx.attrs
    return a["activation"], a["gate_activation"], a["origin_mode"]


@register_kernel("gru")
def gru(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    w = ctx.input("Weight")
    d = w.shape[0]
    act, gate_act, origin = _gru_acts(ctx)
    steps = _Steps(lod, ctx.attrs["is_reverse"])
    xb = x + _bias(ctx, "Bias", 3 * d, x.dtype)
    h = steps.initial(ctx, "H0", d, x.dtype)
    hidden = np.empty((x.shape[0], d), x.dtype)
    prev = np.empty((x.shape[0], d), x.dtype)
    rhs = np.empty((x.shape[0], d), x.dtype)
    gates = np.empty((x.shape[0], 3 * d), x.dtype)
    for n, rows in zip(steps.n, steps.rows):
        hp = h[:n]
        gate, rh, hn = _gru_step(xb[rows], hp, w, act, gate_act, origin)
        hidden[rows], prev[rows], rhs[rows], gates[rows] = hn, hp, rh, gate
        h[:n] = hn
    ctx.set_output("Hidden", hidden, lod=lod)
    ctx.set_output("BatchGate", gates, lod=lod)
    ctx.set_output("BatchResetHiddenPrev", rhs, lod=lod)
    ctx.set_output("BatchHidden", prev, lod=lod)


@register_kernel("gru_grad")
def gru_grad(ctx: KernelContext) -> None:
    x, lod = _lod_of(ctx, "Input")
    w = ctx.input("Weight")
    d = w.shape[0]
    act, gate_act, origin = _gru_acts(ctx)
    steps = _Steps(lod, ctx.attrs["is_reverse"])
    gates, rhs, prev = ctx.input("BatchGate"), ctx.input("BatchResetHiddenPrev"), \
        ctx.input("BatchHidden")
    dhid = ctx.input("Hidden@GRAD")
    dx = np.zeros_like(x)
    dw = np.zeros_like(w)
    dh_next = np.zeros((steps.count, d), x.dtype)
    for t in range(len(steps.n) - 1, -1, -1):
        n, rows = steps.n[t], steps.rows[t]
        dh = dhid[rows] + dh_next[:n]
        dg, dhp, dws = _gru_step_grad(dh, gates[rows], rhs[rows], prev[rows], w, act,
                                      gate_act, origin)
        dx[rows] = dg
        dw += dws
        dh_next[:n] = dhp
    ctx.set_output("Input@GRAD", dx)
    ctx.set_output("Weight@GRAD", dw)
    if ctx.has_output("Bias@GRAD"):
        b = ctx.input("Bias")
        ctx.set_output("Bias@GRAD", dx.sum(axis=0).reshape(b.shape))
    if ctx.has_output("H0@GRAD"):
        ctx.set_output("H0@GRAD", dh_next[np.argsort(steps.order, kind="stable")])
