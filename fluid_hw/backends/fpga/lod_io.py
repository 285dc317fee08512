"""Variable-length sequences in the command line's array files.

``fluid-hw compile --calibration X.npz`` and ``fluid-hw simulate --inputs X.npz`` take
a LoD input ``NAME`` (sequences of different lengths, e.g. the frames of utterances or
the tokens of sentences) as two arrays of the ``.npz``:

* ``NAME``: every sequence's steps concatenated, ``[sum(lengths), ...]``, no padding;
* ``NAME.lengths``: int64 ``[N]``, each sequence's number of steps (>= 1).

Outputs come back the same way: ``outputs.npy`` the concatenated rows and, where the
output is a sequence (a LoD output), ``outputs.lengths.npy`` its lengths.  Dense
inputs in the same ``.npz`` stay plain arrays (one example a row).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.lod import LoDTensor, lengths_to_offsets, offsets_to_lengths
from .steps import BuildError

__all__ = ["LENGTHS", "is_lod_npz", "lod_inputs", "lod_batches", "item_count",
           "sequence_lengths", "lod_value"]

#: the key suffix of a LoD input's lengths in an ``.npz``
LENGTHS = ".lengths"


def is_lod_npz(data: Mapping[str, Any]) -> bool:
    """Whether an ``.npz``'s arrays hold sequence lengths (``NAME.lengths``)."""
    return any(k.endswith(LENGTHS) for k in data)


def _lengths(source: str, name: str, lengths: np.ndarray, rows: int) -> list[int]:
    key = f"{name}{LENGTHS}"
    ln = np.asarray(lengths)
    if ln.ndim != 1 or ln.dtype.kind not in "iu":
        raise BuildError(f"{source}: {key!r} must be a 1-D int64 array (one length a "
                         f"sequence), got {ln.dtype} {list(ln.shape)}")
    if ln.size == 0:
        raise BuildError(f"{source}: {key!r} holds no sequence")
    bad = np.flatnonzero(ln < 1)
    if bad.size:
        i = int(bad[0])
        raise BuildError(f"{source}: sequence {i} of {name!r} has length {int(ln[i])}; every "
                         "sequence needs at least one step (drop empty sequences)")
    total = int(ln.sum())
    if total != rows:
        raise BuildError(f"{source}: the lengths in {key!r} add up to {total} steps but "
                         f"{name!r} holds {rows} rows (the sequences concatenated, no "
                         "padding)")
    return [int(v) for v in ln]


def lod_inputs(data: Mapping[str, np.ndarray], feeds: Sequence[str],
               source: str | os.PathLike[str]) -> dict[str, np.ndarray | LoDTensor]:
    """The inputs ``feeds`` of an ``.npz``'s arrays with sequence lengths: a
    :class:`LoDTensor` (one LoD level) for each ``NAME`` with ``NAME.lengths``, the
    plain array for the others; every input the same number of items (sequences or
    rows).  Clear errors for lengths without their data, data that the lengths do not
    cover, empty sequences."""
    src = str(source)
    orphans = [k for k in data if k.endswith(LENGTHS) and k[:-len(LENGTHS)] not in data]
    if orphans:
        raise BuildError(f"{src}: {orphans} without the sequences they measure (the array "
                         f"{orphans[0][:-len(LENGTHS)]!r})")
    missing = [f for f in feeds if f not in data]
    if missing:
        raise BuildError(f"{src}: no array for input(s) {missing} (it holds {sorted(data)})")
    stray = [k for k in data if k.endswith(LENGTHS) and k[:-len(LENGTHS)] not in feeds]
    if stray:
        raise BuildError(f"{src}: {stray} measure(s) no input of the model (its inputs: "
                         f"{list(feeds)})")
    out: dict[str, np.ndarray | LoDTensor] = {}
    for f in feeds:
        x = np.asarray(data[f])
        key = f"{f}{LENGTHS}"
        if key in data:
            if x.ndim < 1:
                raise BuildError(f"{src}: {f!r} must hold the sequences' steps as rows")
            ln = _lengths(src, f, data[key], len(x))
            out[f] = LoDTensor(x, [lengths_to_offsets(ln)])
        else:
            out[f] = x
    counts = {f: item_count(v) for f, v in out.items()}
    if len(set(counts.values())) > 1:
        raise BuildError(f"{src}: the inputs hold different numbers of items (sequences "
                         f"for LoD inputs): {counts}")
    return out


def item_count(value: Any) -> int:
    """Examples in a value: sequences of a LoD tensor, rows of an array."""
    if isinstance(value, LoDTensor) and value.lod():
        return len(value.lod()[0]) - 1
    return len(np.asarray(value))


def sequence_lengths(value: Any) -> list[int] | None:
    """The top-level sequence lengths of a LoD tensor (None: a dense value)."""
    if isinstance(value, LoDTensor) and value.lod():
        return offsets_to_lengths(value.lod()[0])
    return None


def lod_value(value: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """A fetched value as the files hold it: the rows, and the int64 lengths of its
    sequences (None for a dense value)."""
    ln = sequence_lengths(value)
    rows = np.asarray(value.data if isinstance(value, LoDTensor) else value)
    return rows, None if ln is None else np.asarray(ln, np.int64)


def _calib(a: np.ndarray) -> np.ndarray:
    """Float data as float32; integers (token ids) as they are."""
    return np.ascontiguousarray(a, np.float32 if a.dtype.kind == "f" else a.dtype)


def lod_batches(data: Mapping[str, Any], size: int = 128) -> list[dict[str, Any]]:
    """Calibration batches of ``size`` items (whole sequences for LoD inputs); float
    data as float32, integer data (token ids) as it is."""
    n = item_count(next(iter(data.values())))
    out = []
    for i in range(0, n, size):
        batch: dict[str, Any] = {}
        for k, v in data.items():
            ln = sequence_lengths(v)
            if ln is None:
                batch[k] = _calib(np.asarray(v)[i:i + size])
                continue
            offs = v.lod()[0]
            j = min(i + size, len(ln))
            rows = np.asarray(v.data)[offs[i]:offs[j]]
            batch[k] = LoDTensor(_calib(rows), [lengths_to_offsets(ln[i:j])])
        out.append(batch)
    return out


def save_lod_npz(path: str | os.PathLike[str], values: Mapping[str, Any]) -> Path:
    """Write arrays and LoD tensors as an ``.npz`` of this format (``NAME`` and
    ``NAME.lengths``)."""
    arrays: dict[str, np.ndarray] = {}
    for k, v in values.items():
        rows, ln = lod_value(v)
        arrays[k] = rows
        if ln is not None:
            arrays[f"{k}{LENGTHS}"] = ln
    p = Path(path)
    np.savez(p, **arrays)  # type: ignore[arg-type]
    return p
