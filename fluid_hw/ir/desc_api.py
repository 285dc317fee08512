"""Fluid's C++ ``core`` desc objects' methods on fluid-hw's protobuf descs, for
tools written against ``program.desc`` (``program.desc.block(0).op_size()``,
``block_desc.append_op()``, ``op_desc.input("X")`` ...).

``program.desc`` is the protobuf ``ProgramDesc`` itself; importing this module
(``fluid_hw.ir`` does) adds Fluid's method names to the generated message classes.
Where Fluid's method has the name of a protobuf field the field stays (``OpDesc.type``
and ``VarDesc.name`` / ``persistable`` are strings and bools, not methods: read them
without calling; ``set_type`` and the setters exist). After changing a desc
directly, call ``program._sync_with_cpp()`` (as in Fluid) so the ``Program`` /
``Block`` views see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import attrs as _attrs
from . import dtypes
from . import framework_pb2 as pb

__all__ = ["install"]


# -- ProgramDesc ------------------------------------------------------------------------

def _program_block(self: pb.ProgramDesc, i: int) -> pb.BlockDesc:
    if not 0 <= i < len(self.blocks):
        raise IndexError(f"ProgramDesc.block({i}): the program has {len(self.blocks)} "
                         "block(s)")
    return self.blocks[i]


def _program_append_block(self: pb.ProgramDesc, parent: pb.BlockDesc) -> pb.BlockDesc:
    b = self.blocks.add()
    b.idx = len(self.blocks) - 1
    b.parent_idx = parent.idx
    return b


# -- BlockDesc --------------------------------------------------------------------------

def _block_op(self: pb.BlockDesc, i: int) -> pb.OpDesc:
    if not 0 <= i < len(self.ops):
        raise IndexError(f"BlockDesc.op({i}): block {self.idx} has {len(self.ops)} op(s)")
    return self.ops[i]


def _block_insert_op(self: pb.BlockDesc, index: int) -> pb.OpDesc:
    if not 0 <= index <= len(self.ops):
        raise IndexError(f"BlockDesc._insert_op({index}): block {self.idx} has "
                         f"{len(self.ops)} op(s)")
    tail = [pb.OpDesc.FromString(o.SerializeToString()) for o in self.ops[index:]]
    del self.ops[index:]
    new = self.ops.add()
    for o in tail:
        self.ops.add().CopyFrom(o)
    return new


def _block_remove_op(self: pb.BlockDesc, start: int, end: int) -> None:
    del self.ops[start:end]


def _block_find_var(self: pb.BlockDesc, name: str) -> pb.VarDesc | None:
    return next((v for v in self.vars if v.name == name), None)


def _block_var(self: pb.BlockDesc, name: str) -> pb.VarDesc:
    """The variable ``name``, created (an empty LoD tensor of float32) if missing,
    as Fluid's ``BlockDesc.var``."""
    v = _block_find_var(self, name)
    if v is None:
        v = self.vars.add()
        v.name = name
        v.type.type = pb.VarType.LOD_TENSOR
        v.type.lod_tensor.tensor.data_type = pb.VarType.FP32
    return v


# -- OpDesc -----------------------------------------------------------------------------

def _slot(entries: Any, name: str) -> list[str]:
    return next((list(e.arguments) for e in entries if e.parameter == name), [])


def _set_slot(entries: Any, name: str, args: Sequence[str]) -> None:
    e = next((e for e in entries if e.parameter == name), None)
    if e is None:
        e = entries.add()
        e.parameter = name
    del e.arguments[:]
    e.arguments.extend(args)


def _op_attr_msg(self: pb.OpDesc, name: str) -> pb.OpDesc.Attr | None:
    return next((a for a in self.attrs if a.name == name), None)


def _op_attr(self: pb.OpDesc, name: str) -> Any:
    a = _op_attr_msg(self, name)
    if a is None:
        raise KeyError(f"op {self.type!r} has no attribute {name!r}; it has "
                       f"{[x.name for x in self.attrs]}")
    return _attrs.read(a)


def _op_set_attr(self: pb.OpDesc, name: str, value: Any) -> None:
    a = _op_attr_msg(self, name)
    if a is None:
        a = self.attrs.add()
    else:
        a.Clear()
    _attrs.write(a, name, _attrs.guess_kind(value), value)


