"""What the ONNX op tables see: :class:`NodeCtx` (one ONNX node being imported) and
:class:`ExportCtx` (one fluid op being exported), and the one :func:`fresh` name helper.

The tables (``_import_ops``, ``_export_ops``) import this module, and the drivers
(``importer``, ``exporter``) import the tables and this module: neither table imports
its driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import onnx.numpy_helper

from ...errors import FormatError
from ...ir import dtypes
from ...ir.lod import LoDTensor
from ._values import Const, Dim, Sym, Unsupported, Value

if TYPE_CHECKING:
    from ...ir.program import Block, Operator, Program, Variable
    from ...ir.scope import Scope

__all__ = ["fresh", "ExportCtx", "NodeCtx", "ImportState", "allowed", "TYPE_STRS"]


def fresh(taken: set[str], hint: str) -> str:
    """A name not in ``taken`` (and now added to it): ``hint``, else ``hint.1``,
    ``hint.2``..."""
    name, k = hint, 1
    while name in taken:
        name = f"{hint}.{k}"
        k += 1
    taken.add(name)
    return name


# -- export --------------------------------------------------------------------------

class ExportCtx:
    """What an op exporter sees: the program's variables and ways to add ONNX nodes."""

    def __init__(self, program: Program, scope: Scope, opset: int) -> None:
        self.program = program
        self.block = program.global_block()
        self.scope = scope
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.taken: set[str] = set(self.block.vars)
        self.op: Operator | None = None
        self.label = ""  # the op being exported, for messages
        #: for each node, the op it was written for
        self.origins: list[str] = []
        #: the lowest opset that allows what the ops asked for (see :meth:`needs`)
        self.wanted = opset

    # -- program side --------------------------------------------------------------
    def var(self, name: str) -> Variable:
        return self.block.var(name)

    def shape(self, name: str) -> list[int]:
        return list(self.var(name).shape)

    def np_dtype(self, name: str) -> np.dtype:
        return dtypes.to_numpy(self.var(name).dtype)

    def value(self, name: str) -> np.ndarray | None:
        """The value of a persistable variable (a parameter), None for computed ones."""
        if not self.var(name).persistable:
            return None
        v = self.scope.find_value(name)
        if v is None:
            raise FormatError(f"export: parameter {name!r} has no value in the scope; run the "
                              "startup program (or load the parameters) first, or pass "
                              "scope=...")
        return np.asarray(v.data if isinstance(v, LoDTensor) else v)

    def fail(self, reason: str) -> NoReturn:
        raise Unsupported(reason)

    def needs(self, version: int, what: str) -> None:
        """``what`` exists from opset ``version`` on: fails below it (and remembers it,
        so an export whose opset was not fixed moves there)."""
        if self.opset < version:
            self.wanted = max(self.wanted, version)
            self.fail(f"{what} needs opset >= {version}; export with opset={version}, or "
                      "leave the opset unset to let the exporter choose")

    def allows(self, op_type: str, elem_type: int, input: int = 0) -> bool:
        """ONNX ``op_type`` at the export opset takes ``elem_type`` as input ``input``."""
        return allowed(op_type, self.opset, input, elem_type) is not False

    # -- ONNX side ----------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        return fresh(self.taken, hint)

    def input(self, name: str) -> str:
        """A program variable used as a node input (parameters become initializers)."""
        if name not in self.initializers:
            v = self.value(name)
            if v is not None:
                self.initializers[name] = onnx.numpy_helper.from_array(v, name)
        return name

    def const(self, array: Any, hint: str) -> str:
        """A new initializer holding ``array``."""
        name = self.fresh(hint)
        self.initializers[name] = onnx.numpy_helper.from_array(np.asarray(array), name)
        return name

    def ints(self, values: Sequence[int], hint: str) -> str:
        return self.const(np.array(list(values), dtype=np.int64), hint)

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | None = None,
             **attrs: Any) -> str:
        """Append a node; returns its (first) output, a new name unless given."""
        assert self.op is not None
        outs = list(outputs) if outputs is not None else [self.fresh(
            f"{self.op.output_arg_names[0] if self.op.output_arg_names else 'tmp'}.{op_type}")]
        ins = [self.input(n) if n and self.block.has_var(n) else n for n in inputs]
        name = self.fresh(f"{op_type}_{len(self.nodes)}")
        self.nodes.append(onnx.helper.make_node(op_type, ins, outs, name=name, **attrs))
        self.origins.append(self.label)
        return outs[0]


