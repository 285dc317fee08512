"""The trained digits models, trained once per session and saved as inference models
(as ``tests/frontend/test_training.py`` trains them: Adam, seeded)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import train
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models


@dataclass
class Trained:
    kind: str
    model_dir: Path
    calibration: Path   # 512 training images (.npy)
    x_test: Path        # the 360 test images (.npy)
    y_test: Path        # their labels (.npy)


def _train(kind: str, root: Path) -> Trained:
    image = kind == "cnn"
    xtr, xte, ytr, yte = load_digits_split(image=image)
    m = (models.digits_cnn if image else models.digits_mlp)(
        optimizer=fluid.optimizer.Adam(learning_rate=0.003 if image else 0.002))
    exe = fluid.Executor()
    scope = fluid.Scope()
    d = root / kind
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=15 if image else 30,
              batch_size=32, log=None)
        fluid.io.save_inference_model(str(d / "model"), ["pixels"], [m.prediction], exe,
                                      main_program=m.test_program)
    paths = Trained(kind, d / "model", d / "calib.npy", d / "x_test.npy", d / "y_test.npy")
    np.save(paths.calibration, xtr[:512])
    np.save(paths.x_test, xte)
    np.save(paths.y_test, yte)
    return paths


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """``trained("mlp")`` / ``trained("cnn")``: each trained at most once a session."""
    cache: dict[str, Trained] = {}
    root = tmp_path_factory.mktemp("digits")

    def get(kind: str) -> Trained:
        if kind not in cache:
            cache[kind] = _train(kind, root)
        return cache[kind]
    return get
