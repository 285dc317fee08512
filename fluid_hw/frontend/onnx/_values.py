"""What an ONNX tensor name stands for while a graph is imported.

* :class:`Const`: a value known at import time (initializer, ``Constant``, a folded
  subgraph).  It becomes a persistable variable only when an emitted op reads it.
* :class:`Sym`: a small int64 vector (or scalar) computed from tensor shapes whose
  entries may be run-time dims, named by symbols (``"N"``).  ``Shape`` ->
  ``Gather`` -> ``Concat`` -> ``Reshape`` chains of exporters fold into these.
* a ``str``: the name of a fluid variable computed by the program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import OnnxUnsupportedError as Unsupported
from ._dtypes import np_dtype_of

Dim = int | str  # a known extent, or a symbol naming a run-time one


@dataclass
class Const:
    """A value known at import time."""

    array: np.ndarray
    hint: str  # preferred variable name when materialized
    initializer: bool = False
    var: str | None = None  # the variable holding it, once materialized


@dataclass(frozen=True)
class Sym:
    """A shape-derived int64 vector; a ``str`` entry is a run-time dim (its symbol)."""

    dims: tuple[Dim, ...]
    scalar: bool = False

    def known(self) -> np.ndarray | None:
        """The value as an int64 array when every entry is known."""
        if any(isinstance(d, str) for d in self.dims):
            return None
        arr = np.array(self.dims, dtype=np.int64)
        return arr.reshape(()) if self.scalar else arr


Value = Const | Sym | str


def simplify(v: Sym) -> Const | Sym:
    """A Sym whose entries are all known becomes a Const."""
    k = v.known()
    return Const(k, "shape") if k is not None else v


# -- symbolic folding of the ops of shape subgraphs ---------------------------------------
# Each takes the node's attributes, its inputs (Sym, Const or None) and the default-domain
# opset, and returns its outputs, or raises Unsupported.

SymInputs = Sequence[Const | Sym | None]
SymFolder = Callable[[dict[str, Any], SymInputs, int], list[Const | Sym]]


def _as_sym(v: Const | Sym | None, what: str) -> Sym:
    if isinstance(v, Sym):
        return v
    if isinstance(v, Const) and v.array.ndim <= 1 and v.array.dtype.kind in "iu":
        return Sym(tuple(int(x) for x in v.array.reshape(-1)), v.array.ndim == 0)
    raise Unsupported(f"{what} is not a small integer vector known at import time")


def _ints(v: Const | Sym | None, what: str) -> list[int]:
    s = _as_sym(v, what)
    if any(isinstance(d, str) for d in s.dims):
        raise Unsupported(f"{what} depends on a run-time dim")
    return [int(d) for d in s.dims]


def _gather(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    data = _as_sym(ins[0], "Gather data")
    idx = ins[1]
    if not isinstance(idx, Const) or idx.array.ndim > 1 or attrs.get("axis", 0) not in (0, -1):
        raise Unsupported("Gather on a shape needs constant indices of rank <= 1")
    n = len(data.dims)
    if idx.array.dtype.kind not in "iu":
        raise Unsupported(f"Gather indices of type {idx.array.dtype}; they must be integers")
    bad = [int(i) for i in idx.array.reshape(-1) if not -n <= int(i) < n]
    if bad:
        raise Unsupported(f"Gather index {bad[0]} is out of range for a shape vector of "
                          f"{n} entries")
    picked = tuple(data.dims[int(i) + n if int(i) < 0 else int(i)]
                   for i in idx.array.reshape(-1))
    return [simplify(Sym(picked, idx.array.ndim == 0))]


def _unsqueeze(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    s = _as_sym(ins[0], "Unsqueeze data")
    axes = attrs.get("axes") if opset < 13 else _ints(ins[1], "Unsqueeze axes")
    if s.scalar and list(axes or []) in ([0], [-1]):
        return [simplify(Sym(s.dims))]
    raise Unsupported("Unsqueeze of a shape vector to rank > 1")


def _squeeze(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    s = _as_sym(ins[0], "Squeeze data")
    if not s.scalar and len(s.dims) == 1:
        return [simplify(Sym(s.dims, scalar=True))]
    raise Unsupported("Squeeze of a shape vector with more than one entry")


def _concat(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    parts = [_as_sym(v, "Concat input") for v in ins if v is not None]
    if any(p.scalar for p in parts):
        raise Unsupported("Concat of scalars")
    return [simplify(Sym(tuple(d for p in parts for d in p.dims)))]


def _slice(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    s = _as_sym(ins[0], "Slice data")
    starts, ends = _ints(ins[1], "Slice starts"), _ints(ins[2], "Slice ends")
    axes = _ints(ins[3], "Slice axes") if len(ins) > 3 and ins[3] is not None else [0]
    steps = _ints(ins[4], "Slice steps") if len(ins) > 4 and ins[4] is not None else [1]
    if s.scalar or axes not in ([0], [-1]) or len(starts) != 1 or len(ends) != 1 \
            or len(steps) != 1:
        raise Unsupported("Slice of a shape vector along more than one axis")
    if steps[0] == 0:
        raise Unsupported("Slice with a step of 0")
    lim = 2**62
    sl = slice(max(min(starts[0], lim), -lim), max(min(ends[0], lim), -lim), steps[0])
    return [simplify(Sym(s.dims[sl]))]


def _shape_cast(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    s = _as_sym(ins[0], "Cast input")
    dt = np_dtype_of(int(attrs["to"]))
    if dt is None or dt.kind not in "iu":
        raise Unsupported("Cast of a shape vector to a non-integer type")
    return [s]


def _identity(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    return [_as_sym(ins[0], "Identity input")]


def _shape_of(attrs: dict[str, Any], ins: SymInputs, opset: int) -> list[Const | Sym]:
    s = _as_sym(ins[0], "Shape input")
    dims = [] if s.scalar else [len(s.dims)]
    return [simplify(Sym(tuple(dims[attrs.get("start", 0):attrs.get("end")])))]


#: ONNX op type -> how it folds when an input is a (partly) symbolic shape vector
SYM_FOLDERS: dict[str, SymFolder] = {
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Slice": _slice,
    "Cast": _shape_cast,
    "Identity": _identity,
    "Shape": _shape_of,
}