#: ONNX element type -> its name in schema type constraints, for the types fluid-hw holds
TYPE_STRS = {1: "float", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
              9: "bool", 10: "float16", 11: "double"}


def allowed(op_type: str, opset: int, index: int, elem_type: int) -> bool | None:
    """Whether input ``index`` of ``op_type`` at ``opset`` takes ``elem_type`` (None when
    the schema or the type is unknown)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    if not schema.inputs or elem_type not in TYPE_STRS:
        return None
    formal = schema.inputs[min(index, len(schema.inputs) - 1)]
    if index >= len(schema.inputs) and \
            formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    return f"tensor({TYPE_STRS[elem_type]})" in allowed.get(formal.type_str,
                                                            {formal.type_str})


# -- import --------------------------------------------------------------------------

class ImportState(Protocol):
    """What a :class:`NodeCtx` uses of the import under way (``importer.Importer``)."""

    block: Block
    values: dict[str, Value]
    graph_outputs: set[str]
    feed_onnx_names: set[str]
    feeds_of: dict[str, frozenset[str]]

    def fresh(self, hint: str) -> str: ...

    def materialize(self, c: Const) -> str: ...

    def sym_dims(self, onnx_name: str, var: str) -> list[Dim]: ...


class NodeCtx:
    """What an op converter sees: one ONNX node, its inputs, and ways to emit fluid ops."""

    def __init__(self, imp: ImportState, node: onnx.NodeProto, ins: list[Value | None],
                 attrs: dict[str, Any], opset: int) -> None:
        self.imp = imp
        self.node = node
        self.ins = ins
        self.attrs = attrs
        self.opset = opset

    # -- attributes and inputs ----------------------------------------------------------
    @property
    def op_type(self) -> str:
        return self.node.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def fail(self, reason: str) -> NoReturn:
        raise Unsupported(reason)

    def has(self, i: int) -> bool:
        """Input ``i`` is given (not omitted, not the empty name)."""
        return i < len(self.ins) and self.ins[i] is not None

    def count(self) -> int:
        return len(self.ins)

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when known at import time."""
        v = self.ins[i] if i < len(self.ins) else None
        if isinstance(v, Const):
            return v.array
        if isinstance(v, Sym):
            return v.known()
        return None

    def need_const(self, i: int, what: str) -> np.ndarray:
        c = self.const(i)
        if c is None:
            name = self.node.input[i]
            if name in self.imp.feed_onnx_names:
                self.fail(f"{what} (input #{i}) must be known at import time, but it is the "
                          f"graph input {name!r}; pass its value with "
                          f"load(..., constants={{{name!r}: ...}})")
            feeds = sorted(self.imp.feeds_of.get(name, ()))
            if feeds:
                self.fail(f"{what} (input #{i}) must be known at import time; here it is "
                          f"computed from the graph input(s) {feeds}: pass their values with "
                          f"load(..., constants={{{feeds[0]!r}: ...}})")
            self.fail(f"{what} (input #{i}) must be known at import time; here it is "
                      "computed by the graph")
        return c

    def ints(self, i: int, what: str) -> list[int]:
        """Input ``i`` as a list of ints: it must be an integer tensor known at import time."""
        c = self.need_const(i, what)
        if c.dtype.kind not in "iu":
            self.fail(f"{what} (input #{i}, {self.node.input[i]!r}) is a {c.dtype} tensor; "
                      f"{self.op_type} takes it as int64 (int32 for some inputs): fix the "
                      "exporter or the model")
        return [int(v) for v in c.reshape(-1)]

    def shape_values(self, i: int, what: str) -> list[Dim]:
        """A shape-like input: ints, with symbols for run-time dims."""
        v = self.ins[i]
        if isinstance(v, Sym):
            return list(v.dims)
        return list(self.ints(i, what))

    def var(self, i: int) -> str:
        """Input ``i`` as a fluid variable (constants become persistable variables)."""
        v = self.ins[i]
        if isinstance(v, str):
            return v
        if isinstance(v, Const):
            return self.imp.materialize(v)
        if isinstance(v, Sym):
            self.fail(f"input #{i} is computed from the run-time shape of a tensor "
                      f"({list(v.dims)}); fluid-hw has no shape op. Export the model with "
                      "static shapes")
        self.fail(f"input #{i} is missing")

    def shape(self, i: int) -> list[int]:
        v = self.ins[i]
        if isinstance(v, Const):
            return list(v.array.shape)
        if isinstance(v, Sym):
            return [] if v.scalar else [len(v.dims)]
        return list(self.imp.block.var(self.var(i)).shape)

    def dims(self, i: int) -> list[Dim]:
        """Input ``i``'s dims with symbols for the unknown ones."""
        v = self.ins[i]
        if isinstance(v, str):
            return self.imp.sym_dims(self.node.input[i], v)
        return list(self.shape(i))

    def rank(self, i: int) -> int:
        return len(self.shape(i))

    def dtype(self, i: int) -> np.dtype:
        v = self.ins[i]
        if isinstance(v, Const):
            return v.array.dtype
        if isinstance(v, Sym):
            return np.dtype(np.int64)
        return dtypes.to_numpy(self.imp.block.var(self.var(i)).dtype)

    # -- outputs ---------------------------------------------------------------------------
    def wants(self, j: int) -> bool:
        """Output ``j`` is used (present and named)."""
        return j < len(self.node.output) and bool(self.node.output[j])

    def out_count(self) -> int:
        return len(self.node.output)

    def new_var(self, out: int | None = None, hint: str = "tmp") -> str:
        """A new program variable: named after ONNX output ``out`` (and bound to it), or a
        temporary."""
        base = self.node.output[out] if out is not None else f"{self.node.output[0]}.{hint}"
        name = self.imp.fresh(base)
        self.imp.block.create_var(name=name)
        if out is not None:
            self.bind(out, name)
        return name

    def bind(self, j: int, value: str | np.ndarray) -> None:
        """ONNX output ``j`` is this variable (or constant)."""
        name = self.node.output[j]
        self.imp.values[name] = (Const(value, name) if isinstance(value, np.ndarray)
                                 else value)

    def alias(self, j: int, var: str) -> None:
        """Output ``j`` equals ``var``: bound directly, or copied when it is a graph output
        (so the output keeps its own name)."""
        if self.node.output[j] in self.imp.graph_outputs:
            self.emit("assign", {"X": var}, out=j)
        else:
            self.bind(j, var)

    def param(self, array: np.ndarray, hint: str, source: int | None = None) -> str:
        """A new persistable variable holding ``array``: derived from input ``source``
        (named after it, a weight when that is an initializer), or from nothing."""
        src = self.ins[source] if source is not None else None
        if isinstance(src, Const):
            return self.imp.materialize(Const(np.asarray(array), f"{src.hint}.{hint}",
                                              initializer=src.initializer))
        return self.imp.materialize(Const(np.asarray(array), f"{self.node.output[0]}.{hint}"))

    def emit(self, type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
             out: int | None = None, slot: str = "Out", hint: str | None = None) -> str:
        """Append one fluid op with a single output; returns the output variable."""
        name = self.new_var(out, hint or type)
        self.imp.block.append_op(type, inputs, {slot: [name]}, attrs or {})
        return name

    def emit_op(self, type: str, inputs: dict[str, Any], outputs: dict[str, list[str]],
                attrs: dict[str, Any] | None = None) -> None:
        """Append one fluid op whose output variables exist already (see :meth:`new_var`)."""
        self.imp.block.append_op(type, inputs, outputs, attrs or {})
