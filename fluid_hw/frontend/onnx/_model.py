"""Reading an ONNX model safely: every way a file can be wrong becomes a FormatError.

Truncated or corrupted bytes, a missing external-data file, an opset newer
than the installed ``onnx`` package knows, a graph the ONNX checker rejects:
each gives :class:`fluid_hw.errors.FormatError` naming the file and the fix,
never a protobuf traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import onnx.checker
import onnx.defs
import onnx.external_data_helper
import onnx.shape_inference
import onnx.version_converter
from google.protobuf.message import DecodeError

from ...errors import FormatError

#: the oldest default-domain opset imported as it is (older models are converted)
MIN_OPSET = 11
#: default-domain opset older models are converted to
CONVERT_TO_OPSET = 13
DEFAULT_DOMAINS = ("", "ai.onnx")


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
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise FormatError(f"{path}: is a folder, expected an .onnx file") from None
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None


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
        target = (root / loc).resolve()
        if not loc or root not in (target, *target.parents):
            raise FormatError(f"{source}: tensor {t.name!r} points to external data "
                              f"{loc!r} outside the model's folder {root}; refusing to read it")
        if not target.is_file():
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
    if opset > max_opset():
        raise FormatError(f"{source}: opset {opset} is newer than supported (opsets "
                          f"{MIN_OPSET}..{max_opset()}); re-export the model with opset "
                          f"<= {max_opset()} or upgrade onnx")
    _check_external_data(proto, base_dir, source)
    try:
        onnx.checker.check_model(proto)
    except (onnx.checker.ValidationError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FormatError(f"{source}: the ONNX checker rejects the model: {first}. The file "
                          "is truncated or corrupted, or its exporter wrote an invalid "
                          "graph") from None
    original = opset
    if opset < MIN_OPSET:
        try:
            proto = onnx.version_converter.convert_version(proto, CONVERT_TO_OPSET)
        except Exception as e:  # the converter raises bare RuntimeErrors from C++
            raise FormatError(f"{source}: opset {opset} is older than {MIN_OPSET} and the "
                              f"ONNX version converter cannot upgrade it ({e}); re-export "
                              f"the model with opset >= {MIN_OPSET}") from None
        opset = default_opset(proto)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as e:  # InferenceError, or RuntimeError from C++
        raise FormatError(f"{source}: ONNX shape inference fails ({e}); the model is "
                          "inconsistent") from None
    return ReadModel(proto, inferred, source, opset, original)
