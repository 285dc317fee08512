"""The child process that runs onnx's C++ checker, version converter and shape inference.

Started by :mod:`._isolated` as ``python _onnx_worker.py``; it imports only ``onnx`` and
the standard library.  It reads requests from stdin and answers on stdout, one at a
time, until stdin closes.  A request is ``<opset:u32><memory:u64><size:u64>`` and the
serialized model; an answer is ``<stage:u8><size:u64>`` and a payload: for stage 0
(passed) ``<converted size:u64>``, the converted model (empty when the opset needed
no conversion) and a model holding only the inferred graph's value infos; for the
other stages (1 checker, 2 version converter, 3 shape inference, 4 out of memory,
5 another error) a UTF-8 message.
"""

from __future__ import annotations

import os
import struct
import sys
from typing import BinaryIO

REQUEST = struct.Struct("<IQQ")
ANSWER = struct.Struct("<BQ")
SIZE = struct.Struct("<Q")
OK, CHECKER, CONVERTER, INFERENCE, MEMORY, OTHER = range(6)
#: oldest opset checked as it is / opset older models are converted to (as in _model.py)
MIN_OPSET, CONVERT_TO_OPSET = 11, 13


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _limit_memory(extra: int) -> None:
    """At most ``extra`` bytes of address space beyond what is mapped now (Linux)."""
    try:
        import resource

        with open("/proc/self/statm", "rb") as f:
            now = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError, IndexError):
        return
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    want = now + extra
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_AS, (want, hard))


def check(data: bytes, opset: int) -> tuple[int, bytes]:
    """(stage, payload) for one serialized model."""
    import onnx
    import onnx.checker
    import onnx.shape_inference
    import onnx.version_converter

    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    try:
        onnx.checker.check_model(proto)
    except (onnx.checker.ValidationError, ValueError) as e:
        return CHECKER, _first_line(e).encode()
    converted = b""
    if opset < MIN_OPSET:
        try:
            proto = onnx.version_converter.convert_version(proto, CONVERT_TO_OPSET)
        except Exception as e:  # the converter raises bare RuntimeErrors from C++
            return CONVERTER, _first_line(e).encode()
        converted = proto.SerializeToString()
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as e:  # InferenceError, or RuntimeError from C++
        return INFERENCE, _first_line(e).encode()
    info = onnx.ModelProto()
    info.graph.input.extend(inferred.graph.input)
    info.graph.value_info.extend(inferred.graph.value_info)
    info.graph.output.extend(inferred.graph.output)
    return OK, SIZE.pack(len(converted)) + converted + info.SerializeToString()


def _read(f: BinaryIO, n: int) -> bytes | None:
    data = f.read(n)
    return data if len(data) == n else None


def main() -> None:
    # answers go to a private copy of stdout; whatever C++ or Python prints on fd 1
    # lands on stderr instead of in the middle of an answer
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    while True:
        head = _read(stdin, REQUEST.size)
        if head is None:
            return
        opset, memory, size = REQUEST.unpack(head)
        data = _read(stdin, size)
        if data is None:
            return
        try:
            _limit_memory(memory)
            stage, payload = check(data, opset)
        except MemoryError:
            stage, payload = MEMORY, b"out of memory"
        except Exception as e:
            stage, payload = OTHER, f"{type(e).__name__}: {_first_line(e)}".encode()
        del data
        stdout.write(ANSWER.pack(stage, len(payload)) + payload)
        stdout.flush()


if __name__ == "__main__":
    main()
