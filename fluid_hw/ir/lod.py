"""LoDTensor: a batch of variable-length sequences as one tensor plus offsets.

``lod`` is a list of levels, each a list of offsets into the level below (the
last level indexes rows of ``data``): ``[[0, 3, 5]]`` is two sequences of 3 and
2 rows.  No padding anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from ..errors import FeedError


def lengths_to_offsets(lengths: Sequence[int]) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + int(n))
    return out


def offsets_to_lengths(offsets: Sequence[int]) -> list[int]:
    return [int(b - a) for a, b in pairwise(offsets)]


def reversed_rows(offsets: Sequence[int]) -> np.ndarray:
    """Row order that reverses the rows of each sequence (``offsets``: one LoD level) in
    place; its own inverse."""
    idx = np.arange(int(offsets[-1]) if len(offsets) else 0)
    for b, e in pairwise(offsets):
        idx[b:e] = idx[b:e][::-1]
    return idx


def check_lod(lod: Sequence[Sequence[int]], rows: int, what: str = "tensor") -> None:
    """Raise :class:`FeedError` unless ``lod`` is a valid LoD for ``rows`` rows."""
    for level, offs in enumerate(lod):
        offs = list(offs)
        if len(offs) < 1 or offs[0] != 0:
            raise FeedError(f"{what}: LoD level {level} must start at 0, got {offs[:5]}")
        if any(b < a for a, b in pairwise(offs)):
            raise FeedError(f"{what}: LoD level {level} offsets must not decrease: {offs}")
        below = len(lod[level + 1]) - 1 if level + 1 < len(lod) else rows
        if offs[-1] != below:
            unit = "sequences of the next level" if level + 1 < len(lod) else "rows"
            raise FeedError(f"{what}: LoD level {level} ends at {offs[-1]} but there are "
                            f"{below} {unit}")


class LoDTensor:
    """A tensor with optional level-of-detail offsets (Fluid's ``LoDTensor``)."""

    __slots__ = ("_lod", "data")

    def __init__(self, data: Any = None, lod: Sequence[Sequence[int]] | None = None) -> None:
        self.data = None if data is None else np.asarray(data)
        self._lod = [list(map(int, lv)) for lv in (lod or [])]

    def set(self, array: Any, place: Any = None) -> None:
        self.data = np.asarray(array)

    def lod(self) -> list[list[int]]:
        return [list(lv) for lv in self._lod]

    def set_lod(self, lod: Sequence[Sequence[int]]) -> None:
        # before set(data), as Fluid allows: the levels must agree with each other;
        # the rows are checked when the tensor is fed
        rows = (lod[-1][-1] if lod and len(lod[-1]) else 0) if self.data is None \
            else self.data.shape[0]
        check_lod(lod, rows)
        self._lod = [list(map(int, lv)) for lv in lod]

    def recursive_sequence_lengths(self) -> list[list[int]]:
        return [offsets_to_lengths(lv) for lv in self._lod]

    def set_recursive_sequence_lengths(self, lengths: Sequence[Sequence[int]]) -> None:
        self.set_lod([lengths_to_offsets(lv) for lv in lengths])

    def has_valid_recursive_sequence_lengths(self) -> bool:
        try:
            check_lod(self._lod, 0 if self.data is None else self.data.shape[0])
        except FeedError:
            return False
        return True

    def shape(self) -> list[int]:
        return [] if self.data is None else list(self.data.shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self.data is None:
            raise FeedError("LoDTensor holds no data")
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"LoDTensor(shape={self.shape()}, lod={self._lod})"


def create_lod_tensor(data: Any, recursive_seq_lens: Sequence[Sequence[int]],
                      place: Any = None) -> LoDTensor:
    """Fluid's ``create_lod_tensor``: data rows plus per-level sequence lengths."""
    if isinstance(data, list) and data and isinstance(data[0], (list, np.ndarray)):
        arr = np.concatenate([np.asarray(d).reshape(len(d), -1) for d in data])
    else:
        arr = np.asarray(data)
    t = LoDTensor(arr)
    t.set_recursive_sequence_lengths(recursive_seq_lens)
    return t


# -- helpers for sequence and tensor-array ops ------------------------------------------

def sub_lod(lod: Sequence[Sequence[int]], level: int, start: int,
            end: int) -> tuple[list[list[int]], tuple[int, int]]:
    """Items ``[start, end)`` of LoD ``level``: their lengths on each level from
    ``level`` down, and the rows they cover (Fluid's ``GetSubLoDAndAbsoluteOffset``).

    With ``level == len(lod)`` the items are rows: no lengths, rows ``[start, end)``.
    """
    lengths: list[list[int]] = []
    for offs in lod[level:]:
        lengths.append([int(offs[i + 1] - offs[i]) for i in range(start, end)])
        start, end = int(offs[start]), int(offs[end])
    return lengths, (start, end)


class LoDRankTable:
    """The sequences of one LoD level ordered by length, longest first (Fluid's
    ``LoDRankTable``).  Ties keep their original order, so the table is deterministic.

    ``items`` holds ``(index, length)`` pairs; ``lod`` the whole LoD it was built from
    (levels above ``level`` are needed to rebuild a tensor from an array).
    """

    __slots__ = ("items", "level", "lod")

    def __init__(self, lod: Sequence[Sequence[int]], level: int) -> None:
        if not 0 <= level < len(lod):
            raise FeedError(f"a rank table of LoD level {level} needs a tensor with more than "
                            f"{level} LoD level(s); this one has {len(lod)}")
        self.level = level
        self.lod = [list(map(int, lv)) for lv in lod]
        lengths = offsets_to_lengths(self.lod[level])
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        self.items = [(i, lengths[i]) for i in order]

    def active(self, step: int) -> int:
        """How many sequences are longer than ``step`` (the batch of time step ``step``)."""
        lo, hi = 0, len(self.items)
        while lo < hi:  # items are sorted by decreasing length
            mid = (lo + hi) // 2
            if self.items[mid][1] > step:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @property
    def max_len(self) -> int:
        return self.items[0][1] if self.items else 0

    def __repr__(self) -> str:
        return f"LoDRankTable(level={self.level}, items={self.items})"
