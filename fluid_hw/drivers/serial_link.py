"""The serial line to a UART bridge (``fluid_hw.rtl.uart_bridge``; protocol in
``docs/uart_protocol.md``): the tty, the bridge's packets, INFO and, on a bridge of
several accelerator regions, the REGION selection.

:class:`SerialLink` moves bytes and packets; :class:`~.serial.SerialTransport` (one
per accelerator, i.e. per region address) speaks registers and streams over it.  Any
number of transports share one link; it is closed with the last of them.  Output
beats arrive tagged with their region (``0x90 + 2k``, ``0x91 + 2k`` with ``tlast``)
and are kept per region until that region's transport takes them.
"""

from __future__ import annotations

import contextlib
import os
import select
import termios
import time

from .transport import DriverError

__all__ = ["SerialLink", "BridgeInfo", "open_tty", "describe_errors", "DEFAULT_BAUD"]

# The protocol's byte values (docs/uart_protocol.md; the device side is
# fluid_hw.rtl.uart_bridge, and tests/drivers/test_serial.py checks the two agree).
CMD_NOP, CMD_INFO, CMD_READ, CMD_WRITE, CMD_WRITE_BURST, CMD_STREAM_IN, CMD_REGION = range(7)
RSP_INFO, RSP_READ, RSP_WRITE, RSP_WRITE_BURST, RSP_REGION = 0x81, 0x82, 0x83, 0x84, 0x86
PKT_BEAT, PKT_BEAT_LAST = 0x90, 0x91
RESP_TIMEOUT = 4
PROTOCOL_VERSION = 1
REGIONS_PROTOCOL_VERSION = 2
INFO_MAGIC = b"FH"
MAX_REGIONS = 8
_RESP_SIZE = {RSP_INFO: 8, RSP_READ: 5, RSP_WRITE: 1, RSP_WRITE_BURST: 1, RSP_REGION: 3}
_RESP_NAMES = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR",
               RESP_TIMEOUT: "no answer (bridge timeout)"}
_ERROR_FLAGS = {1: "a received byte was lost (receive FIFO full)",
                2: "a framing error (stop bit 0: wrong baud rate?)",
                4: "an unknown command byte", 8: "a command abandoned half-received",
                16: "an AXI4-Lite access timed out"}
DEFAULT_BAUD = 3_000_000


def _baud_constant(baud: int) -> int:
    name = f"B{int(baud)}"
    if not hasattr(termios, name):
        known = sorted(int(n[1:]) for n in dir(termios) if n[1:].isdigit() and n[0] == "B")
        raise DriverError(f"baud rate {baud} is not one termios knows on this system; "
                          f"choose one of {', '.join(map(str, known[-12:]))}")
    return int(getattr(termios, name))


def open_tty(port: str | os.PathLike[str], baud: int) -> int:
    """Open ``port`` raw (8N1, no echo, no flow control, non-blocking reads through
    ``select``) at ``baud``; returns the file descriptor."""
    speed = _baud_constant(baud)
    try:
        fd = os.open(os.fspath(port), os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as e:
        raise DriverError(f"cannot open the serial port {port}: {e.strerror}; is the board "
                          "plugged in, and may this user open it (group dialout/uucp)?") \
            from None
    try:
        attrs = termios.tcgetattr(fd)
        iflag, oflag, cflag, lflag, _ispeed, _ospeed, cc = attrs
        iflag &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP
                   | termios.INLCR | termios.IGNCR | termios.ICRNL | termios.IXON
                   | termios.IXOFF | termios.IXANY)
        oflag &= ~termios.OPOST
        lflag &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG
                   | termios.IEXTEN)
        cflag &= ~(termios.CSIZE | termios.PARENB | termios.CSTOPB
                   | getattr(termios, "CRTSCTS", 0))
        cflag |= termios.CS8 | termios.CREAD | termios.CLOCAL
        cc = list(cc)
        cc[termios.VMIN] = 0
        cc[termios.VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, [iflag, oflag, cflag, lflag, speed, speed, cc])
        termios.tcflush(fd, termios.TCIOFLUSH)
    except (termios.error, OSError) as e:
        os.close(fd)
        raise DriverError(f"{port}: cannot configure it as a serial port ({e}); is it a "
                          "tty?") from None
    return fd


