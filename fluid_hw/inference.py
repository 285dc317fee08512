"""Fluid 1.5's inference API (``fluid.core.PaddleTensor``, ``AnalysisConfig`` /
``NativeConfig``, ``create_paddle_predictor``) over a model saved with
``fluid.io.save_inference_model``, run by the CPU executor in a scope of its own.

::

    config = fluid.core.AnalysisConfig("model_dir")
    predictor = fluid.core.create_paddle_predictor(config)
    out, = predictor.run([fluid.core.PaddleTensor(images)])
    probs = out.as_ndarray()
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .backends.cpu import CPUPlace, Executor
from .frontend.io import load_inference_model
from .ir.lod import LoDTensor
from .ir.scope import Scope

__all__ = ["AnalysisConfig", "NativeConfig", "PaddlePredictor", "PaddleTensor",
           "create_paddle_predictor"]


class PaddleTensor:
    """A named input or output of a predictor: ``data`` (numpy), ``lod`` (offsets,
    Fluid's), ``name``; ``shape`` and ``dtype`` follow the data."""

    def __init__(self, data: Any = None, name: str = "",
                 lod: Sequence[Sequence[int]] | None = None, copy: bool = True) -> None:
        self.name = name
        self.data = None if data is None else np.array(data, copy=copy)
        self.lod = [list(map(int, lv)) for lv in (lod or [])]

    @property
    def shape(self) -> list[int]:
        return [] if self.data is None else list(self.data.shape)

    @property
    def dtype(self) -> np.dtype | None:
        return None if self.data is None else self.data.dtype

    def as_ndarray(self) -> np.ndarray:
        if self.data is None:
            raise ValueError(f"PaddleTensor {self.name!r} holds no data")
        return self.data

    def __repr__(self) -> str:
        return f"PaddleTensor(name={self.name!r}, shape={self.shape}, lod={self.lod})"


class NativeConfig:
    """Where the model is: ``model_dir`` (the folder ``save_inference_model`` wrote),
    or ``prog_file`` and ``param_file`` (its ``model_filename`` / ``params_filename``
    inside one folder). ``use_gpu`` is accepted; the predictor runs on the CPU."""

    def __init__(self, model_dir: str = "", prog_file: str = "",
                 param_file: str = "") -> None:
        self.model_dir, self.prog_file, self.param_file = model_dir, prog_file, param_file
        self.use_gpu = False

    def set_model(self, model_dir_or_prog: str, params_file: str = "") -> None:
        if params_file:
            self.prog_file, self.param_file = model_dir_or_prog, params_file
        else:
            self.model_dir = model_dir_or_prog

    def disable_gpu(self) -> None:
        self.use_gpu = False

    def _location(self) -> tuple[str, str | None, str | None]:
        if self.model_dir:
            return self.model_dir, None, None
        if not self.prog_file:
            raise ValueError("predictor config: give model_dir, or prog_file and param_file")
        folder = os.path.dirname(self.prog_file) or "."
        params = os.path.basename(self.param_file) if self.param_file else None
        return folder, os.path.basename(self.prog_file), params


class AnalysisConfig(NativeConfig):
    """``AnalysisConfig(model_dir)`` or ``AnalysisConfig(prog_file, params_file)``;
    the switches Fluid's analysis passes take are accepted and recorded."""

    def __init__(self, model_dir_or_prog: str = "", params_file: str = "") -> None:
        super().__init__()
        if model_dir_or_prog:
            self.set_model(model_dir_or_prog, params_file)
        self.ir_optim = True

    def switch_ir_optim(self, on: bool = True) -> None:
        self.ir_optim = bool(on)

    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0) -> None:
        self.use_gpu = True

    def switch_use_feed_fetch_ops(self, on: bool = True) -> None:
        pass

    def switch_specify_input_names(self, on: bool = True) -> None:
        pass


class PaddlePredictor:
    """Runs the loaded inference program: inputs by position (or by name when
    every input is named), outputs in the model's fetch order."""

    def __init__(self, config: NativeConfig) -> None:
        folder, model_file, params_file = config._location()
        self._exe = Executor(CPUPlace())
        self._scope = Scope()
        self._program, self._feeds, self._fetches = load_inference_model(
            folder, self._exe, model_file, params_file, scope=self._scope)

    def get_input_names(self) -> list[str]:
        return list(self._feeds)

    def get_output_names(self) -> list[str]:
        return [v.name for v in self._fetches]

    def run(self, inputs: Sequence[PaddleTensor]) -> list[PaddleTensor]:
        if len(inputs) != len(self._feeds):
            raise ValueError(f"predictor.run: got {len(inputs)} input(s), the model reads "
                             f"{len(self._feeds)}: {self._feeds}")
        named = all(t.name for t in inputs)
        names = [t.name for t in inputs] if named else self._feeds
        unknown = sorted(set(names) - set(self._feeds))
        if unknown:
            raise ValueError(f"predictor.run: inputs {unknown} are not the model's; it reads "
                             f"{self._feeds}")
        feed = {n: LoDTensor(t.as_ndarray(), t.lod) if t.lod else t.as_ndarray()
                for n, t in zip(names, inputs)}
        outs = self._exe.run(self._program, feed=feed, fetch_list=self._fetches,
                             return_numpy=False, scope=self._scope)
        return [PaddleTensor(np.asarray(o), name=v.name, lod=o.lod(), copy=False)
                for o, v in zip(outs, self._fetches)]


def create_paddle_predictor(config: NativeConfig) -> PaddlePredictor:
    """A predictor for the model ``config`` names."""
    return PaddlePredictor(config)
