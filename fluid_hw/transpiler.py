"""Fluid's ``fluid.transpiler``: :class:`DistributeTranspiler` and its config.

The implementation is the cluster back end's (:mod:`fluid_hw.backends.cluster`);
see docs/cluster.md.
"""

from .backends.cluster import DistributeTranspiler, DistributeTranspilerConfig

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig"]
