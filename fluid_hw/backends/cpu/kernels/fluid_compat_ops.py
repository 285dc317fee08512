"""Kernels of ``ir/ops/fluid_compat_ops.py`` and their gradients."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..context import KernelContext
from . import register_kernel


@register_kernel("cvm")
def _cvm(ctx: KernelContext) -> None:
    x, lod = ctx.input_with_lod("X")
    if ctx.attrs["use_cvm"]:
        y = x.astype(np.float64).copy()
        y[:, 0] = np.log(x[:, 0] + 1.0)
        y[:, 1] = np.log(x[:, 1] + 1.0) - y[:, 0]
        ctx.set_output("Y", y.astype(x.dtype), lod=lod)
    else:
        ctx.set_output("Y", x[:, 2:].copy(), lod=lod)


@register_kernel("cvm_grad")
def _cvm_grad(ctx: KernelContext) -> None:
    """The derivative of the forward (Paddle's backward writes the CVM input into the
    show / click gradients instead; fluid-hw's is the true gradient)."""
    if not ctx.has_output("X@GRAD"):
        return
    x, d = ctx.input("X"), ctx.input("Y@GRAD")
    g = np.zeros(x.shape, np.float64)
    if ctx.attrs["use_cvm"]:
        g[:, 2:] = d[:, 2:]
        g[:, 0] = (d[:, 0] - d[:, 1]) / (x[:, 0] + 1.0)
        g[:, 1] = d[:, 1] / (x[:, 1] + 1.0)
    else:
        g[:, 2:] = d
    ctx.set_output("X@GRAD", g.astype(d.dtype))


def focus_mask(t: np.ndarray) -> np.ndarray:
    """Greedy: the largest elements of a 2-D table, one per row and column."""
    mask = np.zeros(t.shape, bool)
    rows: set[int] = set()
    cols: set[int] = set()
    for flat in np.argsort(-t, axis=None, kind="stable"):
        r, c = divmod(int(flat), t.shape[1])
        if r in rows or c in cols:
            continue
        mask[r, c] = True
        rows.add(r)
        cols.add(c)
        if len(rows) == t.shape[0] or len(cols) == t.shape[1]:
            break
    return mask


@register_kernel("similarity_focus")
def _similarity_focus(ctx: KernelContext) -> None:
    x = ctx.input("X")
    ax = ctx.attrs["axis"]
    out = np.zeros(x.shape, bool)
    for n in range(x.shape[0]):
        for i in ctx.attrs["indexes"]:
            m = focus_mask(np.take(x[n], i, axis=ax - 1))
            out[n] |= np.expand_dims(m, ax - 1)
    ctx.set_output("Out", out.astype(x.dtype))


def _im2seq_geometry(ctx: KernelContext, x: np.ndarray
                     ) -> tuple[np.ndarray, list[int], list[int], int, int]:
    kh, kw = ctx.attrs["kernels"]
    sh, sw = ctx.attrs["strides"]
    up, left, down, right = ctx.attrs["paddings"]
    xp = np.pad(x, [(0, 0), (0, 0), (up, down), (left, right)])
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"im2sequence: kernel {kh}x{kw} does not fit the padded image "
                         f"{list(xp.shape[2:])}")
    return xp, [kh, kw], [sh, sw], oh, ow


@register_kernel("im2sequence")
def _im2sequence(ctx: KernelContext) -> None:
    x = ctx.input("X")
    xp, (kh, kw), (sh, sw), oh, ow = _im2seq_geometry(ctx, x)
    n, c = x.shape[:2]
    out = np.empty((n, oh, ow, c, kh, kw), x.dtype)
    for i, j in itertools.product(range(kh), range(kw)):
        out[..., i, j] = xp[:, :, i:i + sh * (oh - 1) + 1:sh,
                            j:j + sw * (ow - 1) + 1:sw].transpose(0, 2, 3, 1)
    ctx.set_output("Out", out.reshape(n * oh * ow, c * kh * kw),
                   lod=[list(range(0, n * oh * ow + 1, oh * ow))])


