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
from typing import Any

import onnx
import onnx.checker
import onnx.defs
import onnx.helper
import onnx.numpy_helper
import onnx.shape_inference

from ...errors import FluidError, UnknownOpError, VerifyError
from ...ir import dtypes
from ...ir.program import Program, Variable
from ...ir.prune import prune
from ...ir.scope import Scope, global_scope
from ..io import atomic_write
from ._context import TYPE_STRS, ExportCtx, allowed
from ._dtypes import onnx_type_of
from ._export_ops import EXPORTERS
from ._values import Unsupported

#: default-domain opset of exported models (widely supported by runtimes and viewers)
EXPORT_OPSET = 17
MIN_EXPORT_OPSET = 13


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
            if not name or et is None or allowed(node.op_type, opset, i, et) is not False:
                continue
            since = next((v for v in range(opset + 1, newest + 1)
                          if allowed(node.op_type, v, i, et)), None)
            fix = (f"opset {since} allows it: export with opset={since}, or leave the opset "
                   "unset to let the exporter choose" if since else
                   f"no opset up to {newest} allows it")
            problems.append(f"{origin}: ONNX {node.op_type} at opset {opset} does not take "
                            f"{TYPE_STRS.get(et, et)} as input #{i} ({name!r}); {fix}")
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
        feed_names = program.get_feed_target_names()
    if fetch_names is None:
        fetch_names = program.get_fetch_target_names()
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
