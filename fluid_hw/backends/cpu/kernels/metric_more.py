"""Kernels of ``ir/ops/metric_more.py``: ``auc`` and ``load``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ....errors import FormatError
from ....fileio import read_npy
from ..context import KernelContext
from . import register_kernel


def auc_of(pos: np.ndarray, neg: np.ndarray) -> float:
    """Trapezoidal ROC area of bucketed counts (highest threshold first)."""
    tp = fp = 0.0
    area = 0.0
    for i in range(pos.size - 1, -1, -1):
        tp2, fp2 = tp + float(pos[i]), fp + float(neg[i])
        area += (fp2 - fp) * (tp + tp2) / 2
        tp, fp = tp2, fp2
    return area / (tp * fp) if tp > 0 and fp > 0 else 0.0


@register_kernel("auc")
def _auc(ctx: KernelContext) -> None:
    p = ctx.input("Predict")[:, -1].astype(np.float64)
    lab = ctx.input("Label").reshape(-1)
    if lab.size != p.size:
        raise ValueError(f"auc: {p.size} predictions but {lab.size} labels")
    t = ctx.attrs["num_thresholds"]
    bins = np.clip((p * t).astype(np.int64), 0, t)
    pos = ctx.input("StatPos").astype(np.int64).copy()
    neg = ctx.input("StatNeg").astype(np.int64).copy()
    np.add.at(pos, bins[lab != 0], 1)
    np.add.at(neg, bins[lab == 0], 1)
    ctx.set_output("StatPosOut", pos.astype(ctx.output_dtype("StatPosOut")))
    ctx.set_output("StatNegOut", neg.astype(ctx.output_dtype("StatNegOut")))
    ctx.set_output("AUC", np.array([auc_of(pos, neg)], np.float64))


@register_kernel("load")
def _load(ctx: KernelContext) -> None:
    path = Path(ctx.attrs["file_path"])
    want = ctx.output_dtype("Out")

    def check(key: str | None, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        if dtype != want and not (ctx.attrs["load_as_fp16"] and dtype.kind == "f"):
            raise FormatError(f"load: {path} holds {dtype}, the variable "
                              f"{ctx.out_names['Out'][0]!r} is {want}")

    arr = read_npy(path, kind="params", check=check)
    if ctx.attrs["load_as_fp16"]:
        arr = arr.astype(np.float16)
    ctx.set_output("Out", arr)
