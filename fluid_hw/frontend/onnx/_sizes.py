"""How large a tensor the importer computes will be, known before it is allocated.

The importer computes some tensors itself: nodes whose inputs are all constants are
folded (evaluated with ONNX's reference evaluator), sparse initializers are made
dense, and a few converters build constants (sequence lengths, ...).  A model can
ask for any size there (a ``ConstantOfShape`` of ``[2**20, 2**20]``), so each is
estimated first from the values and shapes at hand and refused beyond
:data:`MAX_COMPUTED_BYTES` (see docs/onnx.md, "Limits").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: the most bytes one tensor computed at import time may take (a folded node's outputs
#: together, a densified sparse initializer, a constant a converter builds)
MAX_COMPUTED_BYTES = 1 << 30
#: bytes per element assumed when the dtype of a result is not known in advance
_ITEM = 8

Arrays = Sequence[np.ndarray | None]
Estimate = Callable[[dict[str, Any], Arrays], int]


def _ints(a: np.ndarray | None) -> list[int]:
    if a is None:
        return []
    if a.dtype.kind not in "iub":
        raise ValueError(f"expected integers, got {a.dtype}")
    return [int(v) for v in a.reshape(-1)]


def _constant_of_shape(attrs: dict[str, Any], ins: Arrays) -> int:
    return math.prod(max(d, 0) for d in _ints(ins[0] if ins else None))


def _expand(attrs: dict[str, Any], ins: Arrays) -> int:
    x, shape = ins[0], _ints(ins[1] if len(ins) > 1 else None)
    dims = list(x.shape) if x is not None else []
    n = max(len(dims), len(shape))
    dims = [1] * (n - len(dims)) + dims
    shape = [1] * (n - len(shape)) + shape
    return math.prod(max(a, b, 0) for a, b in zip(dims, shape))


def _tile(attrs: dict[str, Any], ins: Arrays) -> int:
    x = ins[0]
    return (x.size if x is not None else 0) * math.prod(
        max(r, 0) for r in _ints(ins[1] if len(ins) > 1 else None))


def _range(attrs: dict[str, Any], ins: Arrays) -> int:
    start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) if v is not None and v.size
                           else 0.0 for v in (list(ins) + [None] * 3)[:3])
    if not all(math.isfinite(v) for v in (start, limit, delta)) or delta == 0:
        return 0  # the evaluator refuses these itself
    return max(math.ceil((limit - start) / delta), 0)


def _one_hot(attrs: dict[str, Any], ins: Arrays) -> int:
    idx, depth = ins[0], ins[1] if len(ins) > 1 else None
    d = float(np.asarray(depth).reshape(-1)[0]) if depth is not None and depth.size else 0.0
    if not math.isfinite(d):
        return 0
    return (idx.size if idx is not None else 0) * max(int(d), 0)


def _pad(attrs: dict[str, Any], ins: Arrays) -> int:
    x = ins[0]
    if x is None:
        return 0
    pads = _ints(ins[1]) if len(ins) > 1 and ins[1] is not None else \
        [int(p) for p in attrs.get("pads", [])]
    axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(x.ndim))
    dims = list(x.shape)
    if len(pads) != 2 * len(axes):
        return x.size
    for i, a in enumerate(axes):
        if -x.ndim <= a < x.ndim:
            dims[a] = max(dims[a] + pads[i] + pads[len(axes) + i], 0)
    return math.prod(dims)


def _broadcast(shapes: list[tuple[int, ...]]) -> int:
    try:
        return math.prod(np.broadcast_shapes(*shapes)) if shapes else 0
    except ValueError:
        return 0


def _matmul(ins: Arrays) -> int:
    """MatMul's output size (numpy's rules), or for Gemm an upper bound."""
    if len(ins) < 2 or ins[0] is None or ins[1] is None:
        return 0
    a, b = ins[0], ins[1]
    if a.ndim == 0 or b.ndim == 0:
        return 0
    rows = a.shape[-2] if a.ndim > 1 else 1
    cols = b.shape[-1] if b.ndim > 1 else 1
    batch = _broadcast([a.shape[:-2], b.shape[:-2]]) if a.ndim > 2 or b.ndim > 2 else 1
    return max(batch * rows * cols, max(a.shape) * max(b.shape))


def _gather(attrs: dict[str, Any], ins: Arrays) -> int:
    data, idx = ins[0], ins[1] if len(ins) > 1 else None
    if data is None or idx is None or data.ndim == 0:
        return 0
    axis = int(attrs.get("axis", 0))
    rows = data.shape[axis] if -data.ndim <= axis < data.ndim else 0
    return idx.size * (data.size // rows if rows else 0)


def _window(attrs: dict[str, Any], ins: Arrays) -> int:
    """Conv / pooling: at most N x max(C, M) x (each spatial size plus its pads)."""
    x = ins[0]
    if x is None or x.ndim < 3:
        return 0
    w = ins[1] if len(ins) > 1 else None
    chans = max(x.shape[1], w.shape[0] if w is not None and w.ndim else 0)
    pads = [int(p) for p in attrs.get("pads", [])]
    n = x.ndim - 2
    if len(pads) != 2 * n:
        pads = [0] * (2 * n)
    return x.shape[0] * chans * math.prod(
        max(x.shape[2 + i] + pads[i] + pads[n + i], 1) for i in range(n))


def _constant(attrs: dict[str, Any], ins: Arrays) -> int:
    sparse = attrs.get("sparse_value")
    return math.prod(max(int(d), 0) for d in sparse.dims) if sparse is not None else 0


#: ops whose output size comes from the values of their inputs: an exact estimate each
ESTIMATES: dict[str, Estimate] = {
    "ConstantOfShape": _constant_of_shape,
    "Expand": _expand,
    "Tile": _tile,
    "Range": _range,
    "OneHot": _one_hot,
    "Pad": _pad,
    "Gather": _gather,
    "Conv": _window,
    "ConvInteger": _window,
    "MaxPool": _window,
    "AveragePool": _window,
    "LpPool": _window,
    "Constant": _constant,
}

#: ops whose output size comes from input values or attributes and that have no
#: estimate: never folded
NOT_FOLDED = frozenset({
    "Resize", "Upsample", "ConvTranspose", "MaxUnpool", "Col2Im", "CenterCropPad",
    "AffineGrid", "ImageDecoder", "HannWindow", "HammingWindow", "BlackmanWindow",
    "MelWeightMatrix", "STFT", "DFT", "TfIdfVectorizer", "Einsum", "StringSplit",
    "GridSample", "RoiAlign", "MaxRoiPool", "NonMaxSuppression", "QLinearConv",
    "QLinearMatMul", "GatherND",
    "Multinomial", "Bernoulli", "RandomNormal", "RandomUniform", "RandomNormalLike",
    "RandomUniformLike", "Loop", "Scan", "If",
})


def fold_bytes(op_type: str, attrs: dict[str, Any], ins: Arrays) -> int | None:
    """An upper bound on the bytes a node's outputs take when it is evaluated on the
    constants ``ins``; None when it cannot be known without evaluating the node."""
    if op_type in NOT_FOLDED:
        return None
    est = ESTIMATES.get(op_type)
    try:
        if est is not None:
            return est(attrs, ins) * _ITEM
        present = [a for a in ins if a is not None]
        total = sum(a.size for a in present)
        size = max(total, _broadcast([a.shape for a in present]))
        if op_type in ("MatMul", "MatMulInteger", "Gemm"):
            size = max(size, _matmul(ins))
        elif op_type == "NonZero" and present:
            size = present[0].size * max(present[0].ndim, 1)
        return size * _ITEM
    except (ValueError, TypeError, IndexError, OverflowError):
        return None


def nbytes(shape: Sequence[int], dtype: Any = None) -> int:
    """Bytes of an array of ``shape`` (Python ints: no overflow)."""
    item = np.dtype(dtype).itemsize if dtype is not None else _ITEM
    return math.prod(max(int(d), 0) for d in shape) * item
