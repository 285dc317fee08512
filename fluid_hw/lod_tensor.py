"""Fluid's ``fluid.lod_tensor`` module: building :class:`LoDTensor` values from
Python data (``create_lod_tensor``) or random integers
(``create_random_int_lodtensor``, e.g. word ids for a quick inference run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .ir.lod import LoDTensor, create_lod_tensor

__all__ = ["create_lod_tensor", "create_random_int_lodtensor"]


def create_random_int_lodtensor(recursive_seq_lens: Sequence[Sequence[int]],
                                base_shape: Sequence[int], place: Any, low: int,
                                high: int) -> LoDTensor:
    """A LoDTensor of int64 drawn uniformly from ``[low, high]`` (both included, as
    Fluid's), ``sum(recursive_seq_lens[-1])`` rows of shape ``base_shape``, with
    the given sequence lengths (numpy's global generator: ``np.random.seed``
    makes it repeatable)."""
    if not recursive_seq_lens:
        raise ValueError("create_random_int_lodtensor: recursive_seq_lens is empty; give "
                         "at least one level of sequence lengths, e.g. [[3, 4, 2]]")
    if high < low:
        raise ValueError(f"create_random_int_lodtensor: high={high} is below low={low}")
    rows = sum(int(n) for n in recursive_seq_lens[-1])
    data = np.random.randint(low, high + 1, size=[rows, *base_shape]).astype(np.int64)
    return create_lod_tensor(data, recursive_seq_lens, place)