@register_kernel("im2sequence_grad")
def _im2sequence_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X")
    xp, (kh, kw), (sh, sw), oh, ow = _im2seq_geometry(ctx, x)
    n, c = x.shape[:2]
    d = ctx.input("Out@GRAD").reshape(n, oh, ow, c, kh, kw)
    dxp = np.zeros(xp.shape, d.dtype)
    for i, j in itertools.product(range(kh), range(kw)):
        dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += \
            d[..., i, j].transpose(0, 3, 1, 2)
    up, left = ctx.attrs["paddings"][:2]
    ctx.set_output("X@GRAD", dxp[:, :, up:up + x.shape[2], left:left + x.shape[3]])


def tree_paths(labels: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray]:
    """(node index [N, depth], bit [N, depth], valid [N, depth]) of each label's path in
    Paddle's default tree (code = label + num_classes; node j = (code >> (j + 1)) - 1,
    bit j = (code >> j) & 1, for j below the code's bit length - 1)."""
    code = labels.astype(np.int64) + num_classes
    depth = max(1, (2 * num_classes - 1).bit_length() - 1)
    j = np.arange(depth)[None, :]
    length = np.floor(np.log2(code)).astype(np.int64)[:, None]
    valid = j < length
    node = np.where(valid, (code[:, None] >> (j + 1)) - 1, 0)
    bit = np.where(valid, (code[:, None] >> j) & 1, 0)
    return node, bit, valid


def _hs_forward(ctx: KernelContext) -> tuple[np.ndarray, ...]:
    x, w = ctx.input("X").astype(np.float64), ctx.input("W").astype(np.float64)
    n_cls = ctx.attrs["num_classes"]
    lab = ctx.input("Label").reshape(-1)
    if lab.size != x.shape[0] or (lab.size and (lab.min() < 0 or lab.max() >= n_cls)):
        raise ValueError(f"hierarchical_sigmoid: Label needs one class in [0, {n_cls}) per "
                         f"row of X ({x.shape[0]})")
    node, bit, valid = tree_paths(lab, n_cls)
    pre = np.einsum("nd,njd->nj", x, w[node])
    if ctx.has_input("Bias"):
        pre += ctx.input("Bias").reshape(-1)[node]
    raw = pre
    pre = np.clip(pre, -40.0, 40.0)
    return x, w, node, bit, valid, pre, raw


@register_kernel("hierarchical_sigmoid")
def _hsigmoid(ctx: KernelContext) -> None:
    _, _, _, bit, valid, pre, _ = _hs_forward(ctx)
    sp = np.maximum(pre, 0) + np.log1p(np.exp(-np.abs(pre)))
    out = ((sp - bit * pre) * valid).sum(axis=1, keepdims=True)
    dt = ctx.input("X").dtype
    ctx.set_output("Out", out.astype(dt))
    ctx.set_output("PreOut", (pre * valid).astype(dt))


@register_kernel("hierarchical_sigmoid_grad")
def _hsigmoid_grad(ctx: KernelContext) -> None:
    x, w, node, bit, valid, pre, raw = _hs_forward(ctx)
    d = ctx.input("Out@GRAD").reshape(-1, 1).astype(np.float64)
    inside = (raw > -40.0) & (raw < 40.0)
    dpre = d * (1 / (1 + np.exp(-pre)) - bit) * valid * inside
    dt = ctx.input("X").dtype
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", np.einsum("nj,njd->nd", dpre, w[node]).astype(dt))
    if ctx.has_output("W@GRAD"):
        dw = np.zeros_like(w)
        np.add.at(dw, node, dpre[..., None] * x[:, None, :])
        ctx.set_output("W@GRAD", dw.astype(dt))
    if ctx.has_output("Bias@GRAD"):
        b = ctx.input("Bias")
        db = np.zeros(b.size)
        np.add.at(db, node, dpre)
        ctx.set_output("Bias@GRAD", db.reshape(b.shape).astype(dt))


def _lse(a: np.ndarray) -> np.ndarray:
    m = np.max(a, axis=0)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(a - safe).sum(axis=0))


