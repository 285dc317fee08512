"""cocotb benches (driver, monitor, reference model, checker) through
cocotb_tools.runner on Verilator: a few vectors of the MLP under random stalls, and
the AXI4-Lite protocol."""

import numpy as np
import pytest

from fluid_hw.sim import SimulationError, run_cocotb

from .designs import mlp_top
from .test_harness import mlp_reference

pytestmark = pytest.mark.slow


def test_cocotb_stream_bench_and_axil_protocol():
    top, params = mlp_top()
    x = np.random.default_rng(8).integers(-128, 128, (6, 64))
    res = run_cocotb(top, x, mlp_reference(params, x), ready_prob=0.7, valid_prob=0.7, seed=3,
                     testcase="stream,axil_protocol")  # one simulator run, two benches
    np.testing.assert_array_equal(res.outputs, mlp_reference(params, x))
    assert res.raw["inferences_register"] == 6 and res.cycles > 6 * 64
    assert res.cycles_per_s > 0


def test_cocotb_checker_reports_a_mismatch():
    top, params = mlp_top()
    x = np.random.default_rng(9).integers(-128, 128, (2, 64))
    wrong = mlp_reference(params, x).copy()
    wrong[1, 3] += 1
    with pytest.raises(SimulationError, match="vector 1 element 3"):
        run_cocotb(top, x, wrong)
