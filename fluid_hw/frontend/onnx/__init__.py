"""ONNX import and export.

    m = fluid_hw.onnx.load("model.onnx")          # Program + parameters in a scope
    exe.run(m.program, feed={m.feed_names[0]: x}, fetch_list=m.fetch_names, scope=m.scope)
    fluid_hw.onnx.export(program, "model.onnx", feed_names=["x"], fetch_names=[y])

The ``onnx`` package (``pip install fluid-hw[onnx]``) is imported only when one of
these functions is called, so the core install does not need it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import FluidError
from ...ir.ops import extra as _extra_ops  # noqa: F401  (clip, pad...: not yet in ops/__init__)

if TYPE_CHECKING:
    import onnx

    from ...ir.program import Program, Variable
    from ...ir.scope import Scope
    from .importer import OnnxModel

__all__ = ["export", "load", "supported_ops"]


def _require_onnx() -> None:
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise FluidError("ONNX support needs the onnx package: pip install "
                         "'fluid-hw[onnx]'") from None


def load(model: str | os.PathLike[str] | bytes | onnx.ModelProto,
         constants: dict[str, Any] | None = None) -> OnnxModel:
    """Import an ONNX model (path, bytes or ``onnx.ModelProto``) as an inference program.

    Returns an :class:`~.importer.OnnxModel`: ``program``, ``scope`` (the parameters),
    ``feed_names``, ``fetch_names``; ``.save(dirname)`` writes an inference-model folder.
    ``constants`` fixes graph inputs to values at import time ({name: array}), for inputs
    fluid-hw needs as constants (a Reshape's shape, a Pad's pads...).
    Raises :class:`~fluid_hw.errors.FormatError` for malformed files (declared shapes
    beyond the limits in docs/onnx.md included) and
    :class:`~fluid_hw.errors.UnknownOpError` listing every node that cannot be converted.
    """
    _require_onnx()
    from .importer import load as _load

    return _load(model, constants)


def export(program: Program, path: str | os.PathLike[str] | None = None, *,
           feed_names: Sequence[str] | None = None,
           fetch_names: Sequence[str | Variable] | None = None,
           scope: Scope | None = None, opset: int | None = None) -> onnx.ModelProto:
    """Write an inference program as an ONNX model (returned; saved to ``path`` if given).

    Feeds and fetches default to the program's feed/fetch ops (a loaded inference
    model); without feed ops the feeds are the data variables the fetches depend on.
    Parameter values come from ``scope`` (default: the global scope).  ``opset``
    unset: opset 17, or the lowest newer one that allows every node written; the
    model passes ``onnx.checker.check_model(model, full_check=True)``.
    Raises :class:`~fluid_hw.errors.UnknownOpError` listing every op without an ONNX
    mapping (or not allowed at a fixed ``opset``, with the opset that allows it).
    """
    _require_onnx()
    from .exporter import export as _export

    return _export(program, path, feed_names=feed_names, fetch_names=fetch_names,
                   scope=scope, opset=opset)


def supported_ops() -> dict[str, Any]:
    """``{"import": {onnx_op: fluid ops}, "export": {fluid_op: onnx ops}}``."""
    _require_onnx()
    from ._export_ops import EXPORTERS
    from ._import_ops import IMPORTERS

    return {"import": {k: v.fluid for k, v in IMPORTERS.items()},
            "export": {k: v.onnx for k, v in EXPORTERS.items()}}
