"""fluid-hw inference :class:`Program` -> ONNX model.

The program is taken in test mode (``clone(for_test=True)``) and pruned to what
the fetch targets need, as ``save_inference_model`` does; each op then goes
through its entry in :data:`._export_ops.EXPORTERS`.  Persistable variables
become initializers (their values read from the scope); feeds become graph
inputs and fetch targets graph outputs.  Ops without an ONNX mapping are all
listed in one error.

Every node is checked against its ONNX schema at the export opset (the element
types each input takes); unless the caller fixed the opset, the exporter moves to
the lowest opset that allows everything it wrote (:data:`EXPORT_OPSET` when that
does).  The result passes ``onnx.checker.check_model(model, full_check=True)``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import onnx
import onnx.checker
import onnx.defs
import onnx.helper
import onnx.numpy_helper
import onnx.shape_inference

from ...errors import FluidError, FormatError, UnknownOpError, VerifyError
from ...ir import dtypes
from ...ir.lod import LoDTensor
from ...ir.program import Operator, Program, Variable
from ...ir.prune import prune
from ...ir.scope import Scope, global_scope
from ..io import atomic_write
from ._dtypes import onnx_type_of
from ._export_ops import EXPORTERS
from ._values import Unsupported

#: default-domain opset of exported models (widely supported by runtimes and viewers)
EXPORT_OPSET = 17
MIN_EXPORT_OPSET = 13


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
        return _allowed(op_type, self.opset, input, elem_type) is not False

    # -- ONNX side ----------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        name, k = hint, 1
        while name in self.taken:
            name = f"{hint}.{k}"
            k += 1
        self.taken.add(name)
        return name

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
_TYPE_STRS = {1: "float", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
              9: "bool", 10: "float16", 11: "double"}


def _allowed(op_type: str, opset: int, index: int, elem_type: int) -> bool | None:
    """Whether input ``index`` of ``op_type`` at ``opset`` takes ``elem_type`` (None when
    the schema or the type is unknown)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    if not schema.inputs or elem_type not in _TYPE_STRS:
        return None
    formal = schema.inputs[min(index, len(schema.inputs) - 1)]
    if index >= len(schema.inputs) and \
            formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    return f"tensor({_TYPE_STRS[elem_type]})" in allowed.get(formal.type_str,
                                                            {formal.type_str})


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Tensor name -> element type, from the graph and ONNX type inference."""
    g = onnx.shape_inference.infer_shapes(model).graph
    types = {t.name: t.data_type for t in g.initializer}
    for vi in (*g.input, *g.value_info, *g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _type_problems(model: onnx.ModelProto, origins: list[str], opset: int
                   ) -> tuple[list[str], int]:
    """Nodes given an element type their schema does not take at ``opset``: a message
    each, and the lowest opset that takes them all (``opset`` when none does)."""
    types = _elem_types(model)
    newest = onnx.defs.onnx_opset_version()
    problems: list[str] = []
    wanted = opset
    for node, origin in zip(model.graph.node, origins):
        for i, name in enumerate(node.input):
            et = types.get(name)
            if not name or et is None or _allowed(node.op_type, opset, i, et) is not False:
                continue
            since = next((v for v in range(opset + 1, newest + 1)
                          if _allowed(node.op_type, v, i, et)), None)
            fix = (f"opset {since} allows it: export with opset={since}, or leave the opset "
                   "unset to let the exporter choose" if since else
                   f"no opset up to {newest} allows it")
            problems.append(f"{origin}: ONNX {node.op_type} at opset {opset} does not take "
                            f"{_TYPE_STRS.get(et, et)} as input #{i} ({name!r}); {fix}")
            if since:
                wanted = max(wanted, since)
    return problems, wanted


def _value_info(var: Variable, batch_name: str | None) -> onnx.ValueInfoProto:
    """A graph input/output; unknown dims are symbols (``batch_name`` for dim 0)."""
    np_dt = dtypes.to_numpy(var.dtype)
    et = onnx_type_of(np_dt)
    if et is None:
        raise Unsupported(f"variable {var.name!r} has dtype {np_dt}, which ONNX export "
                          "does not support")
    dims: list[int | str] = [
        d if d >= 0 else (batch_name if i == 0 and batch_name else f"{var.name}_d{i}")
        for i, d in enumerate(var.shape)]
    return onnx.helper.make_tensor_value_info(var.name, et, dims)


def _data_vars(program: Program, fetches: list[str]) -> list[str]:
    """The variables the fetches depend on that no op computes and that are not
    parameters: the program's data inputs, in the order ops first read them."""
    block = prune(program, [], fetches).global_block()
    written: set[str] = set()
    found: list[str] = []
    for op in block.ops:
        for n in op.input_arg_names:
            v = block._find_var_recursive(n)
            if n not in written and n not in found and v is not None and not v.persistable:
                found.append(n)
        written.update(op.output_arg_names)
    return found


