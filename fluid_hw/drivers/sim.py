"""The simulation transport: the build's ``accelerator.v`` in Verilator, driven by the
C++ batch harness of :mod:`fluid_hw.sim.harness`.

The harness is built from the build folder's files alone (``accelerator.v`` and
``design.json``) by :func:`fluid_hw.sim.build.build_harness_verilog`, under the same
cache key as any other build of the same Verilog, so a design already built by the
compiler or the tests is reused.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fluid_hw.sim import BuildError
from fluid_hw.sim.build import HarnessBuild, build_harness_verilog
from fluid_hw.sim.harness import Harness

from .build_dir import BuildDir
from .transport import DriverError, ParamImage, StreamResult, Transport, register_transport

__all__ = ["SimTransport", "harness_build", "read_design"]


def read_design(build_dir: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """``accelerator.v`` and ``design.json`` of a build folder (checked against its
    manifest: :class:`~.build_dir.BuildDir`)."""
    bd = BuildDir(build_dir)
    return bd.verilog(), bd.design()


def harness_build(verilog: str, info: dict[str, Any], trace: str | None = None
                  ) -> HarnessBuild:
    """Build (or take from the cache) the batch harness of a design given as Verilog
    text and its ``design.json``.  ``trace``: None, ``"vcd"`` or ``"fst"``."""
    return build_harness_verilog(verilog, info, trace=trace)


class SimTransport(Transport):
    """The accelerator of ``build_dir`` simulated by Verilator.

    ``trace``: a ``.vcd`` or ``.fst`` file recording every cycle (a separate, slower
    build); ``ready_prob`` / ``valid_prob``: random back-pressure on the output and
    gaps on the input (1.0: full rate, what the measurements assume); ``seed``: of
    that randomness."""

    name = "sim"

    def __init__(self, build_dir: str | os.PathLike[str], *,
                 trace: str | os.PathLike[str] | None = None, ready_prob: float = 1.0,
                 valid_prob: float = 1.0, seed: int = 0) -> None:
        verilog, info = read_design(build_dir)
        kind = None
        if trace is not None:
            kind = "fst" if str(trace).endswith(".fst") else "vcd"
            Path(trace).parent.mkdir(parents=True, exist_ok=True)
        self.info = info
        try:
            self.build = harness_build(verilog, info, kind)
        except BuildError as e:
            if kind == "fst" and "lz4.h" in str(e):
                raise DriverError(
                    f"FST tracing ({trace}) needs the lz4 C headers, which this Verilator "
                    "cannot find (Debian/Ubuntu: apt-get install liblz4-dev); or trace to a "
                    ".vcd file instead") from e
            raise
        self.harness = Harness(self.build, trace=trace)
        self.ready_prob, self.valid_prob, self.seed = ready_prob, valid_prob, seed
        self._runs = 0

    def read_register(self, reg: str | int) -> int:
        return self.harness.read(reg)

    def write_register(self, reg: str | int, value: int) -> None:
        self.harness.write(reg, value)

    def load_params(self, image: ParamImage) -> int:
        if not self.info.get("runtime_params"):
            raise DriverError(f"{self.info['name']} was built with constant weights; there "
                              "is nothing to load (compile with --weights runtime)")
        return super().load_params(image)

    def stream(self, inputs: np.ndarray) -> StreamResult:
        res = self.harness.run(inputs, ready_prob=self.ready_prob, valid_prob=self.valid_prob,
                               seed=self.seed + self._runs)
        self._runs += 1
        return StreamResult(res.outputs, res.cycles, res.timestamps)

    def stream_sequences(self, inputs: np.ndarray, lengths: Sequence[int]) -> StreamResult:
        res = self.harness.run_sequences(inputs, list(lengths), ready_prob=self.ready_prob,
                                         valid_prob=self.valid_prob,
                                         seed=self.seed + self._runs)
        self._runs += 1
        return StreamResult(res.outputs, res.cycles, res.timestamps)

    def close(self) -> None:
        self.harness.close()


register_transport("sim", SimTransport)
