"""Fluid 1.5's in-graph readers: ``fluid.layers.py_reader`` /
``create_py_reader_by_data`` / ``read_file`` / ``double_buffer`` and
``fluid.io.PyReader``, with ``fluid.core.EOFException``.

A non-iterable reader is attached to the program that declares its variables
(``program._py_readers``).  ``Executor.run`` on that program, when none of the
reader's variables is fed explicitly, takes the reader's next batch as their feed
(:meth:`PyReader._next_feed`); an exhausted reader raises :class:`EOFException`
until ``reset()``.  The batches come from the decorated Python generator in the
executor's thread (no queue thread), so ``capacity`` and the double buffer are
accepted and do not change the results.  No reader op is added: a saved inference
model, pruned to its feeds, holds nothing of the reader.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import EOFException, FeedError, FluidError
from ..ir import unique_name
from ..ir.default_programs import default_main_program
from ..ir.lod import LoDTensor
from ..ir.program import Program, Variable

__all__ = ["EOFException", "PyReader", "create_py_reader_by_data", "double_buffer",
           "py_reader", "read_file"]


Source = Callable[[], Iterator[Mapping[str, Any]]]


class PyReader:
    """Fluid 1.5's ``fluid.io.PyReader`` (and the reader ``py_reader`` returns):
    feeds ``feed_list`` from a decorated Python generator.

    ``iterable=True``: ``for data in reader(): exe.run(feed=data)``;
    ``iterable=False``: ``reader.start()``, then ``exe.run`` until it raises
    :class:`EOFException`, then ``reader.reset()``."""

    def __init__(self, feed_list: Sequence[Variable] | None = None,
                 capacity: int | None = None, use_double_buffer: bool = True,
                 iterable: bool = True, return_list: bool = False,
                 name: str | None = None) -> None:
        if not feed_list:
            raise ValueError("PyReader: give feed_list, the variables it feeds")
        for v in feed_list:
            if not isinstance(v, Variable):
                raise TypeError(f"PyReader: feed_list holds a {type(v).__name__}; give the "
                                "Variables (fluid.layers.data) it feeds")
        if capacity is not None and capacity < 1:
            raise ValueError(f"PyReader: capacity must be >= 1, got {capacity}")
        self.name = name or unique_name.generate("py_reader")
        self.feed_list = list(feed_list)
        self.capacity = capacity
        self.use_double_buffer = use_double_buffer
        self.iterable = iterable
        self.return_list = return_list
        self._source: Source | None = None
        self._it: Iterator[Mapping[str, Any]] | None = None
        self._exhausted = False
        if not iterable:
            program: Program = self.feed_list[0].block.program
            program.__dict__.setdefault("_py_readers", []).append(self)

    # -- decorating ------------------------------------------------------
    def decorate_sample_list_generator(self, reader: Callable[[], Iterable[Any]],
                                       places: Any = None) -> None:
        """``reader()`` yields batches, each a list of samples (one entry per fed
        variable), as ``paddle.batch`` readers do."""
        from .data_feeder import DataFeeder

        feeder = DataFeeder(self.feed_list, places, program=self.feed_list[0].block.program)
        self._source = lambda: (feeder.feed(batch) for batch in reader())

    decorate_paddle_reader = decorate_sample_list_generator

    def decorate_sample_generator(self, sample_generator: Callable[[], Iterable[Any]],
                                  batch_size: int, drop_last: bool = True,
                                  places: Any = None) -> None:
        """``sample_generator()`` yields single samples, batched here by
        ``batch_size`` (the last short batch dropped with ``drop_last``)."""
        if batch_size < 1:
            raise ValueError(f"PyReader {self.name!r}: batch_size must be >= 1, got "
                             f"{batch_size}")

        def batches() -> Iterator[list[Any]]:
            it = iter(sample_generator())
            while batch := list(itertools.islice(it, batch_size)):
                if len(batch) < batch_size and drop_last:
                    return
                yield batch

        self.decorate_sample_list_generator(batches, places)

    def decorate_batch_generator(self, reader: Callable[[], Iterable[Any]],
                                 places: Any = None) -> None:
        """``reader()`` yields batches, each a tuple of arrays or LoDTensors (one per
        fed variable, batch dimension first; a bare array when it feeds one)."""
        names = [v.name for v in self.feed_list]

        def feeds() -> Iterator[dict[str, Any]]:
            for i, batch in enumerate(reader()):
                if isinstance(batch, (LoDTensor, np.ndarray)):  # one tensor, not a tuple
                    batch = (batch,)
                if len(batch) != len(names):
                    got = len(batch)
                    raise FeedError(f"py_reader {self.name!r}: batch {i} holds {got} "
                                    f"value(s), the reader feeds {len(names)} {names}")
                yield dict(zip(names, batch))

        self._source = feeds

    decorate_tensor_provider = decorate_batch_generator

    # -- running ---------------------------------------------------------
    def start(self) -> None:
        if self.iterable:
            raise FluidError(f"PyReader {self.name!r} is iterable: loop over reader() "
                             "instead of start()")
        if self._source is None:
            raise FluidError(f"py_reader {self.name!r}: start() before any data source; "
                             "call decorate_paddle_reader / decorate_tensor_provider / "
                             "decorate_sample_list_generator / decorate_batch_generator")
        if self._it is not None:
            raise FluidError(f"py_reader {self.name!r} is already started; call reset() "
                             "after it raises EOFException, then start()")
        self._it = iter(self._source())
        self._exhausted = False

    def reset(self) -> None:
        self._it = None
        self._exhausted = False

    def __call__(self) -> Iterator[dict[str, Any]]:
        if not self.iterable:
            raise FluidError(f"py_reader {self.name!r} is not iterable: use start() and "
                             "catch fluid.core.EOFException")
        if self._source is None:
            raise FluidError(f"PyReader {self.name!r}: no data source; decorate it first")
        for feed in self._source():
            yield self._checked(feed)

    def _checked(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        """``feed`` with each value's shape checked against its variable (the
        executor then checks dtypes and LoD as for any feed)."""
        for v in self.feed_list:
            val = feed[v.name]
            arr = val.data if isinstance(val, LoDTensor) else val
            shape = np.shape(arr) if arr is not None else ()
            want = list(v.shape)
            if want and (len(want) != len(shape) or any(
                    d != -1 and d != s for d, s in zip(want, shape))):
                raise FeedError(f"py_reader {self.name!r}: variable {v.name!r} got a batch "
                                f"of shape {list(shape)}, it is declared {want} (-1 = any)")
        return dict(feed)

    def _next_feed(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        """The next batch as a feed dict, for ``Executor.run``; nothing when the run
        feeds the reader's variables itself."""
        if any(v.name in feed for v in self.feed_list):
            return {}
        if self._it is None:
            raise FluidError(f"py_reader {self.name!r}: the program reads "
                             f"{[v.name for v in self.feed_list]} before reader.start(); "
                             "call start() before exe.run")
        if self._exhausted:
            raise EOFException(f"py_reader {self.name!r} is exhausted; call reset()")
        try:
            batch = next(self._it)
        except StopIteration:
            self._exhausted = True
            raise EOFException(f"py_reader {self.name!r} is exhausted; call reset(), "
                               "then start() for the next pass") from None
        return self._checked(batch)


