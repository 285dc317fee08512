"""A tiny model with two accelerator regions (fc -> softmax on the host -> fc), for the
tests of one bitstream / one serial port holding both regions."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program
from fluid_hw.frontend import io as fio
from fluid_hw.hls.folding import FoldingBudget

L = fluid.layers


def two_region_build(out: Path, *, weights: str = "const", n: int = 32, seed: int = 3,
                     **options) -> np.ndarray:
    """Compile fc(16 -> 8, relu) -> softmax -> fc(8 -> 4) into ``out`` (regions 0 and 1,
    calibrated on ``n`` random inputs); returns those inputs."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed   # the same weights every run
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[16], dtype="float32")
        h = L.softmax(L.fc(x, size=8, act="relu"))
        prob = L.fc(h, size=4)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    xs = np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)
    compile_program(main.clone(for_test=True), scope, out, feeds=["x"], fetches=[prob.name],
                    calibration={"x": xs}, budget=FoldingBudget(macs=8), weights=weights,
                    **options)
    return xs


def golden(build: Path, x: np.ndarray) -> list[np.ndarray]:
    """The compiled (quantised) model on the CPU executor: the oracle."""
    scope = fluid.Scope()
    prog, feeds, fetches = fio.load_inference_model(build / "model", fluid.Executor(),
                                                    scope=scope)
    return fluid.Executor().run(prog, feed={feeds[0]: x}, fetch_list=fetches, scope=scope)
