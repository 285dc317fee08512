"""LeNet-5 and hls4ml's jet-tagging MLP (the accelerator benchmark's models): their MAC
counts as published (issue 17) and a forward pass of the shape expected."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.frontend import models


@pytest.mark.parametrize("name, shape, classes, want_macs", [
    ("lenet5", (1, 28, 28), 10, 416_520),
    ("jet_mlp", (16,), 5, 4_256),
])
def test_macs_and_forward(name, shape, classes, want_macs):
    m = getattr(models, name)()
    assert models.macs(m.test_program) == want_macs
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        x = np.random.default_rng(0).standard_normal((3, *shape)).astype(np.float32)
        feed = {m.image.name: x, m.label.name: np.zeros((3, 1), np.int64)}
        (p,) = exe.run(m.test_program, feed=feed, fetch_list=[m.prediction])
    assert p.shape == (3, classes)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