class BridgeInfo:
    """The bridge's INFO answer (the beat sizes of the selected region)."""

    def __init__(self, payload: bytes) -> None:
        self.magic = payload[:2]
        self.version = payload[2]
        self.errors = payload[3]
        self.in_bytes = payload[4]
        self.out_bytes = payload[5]
        self.divisor = int.from_bytes(payload[6:8], "little")

    def __repr__(self) -> str:
        return (f"BridgeInfo(version={self.version}, errors=0x{self.errors:02x}, "
                f"in_bytes={self.in_bytes}, out_bytes={self.out_bytes}, "
                f"divisor={self.divisor})")


def describe_errors(flags: int) -> str:
    return "; ".join(t for bit, t in _ERROR_FLAGS.items() if flags & bit) or "none"


def resp_name(code: int) -> str:
    return str(_RESP_NAMES.get(code, code))


class SerialLink:
    """One serial port to one UART bridge, shared by the transports of its regions.

    ``out_bytes``: the output beat size of each region address the link may see
    (``{0: n}`` for a single-region bridge).  ``timeout``: seconds to wait for any
    answer.  :meth:`sync` brings the link into step and returns INFO."""

    def __init__(self, port: str | os.PathLike[str], baud: int, timeout: float = 5.0) -> None:
        self.port, self.baud, self.timeout = str(port), int(baud), float(timeout)
        self.out_bytes: dict[int, int] = {}
        self.beats: dict[int, list[tuple[bytes, int]]] = {}
        self.selected = 0          # the bridge selects region 0 after reset
        self.regions: int | None = None  # the bridge's region count (REGION's answer)
        self.bytes_sent = self.bytes_received = 0
        self.users = 0
        self._rx = bytearray()
        self.fd = open_tty(port, self.baud)

    # -- bytes ------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + self.timeout + len(data) * 10 / self.baud
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                n = 0
            except OSError as e:
                raise DriverError(f"{self.port}: write failed: {e.strerror}") from None
            view = view[n:]
            self.bytes_sent += n
            if view:
                if time.monotonic() > deadline:
                    raise DriverError(f"{self.port}: cannot send ({len(view)} bytes left); "
                                      "is the board still connected?")
                select.select([], [self.fd], [], 0.05)

    def _fill(self, deadline: float, what: str) -> None:
        """Read what has arrived (waiting until ``deadline``)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise DriverError(
                f"{self.port}: no answer to {what} within {self.timeout:g} s; is the "
                f"bitstream with the UART bridge loaded, and the baud rate {self.baud} the "
                "one it was built for (report.json bitstream.uart.baud)?")
        r, _, _ = select.select([self.fd], [], [], left)
        if not r:
            return
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError as e:
            raise DriverError(f"{self.port}: read failed: {e.strerror}") from None
        self._rx += chunk
        self.bytes_received += len(chunk)

    def _size(self, tag: int) -> int | None:
        region = (tag - PKT_BEAT) // 2
        if 0 <= tag - PKT_BEAT < 2 * MAX_REGIONS and region in self.out_bytes:
            return self.out_bytes[region]
        return _RESP_SIZE.get(tag)

    def packet(self, deadline: float, what: str) -> tuple[int, bytes]:
        """The next packet: ``(tag, payload)``."""
        while True:
            if self._rx:
                tag = self._rx[0]
                size = self._size(tag)
                if size is None:
                    bad = bytes(self._rx[:16]).hex(" ")
                    self._rx.clear()
                    raise DriverError(f"{self.port}: unexpected bytes from the bridge ({bad}) "
                                      f"while waiting for {what}: the link is out of step "
                                      "(wrong baud rate, or another program uses the port)")
                if len(self._rx) >= 1 + size:
                    payload = bytes(self._rx[1:1 + size])
                    del self._rx[:1 + size]
                    return tag, payload
            self._fill(deadline, what)

    def next_beat(self, region: int, what: str) -> tuple[bytes, int]:
        """The next output beat of ``region``: ``(data, last)``; beats of other regions
        arriving meanwhile are kept for them."""
        kept = self.beats.setdefault(region, [])
        deadline = time.monotonic() + self.timeout
        while not kept:
            tag, payload = self.packet(deadline, what)
            if tag in _RESP_SIZE:
                raise DriverError(f"{self.port}: response 0x{tag:02x} in the middle of a "
                                  "stream: the link is out of step")
            self.beats.setdefault((tag - PKT_BEAT) // 2, []).append((payload, tag & 1))
        return kept.pop(0)

    def drain(self, quiet_s: float, what: str) -> None:
        """Take what the bridge sends until the line has been quiet for ``quiet_s``:
        output beats are kept per region (a response here means the link is out of
        step).  Bounded by the link's timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            while self._rx:
                size = self._size(self._rx[0])
                if size is None or len(self._rx) < 1 + size:
                    break
                tag, payload = self._rx[0], bytes(self._rx[1:1 + size])
                del self._rx[:1 + size]
                if tag in _RESP_SIZE:
                    raise DriverError(f"{self.port}: response 0x{tag:02x} while draining "
                                      f"{what}: the link is out of step")
                self.beats.setdefault((tag - PKT_BEAT) // 2, []).append((payload, tag & 1))
            r, _, _ = select.select([self.fd], [], [], quiet_s)
            if not r:
                return
            if time.monotonic() > deadline:
                raise DriverError(f"{self.port}: the bridge kept sending while draining "
                                  f"{what} for {self.timeout:g} s")
            self._fill(deadline, what)

    def response(self, want: int, what: str) -> bytes:
        """Wait for the response ``want``; output beats arriving meanwhile are kept."""
        deadline = time.monotonic() + self.timeout
        while True:
            tag, payload = self.packet(deadline, what)
            if tag not in _RESP_SIZE:
                self.beats.setdefault((tag - PKT_BEAT) // 2, []).append((payload, tag & 1))
                continue
            if tag != want:
                raise DriverError(f"{self.port}: got response 0x{tag:02x} while waiting for "
                                  f"0x{want:02x} ({what}): the link is out of step")
            return payload

    # -- the bridge -------------------------------------------------------------------
    def sync(self, settle_s: float = 0.1) -> BridgeInfo:
        """Bring the link into step and ask INFO.  A command left half-sent by an earlier
        host is completed by NOPs or dropped by the bridge's idle timeout (bitstreams:
        20 ms) within ``settle_s``; whatever it answers is discarded."""
        self.send(bytes([CMD_NOP]) * 8)
        time.sleep(settle_s)
        with contextlib.suppress(termios.error):
            termios.tcflush(self.fd, termios.TCIFLUSH)
        self._rx.clear()
        info = self.info()
        if info.magic != INFO_MAGIC or info.version not in (PROTOCOL_VERSION,
                                                            REGIONS_PROTOCOL_VERSION):
            raise DriverError(f"{self.port}: the device answers {info!r}, not a fluid-hw UART "
                              f"bridge of protocol version {PROTOCOL_VERSION} or "
                              f"{REGIONS_PROTOCOL_VERSION}")
        return info

    def info(self) -> BridgeInfo:
        """INFO (of the selected region); reading clears the bridge's error flags."""
        self.send(bytes([CMD_INFO]))
        return BridgeInfo(self.response(RSP_INFO, "INFO"))

    def select(self, region: int) -> None:
        """Make ``region`` the bridge's selected region (REGION), unless it is."""
        if region == self.selected and self.regions is not None:
            return
        self.send(bytes([CMD_REGION, region]))
        resp, got, count = self.response(RSP_REGION, f"REGION {region}")
        self.regions = count
        if resp:
            raise DriverError(f"{self.port}: the bridge has {count} regions, no region "
                              f"{region}: load the bitstream of this build (fluid-hw program)")
        self.selected = got

    def close(self) -> None:
        fd, self.fd = getattr(self, "fd", -1), -1
        if fd >= 0:
            os.close(fd)

    def release(self) -> None:
        """One user fewer; the last one closes the port."""
        self.users -= 1
        if self.users <= 0:
            self.close()
