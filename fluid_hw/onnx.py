"""``fluid_hw.onnx``: import ONNX models and export inference programs to ONNX.

See :mod:`fluid_hw.frontend.onnx`; the ``onnx`` package is imported on first use.
"""

from .frontend.onnx import export, load, supported_ops

__all__ = ["export", "load", "supported_ops"]
