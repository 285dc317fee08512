"""Fluid's ``name_scope``: ops created inside ``with name_scope("encoder"):`` carry
the attribute ``op_namescope = "/encoder/"`` (nested scopes join with ``/``; a name
used again at the same level becomes ``encoder_1``, ...), which Fluid's tools read
to group ops. Ops created outside any scope carry no such attribute."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["current_name_scope", "name_scope"]


class _Scope:
    def __init__(self, name: str, parent: _Scope | None) -> None:
        self.name, self.parent = name, parent
        self.children: dict[str, int] = {}

    def child(self, prefix: str) -> _Scope:
        n = self.children.get(prefix, 0)
        self.children[prefix] = n + 1
        return _Scope(prefix if n == 0 else f"{prefix}_{n}", self)

    def path(self) -> str:
        parts: list[str] = []
        s: _Scope | None = self
        while s is not None and s.parent is not None:
            parts.append(s.name)
            s = s.parent
        return "/" + "".join(f"{p}/" for p in reversed(parts))


_ROOT = _Scope("", None)
_current = _ROOT


@contextmanager
def name_scope(prefix: str | None = None) -> Iterator[None]:
    """Ops created inside carry ``op_namescope`` with this scope's path."""
    global _current
    if not prefix:
        raise ValueError("name_scope: give a non-empty prefix, e.g. name_scope('encoder')")
    if "/" in prefix:
        raise ValueError(f"name_scope: prefix {prefix!r} may not contain '/' (nest "
                         "name_scope blocks instead)")
    outer = _current
    _current = outer.child(prefix)
    try:
        yield
    finally:
        _current = outer


def current_name_scope() -> str | None:
    """The path of the innermost active scope (``"/a/b/"``), None outside any."""
    return None if _current is _ROOT else _current.path()
