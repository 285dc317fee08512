"""A multi-region build over one serial port: one SerialLink, one SerialTransport per
region address, each selecting its region on the bitstream's one UART bridge.

* fast: the bridge's behavioural model behind a pseudo-terminal answers the host; a
  bitstream of the wrong kind (one region, or another number of regions) and a region
  folder opened alone on a multi-region bitstream are refused, naming what to load;
* slow: the two-region board top (both regions' accelerator.v and the bridge with a
  region address) in Verilator behind a pseudo-terminal: ``Accelerator.open(BUILD,
  transport="serial", port=...)`` runs the whole model (host segments on the CPU
  executor) bit for bit against the golden model and the simulation transport, with
  runtime weights loaded into each region over the shared link.
"""

from __future__ import annotations

import os
import select
import threading
import time
import tty

import numpy as np
import pytest

from fluid_hw.drivers import Accelerator, DriverError
from fluid_hw.drivers.regions import RegionedAccelerator
from fluid_hw.drivers.serial import SerialTransport, open_region_transports
from fluid_hw.rtl.uart_bridge import UartBridgeModel
from tests.backends.fpga._two_regions import golden, two_region_build


class ModelOnPty:
    """The bridge's behavioural model answering on a pseudo-terminal (registers read as
    0, every access OKAY): enough for the host's INFO and REGION handshakes."""

    def __init__(self, model: UartBridgeModel) -> None:
        self.model = model
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.port = os.ttyname(self.slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            r, _, _ = select.select([self.master], [], [], 0.02)
            if r:
                os.write(self.master, self.model.feed(os.read(self.master, 4096)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self.master)
        os.close(self.slave)


def _slaves(n: int):
    return [lambda a: (0, 0)] * n, [lambda a, d: 0] * n


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial_regions") / "net"
    two_region_build(out)
    return out


def _sizes(build) -> list[tuple[int, int]]:
    from fluid_hw.backends.fpga.bitstream_regions import read_regions

    return [(b.in_bytes, b.out_bytes) for b in read_regions(build)]


def test_the_wrong_bitstream_is_refused(build):
    sizes = _sizes(build)
    dirs = [build / "regions" / "0", build / "regions" / "1"]
    # a single-region bitstream on the port
    one = ModelOnPty(UartBridgeModel(*sizes[0], lambda a: (0, 0), lambda a, d: 0))
    try:
        with pytest.raises(DriverError, match=r"holds one accelerator .*has 2 regions"):
            open_region_transports(build, dirs, port=one.port, timeout=2)
    finally:
        one.close()
    # three regions on the bitstream, two in the build
    three = ModelOnPty(UartBridgeModel.of_regions([*sizes, (1, 1)], *_slaves(3)))
    try:
        with pytest.raises(DriverError, match=r"holds 3 accelerator regions, but .* has 2"):
            open_region_transports(build, dirs, port=three.port, timeout=2)
        # a region folder alone on a multi-region bitstream
        with pytest.raises(DriverError, match=r"holds several accelerator regions.*"
                                              r"Accelerator.open\(BUILD"):
            SerialTransport(dirs[1], port=three.port, timeout=2)
    finally:
        three.close()
    # the regions' beat sizes are checked against their region address
    swapped = ModelOnPty(UartBridgeModel.of_regions(sizes[::-1], *_slaves(2)))
    try:
        with pytest.raises(DriverError, match=r"beats \(region 0\), but fluid_accel_r0 has"):
            open_region_transports(build, dirs, port=swapped.port, timeout=2)
    finally:
        swapped.close()


def test_transports_share_one_link_and_select_their_region(build):
    sizes = _sizes(build)
    bridge = ModelOnPty(UartBridgeModel.of_regions(sizes, *_slaves(2)))
    try:
        ts = open_region_transports(build, [build / "regions" / "0", build / "regions" / "1"],
                                    port=bridge.port, timeout=2)
        assert [t.region for t in ts] == [0, 1]
        assert ts[0].link is ts[1].link and ts[0].link.users == 2
        assert bridge.model.region == 1          # the last one opened selected itself
        ts[0].read_register("ID")
        assert bridge.model.region == 0
        ts[0].close()
        assert ts[1].link.fd >= 0                # the link lives on with its last user
        ts[1].close()
        assert ts[0].link is None and ts[1].link is None
    finally:
        bridge.close()


@pytest.mark.slow
def test_two_regions_over_one_serial_port_are_bit_exact(tmp_path):
    from fluid_hw.backends.fpga.bitstream import BoardSimulation

    out = tmp_path / "net"
    x = two_region_build(out, weights="runtime", n=24)
    (want,) = golden(out, x)
    with Accelerator.open(out, transport="sim") as ref:
        (want_sim,) = ref.run(x)
    with BoardSimulation(out, divisor=8) as board:
        acc = Accelerator.open(out, transport="serial", port=board.port, timeout=20)
        assert isinstance(acc, RegionedAccelerator)
        with acc:   # each region's ID and design hash checked, its weights loaded
            links = {id(r.transport.link) for r in acc.regions}
            assert len(links) == 1 and [r.transport.region for r in acc.regions] == [0, 1]
            t0 = time.perf_counter()
            (got,) = acc.run(x)
            dt = time.perf_counter() - t0
            counters = acc.region_counters()
            tr = acc.regions[0].transport
            assert tr.bridge_errors() == 0
            sent, received = tr.bytes_sent, tr.bytes_received
        with pytest.raises(DriverError, match="several accelerator regions"):
            SerialTransport(out / "regions" / "0", port=board.port, timeout=20)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, want_sim)
    assert [c["INFERENCES"] for c in counters] == [len(x), len(x)]
    print(f"\nserial, 2 regions: {len(x)} inferences in {dt:.2f} s ({len(x) / dt:.0f}/s), "
          f"{sent} bytes sent, {received} received, Verilator at 8 clock cycles a bit")
