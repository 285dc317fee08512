"""ONNX element types <-> numpy dtypes, for the types fluid-hw tensors can hold."""

from __future__ import annotations

import numpy as np

#: ONNX ``TensorProto.DataType`` value -> numpy dtype, for the types fluid-hw supports
ONNX_TO_NP: dict[int, np.dtype] = {
    1: np.dtype(np.float32),  # FLOAT
    2: np.dtype(np.uint8),  # UINT8
    3: np.dtype(np.int8),  # INT8
    5: np.dtype(np.int16),  # INT16
    6: np.dtype(np.int32),  # INT32
    7: np.dtype(np.int64),  # INT64
    9: np.dtype(np.bool_),  # BOOL
    10: np.dtype(np.float16),  # FLOAT16
    11: np.dtype(np.float64),  # DOUBLE
}
NP_TO_ONNX: dict[np.dtype, int] = {v: k for k, v in ONNX_TO_NP.items()}


def onnx_type_name(elem_type: int) -> str:
    """'FLOAT', 'BFLOAT16'... for messages."""
    from onnx import TensorProto

    try:
        return str(TensorProto.DataType.Name(elem_type))
    except ValueError:
        return f"type {elem_type}"


def np_dtype_of(elem_type: int) -> np.dtype | None:
    """The numpy dtype of an ONNX element type, or None when fluid-hw cannot hold it."""
    return ONNX_TO_NP.get(int(elem_type))


def onnx_type_of(dtype: np.dtype) -> int | None:
    """The ONNX element type of a numpy dtype, or None."""
    return NP_TO_ONNX.get(np.dtype(dtype))
