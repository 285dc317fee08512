"""The trained digits MLP quantised to narrow precision (w4a4, w2a2, bipolar w1a1; the
input and the first / last layers at 8 bits, as in FINN), compiled for ``--target sim``
and simulated in Verilator on the 360 test images: bit for bit against the golden model,
stage by stage (the narrow values travel in int8 lanes, each requantiser clamping to
its layer's rails, or comparing against its thresholds with
``QuantConfig(thresholds=True)``)."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.trainer import train
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga import simulate as simulate_build
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from fluid_hw.hls.folding import FoldingBudget
from fluid_hw.passes import QuantConfig
from fluid_hw.passes.precision import Precision

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_mlp():
    xtr, xte, ytr, yte = load_digits_split(image=False)
    m = models.digits_mlp(optimizer=fluid.optimizer.Adam(learning_rate=0.002))
    exe = fluid.Executor()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=30, batch_size=32,
              log=None)
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