def ctc_sequence(logits: np.ndarray, label: list[int], blank: int
                 ) -> tuple[float, np.ndarray]:
    """(-log p(label), d loss / d logits) of one sequence (logits [T, C])."""
    z = logits - logits.max(axis=1, keepdims=True)
    logy = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    ext = [blank]
    for c in label:
        ext += [c, blank]
    t_len, s_len = logy.shape[0], len(ext)
    neg = -np.inf
    la = np.full((t_len, s_len), neg)
    lb = np.full((t_len, s_len), neg)
    skip = np.array([s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]
                     for s in range(s_len)])
    la[0, 0] = logy[0, ext[0]]
    if s_len > 1:
        la[0, 1] = logy[0, ext[1]]
    for t in range(1, t_len):
        prev = la[t - 1]
        cand = np.stack([prev, np.concatenate([[neg], prev[:-1]]),
                         np.where(skip, np.concatenate([[neg, neg], prev[:-2]]), neg)])
        la[t] = _lse(cand) + logy[t, ext]
    lb[-1, -1] = logy[-1, ext[-1]]
    if s_len > 1:
        lb[-1, -2] = logy[-1, ext[-2]]
    skip_fwd = np.array([s + 2 < s_len and ext[s] != blank and ext[s] != ext[s + 2]
                         for s in range(s_len)])
    for t in range(t_len - 2, -1, -1):
        nxt = lb[t + 1]
        cand = np.stack([nxt, np.concatenate([nxt[1:], [neg]]),
                         np.where(skip_fwd, np.concatenate([nxt[2:], [neg, neg]]), neg)])
        lb[t] = _lse(cand) + logy[t, ext]
    ends = la[-1, -2:] if s_len > 1 else la[-1, -1:]
    logp = float(_lse(ends))
    occ = la + lb - logy[:, ext] - logp  # log of each path position's posterior
    grad = np.exp(logy)
    with np.errstate(invalid="ignore"):
        for s, c in enumerate(ext):
            grad[:, c] -= np.exp(occ[:, s])
    return -logp, grad


@register_kernel("warpctc")
def _warpctc(ctx: KernelContext) -> None:
    x, xlod = ctx.input_with_lod("Logits")
    lab, llod = ctx.input_with_lod("Label")
    if not xlod or not llod or len(xlod[-1]) != len(llod[-1]):
        raise ValueError("warpctc: Logits and Label need LoDs with one sequence per example "
                         "each")
    blank = ctx.attrs["blank"]
    if blank >= x.shape[1]:
        raise ValueError(f"warpctc: blank {blank} is not one of the {x.shape[1]} classes")
    labels = lab.reshape(-1).astype(np.int64)
    loss, grad = [], np.zeros(x.shape, np.float64)
    for (b, e), (lb_, le) in zip(itertools.pairwise(xlod[-1]), itertools.pairwise(llod[-1])):
        nll, g = ctc_sequence(x[b:e].astype(np.float64), labels[lb_:le].tolist(), blank)
        if ctx.attrs["norm_by_times"]:
            g = g / max(e - b, 1)
        loss.append(nll)
        grad[b:e] = g
    ctx.set_output("Loss", np.asarray(loss, x.dtype).reshape(-1, 1))
    ctx.set_output("WarpCTCGrad", grad.astype(x.dtype), lod=xlod)


@register_kernel("warpctc_grad")
def _warpctc_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("Logits@GRAD"):
        return
    g, lod = ctx.input_with_lod("WarpCTCGrad")
    if not lod:
        raise ValueError("warpctc_grad: WarpCTCGrad lost its LoD")
    d = ctx.input("Loss@GRAD").reshape(-1)
    seq = np.repeat(np.arange(len(lod[-1]) - 1), np.diff(np.asarray(lod[-1])))
    ctx.set_output("Logits@GRAD", (g * d[seq][:, None]).astype(g.dtype), lod=lod)


def _grid_taps(x: np.ndarray, grid: np.ndarray) -> Iterator[tuple[Any, ...]]:
    h, w = x.shape[2:]
    gx = (grid[..., 0] + 1) * (w - 1) / 2
    gy = (grid[..., 1] + 1) * (h - 1) / 2
    x0, y0 = np.floor(gx).astype(np.int64), np.floor(gy).astype(np.int64)
    for dy in (0, 1):
        for dx in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            wx = (gx - x0) if dx else (1 - (gx - x0))
            wy = (gy - y0) if dy else (1 - (gy - y0))
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
            yield (np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1), wx, wy, inside,
                   (1 if dx else -1) * (w - 1) / 2, (1 if dy else -1) * (h - 1) / 2)


