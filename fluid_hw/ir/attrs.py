"""Typed op attributes: Python values <-> ``OpDesc.Attr`` messages."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OpAttrError
from . import framework_pb2 as pb

AttrType = pb.AttrType

#: attribute kind names used in op definitions -> proto enum
KINDS: dict[str, int] = {
    "int": AttrType.INT,
    "float": AttrType.FLOAT,
    "string": AttrType.STRING,
    "ints": AttrType.INTS,
    "floats": AttrType.FLOATS,
    "strings": AttrType.STRINGS,
    "bool": AttrType.BOOLEAN,
    "bools": AttrType.BOOLEANS,
    "block": AttrType.BLOCK,
    "long": AttrType.LONG,
    "blocks": AttrType.BLOCKS,
    "longs": AttrType.LONGS,
    "float64": AttrType.FLOAT64,
}
KIND_OF_ENUM = {v: k for k, v in KINDS.items()}

_INT32 = (-(2**31), 2**31 - 1)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_num(v: Any) -> bool:
    return _is_int(v) or isinstance(v, (float, np.floating))


def guess_kind(value: Any) -> str:
    """The attribute kind of a Python value, for attrs without a schema."""
    from .program import Block  # local: program imports this module

    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if _is_int(value):
        return "int" if _INT32[0] <= int(value) <= _INT32[1] else "long"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Block):
        return "block"
    if isinstance(value, (list, tuple)):
        if not value:
            return "ints"
        if all(isinstance(v, (bool, np.bool_)) for v in value):
            return "bools"
        if all(_is_int(v) for v in value):
            return "ints"
        if all(_is_num(v) for v in value):
            return "floats"
        if all(isinstance(v, str) for v in value):
            return "strings"
        if all(isinstance(v, Block) for v in value):
            return "blocks"
    raise OpAttrError(f"cannot store attribute value {value!r} of type {type(value).__name__}")


def check_value(kind: str, value: Any) -> bool:
    """Whether ``value`` can be stored as an attribute of ``kind``."""
    from .program import Block

    scalar = {
        "int": _is_int,
        "long": _is_int,
        "float": _is_num,
        "float64": _is_num,
        "string": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, (bool, np.bool_)),
        "block": lambda v: isinstance(v, (Block, int)) and not isinstance(v, bool),
    }
    if kind in scalar:
        ok = scalar[kind](value)
        if ok and kind == "int":
            ok = _INT32[0] <= int(value) <= _INT32[1]
        return bool(ok)
    elem = {"ints": "int", "longs": "long", "floats": "float", "strings": "string",
            "bools": "bool", "blocks": "block"}[kind]
    return isinstance(value, (list, tuple)) and all(check_value(elem, v) for v in value)


def write(attr: pb.OpDesc.Attr, name: str, kind: str, value: Any) -> None:
    """Fill an ``OpDesc.Attr`` message."""
    attr.Clear()
    attr.name = name
    attr.type = KINDS[kind]
    if kind == "int":
        attr.i = int(value)
    elif kind == "long":
        attr.l = int(value)
    elif kind == "float":
        attr.f = float(value)
    elif kind == "float64":
        attr.float64 = float(value)
    elif kind == "string":
        attr.s = value
    elif kind == "bool":
        attr.b = bool(value)
    elif kind == "block":
        attr.block_idx = value if isinstance(value, int) else value.idx
    elif kind == "ints":
        attr.ints.extend(int(v) for v in value)
    elif kind == "longs":
        attr.longs.extend(int(v) for v in value)
    elif kind == "floats":
        attr.floats.extend(float(v) for v in value)
    elif kind == "strings":
        attr.strings.extend(value)
    elif kind == "bools":
        attr.bools.extend(bool(v) for v in value)
    elif kind == "blocks":
        attr.blocks_idx.extend(v if isinstance(v, int) else v.idx for v in value)
    else:  # pragma: no cover - KINDS is closed
        raise OpAttrError(f"unknown attribute kind {kind!r}")


def read(attr: pb.OpDesc.Attr) -> Any:
    """The Python value of an ``OpDesc.Attr``; BLOCK(S) give block indices."""
    kind = KIND_OF_ENUM.get(attr.type)
    field = {
        "int": "i", "long": "l", "float": "f", "float64": "float64", "string": "s",
        "bool": "b", "block": "block_idx",
    }
    if kind in field:
        return getattr(attr, field[kind])
    rep = {"ints": "ints", "longs": "longs", "floats": "floats", "strings": "strings",
           "bools": "bools", "blocks": "blocks_idx"}
    if kind in rep:
        return list(getattr(attr, rep[kind]))
    raise OpAttrError(f"attribute {attr.name!r} has unknown type {attr.type}")
