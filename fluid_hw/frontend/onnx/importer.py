"""ONNX graph -> fluid-hw inference :class:`Program` plus a scope holding its parameters.

Nodes are visited in graph order.  A node whose inputs are all known at import
time (initializers, ``Constant`` outputs, folded values) is evaluated at once
with the ONNX reference evaluator and never reaches the program; ``Shape`` of a
tensor folds into a (partly symbolic) :class:`~._values.Sym` vector.  Every other
node goes through its entry in :data:`._import_ops.IMPORTERS`, which appends
fluid ops through ``Block.append_op`` (so attribute checks and shape inference
run on every op), and the finished program is verified.  Nodes that cannot be
converted are collected and reported together in one error.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import onnx.numpy_helper

from ...errors import FluidError, FormatError, UnknownOpError
from ...ir import dtypes
from ...ir.program import Program, Variable
from ...ir.scope import Scope, scope_guard
from ...ir.verifier import verify_program
from ._context import NodeCtx, fresh
from ._dtypes import np_dtype_of, onnx_type_name, onnx_type_of
from ._import_ops import IMPORTERS
from ._import_quant import DOMAIN_IMPORTERS, KEEP_AS_OPS
from ._model import DEFAULT_DOMAINS, ReadModel, read_model
from ._sizes import MAX_COMPUTED_BYTES, fold_bytes, nbytes
from ._values import SYM_FOLDERS, Const, Dim, Sym, Unsupported, Value, simplify

if TYPE_CHECKING:
    from ...ir.program import Block

#: ops never folded even with constant inputs (they are random)
NON_DETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                               "RandomUniformLike", "Multinomial", "Bernoulli"})


@dataclass
class OnnxModel:
    """An imported model: an inference program, its parameters and its feeds/fetches.

    Run it with ``exe.run(m.program, feed={m.feed_names[0]: x}, fetch_list=m.fetch_names,
    scope=m.scope)``; :meth:`save` writes a ``save_inference_model`` folder.
    """

    program: Program
    scope: Scope
    feed_names: list[str]
    fetch_names: list[str]
    opset: int
    source: str
    #: ONNX tensor name -> fluid variable name, for graph inputs and outputs
    names: dict[str, str] = field(default_factory=dict)

    @property
    def fetch_targets(self) -> list[Variable]:
        gb = self.program.global_block()
        return [gb.var(n) for n in self.fetch_names]

    def save(self, dirname: str | os.PathLike[str],
             params_filename: str | None = None) -> list[str]:
        """Write the model as an inference-model folder (``io.load_inference_model``
        reads it back); returns the names of the saved parameters."""
        from ..io import save_inference_model

        with scope_guard(self.scope):
            return save_inference_model(dirname, self.feed_names, self.fetch_targets, None,
                                        self.program, params_filename=params_filename)


_NAME_OK = re.compile(r"[^A-Za-z0-9_.\-]")


def sanitize(name: str) -> str:
    """A fluid variable name for an ONNX tensor name: characters outside
    ``[A-Za-z0-9_.-]`` (``/`` or ``:`` of TF exports, ``@``) become ``_``."""
    return _NAME_OK.sub("_", name) or "t"


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out


def _inferred_dims(model: onnx.ModelProto) -> dict[str, list[Dim | None]]:
    """Tensor name -> dims from ONNX shape inference (ints, dim_param symbols or None)."""
    out: dict[str, list[Dim | None]] = {}
    g = model.graph
    for vi in (*g.input, *g.value_info, *g.output):
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims: list[Dim | None] = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            else:
                dims.append(d.dim_param or None)
        out[vi.name] = dims
    return out


def _to_array(t: onnx.TensorProto, source: str) -> np.ndarray:
    try:
        return onnx.numpy_helper.to_array(t)
    except Exception as e:  # ValueError/TypeError from numpy or onnx on bad raw_data
        raise FormatError(f"{source}: tensor {t.name!r} ({onnx_type_name(t.data_type)}, dims "
                          f"{list(t.dims)}) cannot be read ({e}); the file is truncated or "
                          "corrupted") from None


def _sparse_to_array(s: onnx.SparseTensorProto, source: str) -> np.ndarray:
    values = _to_array(s.values, source)
    idx = _to_array(s.indices, source)
    where = f"{source}: sparse initializer {s.values.name!r} (dims {list(s.dims)})"
    size = nbytes(s.dims, values.dtype)
    if size > MAX_COMPUTED_BYTES:
        raise FormatError(f"{where}: its dense form would take {size} bytes, more than the "
                          f"{MAX_COMPUTED_BYTES >> 20} MiB fluid-hw makes at import time; "
                          "store the tensor dense")
    if idx.dtype.kind not in "iu" or values.ndim != 1 or idx.ndim not in (1, 2) \
            or idx.shape[0] != values.shape[0] \
            or (idx.ndim == 2 and idx.shape[1] != len(s.dims)):
        raise FormatError(f"{where}: indices {idx.dtype}{list(idx.shape)} do not fit values "
                          f"{list(values.shape)}; the model is corrupted: export it again")
    dense = np.zeros(tuple(s.dims), dtype=values.dtype)
    try:
        if idx.ndim == 1:
            dense.reshape(-1)[idx] = values
        else:
            dense[tuple(idx.T)] = values
    except IndexError:
        raise FormatError(f"{where}: an index is out of range; the model is corrupted: "
                          "export it again") from None
    return dense


def function_body(node: onnx.NodeProto, opset: int,
                  input_types: list[onnx.TypeProto | None]) -> onnx.FunctionProto | None:
    """The function body ONNX defines for ``node``'s op at ``opset`` (default domain), or
    None when its schema has none."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:  # not an ONNX op
        return None
    try:
        if schema.has_function:  # type: ignore[attr-defined]  # missing from onnx's stubs
            f = schema.get_function_with_opset_version(opset) if hasattr(
                schema, "get_function_with_opset_version") else None
            f = f or schema.function_body
            if isinstance(f, bytes):
                fp = onnx.FunctionProto()
                fp.ParseFromString(f)
                f = fp
            return f if f.node else None
        known = [t for t in input_types if t is not None]
        has_cdf = schema.has_context_dependent_function  # type: ignore[attr-defined]
        if has_cdf and len(known) == len(input_types):
            body = schema.get_context_dependent_function(  # type: ignore[attr-defined]
                node.SerializeToString(), [t.SerializeToString() for t in known])
            fp = onnx.FunctionProto()
            fp.ParseFromString(body)
            return fp if fp.node else None
    except Exception:
        return None
    return None


