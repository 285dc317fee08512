"""The serial transport: the host side of the UART bridge protocol over a tty.

* fast: the host's protocol constants equal the bridge's; errors for a missing build,
  a path that is no tty, a device that does not answer;
* slow: a compiled accelerator's board top (accelerator.v + UartBridge, no PLL) in
  Verilator, its serial pins behind a pseudo-terminal; ``Accelerator.open(...,
  transport=SerialTransport(...))`` runs the same inputs as the simulation transport,
  bit for bit, with constant and with runtime weights (loaded by WRITE_BURST).

Importing the serial module registers the ``serial`` transport, which other tests
expect to be absent until it is integrated: a fixture registers it for each test here
and restores the registry afterwards.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program
from fluid_hw.drivers import Accelerator, DriverError, load_param_image
from tests.backends.fpga._programs import Arch, build, inputs, random_values

ARCH = Arch((16,), [{"kind": "fc", "name": "fc0", "n": 8, "relu": True},
                    {"kind": "fc", "name": "fc1", "n": 6, "relu": False}],
            {"fc0": (2, 4), "fc1": (3, 2)})


@pytest.fixture(autouse=True)
def serial_registered():
    from fluid_hw.drivers import transport

    before = dict(transport._TRANSPORTS)   # before the first import registers "serial"
    from fluid_hw.drivers.serial import SerialTransport

    transport.register_transport("serial", SerialTransport)
    yield
    transport._TRANSPORTS.clear()
    transport._TRANSPORTS.update(before)


def test_host_and_bridge_agree_on_the_protocol():
    from fluid_hw.drivers import serial_link as serial
    from fluid_hw.rtl import uart_bridge as ub

    for name in ("CMD_NOP", "CMD_INFO", "CMD_READ", "CMD_WRITE", "CMD_WRITE_BURST",
                 "CMD_STREAM_IN", "CMD_REGION", "RSP_INFO", "RSP_READ", "RSP_WRITE",
                 "RSP_WRITE_BURST", "RSP_REGION", "PKT_BEAT", "PKT_BEAT_LAST", "RESP_TIMEOUT",
                 "PROTOCOL_VERSION", "REGIONS_PROTOCOL_VERSION", "INFO_MAGIC", "MAX_REGIONS"):
        assert getattr(serial, name) == getattr(ub, name), name
    # response sizes: what the host expects is what the model sends
    model = ub.UartBridgeModel(1, 1, lambda a: (0, 0), lambda a, d: 0)
    regions = ub.UartBridgeModel.of_regions([(1, 1), (2, 1)], [lambda a: (0, 0)] * 2,
                                            [lambda a, d: 0] * 2)
    for m, cmd, payload in ((model, ub.CMD_INFO, b""), (model, ub.CMD_READ, b"\0\0"),
                            (model, ub.CMD_WRITE, b"\0" * 6),
                            (model, ub.CMD_WRITE_BURST, b"\0\0\0\0"),
                            (regions, ub.CMD_REGION, b"\1"), (regions, ub.CMD_INFO, b"")):
        r = m.feed(bytes([cmd]) + payload)
        assert len(r) == 1 + serial._RESP_SIZE[r[0]]


def test_errors_name_the_problem(tmp_path):
    from fluid_hw.drivers.serial import SerialTransport

    with pytest.raises(DriverError, match=r"design.json: not found"):
        SerialTransport(tmp_path, port="/dev/null")
    (tmp_path / "design.json").write_text('{"name": "a", "in_lanes": 1, "out_lanes": 1, '
                                          '"out_bits": 8, "registers": {}}')
    with pytest.raises(DriverError, match=r"cannot configure it as a serial port.*tty"):
        SerialTransport(tmp_path, port="/dev/null")
    with pytest.raises(DriverError, match="cannot open the serial port"):
        SerialTransport(tmp_path, port=tmp_path / "nothing")
    with pytest.raises(DriverError, match="baud rate 1234 is not one termios knows"):
        SerialTransport(tmp_path, port="/dev/null", baud=1234)
    # a tty with nothing behind it: a clear timeout, not a hang
    master, slave = os.openpty()
    try:
        t0 = time.monotonic()
        with pytest.raises(DriverError, match=r"no answer to INFO within 0.3 s.*UART bridge"):
            SerialTransport(tmp_path, port=os.ttyname(slave), timeout=0.3)
        assert time.monotonic() - t0 < 3
    finally:
        os.close(master)
        os.close(slave)


def _compile(root, weights):
    built = build(ARCH)
    scope = fluid.Scope()
    values = random_values(built, 11)
    scope.vars.update(values)
    out = root / weights
    compile_program(built.program, scope, out, feeds=[built.feed], fetches=built.fetches,
                    weights=weights, folding=ARCH.folding)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("weights,window", [("const", 1), ("runtime", 2)])
def test_serial_through_the_verilated_board_top_is_bit_exact(tmp_path, weights, window):
    from fluid_hw.backends.fpga.bitstream import BoardSimulation
    from fluid_hw.drivers.serial import SerialTransport

    out = _compile(tmp_path, weights)
    x = inputs(ARCH, 40, 3)
    with Accelerator.open(out, transport="sim") as ref:
        want = ref.run(x)
        want_hw = ref.last.hw_outputs
    with BoardSimulation(out, divisor=8) as board:
        if window == 1:  # by name, as a user opens it
            acc = Accelerator.open(out, transport="serial", port=board.port, timeout=20)
        else:
            acc = Accelerator.open(out, transport=SerialTransport(out, port=board.port,
                                                                  timeout=20, window=window))
        tr = acc.transport
        assert isinstance(tr, SerialTransport)
        with acc:   # Accelerator.open checked the ID and design hash
            t0 = time.perf_counter()
            got = acc.run(x)
            dt = time.perf_counter() - t0
            got_hw = acc.last.hw_outputs
            counters = acc.last.counters
            assert tr.read_register("STATUS") & 0b1000 == 0   # no TLAST_ERROR
            if weights == "runtime":  # zero weights, loaded by WRITE_BURST: other outputs
                zeros = [(b, np.zeros_like(w)) for b, w in load_param_image(out /
                                                                              "weights.npz")]
                assert acc.load(zeros) == sum(len(w) for _, w in zeros)
                assert not np.array_equal(acc.run_int(acc.last.hw_inputs), want_hw)
            assert tr.bridge_errors() == 0
            sent, received = tr.bytes_sent, tr.bytes_received
    np.testing.assert_array_equal(got_hw, want_hw)
    np.testing.assert_array_equal(got[0], want[0])
    assert counters["INFERENCES"] == len(x)
    print(f"\nserial ({weights}, window {window}): {len(x)} inferences in {dt:.2f} s "
          f"({len(x) / dt:.0f}/s), {sent} bytes sent, {received} received, Verilator at "
          "8 clock cycles a bit")


@pytest.mark.slow
def test_soft_reset_drains_the_completed_packet_and_the_retry_is_in_step(tmp_path):
    """Inputs streamed and a packet cut in the middle, then ``soft_reset()``: the
    outputs on their way and the packet SOFT_RESET completes with zero beats are drained,
    the cut input packet's drop is ended, and the next stream is bit-exact."""
    from fluid_hw.backends.fpga.bitstream import BoardSimulation
    from fluid_hw.drivers.serial import STATUS_BUSY, STATUS_DROPPING, SerialTransport
    from fluid_hw.drivers.serial_link import CMD_STREAM_IN

    out = _compile(tmp_path, "const")
    x = inputs(ARCH, 6, 5)
    with Accelerator.open(out, transport="sim") as ref:
        ref.run(x)
        want_hw = ref.last.hw_outputs
        hw_in = ref.last.hw_inputs.reshape(len(x), -1).astype(np.int8)
    with BoardSimulation(out, divisor=8) as board:
        tr = SerialTransport(out, port=board.port, timeout=20)
        in_beats = int(tr.info["in_len"]) // tr.in_lanes
        perm = Accelerator.open(out, transport=tr, check=False).host.in_perm
        for k in range(4):  # whole input packets, outputs not read
            tr.link.send(bytes([CMD_STREAM_IN]) + in_beats.to_bytes(2, "little") + b"\1"
                         + hw_in[k][perm].tobytes())
        half = max(in_beats // 2, 1)   # and a packet cut after half its beats, no tlast
        tr.link.send(bytes([CMD_STREAM_IN]) + half.to_bytes(2, "little") + b"\0"
                     + hw_in[4][perm][:half * tr.in_lanes].tobytes())
        time.sleep(0.05)
        dropped = tr.soft_reset()
        status = tr.read_register("STATUS")
        assert status & (STATUS_BUSY | STATUS_DROPPING) == 0
        with Accelerator.open(out, transport=tr) as acc:   # ID and DESIGN_HASH in step
            got = acc.run_int(acc.last.hw_inputs if acc.last else hw_in.reshape(x.shape[0],
                                                                                 -1))
            assert tr.bridge_errors() == 0
    np.testing.assert_array_equal(got.reshape(len(x), -1), want_hw.reshape(len(x), -1))
    print(f"\nsoft_reset dropped {dropped} output beats")
