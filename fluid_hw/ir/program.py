"""Program / Block / Variable / Operator: views over a ``ProgramDesc``.

The protobuf desc is the single source of truth.  The view objects hold a
reference to their message and read and write it; the only Python-side state is
the list of view objects themselves (kept in step with the desc by the Block
methods that add, insert and remove) and frontend conveniences that are not
part of the program's meaning (a parameter's regularizer, the random seed used
while building).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import OpAttrError, UnknownNameError, VerifyError
from . import attrs as _attrs
from . import (
    desc_api,  # noqa: F401  (Fluid's desc methods on program.desc)
    dtypes,
    unique_name,
)
from . import framework_pb2 as pb
from .name_scope import current_name_scope
from .registry import InferContext, check_attr_for_op, get_op, has_op

VarType = pb.VarType

#: program format version written by this release (see serialization.py)
CURRENT_VERSION = 1

_TENSOR_KINDS = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS)


def _tensor_desc(desc: pb.VarDesc) -> pb.VarType.LoDTensorDesc | None:
    t = desc.type.type
    if t in _TENSOR_KINDS:
        return desc.type.lod_tensor
    if t == VarType.LOD_TENSOR_ARRAY:
        return desc.type.tensor_array
    return None


class Variable:
    """A named variable of a block (a view over its ``VarDesc``)."""

    def __init__(self, block: Block, desc: pb.VarDesc) -> None:
        self.block = block
        self.desc = desc

    # -- identity ------------------------------------------------------
    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def type(self) -> int:
        """Variable kind: ``VarType.LOD_TENSOR``, ``LOD_TENSOR_ARRAY``..."""
        return self.desc.type.type

    # -- tensor description -------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        td = _tensor_desc(self.desc)
        return tuple(td.tensor.dims) if td is not None else ()

    @shape.setter
    def shape(self, dims: Sequence[int]) -> None:
        self.desc_shape = dims

    @property
    def desc_shape(self) -> tuple[int, ...]:
        return self.shape

    @desc_shape.setter
    def desc_shape(self, dims: Sequence[int]) -> None:
        td = _tensor_desc(self.desc)
        if td is None:
            raise VerifyError(f"variable {self.name!r} of kind {self.type_name} has no shape")
        del td.tensor.dims[:]
        td.tensor.dims.extend(int(d) for d in dims)
        self.block.program._bump()

    @property
    def dtype(self) -> int:
        td = _tensor_desc(self.desc)
        return td.tensor.data_type if td is not None else VarType.RAW

    @dtype.setter
    def dtype(self, value: Any) -> None:
        td = _tensor_desc(self.desc)
        if td is None:
            raise VerifyError(f"variable {self.name!r} of kind {self.type_name} has no dtype")
        td.tensor.data_type = dtypes.to_enum(value)
        self.block.program._bump()

    @property
    def dtype_name(self) -> str:
        """'float32' etc. (``dtype`` is the proto enum, as in Fluid)."""
        return dtypes.name(self.dtype) if self.dtype in dtypes.TENSOR_DTYPES else "raw"

    @property
    def lod_level(self) -> int:
        td = _tensor_desc(self.desc)
        return td.lod_level if td is not None else 0

    @lod_level.setter
    def lod_level(self, value: int) -> None:
        td = _tensor_desc(self.desc)
        if td is not None:
            td.lod_level = int(value)
            self.block.program._bump()

    @property
    def type_name(self) -> str:
        return VarType.Type.Name(self.type)

    # -- flags ---------------------------------------------------------
    def _flag(name: str, doc: str) -> property:  # type: ignore[misc]
        def get(self: Variable) -> bool:
            return bool(getattr(self.desc, name))

        def set_(self: Variable, value: bool) -> None:
            setattr(self.desc, name, bool(value))
            self.block.program._bump()

        return property(get, set_, doc=doc)

    persistable = _flag("persistable", "kept in the scope across runs (parameters, state)")
    stop_gradient = _flag("stop_gradient", "no gradient flows into this variable")
    is_parameter = _flag("is_parameter", "a trainable-model parameter (not optimizer state)")
    trainable = _flag("trainable", "updated by optimizers")
    del _flag

    def __repr__(self) -> str:
        return (
            f"Variable({self.name!r}, shape={list(self.shape)}, dtype={self.dtype_name}, "
            f"lod_level={self.lod_level}{', persistable' if self.persistable else ''})"
        )

    __str__ = __repr__

    # Fluid compatibility
    @property
    def op(self) -> Operator | None:
        """The op of this variable's block that last writes it (Fluid's
        ``Variable.op``); None for data, parameters and other unwritten variables."""
        for op in reversed(self.block.ops):
            if self.name in op.output_arg_names:
                return op
        return None

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return repr(self)


class Parameter(Variable):
    """A variable with ``is_parameter`` set.  Frontend-only extras (regularizer,
    learning-rate multiplier, clip) live in :attr:`Program._param_extras`."""

    def _extra(self) -> dict[str, Any]:
        return self.block.program._param_extras.setdefault(self.name, {})

    def _extra_prop(key: str, default: Any) -> property:  # type: ignore[misc]
        def get(self: Parameter) -> Any:
            return self._extra().get(key, default)

        def set_(self: Parameter, value: Any) -> None:
            self._extra()[key] = value

        return property(get, set_)

    regularizer = _extra_prop("regularizer", None)
    optimize_attr = _extra_prop("optimize_attr", {"learning_rate": 1.0})
    gradient_clip_attr = _extra_prop("gradient_clip_attr", None)
    do_model_average = _extra_prop("do_model_average", None)
    del _extra_prop


class Operator:
    """One op of a block (a view over its ``OpDesc``)."""

    def __init__(self, block: Block, desc: pb.OpDesc) -> None:
        self.block = block
        self.desc = desc

    @property
    def type(self) -> str:
        return self.desc.type

    @property
    def idx(self) -> int:
        """Position in the block."""
        for i, op in enumerate(self.block.ops):
            if op is self:
                return i
        raise VerifyError(f"op {self.type} is no longer in block {self.block.idx}")

    # -- inputs / outputs ---------------------------------------------
    def input(self, slot: str) -> list[str]:
        for v in self.desc.inputs:
            if v.parameter == slot:
                return list(v.arguments)
        return []

    def output(self, slot: str) -> list[str]:
        for v in self.desc.outputs:
            if v.parameter == slot:
                return list(v.arguments)
        return []

    @property
    def input_names(self) -> list[str]:
        return [v.parameter for v in self.desc.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.parameter for v in self.desc.outputs]

    @property
    def input_arg_names(self) -> list[str]:
        return [a for v in self.desc.inputs for a in v.arguments]

    @property
    def output_arg_names(self) -> list[str]:
        return [a for v in self.desc.outputs for a in v.arguments]

    @property
    def inputs(self) -> dict[str, list[str]]:
        return {v.parameter: list(v.arguments) for v in self.desc.inputs}

    @property
    def outputs(self) -> dict[str, list[str]]:
        return {v.parameter: list(v.arguments) for v in self.desc.outputs}

    def _set_io(self, field: str, slot: str, names: Sequence[str]) -> None:
        rep = getattr(self.desc, field)
        for v in rep:
            if v.parameter == slot:
                del v.arguments[:]
                v.arguments.extend(names)
                break
        else:
            v = rep.add()
            v.parameter = slot
            v.arguments.extend(names)
        self.block.program._bump()

    def set_input(self, slot: str, names: Sequence[str]) -> None:
        self._set_io("inputs", slot, names)

    def set_output(self, slot: str, names: Sequence[str]) -> None:
        self._set_io("outputs", slot, names)

    def _rename_input(self, old: str, new: str) -> None:
        for v in self.desc.inputs:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new
        self.block.program._bump()

    def _rename_output(self, old: str, new: str) -> None:
        for v in self.desc.outputs:
            for i, a in enumerate(v.arguments):
                if a == old:
                    v.arguments[i] = new
        self.block.program._bump()

    # -- attributes ----------------------------------------------------
    def _attr_msg(self, name: str) -> pb.OpDesc.Attr | None:
        for a in self.desc.attrs:
            if a.name == name:
                return a
        return None

    def has_attr(self, name: str) -> bool:
        return self._attr_msg(name) is not None

    def attr(self, name: str) -> Any:
        a = self._attr_msg(name)
        if a is None:
            if has_op(self.type):
                d = get_op(self.type).attr_def(name)
                if d is not None and not d.required:
                    return d.default
            raise OpAttrError(f"op {self.type} has no attribute {name!r}")
        return _attrs.read(a)

    @property
    def attr_names(self) -> list[str]:
        return [a.name for a in self.desc.attrs]

    def all_attrs(self, with_defaults: bool = False) -> dict[str, Any]:
        """The stored attributes; ``with_defaults`` adds the schema's default of each
        one the op does not store (a program loaded from a file may store few)."""
        out = {a.name: _attrs.read(a) for a in self.desc.attrs}
        if with_defaults and has_op(self.type):
            out = get_op(self.type).with_defaults(out)
        return out

    def attr_kind(self, name: str) -> str:
        a = self._attr_msg(name)
        if a is None:
            raise OpAttrError(f"op {self.type} has no attribute {name!r}")
        return _attrs.KIND_OF_ENUM[a.type]

    def _set_attr(self, name: str, value: Any) -> None:
        kind = check_attr_for_op(get_op(self.type), name, value) if has_op(self.type) else (
            _attrs.guess_kind(value)
        )
        a = self._attr_msg(name) or self.desc.attrs.add()
        _attrs.write(a, name, kind, value)
        self.block.program._bump()

    set_attr = _set_attr

    def _block_attr(self, name: str) -> Block:
        return self.block.program.block(self.attr(name))

    def _blocks_attr(self, name: str) -> list[Block]:
        return [self.block.program.block(i) for i in self.attr(name)]

    def sub_block_indices(self) -> list[int]:
        out: list[int] = []
        for a in self.desc.attrs:
            if a.type == pb.AttrType.BLOCK:
                out.append(a.block_idx)
            elif a.type == pb.AttrType.BLOCKS:
                out.extend(a.blocks_idx)
        return out

    def infer_shape(self) -> None:
        opdef = get_op(self.type)
        if opdef.infer is not None:
            opdef.infer(InferContext(self, opdef))

    def __repr__(self) -> str:
        from .printer import format_op

        return format_op(self)

    __str__ = __repr__


class Block:
    """A list of ops and the variables they define; sub-blocks see their parents' vars."""

    def __init__(self, program: Program, idx: int) -> None:
        self.program = program
        self.idx = idx
        self.vars: dict[str, Variable] = {}
        self.ops: list[Operator] = []
        for vd in self.desc.vars:
            self.vars[vd.name] = self._make_var_view(vd)
        for od in self.desc.ops:
            self.ops.append(Operator(self, od))

    @property
    def desc(self) -> pb.BlockDesc:
        return self.program.desc.blocks[self.idx]

    def _make_var_view(self, vd: pb.VarDesc) -> Variable:
        return (Parameter if vd.is_parameter else Variable)(self, vd)

    @property
    def parent_idx(self) -> int:
        return self.desc.parent_idx

    @property
    def forward_block_idx(self) -> int:
        return self.desc.forward_block_idx

    def _set_forward_block_idx(self, idx: int) -> None:
        self.desc.forward_block_idx = idx

    @property
    def parent_block(self) -> Block | None:
        return self.program.block(self.parent_idx) if self.parent_idx >= 0 else None

    # -- variables -----------------------------------------------------
    def has_var(self, name: str) -> bool:
        return name in self.vars

    def var(self, name: str) -> Variable:
        try:
            return self.vars[name]
        except KeyError:
            raise UnknownNameError(
                f"block {self.idx} has no variable {name!r}"
                + (f" (it has: {', '.join(list(self.vars)[:20])})" if self.vars else "")
            ) from None

    def _find_var_recursive(self, name: str) -> Variable | None:
        b: Block | None = self
        seen = set()
        while b is not None and b.idx not in seen:
            seen.add(b.idx)
            v = b.vars.get(name)
            if v is not None:
                return v
            b = b.parent_block
        return None

    def _var_recursive(self, name: str) -> Variable:
        v = self._find_var_recursive(name)
        if v is None:
            raise UnknownNameError(
                f"variable {name!r} is not defined in block {self.idx} or its parents"
            )
        return v

    var_recursive = _var_recursive

    def create_var(
        self,
        name: str | None = None,
        shape: Sequence[int] | None = None,
        dtype: Any = "float32",
        type: int = VarType.LOD_TENSOR,
        lod_level: int = 0,
        persistable: bool = False,
        stop_gradient: bool = False,
        is_parameter: bool = False,
        trainable: bool = True,
        **_ignored: Any,
    ) -> Variable:
        """Create (or return the existing) variable ``name`` in this block."""
        if name is None:
            name = unique_name.generate("_generated_var")
        if name in self.vars:
            v = self.vars[name]
            if shape is not None and not v.shape:
                v.shape = shape
            return v
        vd = self.desc.vars.add()
        vd.name = name
        vd.type.type = type
        vd.persistable = persistable
        vd.stop_gradient = stop_gradient
        vd.is_parameter = is_parameter
        vd.trainable = trainable
        td = _tensor_desc(vd)
        if td is not None:
            td.tensor.data_type = dtypes.to_enum(dtype if dtype is not None else "float32")
            td.tensor.dims.extend(int(d) for d in (shape or ()))
            td.lod_level = lod_level
        v = self._make_var_view(vd)
        self.vars[name] = v
        self.program._bump()
        return v

    def create_parameter(self, name: str, shape: Sequence[int], dtype: Any = "float32",
                         trainable: bool = True, **kw: Any) -> Parameter:
        kw.pop("persistable", None)
        v = self.create_var(name=name, shape=shape, dtype=dtype, persistable=True,
                            is_parameter=True, trainable=trainable,
                            stop_gradient=not trainable, **kw)
        assert isinstance(v, Parameter)
        return v

    def _remove_var(self, name: str) -> None:
        if name not in self.vars:
            raise UnknownNameError(f"block {self.idx} has no variable {name!r}")
        for i, vd in enumerate(self.desc.vars):
            if vd.name == name:
                del self.desc.vars[i]
                break
        del self.vars[name]
        self.program._bump()

    def all_parameters(self) -> list[Parameter]:
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    def iter_parameters(self) -> Iterator[Parameter]:
        return iter(self.all_parameters())

    # -- ops -----------------------------------------------------------
    def _fill_op(self, od: pb.OpDesc, type: str, inputs: Mapping[str, Any] | None,
                 outputs: Mapping[str, Any] | None, attrs: Mapping[str, Any] | None) -> None:
        opdef = get_op(type)
        od.type = type
        for field, given in (("inputs", inputs), ("outputs", outputs)):
            for slot, vals in (given or {}).items():
                if vals is None:
                    continue
                if not isinstance(vals, (list, tuple)):
                    vals = [vals]
                names = [v if isinstance(v, str) else v.name for v in vals]
                if not names:
                    continue
                e = getattr(od, field).add()
                e.parameter = slot
                e.arguments.extend(names)
        full = opdef.complete_attrs(dict(attrs or {}))
        scope = current_name_scope()
        if scope is not None and "op_namescope" not in full:
            full["op_namescope"] = scope
        for name, value in full.items():
            a = opdef.attr_def(name)
            kind = a.kind if a is not None else _attrs.guess_kind(value)
            _attrs.write(od.attrs.add(), name, kind, value)

    def append_op(self, type: str | None = None, inputs: Mapping[str, Any] | None = None,
                  outputs: Mapping[str, Any] | None = None,
                  attrs: Mapping[str, Any] | None = None, infer_shape: bool = True,
                  **_ignored: Any) -> Operator:
        """Append an op; its attrs are checked and its output shapes inferred now."""
        if not type:  # Fluid raises ValueError here, not TypeError
            raise ValueError(f"Block.append_op: the op type is {type!r}; pass type=, "
                             "e.g. block.append_op(type='scale', ...)")
        return self._insert_op(len(self.ops), type=type, inputs=inputs, outputs=outputs,
                               attrs=attrs, infer_shape=infer_shape)

    def _prepend_op(self, type: str, inputs: Mapping[str, Any] | None = None,
                    outputs: Mapping[str, Any] | None = None,
                    attrs: Mapping[str, Any] | None = None, infer_shape: bool = True,
                    **_ignored: Any) -> Operator:
        return self._insert_op(0, type=type, inputs=inputs, outputs=outputs, attrs=attrs,
                               infer_shape=infer_shape)

    def _insert_op(self, index: int, type: str, inputs: Mapping[str, Any] | None = None,
                   outputs: Mapping[str, Any] | None = None,
                   attrs: Mapping[str, Any] | None = None, infer_shape: bool = True,
                   **_ignored: Any) -> Operator:
        tmp = pb.OpDesc()
        self._fill_op(tmp, type, inputs, outputs, attrs)
        ops = self.desc.ops
        n = len(ops)
        if not 0 <= index <= n:
            raise IndexError(f"op index {index} out of range for block {self.idx} ({n} ops)")
        tail = [pb.OpDesc.FromString(o.SerializeToString()) for o in ops[index:]]
        del ops[index:]
        new = ops.add()
        new.CopyFrom(tmp)
        op = Operator(self, new)
        for view, saved in zip(self.ops[index:], tail, strict=True):
            m = ops.add()
            m.CopyFrom(saved)
            view.desc = m
        self.ops.insert(index, op)
        self.program._bump()
        if infer_shape:
            try:
                op.infer_shape()
            except BaseException:
                self._remove_op(index)
                raise
        return op

    def _remove_op(self, index: int) -> None:
        del self.desc.ops[index]
        del self.ops[index]
        self.program._bump()

    def _sync_with_desc(self) -> None:
        """Rebuild the views after the desc was changed directly."""
        self.vars = {vd.name: self._make_var_view(vd) for vd in self.desc.vars}
        self.ops = [Operator(self, od) for od in self.desc.ops]
        self.program._bump()

    def __repr__(self) -> str:
        from .printer import format_block

        return format_block(self)

    __str__ = __repr__


