"""Fluid's ``fluid.core`` names that scripts touch: ``Scope``, ``LoDTensor``,
the places and ``is_compiled_with_cuda``. fluid-hw has no compiled core; these
are its Python objects under Fluid's names."""

from __future__ import annotations

from .backends.cpu import CPUPlace, CUDAPlace
from .ir.lod import LoDTensor
from .ir.scope import Scope

__all__ = ["CPUPlace", "CUDAPlace", "LoDTensor", "Scope", "is_compiled_with_cuda"]


def is_compiled_with_cuda() -> bool:
    """True when a CUDA device is usable (CuPy installed and a GPU visible), so
    ``CUDAPlace(0)`` runs; Fluid's scripts test this before choosing a place."""
    from .backends.cuda.runtime import cuda_available

    return cuda_available()
