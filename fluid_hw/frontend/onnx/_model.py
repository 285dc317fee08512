"""Reading an ONNX model safely: every way a file can be wrong becomes a FormatError.

Truncated or corrupted bytes, a missing external-data file, an opset newer
than the installed ``onnx`` package knows, a graph the ONNX checker rejects,
declared dims outside the limits below: each gives
:class:`fluid_hw.errors.FormatError` naming the file, the tensor and the fix,
never a protobuf traceback.  Declared dims are checked in Python before any of
onnx's C++ code sees the model, and the C++ checker, version converter and
shape inference run in a worker process (:mod:`._isolated`), so a model that
makes them abort cannot take the caller down.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import onnx.checker
import onnx.defs
import onnx.external_data_helper
from google.protobuf.message import DecodeError, EncodeError

from ...errors import FormatError
from ...fileio import read_file
from ...ir.verifier import MAX_TENSOR_BYTES
from . import _onnx_worker as worker
from ._dtypes import np_dtype_of
from ._isolated import IsolatedFailure, check_in_worker

#: the oldest default-domain opset imported as it is (older models are converted)
MIN_OPSET = worker.MIN_OPSET
#: default-domain opset older models are converted to
CONVERT_TO_OPSET = worker.CONVERT_TO_OPSET
DEFAULT_DOMAINS = ("", "ai.onnx")
#: the largest dim a model may declare (graph inputs/outputs, value_info, tensors)
MAX_DIM = 2**31 - 1
#: the largest rank a model may declare
MAX_RANK = 32


def max_opset() -> int:
    """The newest default-domain opset the installed ``onnx`` package knows."""
    return int(onnx.defs.onnx_opset_version())


@dataclass
class ReadModel:
    """A checked model, its shape-inferred twin and where it came from."""

    model: onnx.ModelProto
    inferred: onnx.ModelProto
    source: str
    opset: int  # default-domain opset (after any conversion)
    original_opset: int


def _read_bytes(path: Path) -> bytes:
    """The model file: a regular file (a FIFO or device is refused before it is opened
    for reading) of at most 2 GiB (fileio.read_file, kind ``onnx``)."""
    try:
        return read_file(path, kind="onnx")
    except FormatError as e:
        raise FormatError(f"{e} (an ONNX model file was expected)") from None


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    if not data:
        raise FormatError(f"{source}: empty file, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise FormatError(f"{source}: not a valid ONNX model (protobuf: {e}); the file is "
                          "truncated or corrupted: export or download it again") from None
    if not model.HasField("graph"):
        raise FormatError(f"{source}: not an ONNX model (no graph); the file is truncated, "
                          "corrupted or of another format")
    return model


def _all_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor attributes of ``graph`` and its subgraphs."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from _all_tensors(a.g)
            for g in a.graphs:
                yield from _all_tensors(g)


def _check_external_data(model: onnx.ModelProto, base_dir: Path | None, source: str) -> None:
    """Load external tensor data, naming the tensor and the file when it is missing."""
    tensors = [t for t in _all_tensors(model.graph)
               if onnx.external_data_helper.uses_external_data(t)]
    if not tensors:
        return
    if base_dir is None:
        names = ", ".join(t.name for t in tensors[:5])
        raise FormatError(f"{source}: tensors {names} keep their data in external files, "
                          "which a ModelProto cannot locate; pass the path of the .onnx file "
                          "instead (its external data is read from the same folder)")
    root = base_dir.resolve()
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        if "\0" in loc:
            raise FormatError(f"{source}: tensor {t.name!r} points to external data "
                              f"{loc!r}, a path with a NUL byte, which no file has; the "
                              "model is corrupted: export it again")
        try:
            target = (root / loc).resolve()
            inside = bool(loc) and root in (target, *target.parents)
            found = inside and target.is_file()
        except (OSError, ValueError, RuntimeError) as e:  # a symlink loop, a long name
            raise FormatError(f"{source}: tensor {t.name!r} points to external data "
                              f"{loc[:100]!r}, which cannot be resolved "
                              f"({getattr(e, 'strerror', None) or e})") from None
        if not inside:
            raise FormatError(f"{source}: tensor {t.name!r} points to external data "
                              f"{loc!r} outside the model's folder {root}; refusing to read it")
        if not found:
            raise FormatError(f"{source}: tensor {t.name!r} keeps its data in {loc!r}, which "
                              f"is missing from {root}; copy that file next to the model")
    try:
        onnx.external_data_helper.load_external_data_for_model(model, str(root))
    except (OSError, ValueError, onnx.checker.ValidationError) as e:
        raise FormatError(f"{source}: cannot read the external tensor data ({e}); the data "
                          "files are truncated or do not belong to this model") from None


def default_opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    return max(versions) if versions else 1


def read_model(model: Any) -> ReadModel:
    """A path, bytes or an ``onnx.ModelProto`` -> a checked :class:`ReadModel`."""
    base_dir: Path | None = None
    if isinstance(model, onnx.ModelProto):
        source = f"ONNX model {model.graph.name!r}" if model.graph.name else "ONNX model"
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
    elif isinstance(model, (bytes, bytearray, memoryview)):
        source = "<ONNX bytes>"
        proto = _parse(bytes(model), source)
    elif isinstance(model, (str, os.PathLike)):
        path = Path(model)
        source = str(path)
        proto = _parse(_read_bytes(path), source)
        base_dir = path.parent
    else:
        raise FormatError(f"cannot read an ONNX model from a {type(model).__name__}; pass a "
                          "path, bytes or an onnx.ModelProto")
    if proto.ir_version > onnx.IR_VERSION:
        raise FormatError(f"{source}: IR version {proto.ir_version} is newer than the installed "
                          f"onnx package supports ({onnx.IR_VERSION}); upgrade onnx or "
                          "re-export the model for an older IR version")
    opset = default_opset(proto)
    if not any(o.domain in DEFAULT_DOMAINS for o in proto.opset_import):
        # only other domains (ai.onnx.ml, training): nothing to convert; the importer
        # names each node's domain
        opset = max_opset()
    if opset > max_opset():
        raise FormatError(f"{source}: opset {opset} is newer than supported (opsets "
                          f"{MIN_OPSET}..{max_opset()}); re-export the model with opset "
                          f"<= {max_opset()} or upgrade onnx")
    _check_declarations(proto.graph, source)
    _check_external_data(proto, base_dir, source)
    converted, inferred = _check_and_infer(proto, source, opset)
    original = opset
    if converted is not None:
        proto = converted
        opset = default_opset(proto)
    return ReadModel(proto, inferred, source, opset, original)


# -- declared dims ----------------------------------------------------------------------

def _check_dims(dims: list[int | None], itemsize: int, what: str, source: str) -> None:
    """Declared dims (None: a symbolic or unknown dim) within MAX_RANK / MAX_DIM, and the
    tensor within the verifier's size limit."""
    if len(dims) > MAX_RANK:
        raise FormatError(f"{source}: {what} declares rank {len(dims)}; fluid-hw imports "
                          f"tensors of rank <= {MAX_RANK}")
    for k, d in enumerate(dims):
        if d is not None and not 0 <= d <= MAX_DIM:
            raise FormatError(
                f"{source}: {what} declares dim {d} (axis {k} of "
                f"{['?' if x is None else x for x in dims]}); a dim must be 0..{MAX_DIM}. "
                "Fix the exporter's shapes (a dim known only at run time is written as a "
                "dim_param name such as 'N', not as a negative number)")
    known = [d for d in dims if d is not None]
    nbytes = math.prod(known) * itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise FormatError(f"{source}: {what} declares shape {dims}, {nbytes} bytes, beyond "
                          f"the {MAX_TENSOR_BYTES >> 30} GiB fluid-hw allows for one tensor")


