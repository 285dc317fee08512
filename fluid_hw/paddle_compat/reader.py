"""``paddle.reader``: decorators over readers (functions returning an iterator of
samples), with Paddle 1.5's names and behaviour."""

from __future__ import annotations

import itertools
import queue
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ComposeNotAligned

Reader = Callable[[], Iterator[Any]]

__all__ = ["ComposeNotAligned", "buffered", "cache", "chain", "compose", "firstn",
           "map_readers", "shuffle", "xmap_readers"]


def shuffle(reader: Reader, buf_size: int) -> Reader:
    """Shuffle within windows of ``buf_size`` samples (Python's ``random``, so
    ``random.seed`` makes it repeatable)."""
    def shuffled() -> Iterator[Any]:
        buf: list[Any] = []
        for sample in reader():
            buf.append(sample)
            if len(buf) >= buf_size:
                random.shuffle(buf)
                yield from buf
                buf = []
        random.shuffle(buf)
        yield from buf

    return shuffled


def buffered(reader: Reader, size: int) -> Reader:
    """Read ahead up to ``size`` samples in a background thread."""
    end = object()

    def read_ahead() -> Iterator[Any]:
        q: queue.Queue[Any] = queue.Queue(maxsize=size)

        def fill() -> None:
            for sample in reader():
                q.put(sample)
            q.put(end)

        threading.Thread(target=fill, daemon=True).start()
        while (sample := q.get()) is not end:
            yield sample

    return read_ahead


def chain(*readers: Reader) -> Reader:
    """One reader after another."""
    def chained() -> Iterator[Any]:
        for r in readers:
            yield from r()

    return chained


def compose(*readers: Reader, check_alignment: bool = True) -> Reader:
    """Zip readers into one whose samples are the flattened tuple of theirs;
    readers of different lengths raise :class:`ComposeNotAligned` unless
    ``check_alignment`` is off (then the shortest wins)."""
    def as_tuple(x: Any) -> tuple[Any, ...]:
        return x if isinstance(x, tuple) else (x,)

    def composed() -> Iterator[tuple[Any, ...]]:
        its = [r() for r in readers]
        if not check_alignment:
            for outs in zip(*its):
                yield sum((as_tuple(o) for o in outs), ())
            return
        for outs in itertools.zip_longest(*its):
            if any(o is None for o in outs):
                raise ComposeNotAligned("compose: the readers have different lengths; "
                                        "pass check_alignment=False to stop at the shortest")
            yield sum((as_tuple(o) for o in outs), ())

    return composed


def firstn(reader: Reader, n: int) -> Reader:
    """The first ``n`` samples."""
    def first() -> Iterator[Any]:
        yield from itertools.islice(reader(), n)

    return first


def map_readers(func: Callable[..., Any], *readers: Reader) -> Reader:
    """``func`` applied to the samples of the readers taken side by side."""
    def mapped() -> Iterator[Any]:
        yield from map(func, *[r() for r in readers])

    return mapped


def xmap_readers(mapper: Callable[[Any], Any], reader: Reader, process_num: int,
                 buffer_size: int, order: bool = False) -> Reader:
    """``mapper`` applied to each sample (Paddle runs it in ``process_num``
    threads; the samples come out in order here, which ``order=True`` asks for
    and ``order=False`` allows)."""
    del process_num, buffer_size, order

    def mapped() -> Iterator[Any]:
        yield from map(mapper, reader())

    return mapped


def cache(reader: Reader) -> Reader:
    """Read ``reader`` once into memory and replay it."""
    data = list(reader())

    def cached() -> Iterator[Any]:
        yield from data

    return cached
