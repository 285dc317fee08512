"""Variable-length sequences over the serial transport: a GRU returning its whole hidden
sequence, compiled for the simulation, its board top (accelerator + UART bridge) in
Verilator behind a pseudo-terminal; SerialTransport.stream_sequences (one STREAM_IN a
sequence, tlast on its last beat) gives the same steps, bit for bit, as the sim
transport, with per-step tlast checked."""

from __future__ import annotations

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.backends.fpga import compile_model
from fluid_hw.backends.fpga.lod_io import save_lod_npz
from fluid_hw.drivers import Accelerator
from fluid_hw.frontend import io as fio

HIDDEN, COEFFS = 8, 10


@pytest.fixture(autouse=True)
def serial_registered():
    from fluid_hw.drivers import transport

    before = dict(transport._TRANSPORTS)   # before the first import registers "serial"
    from fluid_hw.drivers.serial import SerialTransport

    transport.register_transport("serial", SerialTransport)
    yield
    transport._TRANSPORTS.clear()
    transport._TRANSPORTS.update(before)


def _lod(rng: np.random.Generator, n: int) -> fluid.LoDTensor:
    lengths = rng.integers(1, 51, n)
    lengths[:2] = (1, 50)
    x = rng.standard_normal((int(lengths.sum()), COEFFS)).astype(np.float32)
    return fluid.create_lod_tensor(x, [lengths.tolist()])


@pytest.mark.slow
def test_sequences_over_the_serial_bridge(tmp_path):
    from fluid_hw.backends.fpga.bitstream import BoardSimulation
    from fluid_hw.drivers.serial import SerialTransport

    rng = np.random.default_rng(5)
    main_prog, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main_prog, startup), fluid.unique_name.guard():
        x = layers.data(name="frames", shape=[COEFFS], dtype="float32", lod_level=1)
        h = layers.dynamic_gru(layers.fc(x, size=3 * HIDDEN), size=HIDDEN)
    exe = fluid.Executor()
    exe.run(startup)
    fio.save_inference_model(str(tmp_path / "model"), ["frames"], [h], exe,
                             main_program=main_prog)
    save_lod_npz(tmp_path / "cal.npz", {"frames": _lod(rng, 32)})
    out = tmp_path / "build"
    compile_model(tmp_path / "model", out, target="sim", calibration=tmp_path / "cal.npz")
    test_x = _lod(rng, 10)
    with Accelerator.open(out, transport="sim") as ref:
        (want,) = ref.run(test_x)
        want_hw = ref.last.hw_outputs
    with BoardSimulation(out, divisor=8) as board:
        acc = Accelerator.open(out, transport=SerialTransport(out, port=board.port,
                                                              timeout=30, window=2))
        with acc:
            (got,) = acc.run(test_x)
            got_hw = acc.last.hw_outputs
            assert acc.transport.read_register("STATUS") & 0b1000 == 0  # no TLAST_ERROR
            assert acc.counters()["INPUTS"] == 10
    np.testing.assert_array_equal(got_hw, want_hw)
    assert got.lod() == want.lod() == test_x.lod()
    np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))
