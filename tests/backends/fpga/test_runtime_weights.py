"""Property: random architectures (shapes, layouts, foldings), each compiled once with
runtime weights, stay bit-exact against the golden model (the CPU executor on the
quantised program) for many random weight sets, biases, multipliers and shifts
loaded through the register interface."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, load_build, param_image_for
from fluid_hw.drivers import Accelerator

from ._programs import Arch, architectures, build, golden, inputs, random_values

WEIGHT_SETS = 6

#: the deepest layout always runs: conv + pool + conv + pool (3x3, stride 1, padded)
#: + two fully-connected layers, odd foldings everywhere
DEEP = Arch((1, 6, 6), [
    {"kind": "conv", "name": "conv0", "m": 4, "k": 3, "stride": 1, "pad": 1, "relu": True},
    {"kind": "pool", "name": "pool0", "k": 2, "stride": 2, "pad": 0},
    {"kind": "conv", "name": "conv1", "m": 3, "k": 3, "stride": 1, "pad": 1, "relu": False},
    {"kind": "pool", "name": "pool1", "k": 3, "stride": 1, "pad": 1},
    {"kind": "fc", "name": "fc0", "n": 6, "relu": True},
    {"kind": "fc", "name": "fc1", "n": 4, "relu": False},
], {"conv0": (2, 3), "conv1": (3, 12), "fc0": (3, 9), "fc1": (2, 3)})


@pytest.mark.slow
@settings(max_examples=4, derandomize=True, deadline=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each shrink step rebuilds
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(arch=architectures(), seed=st.integers(0, 2**31 - 1))
@example(arch=DEEP, seed=7)
def test_random_architectures_with_runtime_weights_are_bit_exact(arch, seed, tmp_path_factory):
    built = build(arch)
    scope = fluid.Scope()
    scope.vars.update(random_values(built, 0))
    out = tmp_path_factory.mktemp("arch")
    compile_program(built.program, scope, out, feeds=[built.feed], fetches=built.fetches,
                    weights="runtime", folding=arch.folding)
    b = load_build(out)
    assert b.lowered.folding == arch.folding
    x = inputs(arch, 24, seed=1)
    with Accelerator.open(out, "sim") as acc:
        for k in range(WEIGHT_SETS):
            values = random_values(built, seed + k)
            acc.load(param_image_for(b, values))
            (prob,) = acc.run(x)
            want_int, want_prob = golden(built, values, x)
            np.testing.assert_array_equal(acc.last.hw_outputs, want_int,
                                          err_msg=f"{arch}, weight seed {seed + k}")
            assert prob.tobytes() == want_prob.tobytes()
            assert acc.last.counters["INFERENCES"] == len(x)
