"""Scopes hold the run-time values of variables; child scopes see their parents'.

Shared by every back end (and by ``io``, which saves and loads scope values),
so it lives beside the IR rather than inside one back end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import FetchError
from .lod import LoDTensor


class ScopeTensor:
    """``scope.find_var(name).get_tensor()``: a live view of one scope entry."""

    def __init__(self, scope: Scope, name: str) -> None:
        self._scope = scope
        self._name = name

    def _value(self) -> Any:
        v = self._scope.vars.get(self._name)
        if v is None:
            raise FetchError(f"variable {self._name!r} has no value in this scope yet")
        return v

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        v = self._value()
        arr = np.asarray(v.data if isinstance(v, LoDTensor) else v)
        return arr if dtype is None else arr.astype(dtype)

    def set(self, array: Any, place: Any = None) -> None:
        old = self._scope.vars.get(self._name)
        arr = np.array(array)
        if isinstance(old, LoDTensor):
            old.data = arr
        else:
            self._scope.vars[self._name] = arr

    def lod(self) -> list[list[int]]:
        v = self._scope.vars.get(self._name)
        return v.lod() if isinstance(v, LoDTensor) else []

    def set_lod(self, lod: list[list[int]]) -> None:
        t = LoDTensor(np.asarray(self._value()), None)
        t.set_lod(lod)
        self._scope.vars[self._name] = t

    def recursive_sequence_lengths(self) -> list[list[int]]:
        v = self._scope.vars.get(self._name)
        return v.recursive_sequence_lengths() if isinstance(v, LoDTensor) else []

    def shape(self) -> list[int]:
        return list(np.asarray(self).shape)

    def _is_initialized(self) -> bool:
        return self._scope.vars.get(self._name) is not None


class ScopeVariable:
    def __init__(self, scope: Scope, name: str) -> None:
        self.scope = scope
        self.name = name

    def get_tensor(self) -> ScopeTensor:
        return ScopeTensor(self.scope, self.name)

    def is_initialized(self) -> bool:
        return self.scope.vars.get(self.name) is not None

    def value(self) -> Any:
        return self.scope.vars.get(self.name)

    # Fluid's core.Variable: a tensor array, or a plain int (a step counter, ...)
    def get_lod_tensor_array(self) -> list[Any]:
        """The tensor array (a list of arrays / LoDTensors) this variable holds;
        an empty variable becomes an empty array."""
        v = self.scope.vars.get(self.name)
        if v is None:
            v = self.scope.vars[self.name] = []
        if not isinstance(v, list):
            raise FetchError(f"variable {self.name!r} holds a {type(v).__name__}, not a "
                             "tensor array; use get_tensor()")
        return v

    def set_int(self, value: int) -> None:
        self.scope.vars[self.name] = int(value)

    def is_int(self) -> bool:
        v = self.scope.vars.get(self.name)
        return isinstance(v, int) and not isinstance(v, bool)

    def get_int(self) -> int:
        if not self.is_int():
            raise FetchError(f"variable {self.name!r} holds no int (set_int sets one)")
        return int(self.scope.vars[self.name])


class Scope:
    """Name -> value (a numpy array, a :class:`LoDTensor`, or a list for tensor arrays)."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.vars: dict[str, Any] = {}
        self.parent = parent
        self._kids: list[Scope] = []

    def var(self, name: str) -> ScopeVariable:
        """The variable ``name`` of this scope, created (empty) if needed."""
        self.vars.setdefault(name, None)
        return ScopeVariable(self, name)

    def find_var(self, name: str) -> ScopeVariable | None:
        s: Scope | None = self
        while s is not None:
            if name in s.vars:
                return ScopeVariable(s, name)
            s = s.parent
        return None

    def find_value(self, name: str) -> Any:
        s: Scope | None = self
        while s is not None:
            v = s.vars.get(name)
            if v is not None:
                return v
            s = s.parent
        return None

    def new_scope(self) -> Scope:
        kid = Scope(self)
        self._kids.append(kid)
        return kid

    def drop_kids(self) -> None:
        self._kids.clear()

    def local_var_names(self) -> list[str]:
        return list(self.vars)

    def erase(self, names: list[str]) -> None:
        for n in names:
            self.vars.pop(n, None)


_global_scope = Scope()


def global_scope() -> Scope:
    return _global_scope


@contextlib.contextmanager
def scope_guard(scope: Scope) -> Iterator[None]:
    """Make ``scope`` the global scope inside the ``with`` block."""
    global _global_scope
    old = _global_scope
    _global_scope = scope
    try:
        yield
    finally:
        _global_scope = old
