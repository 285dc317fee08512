"""Fluid-style layer functions: each appends ops to the current program."""

from . import io, math_ops, nn, tensor
from .io import *  # noqa: F403
from .math_ops import *  # noqa: F403
from .nn import *  # noqa: F403
from .tensor import *  # noqa: F403

__all__ = [*io.__all__, *nn.__all__, *math_ops.__all__, *tensor.__all__]
