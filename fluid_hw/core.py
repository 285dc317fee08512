"""Fluid's ``fluid.core`` names that scripts touch: ``Scope``, ``LoDTensor``,
the places, ``is_compiled_with_cuda`` and the inference API (``PaddleTensor``,
``AnalysisConfig``, ``create_paddle_predictor``: :mod:`fluid_hw.inference`).
fluid-hw has no compiled core; these are its Python objects under Fluid's names."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .backends.cpu import CPUPlace, CUDAPlace
from .errors import EOFException
from .inference import (
    AnalysisConfig,
    NativeConfig,
    PaddlePredictor,
    PaddleTensor,
    create_paddle_predictor,
)
from .ir.lod import LoDTensor
from .ir.scope import Scope

__all__ = ["AnalysisConfig", "CPUPlace", "CUDAPlace", "EOFException", "LoDTensor", "NativeConfig",
           "PaddlePredictor", "PaddleTensor", "Scope", "cpu_places", "create_paddle_predictor",
           "cuda_places", "is_compiled_with_cuda"]


def cpu_places(device_count: int | None = None) -> list[CPUPlace]:
    """``device_count`` CPU places (default: the ``CPU_NUM`` environment variable,
    else the number of CPUs), as Fluid's ``fluid.cpu_places``."""
    if device_count is None:
        env = os.environ.get("CPU_NUM")
        try:
            device_count = int(env) if env else (os.cpu_count() or 1)
        except ValueError:
            raise ValueError(f"cpu_places: CPU_NUM={env!r} is not an integer") from None
    if device_count < 1:
        raise ValueError(f"cpu_places: device_count must be >= 1, got {device_count}")
    return [CPUPlace() for _ in range(device_count)]


def cuda_places(device_ids: Sequence[int] | None = None) -> list[CUDAPlace]:
    """CUDA places for ``device_ids`` (default: every visible GPU), as Fluid's
    ``fluid.cuda_places``; empty without a GPU."""
    if device_ids is None:
        from .backends.cuda.runtime import device_count

        device_ids = range(device_count())
    return [CUDAPlace(int(i)) for i in device_ids]


def is_compiled_with_cuda() -> bool:
    """True when a CUDA device is usable (CuPy installed and a GPU visible), so
    ``CUDAPlace(0)`` runs; Fluid's scripts test this before choosing a place."""
    from .backends.cuda.runtime import cuda_available

    return cuda_available()
