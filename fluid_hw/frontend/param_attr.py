"""ParamAttr: how a layer creates its parameter (name, initializer, training knobs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ParamAttr:
    """Fluid's ``ParamAttr``.  ``bias_attr=False`` on a layer means "no bias"."""

    name: str | None = None
    initializer: Any = None
    learning_rate: float = 1.0
    regularizer: Any = None
    trainable: bool = True
    gradient_clip: Any = None
    do_model_average: bool = False

    @staticmethod
    def to_attr(arg: Any) -> ParamAttr | bool:
        """Normalise what users pass as ``param_attr``/``bias_attr``."""
        if arg is None:
            return ParamAttr()
        if arg is False:
            return False
        if arg is True:
            return ParamAttr()
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        from .initializer import Initializer

        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        raise TypeError(f"param_attr/bias_attr must be a ParamAttr, a name, an initializer, "
                        f"None or False, got {arg!r}")