def py_reader(capacity: int, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any],
              lod_levels: Sequence[int] | None = None, name: str | None = None,
              use_double_buffer: bool = True) -> PyReader:
    """A reader with new variables of ``shapes`` (batch dimension included, -1 for
    any) and ``dtypes``; ``read_file(reader)`` gives them."""
    if len(shapes) != len(dtypes):
        raise ValueError(f"py_reader: {len(shapes)} shapes but {len(dtypes)} dtypes")
    lods = list(lod_levels) if lod_levels is not None else [0] * len(shapes)
    if len(lods) != len(shapes):
        raise ValueError(f"py_reader: {len(shapes)} shapes but {len(lods)} lod_levels")
    base = name or unique_name.generate("py_reader")
    gb = default_main_program().global_block()
    outs = [gb.create_var(name=unique_name.generate(f"{base}_out"), shape=list(s),
                          dtype=dt, lod_level=lod, stop_gradient=True)
            for s, dt, lod in zip(shapes, dtypes, lods)]
    return PyReader(outs, capacity, use_double_buffer, iterable=False, name=base)


def create_py_reader_by_data(capacity: int, feed_list: Sequence[Variable],
                             name: str | None = None,
                             use_double_buffer: bool = True) -> PyReader:
    """A reader feeding the existing variables ``feed_list`` (e.g. ``layers.data``)."""
    return PyReader(feed_list, capacity, use_double_buffer, iterable=False, name=name)


def double_buffer(reader: PyReader, place: Any = None, name: str | None = None) -> PyReader:
    """Fluid prefetches the next batch onto the device; fluid-hw reads batches in the
    executor's thread, so the reader is returned as it is."""
    if not isinstance(reader, PyReader):
        raise TypeError(f"double_buffer expects a py_reader, got {type(reader).__name__}")
    return reader


def read_file(reader: PyReader) -> Variable | list[Variable]:
    """The variables ``reader`` fills (one Variable when it has one)."""
    if not isinstance(reader, PyReader):
        raise TypeError(f"read_file expects a py_reader, got {type(reader).__name__}")
    return reader.feed_list[0] if len(reader.feed_list) == 1 else list(reader.feed_list)