def _op_remove_attr(self: pb.OpDesc, name: str) -> None:
    for a in [a for a in self.attrs if a.name == name]:
        self.attrs.remove(a)


def _op_set_type(self: pb.OpDesc, t: str) -> None:
    self.type = t


# -- VarDesc ----------------------------------------------------------------------------

def _tensor(v: pb.VarDesc) -> Any:
    return v.type.tensor_array if v.type.type == pb.VarType.LOD_TENSOR_ARRAY \
        else v.type.lod_tensor


def _var_set_shape(self: pb.VarDesc, dims: Sequence[int]) -> None:
    t = _tensor(self).tensor
    del t.dims[:]
    t.dims.extend(int(d) for d in dims)


def _var_set_dtype(self: pb.VarDesc, dtype: Any) -> None:
    _tensor(self).tensor.data_type = dtypes.to_enum(dtype)


def _var_set_lod_level(self: pb.VarDesc, level: int) -> None:
    _tensor(self).lod_level = int(level)


def _var_set_persistable(self: pb.VarDesc, value: bool) -> None:
    self.persistable = bool(value)


_METHODS: dict[type, dict[str, Any]] = {
    pb.ProgramDesc: {
        "block": _program_block,
        "num_blocks": lambda self: len(self.blocks),
        "append_block": _program_append_block,
        "serialize_to_string": lambda self: self.SerializeToString(),
        "flush": lambda self: None,
    },
    pb.BlockDesc: {
        "id": property(lambda self: self.idx),
        "parent": property(lambda self: self.parent_idx),
        "op": _block_op,
        "op_size": lambda self: len(self.ops),
        "append_op": lambda self: self.ops.add(),
        "_prepend_op": lambda self: _block_insert_op(self, 0),
        "_insert_op": _block_insert_op,
        "_remove_op": _block_remove_op,
        "var": _block_var,
        "has_var": lambda self, name: _block_find_var(self, name) is not None,
        "find_var": _block_find_var,
        "all_vars": lambda self: list(self.vars),
        "get_forward_block_idx": lambda self: self.forward_block_idx,
        "_set_forward_block_idx": lambda self, i: setattr(self, "forward_block_idx", i),
        "serialize_to_string": lambda self: self.SerializeToString(),
    },
    pb.OpDesc: {
        "set_type": _op_set_type,
        "input": lambda self, name: _slot(self.inputs, name),
        "output": lambda self, name: _slot(self.outputs, name),
        "input_names": lambda self: [e.parameter for e in self.inputs],
        "output_names": lambda self: [e.parameter for e in self.outputs],
        "input_arg_names": lambda self: [a for e in self.inputs for a in e.arguments],
        "output_arg_names": lambda self: [a for e in self.outputs for a in e.arguments],
        "set_input": lambda self, name, args: _set_slot(self.inputs, name, args),
        "set_output": lambda self, name, args: _set_slot(self.outputs, name, args),
        "has_attr": lambda self, name: _op_attr_msg(self, name) is not None,
        "attr": _op_attr,
        "set_attr": _op_set_attr,
        "_set_attr": _op_set_attr,
        "attr_names": lambda self: [a.name for a in self.attrs],
        "remove_attr": _op_remove_attr,
        "serialize_to_string": lambda self: self.SerializeToString(),
    },
    pb.VarDesc: {
        "shape": lambda self: list(_tensor(self).tensor.dims),
        "set_shape": _var_set_shape,
        "dtype": lambda self: _tensor(self).tensor.data_type,
        "set_dtype": _var_set_dtype,
        "lod_level": lambda self: _tensor(self).lod_level,
        "set_lod_level": _var_set_lod_level,
        "set_persistable": _var_set_persistable,
        "serialize_to_string": lambda self: self.SerializeToString(),
    },
}


def install() -> None:
    """Add the methods (idempotent); a name that is a protobuf field is skipped."""
    for cls, methods in _METHODS.items():
        fields = set(cls.DESCRIPTOR.fields_by_name)  # type: ignore[attr-defined]
        for name, fn in methods.items():
            if name not in fields:
                setattr(cls, name, fn)


install()
