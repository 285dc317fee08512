"""Kernels of ``ir/ops/misc_more.py``."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir import dtypes
from ....ir.ops.misc_more import PY_FUNCS
from ..context import KernelContext
from . import register_kernel
from .elementwise import broadcast_pair


def _offsets(ctx: KernelContext, slot: str) -> tuple[np.ndarray, list[int]]:
    x, lod = ctx.input_with_lod(slot)
    if not lod:
        raise ValueError(f"{ctx.op_type}: {slot} {ctx.in_names[slot][0]!r} has no LoD; feed a "
                         "LoDTensor of sequences")
    return x, lod[-1]


@register_kernel("ctc_greedy_decoder")
def _ctc_greedy_decoder(ctx: KernelContext) -> None:
    x, offs = _offsets(ctx, "Input")
    best = x.argmax(axis=1)
    blank, merge = ctx.attrs["blank"], ctx.attrs["merge_repeated"]
    out: list[int] = []
    lens = []
    for b, e in itertools.pairwise(offs):
        seq = best[b:e]
        keep = [int(v) for k, v in enumerate(seq)
                if v != blank and not (merge and k > 0 and seq[k - 1] == v)]
        out += keep
        lens.append(len(keep))
    ctx.set_output("Output", np.asarray(out, np.int64).reshape(-1, 1),
                   lod=[[0, *itertools.accumulate(lens)]])


def levenshtein(a: list[int], b: list[int]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@register_kernel("edit_distance")
def _edit_distance(ctx: KernelContext) -> None:
    h, ho = _offsets(ctx, "Hyps")
    r, ro = _offsets(ctx, "Refs")
    if len(ho) != len(ro):
        raise ValueError(f"edit_distance: {len(ho) - 1} hypotheses but {len(ro) - 1} "
                         "references")
    hs, rs = h.reshape(-1).tolist(), r.reshape(-1).tolist()
    drop = set(ctx.attrs["ignored_tokens"])
    out = []
    for (hb, he), (rb, re_) in zip(itertools.pairwise(ho), itertools.pairwise(ro)):
        hyp = [t for t in hs[hb:he] if t not in drop]
        ref = [t for t in rs[rb:re_] if t not in drop]
        d = float(levenshtein(hyp, ref))
        if ctx.attrs["normalized"]:
            if not ref:
                raise ValueError("edit_distance: normalized needs non-empty references")
            d /= len(ref)
        out.append(d)
    ctx.set_output("Out", np.asarray(out, np.float32).reshape(-1, 1))
    ctx.set_output("SequenceNum", np.array([len(out)], np.int64))


@register_kernel("mean_iou")
def _mean_iou(ctx: KernelContext) -> None:
    p = ctx.input("Predictions").reshape(-1).astype(np.int64)
    lab = ctx.input("Labels").reshape(-1).astype(np.int64)
    n = ctx.attrs["num_classes"]
    if p.size != lab.size:
        raise ValueError(f"mean_iou: {p.size} predictions but {lab.size} labels")
    for what, v in (("Predictions", p), ("Labels", lab)):
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ValueError(f"mean_iou: {what} must be classes in [0, {n})")
    right = p == lab
    correct = np.bincount(p[right], minlength=n)
    wrong = np.bincount(p[~right], minlength=n) + np.bincount(lab[~right], minlength=n)
    denom = correct + wrong
    valid = denom > 0
    miou = (correct[valid] / denom[valid]).mean() if valid.any() else 0.0
    ctx.set_output("OutMeanIou", np.array([miou], np.float32))
    ctx.set_output("OutWrong", wrong.astype(np.int32))
    ctx.set_output("OutCorrect", correct.astype(np.int32))


@register_kernel("elementwise_floordiv")
def _floordiv(ctx: KernelContext) -> None:
    x, y = broadcast_pair(ctx.input("X"), ctx.input("Y"), ctx.attrs["axis"])
    if x.dtype.kind in "iu" and np.any(y == 0):
        raise ValueError(f"elementwise_floordiv: division by zero in Y "
                         f"{ctx.in_names['Y'][0]!r}")
    ctx.set_output("Out", np.floor_divide(x, y).astype(x.dtype))


def _like_shape(ctx: KernelContext) -> list[int]:
    shape = list(ctx.attrs["shape"])
    shape[ctx.attrs["output_dim_idx"]] = ctx.input("Input").shape[ctx.attrs["input_dim_idx"]]
    return shape


@register_kernel("uniform_random_batch_size_like")
def _uniform_like(ctx: KernelContext) -> None:
    a = ctx.attrs
    out = ctx.rng().uniform(a["min"], a["max"], size=_like_shape(ctx))
    ctx.set_output("Out", out.astype(dtypes.to_numpy(a["dtype"])))


@register_kernel("gaussian_random_batch_size_like")
def _gaussian_like(ctx: KernelContext) -> None:
    a = ctx.attrs
    out = ctx.rng().normal(a["mean"], a["std"], size=_like_shape(ctx))
    ctx.set_output("Out", out.astype(dtypes.to_numpy(a["dtype"])))


@register_kernel("sampling_id")
def _sampling_id(ctx: KernelContext) -> None:
    x = ctx.input("X").astype(np.float64)
    u = ctx.rng().uniform(ctx.attrs["min"], ctx.attrs["max"], size=x.shape[0])
    c = np.cumsum(x, axis=1)
    idx = (c <= u[:, None]).sum(axis=1)
    ctx.set_output("Out", np.minimum(idx, x.shape[1] - 1).astype(np.int64))


_PRINTED: dict[tuple[int, int], int] = {}


def _print_value(ctx: KernelContext, slot: str, phase: str) -> None:
    a = ctx.attrs
    if a["print_phase"] not in (phase, "both"):
        return
    key = (id(ctx.scope), ctx.op_index)
    count = _PRINTED.get(key, 0) + 1
    _PRINTED[key] = count
    if 0 <= a["first_n"] < count:
        return
    x, lod = ctx.input_with_lod(slot)
    parts = [a["message"]] if a["message"] else []
    if a["print_tensor_name"]:
        parts.append(f"Variable: {ctx.in_names[slot][0]}")
    if a["print_tensor_type"]:
        parts.append(f"dtype: {x.dtype}")
    if a["print_tensor_shape"]:
        parts.append(f"shape: {list(x.shape)}")
    if a["print_tensor_lod"] and lod:
        parts.append(f"LoD: {lod}")
    flat = x.reshape(-1)
    n = a["summarize"]
    parts.append(f"data: {(flat if n < 0 else flat[:n]).tolist()}")
    print("  ".join(parts), flush=True)


@register_kernel("print")
def _print(ctx: KernelContext) -> None:
    _print_value(ctx, "In", "forward")
    x, lod = ctx.input_with_lod("In")
    ctx.set_output("Out", x, lod=lod)


@register_kernel("print_grad")
def _print_grad(ctx: KernelContext) -> None:
    _print_value(ctx, "Out@GRAD", "backward")
    if ctx.has_output("In@GRAD"):
        ctx.set_output("In@GRAD", ctx.input("Out@GRAD"))


def _callable(ctx: KernelContext, attr: str) -> Callable[..., Any]:
    i = ctx.attrs[attr]
    fn = PY_FUNCS[i] if 0 <= i < len(PY_FUNCS) else None
    if fn is None:
        raise ValueError(f"py_func: no Python function registered with id {i} ({attr}); "
                         "py_func ops only run in the process that built them")
    return fn


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


@register_kernel("py_func")
def _py_func(ctx: KernelContext) -> None:
    xs = ctx.inputs("X") if ctx.has_input("X") else []
    outs = _as_list(_callable(ctx, "forward_callable_id")(*xs))
    n = len(ctx.out_names.get("Out", []))
    if len(outs) != n:
        raise ValueError(f"py_func: the function returned {len(outs)} values for {n} outputs")
    for i, o in enumerate(outs):
        ctx.set_output("Out", np.asarray(o, ctx.output_dtype("Out", i)), i)


@register_kernel("py_func_grad")
def _py_func_grad(ctx: KernelContext) -> None:
    skip = set(ctx.attrs["backward_skip_vars"])
    args = [v for slot in ("X", "Out") if ctx.has_input(slot)
            for n, v in zip(ctx.in_names[slot], ctx.inputs(slot)) if n not in skip]
    args += ctx.inputs("Out@GRAD") if ctx.has_input("Out@GRAD") else []
    grads = _as_list(_callable(ctx, "backward_callable_id")(*args))
    names = ctx.out_names.get("X@GRAD", [])
    if len(grads) != len(names):
        raise ValueError(f"py_func: the backward function returned {len(grads)} values for "
                         f"{len(names)} input gradients")
    xs = ctx.inputs("X")
    for i, g in enumerate(grads):
        ctx.set_output("X@GRAD", np.asarray(g, xs[i].dtype).reshape(xs[i].shape), i)
