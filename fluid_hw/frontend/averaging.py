"""Fluid 1.5's parameter averaging (issue 20): ``ModelAverage`` (the mean of each
parameter over a sliding window of updates) and ``ExponentialMovingAverage`` (a
bias-corrected EMA), each swapped into the parameters by ``apply`` (a context manager)
and swapped back by ``restore``.  Exported by ``fluid.optimizer``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import OpAttrError
from ..ir import unique_name
from ..ir.default_programs import default_main_program, default_startup_program
from ..ir.program import Parameter, Variable
from ..ir.scope import global_scope
from .initializer import Constant

__all__ = ["ExponentialMovingAverage", "ModelAverage"]


def _persistable(name: str, shape: list[int], dtype: str, value: float) -> Variable:
    main, start = default_main_program(), default_startup_program()
    v = main.global_block().create_var(name=name, shape=shape, dtype=dtype, persistable=True,
                                       stop_gradient=True)
    sv = start.global_block().create_var(name=name, shape=shape, dtype=dtype, persistable=True)
    Constant(value)(sv, start.global_block())
    return v


def _params() -> list[Parameter]:
    return [p for p in default_main_program().global_block().all_parameters() if p.trainable]


def _holder(name: str) -> Any:
    """The scope (the global one or an ancestor) that holds ``name``'s value."""
    s: Any = global_scope()
    while s is not None and name not in s.vars:
        s = s.parent
    return s if s is not None else global_scope()


def _value(name: str) -> np.ndarray:
    v = global_scope().find_value(name)
    if v is None:
        raise OpAttrError(f"variable {name!r} has no value: run the startup program and some "
                          "training steps before apply()")
    return np.asarray(getattr(v, "data", v))


class _Swapper:
    """apply / restore over the global scope: the averaged values in, the trained ones
    kept aside and put back."""

    def __init__(self) -> None:
        self._backup: dict[str, np.ndarray] = {}

    def _averaged(self, param: Parameter) -> np.ndarray:
        raise NotImplementedError

    @contextmanager
    def apply(self, executor: Any = None, need_restore: bool = True) -> Iterator[None]:
        new = {p.name: self._averaged(p) for p in self._targets}
        self._backup = {n: _value(n).copy() for n in new}
        for n, v in new.items():
            _holder(n).vars[n] = v.astype(self._backup[n].dtype)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor: Any = None) -> None:
        for n, v in self._backup.items():
            _holder(n).vars[n] = v
        self._backup = {}

    _targets: list[Parameter]


class ExponentialMovingAverage(_Swapper):
    """``ema = decay * ema + (1 - decay) * param`` after each step (``update()`` appends
    the ops to the main program, after ``minimize``); with ``thres_steps`` (a step
    counter variable) the decay is ``min(decay, (1 + t) / (10 + t))``.  ``apply`` puts
    ``ema / (1 - prod(decay))`` (bias-corrected) into the parameters."""

    def __init__(self, decay: float = 0.999, thres_steps: Variable | None = None,
                 name: str | None = None) -> None:
        super().__init__()
        if not 0.0 <= decay <= 1.0:
            raise OpAttrError(f"ExponentialMovingAverage: decay must be in [0, 1], got {decay}")
        self._decay = float(decay)
        self._thres_steps = thres_steps
        self._name = name or unique_name.generate("ema")
        self._targets = []
        self._ema: dict[str, Variable] = {}
        self._decay_pow: Variable | None = None

    def update(self) -> None:
        from . import layers

        self._targets = _params()
        self._decay_pow = _persistable(f"{self._name}.decay_pow", [1], "float32", 1.0)
        decay = layers.fill_constant([1], "float32", self._decay)
        if self._thres_steps is not None:
            t = layers.cast(self._thres_steps, "float32")
            ratio = layers.elementwise_div(layers.scale(t, 1.0, 1.0),
                                           layers.scale(t, 1.0, 10.0))
            decay = layers.elementwise_min(decay, ratio)
        decay.stop_gradient = True
        one_minus = layers.scale(decay, -1.0, 1.0)
        for p in self._targets:
            ema = _persistable(f"{self._name}.{p.name}", list(p.shape), p.dtype_name, 0.0)
            self._ema[p.name] = ema
            d, om = decay, one_minus
            if p.dtype_name != "float32":
                d, om = layers.cast(decay, p.dtype_name), layers.cast(one_minus, p.dtype_name)
            new = layers.elementwise_add(layers.elementwise_mul(ema, d),
                                         layers.elementwise_mul(p, om))
            layers.assign(new, output=ema)
        layers.assign(layers.elementwise_mul(self._decay_pow, decay), output=self._decay_pow)

    def _averaged(self, param: Parameter) -> np.ndarray:
        if self._decay_pow is None:
            raise OpAttrError("ExponentialMovingAverage: call update() (after minimize) and "
                              "train before apply()")
        pow_ = float(_value(self._decay_pow.name).reshape(-1)[0])
        ema = _value(self._ema[param.name].name)
        return ema / (1.0 - pow_) if pow_ < 1.0 else ema


class ModelAverage(_Swapper):
    """The mean of each parameter over its recent updates: the window grows with the
    number of updates (``average_window_rate`` of them) between ``min_average_window``
    and ``max_average_window``.  Build it after ``minimize``: it appends one
    ``average_accumulates`` op per parameter to the main program."""

    def __init__(self, average_window_rate: float, min_average_window: int = 10000,
                 max_average_window: int = 10000, regularization: Any = None,
                 name: str | None = None) -> None:
        super().__init__()
        if not average_window_rate > 0:
            raise OpAttrError(f"ModelAverage: average_window_rate must be > 0, got "
                              f"{average_window_rate}")
        if not 1 <= min_average_window <= max_average_window:
            raise OpAttrError(f"ModelAverage: need 1 <= min_average_window "
                              f"({min_average_window}) <= max_average_window "
                              f"({max_average_window})")
        self._name = name or unique_name.generate("model_average")
        self._targets = _params()
        self._acc: dict[str, dict[str, Variable]] = {}
        block = default_main_program().global_block()
        for p in self._targets:
            acc = {f"sum_{i}": _persistable(f"{p.name}.{self._name}.sum_{i}", list(p.shape),
                                            p.dtype_name, 0.0) for i in (1, 2, 3)}
            for c in ("num_accumulates", "old_num_accumulates", "num_updates"):
                acc[c] = _persistable(f"{p.name}.{self._name}.{c}", [1], "int64", 0.0)
            self._acc[p.name] = acc
            block.append_op("average_accumulates",
                            {"param": p, **{f"in_{k}": v for k, v in acc.items()}},
                            {f"out_{k}": v for k, v in acc.items()},
                            {"average_window": float(average_window_rate),
                             "min_average_window": int(min_average_window),
                             "max_average_window": int(max_average_window),
                             "op_role": "optimize"})

    def _averaged(self, param: Parameter) -> np.ndarray:
        acc = self._acc[param.name]
        total = sum(_value(acc[f"sum_{i}"].name).astype(np.float64) for i in (1, 2, 3))
        n = int(_value(acc["num_accumulates"].name)[0]) + \
            int(_value(acc["old_num_accumulates"].name)[0])
        if n == 0:
            raise OpAttrError("ModelAverage: nothing accumulated yet; train some steps "
                              "before apply()")
        return np.asarray(total / n)
