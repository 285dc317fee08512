"""Errors of the cluster back end, defined with every other error in
:mod:`fluid_hw.errors` and re-exported here, where the back end imports them."""

from __future__ import annotations

from ...errors import ClusterError, LaunchError, MasterError, TranspileError, WireError

__all__ = ["ClusterError", "TranspileError", "WireError", "LaunchError", "MasterError"]
