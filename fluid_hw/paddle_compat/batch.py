"""``paddle.batch``: group a sample reader's samples into lists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Reader = Callable[[], Iterator[Any]]


def batch(reader: Reader, batch_size: int, drop_last: bool = False) -> Reader:
    """A reader yielding lists of ``batch_size`` samples of ``reader`` (the last,
    shorter list too unless ``drop_last``)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch: batch_size must be a positive int, got {batch_size!r}")

    def batch_reader() -> Iterator[list[Any]]:
        b: list[Any] = []
        for sample in reader():
            b.append(sample)
            if len(b) == batch_size:
                yield b
                b = []
        if b and not drop_last:
            yield b

    return batch_reader
