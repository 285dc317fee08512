"""Unique names for layers and temporaries (``fc_0``, ``fc_0.tmp_1``), as in Fluid."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator


class UniqueNameGenerator:
    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.ids: defaultdict[str, int] = defaultdict(int)

    def __call__(self, key: str) -> str:
        n = self.ids[key]
        self.ids[key] += 1
        return f"{self.prefix}{key}_{n}"


_generator = UniqueNameGenerator()


def generate(key: str) -> str:
    """``generate("fc")`` -> ``fc_0``, then ``fc_1``..."""
    return _generator(key)


def generate_with_ignorable_key(key: str) -> str:
    return generate(key)


@contextlib.contextmanager
def guard(new_generator: UniqueNameGenerator | str | None = None) -> Iterator[None]:
    """Use a fresh name generator inside the block (names restart at 0)."""
    global _generator
    if isinstance(new_generator, str):
        new_generator = UniqueNameGenerator(new_generator)
    old = _generator
    _generator = new_generator or UniqueNameGenerator()
    try:
        yield
    finally:
        _generator = old


def switch(new_generator: UniqueNameGenerator | None = None) -> UniqueNameGenerator:
    global _generator
    old = _generator
    _generator = new_generator or UniqueNameGenerator()
    return old
