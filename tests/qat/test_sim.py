"""Acceptance (issue 16): each frozen QAT program of the digits MLP compiles for
``--target sim`` and simulates bit-exactly in Verilator against the golden model (the
narrow programs in int8 lanes whose requantisers clamp to the program's rails)."""

import pytest

from fluid_hw.backends.fpga import compile_program, read_report, simulate
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat_freeze import freeze
from tests.qat._digits import data, qat, qat_cnn

pytestmark = pytest.mark.slow

@pytest.mark.parametrize("precision", [
    pytest.param(Precision(8, 8), id="int8"),
    pytest.param(Precision(2, 2), id="w2a2"),
    pytest.param(Precision(1, 1), id="w1a1"),
])
def test_frozen_qat_program_simulates_bit_exactly(precision, tmp_path):
    r = qat(precision)
    name = r.model.prediction.name
    frozen = freeze(r.qat.test_program, r.scope, feed_names=["pixels"], fetch_names=[name])
    _, xte, _, yte = data()
    out = tmp_path / "build"
    st = compile_program(frozen, r.scope, out, feeds=["pixels"], fetches=[name], target="sim")
    assert [s.kind for s in st.lowered.stages] == ["mvau"] * 3
    keys = simulate(out, inputs={"pixels": xte}, labels=yte)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == len(xte)
    acc = keys["accuracy"]
    assert acc["hardware_int8"] == acc["golden_int8"]
    assert acc["golden_int8"] == pytest.approx(r.golden_accuracy)
    rep = read_report(out)
    assert rep["quantized"] == "given"
    print(f"\n{precision}: hardware accuracy {acc['hardware_int8']:.4f} on {len(xte)} images")


def test_frozen_qat_cnn_simulates_bit_exactly(tmp_path):
    """The digits CNN (batch norms folded, w4a4) frozen all-integer: conv, pool, conv,
    pool, fc stages, bit-exact on the 360 test images."""
    m, q, scope, _ = qat_cnn()
    name = m.prediction.name
    frozen = freeze(q.test_program, scope, feed_names=["pixels"], fetch_names=[name])
    _, xte, _, yte = data()
    out = tmp_path / "build"
    compile_program(frozen, scope, out, feeds=["pixels"], fetches=[name], target="sim")
    assert [s["op"] for s in read_report(out)["stages"]] == \
        ["quantized_conv2d", "quantized_pool2d"] * 2 + ["quantized_fc"]
    keys = simulate(out, inputs={"pixels": xte.reshape(-1, 1, 8, 8)}, labels=yte)
    assert keys["bit_exact"] is True and keys["mismatches"] == 0 and keys["inputs"] == len(xte)
    assert keys["accuracy"]["hardware_int8"] == keys["accuracy"]["golden_int8"] >= 0.95
    print(f"\ndigits CNN w4a4: hardware accuracy {keys['accuracy']['hardware_int8']:.4f}")