@register_kernel("grid_sampler")
def _grid_sampler(ctx: KernelContext) -> None:
    x, grid = ctx.input("X").astype(np.float64), ctx.input("Grid").astype(np.float64)
    n_idx = np.arange(x.shape[0])[:, None, None]
    out = np.zeros((x.shape[0], x.shape[1], *grid.shape[1:3]))
    for yi, xi, wx, wy, inside, _, _ in _grid_taps(x, grid):
        v = x[n_idx, :, yi, xi]  # [N, Ho, Wo, C]
        out += np.moveaxis(v * (wx * wy * inside)[..., None], -1, 1)
    ctx.set_output("Output", out.astype(ctx.input("X").dtype))


@register_kernel("grid_sampler_grad")
def _grid_sampler_grad(ctx: KernelContext) -> None:
    x, grid = ctx.input("X").astype(np.float64), ctx.input("Grid").astype(np.float64)
    d = np.moveaxis(ctx.input("Output@GRAD").astype(np.float64), 1, -1)  # [N, Ho, Wo, C]
    n_idx = np.broadcast_to(np.arange(x.shape[0])[:, None, None], grid.shape[:3])
    dx = np.zeros_like(x)
    dgrid = np.zeros_like(grid)
    for yi, xi, wx, wy, inside, sx, sy in _grid_taps(x, grid):
        wgt = wx * wy * inside
        xt = np.moveaxis(dx, 1, -1)
        np.add.at(xt, (n_idx, yi, xi), d * wgt[..., None])
        dx = np.moveaxis(xt, -1, 1)
        v = x[n_idx, :, yi, xi]
        dot = (v * d).sum(-1) * inside
        dgrid[..., 0] += dot * wy * sx
        dgrid[..., 1] += dot * wx * sy
    dt = ctx.input("X").dtype
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", dx.astype(dt))
    if ctx.has_output("Grid@GRAD"):
        ctx.set_output("Grid@GRAD", dgrid.astype(dt))


def _nce_q(ctx: KernelContext, labels: np.ndarray) -> np.ndarray:
    n = ctx.attrs["num_total_classes"]
    s = ctx.attrs["sampler"]
    if s == "uniform":
        return np.full(labels.shape, 1.0 / n)
    if s == "log_uniform":
        return (np.log(labels + 2.0) - np.log(labels + 1.0)) / np.log(n + 1.0)
    return ctx.input("CustomDistProbs").reshape(-1).astype(np.float64)[labels]


def _nce_sample(ctx: KernelContext, rows: int) -> np.ndarray:
    a = ctx.attrs
    if a["custom_neg_classes"]:
        return np.tile(np.asarray(a["custom_neg_classes"], np.int64), (rows, 1))
    n, k = a["num_total_classes"], a["num_neg_samples"]
    rng = ctx.rng()
    if a["sampler"] == "uniform":
        return rng.integers(0, n, size=(rows, k))
    if a["sampler"] == "log_uniform":
        u = rng.random((rows, k))
        return np.minimum((np.exp(u * np.log(n + 1.0)) - 1).astype(np.int64), n - 1)
    p = ctx.input("CustomDistProbs").reshape(-1).astype(np.float64)
    return rng.choice(n, size=(rows, k), p=p / p.sum())