class Importer:
    """One import: walks the graph, fills the program, collects the problems."""

    def __init__(self, read: ReadModel, constants: dict[str, Any] | None = None) -> None:
        self.read = read
        self.constants = dict(constants or {})
        self.feed_onnx_names: set[str] = set()
        #: the graph inputs each value computed at run time derives from (for messages)
        self.feeds_of: dict[str, frozenset[str]] = {}
        self.graph = read.model.graph
        self.source = read.source
        self.opsets = {("" if o.domain in DEFAULT_DOMAINS else o.domain): int(o.version)
                       for o in read.model.opset_import}
        self.opsets[""] = read.opset
        self.program = Program()
        self.block: Block = self.program.global_block()
        self.values: dict[str, Value] = {}
        self.params: dict[str, np.ndarray] = {}
        self.taken: set[str] = set()
        self.inferred = _inferred_dims(read.inferred)
        self.problems: list[str] = []
        self.graph_outputs = {o.name for o in self.graph.output}
        self.feed_names: list[str] = []
        self.names: dict[str, str] = {}

    # -- names and constants ---------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """An unused variable name close to ``hint``."""
        return fresh(self.taken, sanitize(hint))

    def materialize(self, c: Const) -> str:
        """The persistable variable holding a constant (created on first use)."""
        if c.var is not None:
            return c.var
        arr = np.array(c.array, order="C", copy=None)  # (ascontiguousarray makes 0-d 1-d)
        if onnx_type_of(arr.dtype) is None:
            raise Unsupported(f"constant {c.hint!r} has dtype {arr.dtype}, which fluid-hw "
                              "tensors cannot hold")
        name = self.fresh(c.hint)
        self.block.create_parameter(name, shape=list(arr.shape), dtype=arr.dtype,
                                    trainable=c.initializer and arr.dtype.kind == "f")
        self.params[name] = arr
        c.var = name
        return name

    def sym_dims(self, onnx_name: str, var: str) -> list[Dim]:
        """The dims of a program variable; unknown ones as symbols (ONNX's dim_param
        where shape inference has one, else ``"<tensor>:<axis>"``)."""
        inferred = self.inferred.get(onnx_name) or []
        dims: list[Dim] = []
        for k, d in enumerate(self.block.var(var).shape):
            got = inferred[k] if k < len(inferred) else None
            if d >= 0:
                dims.append(d)
            elif isinstance(got, int):
                dims.append(got)
            else:
                dims.append(got or f"{onnx_name}:{k}")
        return dims

    # -- the walk ------------------------------------------------------------------------
    def run(self) -> OnnxModel:
        self._initializers()
        self._inputs()
        for i, node in enumerate(self.graph.node):
            self._node(i, node)
        fetch = self._outputs()
        if self.problems:
            listed = "\n".join(f"  - {p}" for p in self.problems)
            raise UnknownOpError(
                f"cannot import {self.source}: {len(self.problems)} node(s) cannot be "
                f"converted to fluid-hw ops:\n{listed}\n"
                f"Supported ONNX ops: {', '.join(sorted(IMPORTERS))} (plus any op whose "
                "inputs are all known at import time, which is folded)")
        verify_program(self.program)
        scope = Scope()
        scope.vars.update(self.params)
        return OnnxModel(self.program, scope, self.feed_names, fetch, self.read.opset,
                         self.source, self.names)

    def _initializers(self) -> None:
        for t in self.graph.initializer:
            self.values[t.name] = Const(_to_array(t, self.source), t.name, initializer=True)
        for s in self.graph.sparse_initializer:
            name = s.values.name
            self.values[name] = Const(_sparse_to_array(s, self.source), name, initializer=True)

    def _inputs(self) -> None:
        inputs = [i.name for i in self.graph.input if i.name not in self.values]
        unknown = sorted(set(self.constants) - set(inputs))
        if unknown:
            raise FormatError(f"{self.source}: constants given for {unknown}, which are not "
                              f"graph inputs (the graph inputs are: {inputs})")
        for inp in self.graph.input:
            if inp.name in self.values:  # an initializer listed as input (IR < 4)
                continue
            where = f"graph input {inp.name!r}"
            if inp.name in self.constants:
                self.values[inp.name] = self._constant_input(inp, self.constants[inp.name])
                continue
            if not inp.type.HasField("tensor_type"):
                self.problems.append(f"{where}: only tensor inputs are supported, not "
                                     f"{inp.type.WhichOneof('value')}")
                continue
            tt = inp.type.tensor_type
            dt = np_dtype_of(tt.elem_type)
            if dt is None:
                self.problems.append(f"{where}: element type {onnx_type_name(tt.elem_type)} "
                                     "is not supported (fluid-hw holds bool, int8/16/32/64, "
                                     "uint8, float16/32/64)")
                continue
            if not tt.HasField("shape"):
                self.problems.append(f"{where}: has no shape (not even a rank); give the "
                                     "input a shape when exporting")
                continue
            shape = [int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            name = self.fresh(inp.name)
            self.block.create_var(name=name, shape=shape, dtype=dt)
            self.values[inp.name] = name
            self.feed_names.append(name)
            self.feed_onnx_names.add(inp.name)
            self.names[inp.name] = name

    def _constant_input(self, inp: onnx.ValueInfoProto, value: Any) -> Const:
        """A graph input given a value at import time, checked against its declaration."""
        arr = np.asarray(value)
        where = f"{self.source}: constant for graph input {inp.name!r}"
        tt = inp.type.tensor_type
        want = np_dtype_of(tt.elem_type)
        if want is not None and arr.dtype != want:
            raise FormatError(f"{where}: is {arr.dtype}, the input is declared {want}")
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if len(dims) != arr.ndim or any(d not in (-1, s) for d, s in zip(dims, arr.shape)):
                raise FormatError(f"{where}: has shape {list(arr.shape)}, the input is "
                                  f"declared {dims}")
        return Const(arr, inp.name)

    def _outputs(self) -> list[str]:
        fetch = []
        for out in self.graph.output:
            v = self.values.get(out.name)
            if v is None:
                continue  # its producer could not be converted (already reported)
            if isinstance(v, Sym):
                self.problems.append(f"graph output {out.name!r}: it is the run-time shape of "
                                     f"a tensor ({list(v.dims)}); fluid-hw has no shape op")
                continue
            try:
                name = self.materialize(v) if isinstance(v, Const) else v
            except Unsupported as e:
                self.problems.append(f"graph output {out.name!r}: {e}")
                continue
            fetch.append(name)
            self.names[out.name] = name
        return fetch

    def _node(self, index: int, node: onnx.NodeProto) -> None:
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        opset = self.opsets.get(domain, 0)
        label = (f"{node.op_type} node {node.name or f'#{index}'!r} "
                 f"({f'domain {domain!r}, ' if domain else ''}opset {opset})")
        ins: list[Value | None] = []
        for n in node.input:
            if not n:
                ins.append(None)
                continue
            v = self.values.get(n)
            if v is None:
                # produced by a node that failed (and is reported); an op type without
                # a mapping is listed as well, so one run names every unsupported node
                if domain or node.op_type not in IMPORTERS:
                    self.problems.append(f"{label}: no mapping to fluid-hw ops")
                return
            ins.append(v)
        feeds = frozenset().union(*(self.feeds_of.get(n, {n} & self.feed_onnx_names)
                                    for n, v in zip(node.input, ins) if isinstance(v, str)))
        for o in node.output:
            self.feeds_of[o] = feeds
        try:
            if domain and (domain, node.op_type) not in DOMAIN_IMPORTERS:
                raise Unsupported(f"ops of domain {domain!r} are not supported (only the "
                                  "default ONNX domain, and QONNX's and com.microsoft's "
                                  f"{sorted({op for _, op in DOMAIN_IMPORTERS})})")
            attrs = attributes(node)
            if not domain and self._fold(node, ins, attrs):
                return
            conv = DOMAIN_IMPORTERS[domain, node.op_type] if domain else \
                IMPORTERS.get(node.op_type)
            if conv is None:
                body = function_body(node, opset, [self._type_of(v) for v in ins])
                if body is None:
                    raise Unsupported("no mapping to fluid-hw ops")
                self._expand(index, node, body, label)
                return
            for i, v in enumerate(ins):
                if isinstance(v, Const) and onnx_type_of(v.array.dtype) is None:
                    raise Unsupported(f"input #{i} ({node.input[i]!r}) is a {v.array.dtype} "
                                      "constant, a type fluid-hw tensors cannot hold")
            ctx = NodeCtx(self, node, ins, attrs, opset)
            conv.fn(ctx)
            for j, name in enumerate(node.output):
                if name and name not in self.values:
                    raise Unsupported(f"output #{j} ({name!r}) is not supported")
        except FluidError as e:
            self.problems.append(f"{label}: {e}")

    def _type_of(self, v: Value | None) -> onnx.TypeProto | None:
        """An input's ONNX tensor type (for context-dependent function bodies)."""
        if isinstance(v, Const):
            elem, shape = onnx_type_of(v.array.dtype), list(v.array.shape)
        elif isinstance(v, str):
            var = self.block.var(v)
            elem = onnx_type_of(np.dtype(dtypes.to_numpy(var.dtype)))
            shape = [d if d >= 0 else None for d in var.shape]
        else:
            return None
        return None if elem is None else onnx.helper.make_tensor_type_proto(elem, shape)

    def _expand(self, index: int, node: onnx.NodeProto, body: onnx.FunctionProto,
                label: str) -> None:
        """Import ``node`` as the nodes of the function body ONNX defines for its op:
        the body's inputs and outputs are the node's, its other values get names of
        their own, its attribute references take the node's attributes (or the
        schema's defaults)."""
        schema = onnx.defs.get_schema(node.op_type, self.opsets[""], "")
        given = {a.name: a for a in node.attribute}
        rename = dict(zip(body.input, node.input))
        rename.update({o: n for o, n in zip(body.output, node.output)})
        prefix = f"{node.output[0] if node.output else node.op_type}.fn{index}."

        def name(n: str) -> str:
            if not n:
                return n
            if n not in rename:
                rename[n] = fresh(self.taken, prefix + n)
            return rename[n]

        subs = []
        for k, sub in enumerate(body.node):
            new = onnx.NodeProto()
            new.CopyFrom(sub)
            new.name = f"{node.name or node.op_type}/{sub.name or sub.op_type + str(k)}"
            del new.input[:], new.output[:], new.attribute[:]
            new.input.extend(name(n) for n in sub.input)
            new.output.extend(name(n) for n in sub.output)
            for a in sub.attribute:
                if not a.ref_attr_name:
                    new.attribute.append(a)
                    continue
                src = given.get(a.ref_attr_name)
                if src is None and a.ref_attr_name in schema.attributes:
                    d = schema.attributes[a.ref_attr_name].default_value
                    src = d if d.name else None
                if src is not None:
                    b = onnx.AttributeProto()
                    b.CopyFrom(src)
                    b.name = a.name
                    new.attribute.append(b)
            subs.append(new)
        versions = {("" if o.domain in DEFAULT_DOMAINS else o.domain): int(o.version)
                    for o in body.opset_import}
        saved, before = self.opsets[""], len(self.problems)
        self.opsets[""] = versions.get("", saved)
        try:
            for sub in subs:
                self._node(index, sub)
        finally:
            self.opsets[""] = saved
        for k in range(before, len(self.problems)):
            self.problems[k] = f"{label}, expanded into its ONNX function body: " \
                               f"{self.problems[k]}"

    def _fold(self, node: onnx.NodeProto, ins: list[Value | None],
              attrs: dict[str, Any]) -> bool:
        """Evaluate a node at import time when its inputs allow; True when done."""
        if node.op_type in NON_DETERMINISTIC or node.op_type in KEEP_AS_OPS or any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute):
            return False
        present = [v for v in ins if v is not None]
        outs: list[Const | Sym] | None = None
        if all(isinstance(v, Const) for v in present):
            size = fold_bytes(node.op_type, attrs,
                              [v.array if isinstance(v, Const) else None for v in ins])
            if size is None:
                return False  # its size cannot be known before evaluating it
            if size > MAX_COMPUTED_BYTES:
                raise Unsupported(
                    f"its inputs are all constants, and evaluating it at import time would "
                    f"make about {size} bytes, more than the {MAX_COMPUTED_BYTES >> 20} MiB "
                    "fluid-hw computes at import time; check the values of its inputs")
            arrays = self._evaluate(node, ins)
            if arrays is None:
                return False
            outs = [Const(np.asarray(a), name) for a, name in zip(arrays, node.output)]
        elif node.op_type in ("Shape", "Size") and isinstance(ins[0], str):
            dims = self.sym_dims(node.input[0], ins[0])
            if node.op_type == "Size":
                if any(isinstance(d, str) for d in dims):
                    return False
                outs = [Const(np.array(np.prod([int(d) for d in dims], dtype=np.int64)),
                              node.output[0])]
            else:
                start, end = attrs.get("start", 0), attrs.get("end")
                outs = [simplify(Sym(tuple(dims[start:end])))]
        elif all(isinstance(v, (Const, Sym)) for v in present):
            folder = SYM_FOLDERS.get(node.op_type)
            if folder is None:
                return False
            outs = folder(attrs, ins, self.opsets[""])  # type: ignore[arg-type]
        if outs is None:
            return False
        for name, v in zip(node.output, outs):
            if name:
                if isinstance(v, Const):
                    v.hint = name
                self.values[name] = v
        return True

    def _evaluate(self, node: onnx.NodeProto, ins: list[Value | None]
                  ) -> list[np.ndarray] | None:
        from onnx.reference import ReferenceEvaluator

        feeds = {n: v.array for n, v in zip(node.input, ins) if n and isinstance(v, Const)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ev = ReferenceEvaluator(node, opsets=self.opsets)
                return list(ev.run(None, feeds))
        except Exception:  # an op the reference evaluator lacks, or bad constants:
            return None  # the node is converted (or reported) instead


def load(model: Any, constants: dict[str, Any] | None = None) -> OnnxModel:
    """Import an ONNX model (a path, bytes or an ``onnx.ModelProto``).

    ``constants`` gives values to graph inputs that are to be fixed at import time
    (e.g. the shape input of a Reshape that an exporter left as a graph input).
    Raises :class:`~fluid_hw.errors.FormatError` for files that are not valid ONNX
    models and :class:`~fluid_hw.errors.UnknownOpError` listing every node that
    cannot be converted.
    """
    return Importer(read_model(model), constants).run()
