"""The trained digits MLP at w4a4 (first and last layers 8-bit) with mixed multiplier
kinds -- LUT products beside the MULT18X18Ds (``lut_mults``) in every layer, the int4
layer's remaining DSPs shared by PE pairs -- as the ECP5 build makes it
(``ff_style="trellis"``: MULT18X18D and CCU2C primitives through their Verilog
models), in Verilator under random back-pressure: bit for bit against the golden
model's values at the hardware's boundary."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, load_build
from fluid_hw.passes import QuantConfig
from fluid_hw.passes.precision import Precision
from fluid_hw.rtl import AcceleratorTop
from fluid_hw.rtl.multipliers import dsp_pairs, mvau_multipliers
from fluid_hw.sim import Harness
from tests.passes._util import trained_digits

pytestmark = pytest.mark.slow


def test_mixed_kinds_w4a4_mlp_in_verilator(tmp_path):
    m, scope, (xtr, xte, _ytr, _yte) = trained_digits("mlp")
    compile_program(m.test_program, fluid.Scope(scope), tmp_path / "build",
                    feeds=["pixels"], fetches=[m.prediction.name], target="sim",
                    calibration={"pixels": xtr[:512]},
                    folding={"fc_0": (4, 8), "fc_1": (4, 8), "fc_2": (2, 4)},
                    quant_config=QuantConfig(precision=Precision(w=4, a=4)))
    b = load_build(tmp_path / "build")
    low = b.lowered
    assert [s.weight_bits for s in low.specs] == [8, 4, 8]
    # about half of each layer's products in LUTs, an odd count: a PE split between kinds
    specs = [replace(s, lut_mults=s.pe * s.simd // 2 + 1) for s in low.specs]
    narrow = specs[1]
    dsp, lut = mvau_multipliers(narrow.pe, narrow.simd, narrow.lut_mults, 4)
    # PEs 0 and 1 share seven DSPs, PE 0's lane 7 has its own, PE 1's lane 7 and PEs 2-3
    # are LUT products
    assert len(dsp_pairs(narrow.pe, narrow.simd, narrow.lut_mults, 4)) == 7
    assert (dsp, lut) == (8, 17)
    part = low.partition
    x = xte[:120]
    gold = fluid.Executor().run(b.program, feed={"pixels": x},
                                fetch_list=[part.hw_input, part.hw_output],
                                scope=fluid.Scope(b.scope))
    x_in, want = (np.asarray(v) for v in gold)
    top = AcceleratorTop(specs, fifo_depth=low.fifo_depth, graph=low.graph,
                         ff_style="trellis")
    with Harness(top) as h:
        res = h.run(x_in.reshape(len(x), -1), ready_prob=0.6, valid_prob=0.8, seed=3)
    np.testing.assert_array_equal(res.outputs, want.reshape(len(x), -1))
