"""Slicing variables into row blocks and dispatching the blocks to servers.

Fluid's rule (``slice_variable``): a variable of ``numel`` elements is cut into
``min(servers, numel // min_block_size)`` pieces (at least one), each a whole
number of rows (dim 0), the last one possibly shorter.  Blocks go to servers
round-robin or by a hash of the block's name.  The hash is CRC-32, not
Python's ``hash``, which is salted per process and would send a trainer's
gradient to a server that does not hold the parameter.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import TranspileError


@dataclass(frozen=True)
class VarBlock:
    """Rows ``[offset, offset + rows)`` of variable ``var`` (block ``index`` of ``count``)."""

    var: str
    index: int
    count: int
    offset: int
    rows: int
    shape: tuple[int, ...]  # the block's shape

    @property
    def name(self) -> str:
        """``var`` itself when it is not split, else ``<var>.block<k>`` (Fluid's naming)."""
        return self.var if self.count == 1 else block_name(self.var, self.index)


def block_name(var: str, index: int) -> str:
    return f"{var}.block{index}"


def slice_variable(name: str, shape: Sequence[int], slice_count: int,
                   min_block_size: int) -> list[VarBlock]:
    """The row blocks of one variable."""
    shape = tuple(int(d) for d in shape)
    if not shape or any(d <= 0 for d in shape):
        raise TranspileError(f"variable {name!r} has shape {list(shape)}; only variables with "
                             "a fixed, non-empty shape can be sliced across servers")
    if slice_count < 1 or min_block_size < 1:
        raise TranspileError(f"slice_count ({slice_count}) and min_block_size "
                             f"({min_block_size}) must be >= 1")
    numel = math.prod(shape)
    count = max(1, min(slice_count, numel // min_block_size))
    width = math.prod(shape[1:])  # elements per row
    rows_total = shape[0]
    rows = math.ceil(rows_total / count)
    count = math.ceil(rows_total / rows)  # after rounding to whole rows
    blocks = []
    for i in range(count):
        r = min(rows, rows_total - i * rows)
        blocks.append(VarBlock(name, i, count, i * rows, r, (r, *shape[1:])))
    assert sum(b.rows for b in blocks) == rows_total and width > 0
    return blocks


class RoundRobin:
    """Block i of the run goes to server i mod n."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        self.endpoints = list(endpoints)
        self.next = 0

    def dispatch(self, blocks: Sequence[VarBlock]) -> list[str]:
        out = []
        for _ in blocks:
            out.append(self.endpoints[self.next % len(self.endpoints)])
            self.next += 1
        return out


class HashName:
    """A block goes to server crc32(block name) mod n: stable across processes."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        self.endpoints = list(endpoints)

    def dispatch(self, blocks: Sequence[VarBlock]) -> list[str]:
        return [self.endpoints[zlib.crc32(b.name.encode()) % len(self.endpoints)]
                for b in blocks]


SPLIT_METHODS: dict[str, type[RoundRobin | HashName]] = {"RoundRobin": RoundRobin,
                                                         "HashName": HashName}


def get_dispatcher(method: str, endpoints: Sequence[str]) -> RoundRobin | HashName:
    try:
        return SPLIT_METHODS[method](endpoints)
    except KeyError:
        raise TranspileError(f"unknown split_method {method!r}; use one of "
                             f"{sorted(SPLIT_METHODS)}") from None
