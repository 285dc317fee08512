"""The trained digits MLP quantised to narrow precision (w4a4, w2a2, bipolar w1a1; the
input and the first / last layers at 8 bits, as in FINN), compiled for ``--target sim``
and simulated in Verilator on the 360 test images: bit for bit against the golden model,
stage by stage (the narrow values travel in int8 lanes, each requantiser clamping to
its layer's rails, or comparing against its thresholds with
``QuantConfig(thresholds=True)``); and the digits CNN at w4a3 the same way."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.frontend import models
from fluid_hw.hls.folding import FoldingBudget
from fluid_hw.passes import QuantConfig
from fluid_hw.passes.precision import Precision
from tests.passes._util import trained_digits

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_mlp():
    m, scope, (xtr, xte, _ytr, yte) = trained_digits("mlp")
    return m, scope, xtr[:512], xte, yte


@pytest.mark.parametrize(("prec", "thresholds"), [
    (Precision(w=4, a=4), False), (Precision(w=2, a=2), False), (Precision(w=1, a=1), False),
    (Precision(w=2, a=2), True), (Precision(w=1, a=1), True)],
    ids=["w4a4", "w2a2", "w1a1", "w2a2-thresholds", "w1a1-thresholds"])
def test_narrow_digits_mlp_simulates_bit_exactly(trained_mlp, prec, thresholds, tmp_path):
    m, scope, calib, xte, yte = trained_mlp
    st = compile_program(m.test_program, fluid.Scope(scope), tmp_path / "build",
                         feeds=["pixels"], fetches=[m.prediction.name], target="sim",
                         calibration={"pixels": calib}, budget=FoldingBudget(macs=32),
                         quant_config=QuantConfig(precision=prec, thresholds=thresholds))
    with_th = [spec.thresholds is not None for spec in st.lowered.specs]
    assert with_th == [thresholds, thresholds, False]
    fmts = [(s.out_format.bits, s.out_format.kind) for s in st.lowered.stages]
    kind = "bipolar" if prec.a == 1 else "unsigned"
    assert fmts == [(prec.a, kind), (prec.a, kind), (8, "signed")]
    keys = simulate_build(tmp_path / "build", inputs={"pixels": xte}, labels=yte,
                          debug_stages=True)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 360
    dbg = keys["debug_stages"]
    assert dbg["first_divergence"] is None
    assert [s["mismatches"] for s in dbg["stages"]] == [0, 0, 0]
    r = read_report(tmp_path / "build")
    stages = {s["name"]: s for s in r["stages"]}
    assert stages["fc_0"]["out_format"]["kind"] == kind
    acc = r["accuracy"]
    print(prec, acc)  # measured: w4a4 97.8 %, w2a2 88.1 %, w1a1 46.4 % (float 97.5 %)
    assert acc["hardware_int8"] == acc["golden_int8"]
    hw = float((np.load(tmp_path / "build" / "outputs.npy").argmax(1) == yte[:, 0]).mean())
    assert hw == acc["hardware_int8"]


@pytest.mark.parametrize("thresholds", [False, True], ids=["requantize", "thresholds"])
def test_narrow_digits_cnn_simulates_bit_exactly(thresholds, tmp_path):
    """The digits CNN (conv - batch norm - relu - max pool, twice, then fc; random
    parameters and batch-norm statistics) at w4a3: the convolution stages clamp to
    [0, 7] or compare against their thresholds, bit for bit in Verilator."""
    from tests.passes._util import digits

    b = digits("cnn")
    rng = np.random.default_rng(4)
    st = compile_program(b.program, b.scope, tmp_path / "build", feeds=["pixels"],
                         fetches=b.fetch, target="sim",
                         calibration={"pixels": rng.random((64, 1, 8, 8), np.float32)},
                         budget=FoldingBudget(macs=16),
                         quant_config=QuantConfig(precision=Precision(w=4, a=3),
                                                  thresholds=thresholds))
    convs = [(s, spec) for s, spec in zip(st.lowered.stages, st.lowered.specs)
             if s.kind == "conv"]
    assert len(convs) == 2
    assert all((s.out_format.lo, s.out_format.hi) == (0, 7) and
               (spec.thresholds is not None) == thresholds for s, spec in convs)
    keys = simulate_build(tmp_path / "build",
                          inputs={"pixels": rng.random((48, 1, 8, 8), np.float32)},
                          debug_stages=True)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 48
    assert keys["debug_stages"]["first_divergence"] is None


@pytest.mark.parametrize("thresholds", [False, True], ids=["requantize", "thresholds"])
def test_narrow_ds_cnn_simulates_bit_exactly(thresholds, tmp_path):
    """MLPerf Tiny's DS-CNN, scaled down (conv, depthwise conv, pointwise conv, average
    pool, fc; random parameters) at w4a4: the depthwise stage's lanes clamp to its rails
    or compare against its thresholds, bit for bit in Verilator."""
    m = models.ds_cnn(filters=4, blocks=1, num_classes=4, input_shape=(11, 4))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(m.startup)
    shape = tuple(m.image.shape[1:])
    rng = np.random.default_rng(5)
    st = compile_program(m.test_program, scope, tmp_path / "build", feeds=[m.image.name],
                         fetches=[m.prediction.name], target="sim",
                         calibration={m.image.name: rng.standard_normal((64, *shape),
                                                                        np.float32)},
                         budget=FoldingBudget(macs=8),
                         quant_config=QuantConfig(precision=Precision(w=4, a=4),
                                                  thresholds=thresholds))
    kinds = [s.kind for s in st.lowered.stages]
    assert kinds == ["conv", "dwconv", "conv", "avgpool", "mvau"]
    dw = st.lowered.specs[1]
    assert dw.clamp is not None and (dw.thresholds is not None) == thresholds
    keys = simulate_build(tmp_path / "build",
                          inputs={m.image.name: rng.standard_normal((32, *shape), np.float32)},
                          debug_stages=True)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == 32
    assert keys["debug_stages"]["first_divergence"] is None