def _itemsize(elem_type: int) -> int:
    dt = np_dtype_of(elem_type)
    return dt.itemsize if dt is not None else 1


def _check_type(tp: onnx.TypeProto, what: str, source: str) -> None:
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, kind)
        if tt.HasField("shape"):
            dims = [int(d.dim_value) if d.HasField("dim_value") else None
                    for d in tt.shape.dim]
            _check_dims(dims, _itemsize(tt.elem_type), what, source)
    elif kind == "sequence_type":
        _check_type(tp.sequence_type.elem_type, f"{what} (sequence element)", source)
    elif kind == "optional_type":
        _check_type(tp.optional_type.elem_type, f"{what} (optional element)", source)
    elif kind == "map_type":
        _check_type(tp.map_type.value_type, f"{what} (map value)", source)


def _check_tensor(t: onnx.TensorProto, what: str, source: str) -> None:
    _check_dims([int(d) for d in t.dims], _itemsize(t.data_type), f"{what} {t.name!r}",
                source)


def _check_declarations(graph: onnx.GraphProto, source: str) -> None:
    """Every dim the graph (and its subgraphs) declares, before onnx's C++ code reads
    them: negative or huge dims have made its shape inference abort the process."""
    for kind, infos in (("graph input", graph.input), ("graph output", graph.output),
                        ("value_info", graph.value_info)):
        for vi in infos:
            _check_type(vi.type, f"{kind} {vi.name!r}", source)
    for t in graph.initializer:
        _check_tensor(t, "initializer", source)
    for sp in graph.sparse_initializer:
        _check_dims([int(d) for d in sp.dims], _itemsize(sp.values.data_type),
                    f"sparse initializer {sp.values.name!r}", source)
    for node in graph.node:
        for a in node.attribute:
            what = f"attribute {a.name!r} of {node.op_type} node {node.name!r}"
            if a.HasField("t"):
                _check_tensor(a.t, f"tensor of {what}", source)
            for t in a.tensors:
                _check_tensor(t, f"tensor of {what}", source)
            if a.HasField("tp"):
                _check_type(a.tp, what, source)
            if a.HasField("g"):
                _check_declarations(a.g, source)
            for g in a.graphs:
                _check_declarations(g, source)


