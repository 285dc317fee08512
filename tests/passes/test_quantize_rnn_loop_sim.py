"""A DynamicRNN loop on the FPGA: a classifier whose recurrence is written as a
DynamicRNN body (gru_unit with its fc, lstm_unit, or a plain fc([x, h], act=tanh / relu /
sigmoid)) is quantised to quantized_fc + quantized_gru / quantized_lstm / quantized_rnn
(rnn_loop_to_sequence), and `fluid-hw compile --target sim` makes it the same recurrent
stage as dynamic_gru / dynamic_lstm; `fluid-hw simulate`
on 64 sequences of lengths 1..50 is bit-exact against the golden model, with one
stream step per time step (no padding)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.backends.fpga.lod_io import save_lod_npz
from fluid_hw.cli.main import main
from fluid_hw.frontend import io as fio
from tests.rtl._recurrent_programs import dynamic_rnn_program

HIDDEN, COEFFS = 8, 10


def _model(cell: str):
    def step(drnn, word, prev):
        if cell == "gru":
            h, _, _ = layers.gru_unit(layers.fc(word, size=3 * HIDDEN), prev,
                                      size=3 * HIDDEN)
        elif cell in ("tanh", "relu", "sigmoid"):
            h = layers.fc([word, prev], size=HIDDEN, act=cell)
        else:
            cp = drnn.memory(shape=[HIDDEN], value=0.0)
            h, c = layers.lstm_unit(word, prev, cp, forget_bias=1.0)
            drnn.update_memory(cp, c)
        return h

    return dynamic_rnn_program(
        "mfcc", COEFFS, HIDDEN, step,
        lambda seq: layers.fc(layers.sequence_last_step(seq), size=4, act="softmax"))


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["gru", "lstm", "tanh", "relu", "sigmoid"])
def test_dynamic_rnn_cell_compiles_to_the_recurrent_stage_bit_exact(cell, tmp_path):
    prog, startup, prob = _model(cell)
    exe = fluid.Executor()
    exe.run(startup)
    fio.save_inference_model(str(tmp_path / "model"), ["mfcc"], [prob], exe,
                             main_program=prog)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 51, 64)
    lengths[:2] = (1, 50)
    x = rng.standard_normal((int(lengths.sum()), COEFFS)).astype(np.float32)
    save_lod_npz(tmp_path / "x.npz", {"mfcc": fluid.create_lod_tensor(x, [lengths.tolist()])})
    build = tmp_path / "build"
    assert main(["compile", str(tmp_path / "model"), "--target", "sim", "--out", str(build),
                 "--calibration", str(tmp_path / "x.npz")]) == 0
    design = json.loads((build / "design.json").read_text())
    assert [s["kind"] for s in design["stages"]] == ["recurrent", "mvau"]
    assert design["stages"][0]["cell"] == {"tanh": "rnn", "relu": "rnn",
                                           "sigmoid": "rnn"}.get(cell, cell)
    assert design["sequence"] == "last"
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "x.npz")]) == 0
    report = json.loads((build / "report.json").read_text())
    assert report["bit_exact"] and report["inputs"] == 64
    meas = report["measured"]
    assert meas["steps"] == int(lengths.sum())
    assert abs(meas["cycles_per_step_vs_estimate"] - 1) < 0.05
    print(f"DynamicRNN {cell} hidden {HIDDEN}: {meas['cycles_per_step']:.2f} cycles per step "
          f"measured, {meas['estimated_cycles_per_step']} estimated")


@pytest.mark.slow
def test_static_rnn_gru_compiles_to_a_recurrent_region_bit_exact(tmp_path):
    """A StaticRNN over a time-major [T, N, D] input: the host makes N sequences of T
    steps (transpose2, sequence_unpad), the recurrent stage runs them (whole-sequence
    output), the host stacks them back; bit-exact through both regions."""
    steps = 12
    prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        xs = layers.data(name="xs", shape=[steps, -1, COEFFS], dtype="float32",
                         append_batch_size=False)
        rnn = layers.StaticRNN()
        with rnn.step():
            word = rnn.step_input(xs)
            prev = rnn.memory(shape=[-1, HIDDEN], batch_ref=word)
            h, _, _ = layers.gru_unit(layers.fc(word, size=3 * HIDDEN), prev,
                                      size=3 * HIDDEN)
            rnn.update_memory(prev, h)
            rnn.step_output(h)
        last = layers.slice(rnn(), axes=[0], starts=[steps - 1], ends=[steps])
        prob = layers.fc(layers.reshape(last, [-1, HIDDEN]), size=4, act="softmax")
    exe = fluid.Executor()
    exe.run(startup)
    fio.save_inference_model(str(tmp_path / "model"), ["xs"], [prob], exe, main_program=prog)
    x = np.random.default_rng(0).standard_normal((steps, 16, COEFFS)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    build = tmp_path / "build"
    assert main(["compile", str(tmp_path / "model"), "--target", "sim", "--out", str(build),
                 "--calibration", str(tmp_path / "x.npy")]) == 0
    segments = json.loads((build / "segments.json").read_text())["segments"]
    fpga = [s["ops"] for s in segments if s["where"].startswith("fpga")]
    assert fpga[0] == ["quantized_fc", "quantized_gru"]
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "x.npy")]) == 0
    report = json.loads((build / "report.json").read_text())
    assert report["bit_exact"] and report["inputs"] == 16
