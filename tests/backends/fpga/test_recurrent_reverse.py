"""``is_reverse`` recurrences on the accelerator: the driver streams each sequence last
step first (host.json ``reverse_sequences``) and puts a whole-sequence output back in
program order; a reversed LSTM's summary (``sequence_first_step``) is the stage's
``"last"`` output. Bit-exact against the CPU executor on the quantised program (the
golden model), through ``fluid-hw simulate`` and ``Executor(FPGAPlace)``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.backends.fpga import compile_model, simulate
from fluid_hw.backends.fpga.lod_io import save_lod_npz
from fluid_hw.errors import FluidError
from fluid_hw.ir.lod import lengths_to_offsets, reversed_rows
from tests.backends.fpga.test_recurrent_network import (
    COEFFS,
    HIDDEN,
    _lod,
    _save,
    fpga_place_equals_golden,
)


def test_reversed_rows_reverses_each_sequence_and_is_its_own_inverse():
    order = reversed_rows(lengths_to_offsets([1, 3, 2]))
    np.testing.assert_array_equal(order, [0, 3, 2, 1, 5, 4])
    np.testing.assert_array_equal(order[order], np.arange(6))


def _reverse_gru(tmp_path):
    main_prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main_prog, startup), fluid.unique_name.guard():
        x = layers.data(name="frames", shape=[COEFFS], dtype="float32", lod_level=1)
        h = layers.dynamic_gru(layers.fc(x, size=3 * HIDDEN), size=HIDDEN, is_reverse=True)
    return _save(tmp_path, main_prog, startup, "frames", h), h.name


def _reverse_lstm(tmp_path, pool):
    main_prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 6
    with fluid.program_guard(main_prog, startup), fluid.unique_name.guard():
        x = layers.data(name="frames", shape=[COEFFS], dtype="float32", lod_level=1)
        h, _ = layers.dynamic_lstm(layers.fc(x, size=4 * HIDDEN), size=4 * HIDDEN,
                                   is_reverse=True)
        y = layers.fc(pool(h), size=4)
    return _save(tmp_path, main_prog, startup, "frames", y), y.name


@pytest.mark.slow
def test_reverse_gru_whole_sequence_through_fpga_place(tmp_path):
    rng = np.random.default_rng(7)
    model, h_name = _reverse_gru(tmp_path)
    cal = _lod(rng, 32)
    save_lod_npz(tmp_path / "cal.npz", {"frames": cal})
    build = tmp_path / "build"
    compile_model(model, build, target="sim", calibration=tmp_path / "cal.npz")
    assert json.loads((build / "host" / "host.json").read_text())["reverse_sequences"]
    assert json.loads((build / "design.json").read_text())["sequence"] == "sequence"
    keys = simulate(build, tmp_path / "cal.npz")
    assert keys["bit_exact"] and keys["inputs"] == sum(cal.recursive_sequence_lengths()[0])
    test_x = _lod(rng, 12)
    got, want = fpga_place_equals_golden(build, "frames", test_x, h_name)
    # the reversal matters: the same rows in stream order differ from the program's
    assert not np.array_equal(got[reversed_rows(test_x.lod()[0])], want)


@pytest.mark.slow
def test_reverse_lstm_first_step_is_the_stage_last_output(tmp_path):
    rng = np.random.default_rng(8)
    model, _ = _reverse_lstm(tmp_path, layers.sequence_first_step)
    cal = _lod(rng, 32)
    save_lod_npz(tmp_path / "cal.npz", {"frames": cal})
    st = compile_model(model, tmp_path / "build", target="sim",
                       calibration=tmp_path / "cal.npz")
    assert [s.op for s in st.lowered.stages] == ["quantized_lstm", "quantized_fc"]
    assert st.lowered.stages[0].layout["mode"] == "last"
    keys = simulate(tmp_path / "build", tmp_path / "cal.npz")
    assert keys["bit_exact"] and keys["inputs"] == 32


def test_reverse_lstm_last_step_is_refused_naming_first_step(tmp_path):
    rng = np.random.default_rng(9)
    model, _ = _reverse_lstm(tmp_path, layers.sequence_last_step)
    save_lod_npz(tmp_path / "cal.npz", {"frames": _lod(rng, 4)})
    with pytest.raises(FluidError, match=r"(?s)LAST.*is_reverse.*sequence_first_step"):
        compile_model(model, tmp_path / "build", target="sim",
                      calibration=tmp_path / "cal.npz")
