"""The Python frontend: layers, initializers, io (and later backward, optimizers)."""

from . import debugger, initializer, io, layers
from .framework import *  # noqa: F403
from .layer_helper import LayerHelper
from .param_attr import ParamAttr

__all__ = ["LayerHelper", "ParamAttr", "debugger", "initializer", "io", "layers"]
