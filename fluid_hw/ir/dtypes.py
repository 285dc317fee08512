"""Element types: the protobuf enum, numpy dtypes and readable names."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FormatError
from . import framework_pb2 as pb

VarType = pb.VarType

_ENUM_TO_NP: dict[int, np.dtype] = {
    VarType.BOOL: np.dtype(np.bool_),
    VarType.INT8: np.dtype(np.int8),
    VarType.UINT8: np.dtype(np.uint8),
    VarType.INT16: np.dtype(np.int16),
    VarType.INT32: np.dtype(np.int32),
    VarType.INT64: np.dtype(np.int64),
    VarType.FP16: np.dtype(np.float16),
    VarType.FP32: np.dtype(np.float32),
    VarType.FP64: np.dtype(np.float64),
}
_NP_TO_ENUM: dict[np.dtype, int] = {v: k for k, v in _ENUM_TO_NP.items()}

#: element types a tensor may hold
TENSOR_DTYPES = frozenset(_ENUM_TO_NP)
FLOAT_DTYPES = frozenset({VarType.FP16, VarType.FP32, VarType.FP64})
INT_DTYPES = frozenset({VarType.INT8, VarType.UINT8, VarType.INT16, VarType.INT32, VarType.INT64})


def to_enum(dtype: Any) -> int:
    """Accept 'float32', np.float32, np.dtype('float32') or an enum value."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) in _ENUM_TO_NP:
            return int(dtype)
        raise FormatError(f"unknown dtype enum value {int(dtype)}; known: {sorted(_ENUM_TO_NP)}")
    try:
        npd = np.dtype(dtype)
    except TypeError as e:
        raise FormatError(f"unknown dtype {dtype!r}; use one of {sorted(names())}") from e
    if npd not in _NP_TO_ENUM:
        raise FormatError(f"unsupported dtype {npd}; use one of {sorted(names())}")
    return _NP_TO_ENUM[npd]


def to_numpy(dtype: Any) -> np.dtype:
    """The numpy dtype of an enum value (or anything :func:`to_enum` accepts)."""
    return _ENUM_TO_NP[to_enum(dtype)]


def name(dtype: Any) -> str:
    """'float32' for FP32 and so on."""
    return str(to_numpy(dtype))


def names() -> list[str]:
    return [str(d) for d in _ENUM_TO_NP.values()]


def is_float(dtype: Any) -> bool:
    return to_enum(dtype) in FLOAT_DTYPES


def is_integer(dtype: Any) -> bool:
    return to_enum(dtype) in INT_DTYPES