def _nce_parts(ctx: KernelContext, labels: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(logits s, o = sigmoid(s), B = k * q) of the sample labels [N, K]."""
    x = ctx.input("Input").astype(np.float64)
    w = ctx.input("Weight").astype(np.float64)
    s = np.einsum("nd,nkd->nk", x, w[labels])
    if ctx.has_input("Bias"):
        s = s + ctx.input("Bias").reshape(-1).astype(np.float64)[labels]
    o = 1 / (1 + np.exp(-s))
    return s, o, ctx.attrs["num_neg_samples"] * _nce_q(ctx, labels)


@register_kernel("nce")
def _nce(ctx: KernelContext) -> None:
    true = ctx.input("Label").astype(np.int64)
    n = ctx.attrs["num_total_classes"]
    if true.size and (true.min() < 0 or true.max() >= n):
        raise ValueError(f"nce: Label must be classes in [0, {n})")
    labels = np.concatenate([true, _nce_sample(ctx, true.shape[0])], axis=1)
    _, o, b = _nce_parts(ctx, labels)
    nt = true.shape[1]
    cost = -np.log(o[:, :nt] / (o[:, :nt] + b[:, :nt])).sum(1) \
        - np.log(b[:, nt:] / (o[:, nt:] + b[:, nt:])).sum(1)
    if ctx.has_input("SampleWeight"):
        cost = cost * ctx.input("SampleWeight").reshape(-1)
    dt = ctx.input("Input").dtype
    ctx.set_output("Cost", cost.reshape(-1, 1).astype(dt))
    ctx.set_output("SampleLogits", o.astype(dt))
    ctx.set_output("SampleLabels", labels)


@register_kernel("nce_grad")
def _nce_grad(ctx: KernelContext) -> None:
    labels = ctx.input("SampleLabels")
    nt = ctx.input("Label").shape[1]
    _, o, b = _nce_parts(ctx, labels)
    d = ctx.input("Cost@GRAD").reshape(-1).astype(np.float64)
    if ctx.has_input("SampleWeight"):
        d = d * ctx.input("SampleWeight").reshape(-1)
    ds = np.empty_like(o)
    ds[:, :nt] = -(1 - o[:, :nt]) * b[:, :nt] / (o[:, :nt] + b[:, :nt])
    ds[:, nt:] = o[:, nt:] * (1 - o[:, nt:]) / (o[:, nt:] + b[:, nt:])
    ds *= d[:, None]
    x = ctx.input("Input").astype(np.float64)
    w = ctx.input("Weight").astype(np.float64)
    dt = ctx.input("Input").dtype
    if ctx.has_output("Input@GRAD"):
        ctx.set_output("Input@GRAD", np.einsum("nk,nkd->nd", ds, w[labels]).astype(dt))
    if ctx.has_output("Weight@GRAD"):
        dw = np.zeros_like(w)
        np.add.at(dw, labels, ds[..., None] * x[:, None, :])
        ctx.set_output("Weight@GRAD", dw.astype(dt))
    if ctx.has_output("Bias@GRAD"):
        b0 = ctx.input("Bias")
        db = np.zeros(b0.size)
        np.add.at(db, labels, ds)
        ctx.set_output("Bias@GRAD", db.reshape(b0.shape).astype(dt))


def _sce(x: np.ndarray, t: Any) -> np.ndarray:
    return np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))


@register_kernel("teacher_student_sigmoid_loss")
def _ts_loss(ctx: KernelContext) -> None:
    x = ctx.input("X").astype(np.float64)
    lab = ctx.input("Label").astype(np.float64).reshape(x.shape)
    y = np.where(lab < -1, _sce(x, 0.0),
                 np.where(lab < 0, _sce(x, 1.0),
                          np.where(lab < 1, _sce(x, 0.0) + _sce(x, lab),
                                   _sce(x, 1.0) + _sce(x, lab - 1.0))))
    ctx.set_output("Y", y.astype(ctx.input("X").dtype))


@register_kernel("teacher_student_sigmoid_loss_grad")
def _ts_loss_grad(ctx: KernelContext) -> None:
    if not ctx.has_output("X@GRAD"):
        return
    x = ctx.input("X").astype(np.float64)
    lab = ctx.input("Label").astype(np.float64).reshape(x.shape)
    up, lo = ctx.attrs["soft_max_up_bound"], ctx.attrs["soft_max_lower_bound"]
    p = 1 / (1 + np.exp(-np.clip(x, lo, up)))
    g = np.where(lab < -1, p, np.where(lab < 0, p - 1.0, 2.0 * p - lab))
    g = np.where((x >= up) | (x <= lo), 0.0, g)
    d = ctx.input("Y@GRAD")
    ctx.set_output("X@GRAD", (g * d).astype(d.dtype))


@register_kernel("where_index")
def _where_index(ctx: KernelContext) -> None:
    c = ctx.input("Condition")
    ctx.set_output("Out", np.argwhere(c).astype(np.int64).reshape(-1, c.ndim))
