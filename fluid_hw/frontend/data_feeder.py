"""``DataFeeder``: turns a minibatch from a reader (a list of samples, each a tuple
with one entry per fed variable) into the feed dict ``Executor.run`` takes, as
Fluid 1.5's ``fluid.DataFeeder`` does.

A variable with ``lod_level`` 0 gets one array of the samples stacked, reshaped to
the variable's shape; a variable with ``lod_level`` L > 0 takes L levels of nested
lists per sample and gets a :class:`LoDTensor` of their rows with the matching
sequence lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import FeedError
from ..ir import dtypes
from ..ir.default_programs import default_main_program
from ..ir.lod import LoDTensor
from ..ir.program import Program, Variable

__all__ = ["DataFeeder"]


class _SlotConverter:
    """Collects one variable's entries of a minibatch and builds its value."""

    def __init__(self, var: Variable) -> None:
        self.var = var
        self.dtype = dtypes.to_numpy(var.dtype)
        self.rows: list[Any] = []
        self.lengths: list[list[int]] = [[] for _ in range(var.lod_level)]

    def add(self, entry: Any, level: int = 0) -> None:
        if level == self.var.lod_level:
            self.rows.append(entry)
            return
        try:
            items = list(entry)
        except TypeError:
            raise FeedError(f"DataFeeder: variable {self.var.name!r} has lod_level "
                            f"{self.var.lod_level}, so each sample's entry must be nested "
                            f"{self.var.lod_level} level(s) deep; got {entry!r} at level "
                            f"{level}") from None
        self.lengths[level].append(len(items))
        for item in items:
            self.add(item, level + 1)

    def done(self) -> np.ndarray | LoDTensor:
        name = self.var.name
        try:
            arr = np.array(self.rows, dtype=self.dtype)
        except (ValueError, TypeError) as e:
            raise FeedError(f"DataFeeder: cannot make the entries for {name!r} an array of "
                            f"{self.dtype} ({e}); check that every sample's entry has the "
                            f"same shape") from None
        shape = [d for d in self.var.shape]
        if shape:
            rest = shape[1:]
            if all(d >= 0 for d in rest):
                want = int(np.prod(rest)) if rest else 1
                per_row = arr.size // max(len(arr), 1) if arr.ndim else 1
                if arr.size and per_row != want:
                    raise FeedError(f"DataFeeder: each entry for {name!r} has {per_row} "
                                    f"value(s), the variable's shape {shape} takes {want}")
                arr = arr.reshape([-1, *rest])
        if not self.var.lod_level:
            return arr
        t = LoDTensor(arr)
        t.set_recursive_sequence_lengths(self.lengths)
        return t


class DataFeeder:
    """Converts reader minibatches into feed dicts for the variables of
    ``feed_list`` (variables, or names looked up in ``program``, default the
    main program), in that order."""

    def __init__(self, feed_list: Sequence[Variable | str], place: Any,
                 program: Program | None = None) -> None:
        prog = program or default_main_program()
        self.feed_vars: list[Variable] = []
        for v in feed_list:
            if isinstance(v, str):
                block = prog.global_block()
                if not block.has_var(v):
                    raise FeedError(f"DataFeeder: the program has no variable {v!r}; "
                                    "pass the Variable or the program that declares it")
                v = block.var(v)
            elif not isinstance(v, Variable):
                raise TypeError(f"DataFeeder: feed_list holds a {type(v).__name__}; give "
                                "Variables or variable names")
            self.feed_vars.append(v)
        self.feed_names = [v.name for v in self.feed_vars]
        self.place = place

    def feed(self, iterable: Iterable[Sequence[Any]]) -> dict[str, np.ndarray | LoDTensor]:
        """One minibatch (samples, each with one entry per fed variable) -> feed dict."""
        convs = [_SlotConverter(v) for v in self.feed_vars]
        for i, sample in enumerate(iterable):
            if len(sample) != len(convs):
                raise FeedError(f"DataFeeder: sample {i} has {len(sample)} entries, the "
                                f"feeder feeds {len(convs)} variables {self.feed_names}")
            for conv, entry in zip(convs, sample):
                conv.add(entry)
        return {c.var.name: c.done() for c in convs}

    def feed_parallel(self, iterable: Iterable[Iterable[Sequence[Any]]],
                      num_places: int | None = None) -> Iterator[dict[str, Any]]:
        """One feed dict per device's minibatch."""
        for i, mini in enumerate(iterable):
            if num_places is not None and i >= num_places:
                break
            yield self.feed(mini)

    def decorate_reader(self, reader: Callable[[], Iterable[Any]], multi_devices: bool,
                        num_places: int | None = None,
                        drop_last: bool = True) -> Callable[[], Iterator[Any]]:
        """A reader of feed dicts from a reader of minibatches (with
        ``multi_devices``, lists of ``num_places`` feed dicts, the minibatch split
        among them)."""
        def feeds() -> Iterator[Any]:
            for batch in reader():
                if not multi_devices:
                    yield self.feed(batch)
                    continue
                n = num_places or 1
                batch = list(batch)
                if len(batch) % n and drop_last:
                    continue
                per = -(-len(batch) // n)
                yield [self.feed(batch[k * per:(k + 1) * per]) for k in range(n)]

        return feeds