def _feeds_fetches(program: Program, feed_names: Sequence[str] | None,
                   fetch_names: Sequence[Any] | None) -> tuple[list[str], list[str]]:
    gb = program.global_block()
    if feed_names is None:
        feed_names = [n for _, n in sorted((op.attr("col"), op.output("Out")[0])
                                           for op in gb.ops if op.type == "feed")]
    if fetch_names is None:
        fetch_names = [n for _, n in sorted((op.attr("col"), op.input("X")[0])
                                            for op in gb.ops if op.type == "fetch")]
    fetches = [f.name if isinstance(f, Variable) else str(f) for f in fetch_names]
    if not fetches:
        raise VerifyError("export: the program has no fetch ops; pass fetch_names=[...] "
                          "(and feed_names=[...]) to say what the ONNX model computes")
    for n in [*(feed_names or []), *fetches]:
        if not gb.has_var(n):
            raise VerifyError(f"export: {n!r} is not a variable of the program's global block")
    if not feed_names:
        feed_names = _data_vars(program, fetches)
    return list(feed_names), fetches


def export(program: Program, path: str | os.PathLike[str] | None = None, *,
           feed_names: Sequence[str] | None = None, fetch_names: Sequence[Any] | None = None,
           scope: Scope | None = None, opset: int | None = None) -> onnx.ModelProto:
    """See :func:`fluid_hw.onnx.export`."""
    chosen = opset is None
    opset = EXPORT_OPSET if opset is None else int(opset)
    newest = onnx.defs.onnx_opset_version()
    if not MIN_EXPORT_OPSET <= opset <= newest:
        raise VerifyError(f"export: opset {opset} is outside {MIN_EXPORT_OPSET}..{newest}")
    feeds, fetches = _feeds_fetches(program, feed_names, fetch_names)
    inf = prune(program.clone(for_test=True), feeds, fetches)
    while True:
        model, problems, wanted = _build(inf, scope or global_scope(), opset, feeds, fetches)
        if not (chosen and problems and opset < wanted <= newest):
            break
        opset = wanted  # what was written needs a newer opset: write it again there
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise UnknownOpError(f"cannot export the program to ONNX: {len(problems)} problem(s):\n"
                             f"{listed}\nExportable fluid ops: {', '.join(sorted(EXPORTERS))}")
    try:
        onnx.checker.check_model(model, full_check=True)
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise FluidError(f"export produced an invalid ONNX model ({e}); this is a fluid-hw "
                         "bug, please report it with the program") from None
    if path is not None:
        atomic_write(Path(path), model.SerializeToString())
    return model


def _build(inf: Program, scope: Scope, opset: int, feeds: list[str], fetches: list[str]
           ) -> tuple[onnx.ModelProto, list[str], int]:
    """The model of ``inf`` at ``opset``, what could not be written, and the lowest
    opset that would allow all of it."""
    ctx = ExportCtx(inf, scope, opset)
    problems: list[str] = []
    for i, op in enumerate(ctx.block.ops):
        if op.type in ("feed", "fetch"):
            continue
        label = f"op #{i} {op.type} (-> {', '.join(op.output_arg_names) or 'nothing'})"
        entry = EXPORTERS.get(op.type)
        try:
            if op.sub_block_indices():
                raise Unsupported("ops with sub-blocks (control flow) are not exported")
            if entry is None:
                raise Unsupported("no ONNX mapping")
            ctx.op, ctx.label = op, label
            entry.fn(ctx, op)
        except Unsupported as e:
            problems.append(f"{label}: {e}")
    ins, outs = [], []
    try:
        ins = [_value_info(ctx.var(n), "batch") for n in feeds]
        for n in fetches:
            vi = _value_info(ctx.var(n), None)
            if n in feeds or ctx.var(n).persistable:
                # an output must be produced by a node: copy the input / parameter
                vi.name = ctx.fresh(f"{n}.out")
                ctx.nodes.append(onnx.helper.make_node("Identity", [ctx.input(n)], [vi.name]))
                ctx.origins.append(f"graph output {n!r}")
            outs.append(vi)
    except Unsupported as e:
        problems.append(str(e))
    graph = onnx.helper.make_graph(ctx.nodes, "fluid_hw", ins, outs,
                                   list(ctx.initializers.values()))
    model = onnx.helper.make_model(graph, producer_name="fluid-hw",
                                   opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    wanted = ctx.wanted
    if not problems:
        problems, wanted = _type_problems(model, ctx.origins, opset)
    return model, problems, max(wanted, ctx.wanted)