# -- onnx's checker, version converter and shape inference, isolated -----------------------

def _check_and_infer(proto: onnx.ModelProto, source: str, opset: int
                     ) -> tuple[onnx.ModelProto | None, onnx.ModelProto]:
    """(the model converted to CONVERT_TO_OPSET or None, its shape-inferred value infos),
    from onnx's checker, version converter and shape inference run in a worker process."""
    try:
        data = proto.SerializeToString()
    except (ValueError, EncodeError):  # beyond protobuf's 2 GiB
        raise FormatError(f"{source}: the model with its external data is larger than "
                          "2 GiB, protobuf's limit for one message; fluid-hw imports models "
                          "up to that size") from None
    try:
        answer = check_in_worker(data, opset)
    except IsolatedFailure as e:
        raise FormatError(f"{source}: onnx's checker or shape inference (run in a worker "
                          f"process) {e.reason}. The model is malformed (check the shapes "
                          "and attributes it declares, e.g. a Pad that makes a dim "
                          "negative) or too large; fix or re-export it") from None
    if answer.stage == worker.CHECKER:
        raise FormatError(f"{source}: the ONNX checker rejects the model: {answer.message}. "
                          "The file is truncated or corrupted, or its exporter wrote an "
                          "invalid graph")
    if answer.stage == worker.CONVERTER:
        others = sorted({o.domain for o in proto.opset_import
                         if o.domain not in DEFAULT_DOMAINS})
        also = (f"; the model also imports domain(s) {others}, whose ops fluid-hw does not "
                "import (only the default ONNX domain)" if others else "")
        raise FormatError(f"{source}: default-domain (ai.onnx) opset {opset} is older than "
                          f"{MIN_OPSET} and the ONNX version converter cannot upgrade it "
                          f"({answer.message}); re-export the model with opset >= "
                          f"{MIN_OPSET}{also}")
    if answer.stage != worker.OK:  # shape inference failed, or something else
        raise FormatError(f"{source}: ONNX shape inference fails ({answer.message}); the "
                          "model is inconsistent")
    (size,) = worker.SIZE.unpack_from(answer.payload)
    rest = answer.payload[worker.SIZE.size:]
    converted = None
    if size:
        converted = onnx.ModelProto()
        converted.ParseFromString(rest[:size])
    inferred = onnx.ModelProto()
    inferred.ParseFromString(rest[size:])
    return converted, inferred
