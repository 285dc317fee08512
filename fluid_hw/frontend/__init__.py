"""The Python frontend: layers, initializers, io (and later backward, optimizers)."""

from . import backward, clip, debugger, initializer, io, layers, models, optimizer, regularizer
from .framework import *  # noqa: F403
from .layer_helper import LayerHelper
from .param_attr import ParamAttr

__all__ = ["LayerHelper", "ParamAttr", "backward", "clip", "debugger", "initializer", "io",
           "layers", "models", "optimizer", "regularizer"]
