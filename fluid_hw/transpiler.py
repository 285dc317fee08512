"""Fluid's ``fluid.transpiler``: :class:`DistributeTranspiler` and its config.

The implementation is the cluster back end's (:mod:`fluid_hw.backends.cluster`);
see docs/cluster.md.
"""

from .backends.cluster import DistributeTranspiler, DistributeTranspilerConfig
from .inference_transpiler import InferenceTranspiler
from .memory_optimization import memory_optimize, release_memory

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "InferenceTranspiler",
           "memory_optimize", "release_memory"]
