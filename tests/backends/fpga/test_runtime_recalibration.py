"""Runtime parameters of every kind (issue 13): a network with a table activation
(sigmoid), a residual add and an average pool, built once with runtime weights,
runs a *differently calibrated* quantisation of the same model -- new scales, so new
tables, join multipliers and shifts, pool multipliers, biases and requantisers --
without a new design: the recalibrated build has the same design hash and Verilog, its
parameters load onto the first build's simulated hardware, and the outputs equal that
model's golden outputs bit for bit.  Also what registers.md says of the segments, and
the driver's refusal of an image made for another layout."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program
from fluid_hw.drivers import Accelerator, DriverError, get_transport
from fluid_hw.frontend import io as fio
from fluid_hw.hls.folding import FoldingBudget

L = fluid.layers
KINDS = ["conv", "table", "add", "avgpool", "mvau"]


def _model() -> tuple[fluid.Program, dict[str, np.ndarray], str]:
    """conv -> [sigmoid] + skip -> 2x2 average pool -> fc on [2, 6, 6]: the
    test program, its initial parameters, the fetch name."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=[2, 6, 6], dtype="float32")
        h = L.conv2d(x, 4, 3, padding=1)
        b = L.sigmoid(h)
        h = L.pool2d(L.elementwise_add(b, h), 2, "avg", 2)
        y = L.fc(h, 3)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    return main.clone(for_test=True), dict(scope.vars), y.name


def _compile(out, calibration, weights="runtime", **kw):
    prog, params, fetch = _model()
    scope = fluid.Scope()
    scope.vars.update({k: np.array(v) for k, v in params.items()})
    st = compile_program(prog, scope, out, feeds=["x"], fetches=[fetch], target="sim",
                         weights=weights, calibration={"x": calibration},
                         budget=FoldingBudget(macs=8), **kw)
    return st


def _golden(build, x):
    scope = fluid.Scope()
    prog, feeds, fetches = fio.load_inference_model(build / "model", fluid.Executor(),
                                                    scope=scope)
    return fluid.Executor().run(prog, feed={feeds[0]: x}, fetch_list=fetches, scope=scope)


def _data(seed: int, scale: float, n: int = 32) -> np.ndarray:
    return (scale * np.random.default_rng(seed).standard_normal((n, 2, 6, 6))
            ).astype(np.float32)


@pytest.mark.slow
def test_a_recalibrated_model_runs_on_the_same_hardware_bit_exact(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st_a = _compile(a, _data(0, 1.0))
    st_b = _compile(b, _data(1, 3.0))  # three times the range: every scale changes
    assert [s.kind for s in st_a.lowered.stages] == KINDS
    assert all(s.runtime for s in st_a.lowered.specs if s.kind != "maxpool")
    # one design: the same hash, Verilog and register map; other parameters
    assert st_a.top.design_hash == st_b.top.design_hash
    assert (a / "accelerator.v").read_bytes() == (b / "accelerator.v").read_bytes()
    assert (a / "registers.md").read_text() == (b / "registers.md").read_text()
    segs = {s.stage: s for s in st_a.top.segments}
    image_a, image_b = (dict(_image(d)) for d in (a, b))
    for stage in ("sigmoid_0", "elementwise_add_0", "pool2d_0"):
        base = segs[stage].base
        assert not np.array_equal(image_a[base], image_b[base]), stage

    x = _data(2, 2.0, 24)
    with get_transport("sim", a) as hw:  # the hardware of build a, verilated once
        acc = Accelerator.open(b, hw)    # b's host programs and parameters on it
        (out_b,) = acc.run(x)
        want_int = acc.last.hw_outputs
        (gold_b,) = _golden(b, x)
        assert out_b.tobytes() == gold_b.tobytes()
        # the hardware ran b's parameters: a's, loaded back, give a's golden outputs
        acc_a = Accelerator.open(a, hw)
        (out_a,) = acc_a.run(x)
        (gold_a,) = _golden(a, x)
        assert out_a.tobytes() == gold_a.tobytes()
        assert not np.array_equal(out_a, out_b) and not np.array_equal(
            acc_a.last.hw_outputs, want_int)
        # b's accelerator region alone, on b's integer inputs: b's golden integers
        part = st_b.lowered.partition
        scope = fluid.Scope()
        prog, _, _ = fio.load_inference_model(b / "model", fluid.Executor(), scope=scope)
        xin, yint = fluid.Executor().run(prog, feed={"x": x}, scope=scope,
                                         fetch_list=[part.hw_input, part.hw_output])
        acc.load()
        np.testing.assert_array_equal(acc.run_int(xin), yint)
        _wrong_images_are_refused(acc, st_a.top.segments)


def _image(d):
    from fluid_hw.drivers import load_param_image

    return load_param_image(d / "weights.npz")


def _wrong_images_are_refused(acc, segs) -> None:
    table = next(s for s in segs if s.kind == "table")
    with pytest.raises(DriverError, match=(
            r"segment 0 \(stage 'sigmoid_0', its table memory 0\) holds \[255\] "
            r"words, but that memory takes 256 \(256 entries of 1 words\); the image was "
            r"made for another design")):
        acc.load([(table.base, np.zeros(255, np.uint32))])
    with pytest.raises(DriverError, match=r"segment 1 starts at word 0x3, where no "
                                          r"parameter memory of 'fluid_accel' starts"):
        acc.load([(table.base, np.zeros(256, np.uint32)), (3, np.zeros(2, np.uint32))])


@pytest.mark.slow
def test_registers_md_documents_every_runtime_segment(tmp_path):
    """registers.md and registers.h follow the build: a runtime build's layout rows and
    entry formats for tables, joins and the pool's requantiser, and its design hash; a
    const build of the same model has another hash and no parameter window."""
    x = _data(0, 1.0)
    st = _compile(tmp_path / "rt", x, stop_after="write_registers")
    const = _compile(tmp_path / "const", x, weights="const", stop_after="write_registers")
    md = (tmp_path / "rt" / "registers.md").read_text()
    h = (tmp_path / "rt" / "registers.h").read_text()
    top = st.top
    assert top.design_hash != const.top.design_hash
    assert f"Design hash `{top.design_hash}`" in md
    assert f"0x{top.param_words:X}" in md and f"PARAM_WORDS {top.param_words}u" in h
    for s in top.segments:
        assert (f"| 0x{s.base:X} | {s.stage} | {s.kind} | {s.pe} | {s.depth} | "
                f"{s.words_per_entry} |") in md
    assert {s.kind for s in top.segments} == {"weights", "requant", "table", "join"}
    for what in ("Weight entries", "Requantisation entries", "Table entries",
                 "Join entries"):
        assert what in md
    cmd = (tmp_path / "const" / "registers.md").read_text()
    assert f"Design hash `{const.top.design_hash}`" in cmd
    assert "PARAM_DATA" not in cmd and "Table entries" not in cmd