#: the Program attributes Fluid's DistributeTranspiler sets (clone keeps them)
DISTRIBUTED_ATTRS = ("_is_distributed", "_is_chief", "_endpoints", "_ps_endpoint",
                     "_trainers_endpoints", "_distributed_lookup_table")


class Program:
    """A whole program: blocks of ops; block 0 is the global block."""

    def __init__(self, desc: pb.ProgramDesc | None = None) -> None:
        if desc is None:
            desc = pb.ProgramDesc()
            b = desc.blocks.add()
            b.idx = 0
            b.parent_idx = -1
            desc.version.version = CURRENT_VERSION
        self.desc = desc
        self._version = 0
        self.random_seed = 0
        self._param_extras: dict[str, dict[str, Any]] = {}
        self._current_block_idx = 0
        # what Fluid's DistributeTranspiler.transpile records on a program
        self._is_distributed = False
        self._is_chief = False
        self._endpoints: list[str] = []
        self._ps_endpoint: str | None = None
        self._trainers_endpoints: list[str] = []
        self._distributed_lookup_table: str | None = None
        self.blocks = [Block(self, i) for i in range(len(desc.blocks))]

    def _bump(self) -> None:
        self._version += 1

    def _sync_with_cpp(self) -> None:
        """Rebuild the Block views after ``program.desc`` was changed directly
        (Fluid's name; see :mod:`fluid_hw.ir.desc_api`)."""
        for b in self.blocks:
            b._sync_with_desc()
        self.blocks += [Block(self, i) for i in range(len(self.blocks), len(self.desc.blocks))]
        self._bump()

    # -- blocks --------------------------------------------------------
    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, index: int) -> Block:
        if not 0 <= index < len(self.blocks):
            raise VerifyError(f"block index {index} out of range (program has "
                              f"{len(self.blocks)} blocks)")
        return self.blocks[index]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def current_block(self) -> Block:
        return self.blocks[self._current_block_idx]

    @property
    def current_block_idx(self) -> int:
        return self._current_block_idx

    def _create_block(self, parent_idx: int | None = None) -> Block:
        """Add a sub-block (child of the current block) and make it current."""
        parent = self._current_block_idx if parent_idx is None else parent_idx
        bd = self.desc.blocks.add()
        bd.idx = len(self.blocks)
        bd.parent_idx = parent
        blk = Block(self, bd.idx)
        self.blocks.append(blk)
        self._current_block_idx = bd.idx
        self._bump()
        return blk

    def _rollback(self) -> None:
        """Return to the parent of the current block."""
        self._current_block_idx = self.current_block().parent_idx

    @contextlib.contextmanager
    def _block_guard(self, parent_idx: int | None = None) -> Iterator[Block]:
        blk = self._create_block(parent_idx)
        try:
            yield blk
        finally:
            self._rollback()

    # -- queries -------------------------------------------------------
    def list_vars(self) -> Iterator[Variable]:
        for b in self.blocks:
            yield from b.vars.values()

    def all_parameters(self) -> list[Parameter]:
        return self.global_block().all_parameters()

    def get_feed_target_names(self) -> list[str]:
        """The variables the global block's ``feed`` ops write, in ``col`` order
        (Fluid's ``ProgramDesc.get_feed_target_names``); empty without feed ops."""
        return [n for _, n in sorted((op.attr("col"), op.output("Out")[0])
                                     for op in self.global_block().ops if op.type == "feed")]

    def get_fetch_target_names(self) -> list[str]:
        """The variables the global block's ``fetch`` ops read, in ``col`` order
        (Fluid's ``ProgramDesc.get_fetch_target_names``); empty without fetch ops."""
        return [n for _, n in sorted((op.attr("col"), op.input("X")[0])
                                     for op in self.global_block().ops if op.type == "fetch")]

    def add_feed_fetch_ops(self, feed_names: Sequence[str], fetch_names: Sequence[str],
                           feed_var: str = "feed", fetch_var: str = "fetch") -> None:
        """Put ``feed`` ops (``col`` i: ``feed_names[i]``) at the front of the global
        block and ``fetch`` ops (``col`` i: ``fetch_names[i]``) at its end, reading and
        writing the holder variables ``feed_var`` and ``fetch_var`` (created if absent):
        what an inference model saved by ``io.save_inference_model`` holds."""
        b = self.global_block()
        fv = b.create_var(name=feed_var, type=VarType.FEED_MINIBATCH, persistable=True)
        tv = b.create_var(name=fetch_var, type=VarType.FETCH_LIST, persistable=True)
        for i, n in enumerate(feed_names):
            b._insert_op(i, "feed", {"X": fv}, {"Out": n}, {"col": i}, infer_shape=False)
        for i, n in enumerate(fetch_names):
            b.append_op("fetch", {"X": n}, {"Out": tv}, {"col": i}, infer_shape=False)

    # -- copies --------------------------------------------------------
    def clone(self, for_test: bool = False) -> Program:
        """A deep copy.  ``for_test=True`` switches ops with an ``is_test``
        attribute (dropout, batch_norm) to inference behaviour."""
        p = Program(pb.ProgramDesc.FromString(self.desc.SerializeToString()))
        p.random_seed = self.random_seed
        p._param_extras = copy.deepcopy(self._param_extras)
        for attr in DISTRIBUTED_ATTRS:
            setattr(p, attr, copy.copy(getattr(self, attr)))
        if "_py_readers" in self.__dict__:  # the clone reads from the same py_readers
            p.__dict__["_py_readers"] = list(self.__dict__["_py_readers"])
        if for_test:
            for b in p.blocks:
                for op in b.ops:
                    if has_op(op.type) and get_op(op.type).attr_def("is_test") is not None:
                        op._set_attr("is_test", True)
        return p

    @staticmethod
    def parse_from_string(binary: bytes, source: str = "<bytes>") -> Program:
        """Load a program serialized with ``program.desc.SerializeToString()``.

        Malformed input raises :class:`fluid_hw.errors.FormatError` naming ``source``.
        """
        from .serialization import program_from_bytes

        return program_from_bytes(binary, source)

    def serialize_to_string(self) -> bytes:
        from .serialization import program_to_bytes

        return program_to_bytes(self)

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return str(self)

    def __str__(self) -> str:
        from .printer import format_program

        return format_program(self)

    def __repr__(self) -> str:
        return f"<Program: {len(self.blocks)} block(s), {sum(len(b.ops) for b in self.blocks)} ops>"


def ops_of(program: Program) -> Iterable[tuple[Block, Operator]]:
    """Every (block, op) pair of a program, block by block."""
    for b in program.blocks:
        for op in b.ops:
            yield b, op
