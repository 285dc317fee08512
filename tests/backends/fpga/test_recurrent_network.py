"""Recurrent networks end to end on the Verilator simulation: `fluid-hw compile --target
sim` with LoD calibration data (.npz: NAME + NAME.lengths) and `fluid-hw simulate` on
64 sequences of lengths 1..50, bit-exact against the golden model; the sequences travel
back to back (the accelerator counts 64 sequences, no TLAST error: every beat sent --
sum(lengths) x beats per step -- was a step's); cycles per time step measured against
the recurrent stage's estimate; Executor(FPGAPlace) with LoD feeds, and a whole output
sequence back as a LoD tensor and outputs.lengths.npy."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.backends.fpga.lod_io import save_lod_npz
from fluid_hw.backends.fpga.place import FPGAPlace
from fluid_hw.cli.main import main
from fluid_hw.drivers import Accelerator, DriverError
from fluid_hw.frontend import io as fio
from fluid_hw.frontend import models

HIDDEN, COEFFS = 8, 10
TLAST_ERROR = 0b1000


def _lod(rng: np.random.Generator, n: int) -> fluid.LoDTensor:
    lengths = rng.integers(1, 51, n)
    lengths[:2] = (1, 50)
    x = rng.standard_normal((int(lengths.sum()), COEFFS)).astype(np.float32)
    return fluid.create_lod_tensor(x, [lengths.tolist()])


def _save(tmp_path, main_prog, startup, feed, fetch):
    exe = fluid.Executor()
    exe.run(startup)
    fio.save_inference_model(str(tmp_path / "model"), [feed], [fetch], exe,
                             main_program=main_prog)
    return tmp_path / "model"


@pytest.mark.slow
def test_gru_last_step_cli(tmp_path, capsys):
    rng = np.random.default_rng(0)
    m = models.gru_kws(hidden=HIDDEN, num_classes=4)
    model = _save(tmp_path, m.test_program, m.startup, "mfcc", m.prediction)
    x = _lod(rng, 64)
    save_lod_npz(tmp_path / "x.npz", {"mfcc": x})
    build = tmp_path / "build"
    assert main(["compile", str(model), "--target", "sim", "--out", str(build),
                 "--calibration", str(tmp_path / "x.npz")]) == 0
    design = json.loads((build / "design.json").read_text())
    assert design["sequence"] == "last" and design["stages"][0]["kind"] == "recurrent"
    assert "one input item is a sequence" in (build / "registers.md").read_text()
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "x.npz")]) == 0
    report = json.loads((build / "report.json").read_text())
    assert report["bit_exact"] and report["inputs"] == 64
    meas = report["measured"]
    lengths = x.recursive_sequence_lengths()[0]
    assert meas["steps"] == sum(lengths)
    assert meas["counters"]["INPUTS"] == meas["counters"]["INFERENCES"] == 64
    assert abs(meas["cycles_per_step_vs_estimate"] - 1) < 0.05
    print(f"GRU hidden {HIDDEN}: {meas['cycles_per_step']:.2f} cycles per step measured, "
          f"{meas['estimated_cycles_per_step']} estimated; {meas['sequences_per_s']:.0f} "
          f"sequences/s at {meas['clock_mhz']} MHz (mean length "
          f"{meas['mean_steps_per_sequence']:.1f})")
    out = np.load(build / "outputs.npy")
    assert out.shape == (64, 4) and not (build / "outputs.lengths.npy").exists()
    # the driver sent exactly sum(lengths) x beats-per-step beats, all taken as steps
    with Accelerator.open(build, "sim", ready_prob=0.6, valid_prob=0.7) as acc:
        (prob,) = acc.run(x)
        steps = acc.last.hw_inputs.shape[0]
        assert steps == sum(lengths) and acc.info["in_len"] == COEFFS
        assert not acc.transport.read_register("STATUS") & TLAST_ERROR
        assert acc.counters()["INPUTS"] == 64
        with pytest.raises(DriverError, match="at least one step"):
            acc.run_int_sequences(np.zeros((2, COEFFS), np.int8), [2, 0])
        with pytest.raises(DriverError, match="lod_level 1; feed a LoDTensor"):
            acc.run(np.asarray(x.data))
    np.testing.assert_array_equal(prob, out)


@pytest.mark.slow
def test_gru_sequence_output_through_fpga_place(tmp_path):
    rng = np.random.default_rng(1)
    main_prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 2
    with fluid.program_guard(main_prog, startup), fluid.unique_name.guard():
        x = layers.data(name="frames", shape=[COEFFS], dtype="float32", lod_level=1)
        h = layers.dynamic_gru(layers.fc(x, size=3 * HIDDEN), size=HIDDEN)
    model = _save(tmp_path, main_prog, startup, "frames", h)
    cal = _lod(rng, 64)
    save_lod_npz(tmp_path / "cal.npz", {"frames": cal})
    build = tmp_path / "build"
    assert main(["compile", str(model), "--target", "sim", "--out", str(build),
                 "--calibration", str(tmp_path / "cal.npz")]) == 0
    assert json.loads((build / "design.json").read_text())["sequence"] == "sequence"
    assert main(["simulate", str(build), "--inputs", str(tmp_path / "cal.npz")]) == 0
    report = json.loads((build / "report.json").read_text())
    assert report["bit_exact"] and report["inputs"] == sum(cal.recursive_sequence_lengths()[0])
    np.testing.assert_array_equal(np.load(build / "outputs.lengths.npy"),
                                  cal.recursive_sequence_lengths()[0])
    # Executor(FPGAPlace) runs the LoD program; the golden model is the CPU executor
    fpga_place_equals_golden(build, "frames", _lod(rng, 20), h.name)


def fpga_place_equals_golden(build, feed, x, fetch_name):
    """``Executor(FPGAPlace(build))`` on the LoD feed ``x``: its output (a LoD tensor)
    equals the CPU executor's on the build's quantised program (the golden model), LoD
    included; returns (got, want) data."""
    exe = fluid.Executor(FPGAPlace(build))
    try:
        (got,) = exe.run(None, feed={feed: x}, fetch_list=[fetch_name], return_numpy=False)
    finally:
        exe.close()
    qprog, _, fetch = fio.load_inference_model(build / "model", fluid.Executor())
    (want,) = fluid.Executor().run(qprog, feed={feed: x}, fetch_list=[fetch[0].name],
                                   return_numpy=False)
    assert got.lod() == x.lod() == want.lod()
    np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))
    return np.asarray(got.data), np.asarray(want.data)


@pytest.mark.slow
def test_lstm_sequence_classifier(tmp_path):
    """The LSTM reference model (peepholes; embedding on the host: token ids in)."""
    from fluid_hw.backends.fpga import compile_model, simulate
    from tests.passes.test_quantize_rnn import make_data, to_lod

    rng = np.random.default_rng(2)
    m = models.sequence_classifier(hidden=HIDDEN)
    model = _save(tmp_path, m.test_program, m.startup, "words", m.prediction)
    xs, _ = make_data(rng, 64)
    save_lod_npz(tmp_path / "x.npz", {"words": to_lod(xs)})
    st = compile_model(model, tmp_path / "build", target="sim",
                       calibration=tmp_path / "x.npz")
    assert [s.op for s in st.lowered.stages] == ["quantized_lstm", "quantized_fc"]
    keys = simulate(tmp_path / "build", tmp_path / "x.npz")
    assert keys["bit_exact"] and keys["inputs"] == 64
    meas = keys["measured"]
    assert meas["steps"] == sum(len(s) for s in xs)
    assert abs(meas["cycles_per_step_vs_estimate"] - 1) < 0.05
    print(f"LSTM hidden {HIDDEN}: {meas['cycles_per_step']:.2f} cycles per step measured, "
          f"{meas['estimated_cycles_per_step']} estimated")


@pytest.mark.slow
def test_gru_region_then_fc_region(tmp_path):
    """A softmax between the last step and the classifier splits the accelerator: region
    0 the recurrent stage (sequences in), region 1 the fc; simulate and the driver."""
    from fluid_hw.backends.fpga import compile_model, simulate

    rng = np.random.default_rng(3)
    main_prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main_prog, startup), fluid.unique_name.guard():
        x = layers.data(name="mfcc", shape=[COEFFS], dtype="float32", lod_level=1)
        h = layers.dynamic_gru(layers.fc(x, size=3 * HIDDEN), size=HIDDEN)
        prob = layers.fc(layers.softmax(layers.sequence_last_step(h)), size=4)
    model = _save(tmp_path, main_prog, startup, "mfcc", prob)
    xs = _lod(rng, 64)
    save_lod_npz(tmp_path / "x.npz", {"mfcc": xs})
    compile_model(model, tmp_path / "build", target="sim", calibration=tmp_path / "x.npz")
    keys = simulate(tmp_path / "build", tmp_path / "x.npz")
    assert keys["bit_exact"] and keys["inputs"] == 64 and len(keys["regions"]) == 2
    assert np.load(tmp_path / "build" / "outputs.npy").shape == (64, 4)
