"""Errors of the cluster back end (all :class:`fluid_hw.errors.FluidError`)."""

from __future__ import annotations

from ...errors import FluidError


class ClusterError(FluidError):
    """A distributed job cannot go on: a peer is missing, a message is malformed,
    the job's layout does not match the programs.  The message names the rank,
    the variable or the setting, and the fix."""


class TranspileError(ClusterError):
    """A program cannot be split into trainer and parameter-server programs."""


class WireError(ClusterError):
    """A message on the wire is malformed or unexpected."""


class LaunchError(ClusterError):
    """``fluid-hw launch`` cannot start or finish the job."""
