"""Runtime weights: new parameter values loaded into a running simulated accelerator
give the golden model's output for those values, bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.fpga import param_image_for
from fluid_hw.drivers import Accelerator


def assert_reload_is_bit_exact(out: Any, b: Any, values: dict[str, np.ndarray], x: np.ndarray,
                               feed: str = "x") -> None:
    """Run ``x`` on build ``out`` (``b``: its ``load_build``), load ``values`` at run time,
    run again: the accelerator's output equals the golden program's with ``values`` and
    differs from the first run's."""
    golden = fluid.Scope(b.scope)
    golden.vars.update(values)
    part = b.lowered.partition
    (want,) = fluid.Executor().run(b.program, feed={feed: x}, fetch_list=[part.hw_output],
                                   scope=golden)
    with Accelerator.open(out, "sim") as acc:
        acc.run(x)
        before = acc.last.hw_outputs
        acc.load(param_image_for(b, values))
        acc.run(x)
        np.testing.assert_array_equal(acc.last.hw_outputs, want)
    assert not np.array_equal(before, want)  # the new parameters changed the outputs
