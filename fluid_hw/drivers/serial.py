"""The serial transport: an accelerator on a board, reached through the UART-to-AXI
bridge of its bitstream (``fluid_hw.rtl.uart_bridge``; protocol in
``docs/uart_protocol.md``).

    acc = Accelerator.open("build/mlp", transport="serial", port="/dev/ttyUSB1")

The port is any tty: a USB-serial adapter, or the pseudo-terminal of a simulated
board (``fluid_hw.backends.fpga.bitstream.BoardSimulation``).  It is driven with
``termios`` and ``os`` only (raw mode, 8N1, no flow control), so nothing beyond the
standard library is needed.  The baud rate defaults to the one the bitstream was
built for (``report.json``'s ``bitstream.uart.baud``).

Flow control is the host's (the bridge has a small receive FIFO): a command that
has a response is sent only after the previous response arrived, and at most
``window`` input vectors are in flight (sent, output not yet fully received).  With
``window=1`` (the default) the accelerator is empty whenever a vector is sent, so it
takes the vector at line rate and no byte is ever lost, whatever the design; larger
windows overlap transfers for designs that hold several vectors.  Every error the
bridge flags (a lost byte, a framing error) is checked after each stream and raised.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import termios
import time
from pathlib import Path
from typing import Any

import numpy as np

from .transport import DriverError, ParamImage, StreamResult, Transport, register_transport

__all__ = ["SerialTransport", "open_tty", "BridgeInfo", "DEFAULT_BAUD"]

# The protocol's byte values (docs/uart_protocol.md; the device side is
# fluid_hw.rtl.uart_bridge, and tests/drivers/test_serial.py checks the two agree).
CMD_NOP, CMD_INFO, CMD_READ, CMD_WRITE, CMD_WRITE_BURST, CMD_STREAM_IN = range(6)
RSP_INFO, RSP_READ, RSP_WRITE, RSP_WRITE_BURST = 0x81, 0x82, 0x83, 0x84
PKT_BEAT, PKT_BEAT_LAST = 0x90, 0x91
RESP_TIMEOUT = 4
PROTOCOL_VERSION = 1
INFO_MAGIC = b"FH"
_RESP_SIZE = {RSP_INFO: 8, RSP_READ: 5, RSP_WRITE: 1, RSP_WRITE_BURST: 1}
_RESP_NAMES = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR",
               RESP_TIMEOUT: "no answer (bridge timeout)"}
_ERROR_FLAGS = {1: "a received byte was lost (receive FIFO full)",
                2: "a framing error (stop bit 0: wrong baud rate?)",
                4: "an unknown command byte", 8: "a command abandoned half-received",
                16: "an AXI4-Lite access timed out"}
MAX_BURST = 0xFFFF
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
    """The bridge's INFO answer."""

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


class SerialTransport(Transport):
    """The accelerator of ``build_dir`` on a board at serial ``port``.

    ``baud``: default from the build's report (the bitstream's bridge), else
    3 Mbaud.  ``timeout``: seconds to wait for any answer.  ``window``: input vectors
    in flight (see the module docstring)."""

    name = "serial"

    def __init__(self, build_dir: str | os.PathLike[str], *, port: str | os.PathLike[str],
                 baud: int | None = None, timeout: float = 5.0, window: int = 1) -> None:
        d = Path(build_dir)
        design = d / "design.json"
        if not design.is_file():
            raise DriverError(f"{design}: not found; is {d} a build folder? Make one with "
                              "`fluid-hw compile MODEL --out BUILD_DIR`")
        try:
            self.info: dict[str, Any] = json.loads(design.read_text())
        except json.JSONDecodeError as e:
            raise DriverError(f"{design}: not valid JSON ({e}); recompile the model") from None
        if window < 1:
            raise DriverError(f"window must be >= 1 input vector, got {window}")
        self.baud = int(baud or self._report_baud(d) or DEFAULT_BAUD)
        self.port, self.timeout, self.window = str(port), float(timeout), int(window)
        self.in_lanes = int(self.info["in_lanes"])
        self.out_lanes = int(self.info["out_lanes"])
        self.out_bits = int(self.info["out_bits"])
        self.out_bytes = self.out_lanes * self.out_bits // 8
        self.regs: dict[str, int] = dict(self.info.get("registers", {}))
        self.fd = open_tty(port, self.baud)
        self._rx = bytearray()
        self._beats: list[tuple[bytes, int]] = []
        self.bytes_sent = self.bytes_received = 0
        try:
            self.bridge = self.sync()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _report_baud(d: Path) -> int | None:
        try:
            rep = json.loads((d / "report.json").read_text())
            return int(rep["bitstream"]["uart"]["baud"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # -- bytes ------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
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

    def _packet(self, deadline: float, what: str) -> tuple[int, bytes]:
        """The next packet: ``(tag, payload)``."""
        while True:
            if self._rx:
                tag = self._rx[0]
                if tag in (PKT_BEAT, PKT_BEAT_LAST):
                    size = self.out_bytes
                elif tag in _RESP_SIZE:
                    size = _RESP_SIZE[tag]
                else:
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

    def _response(self, want: int, what: str) -> bytes:
        """Wait for the response ``want``; output beats arriving meanwhile are kept."""
        deadline = time.monotonic() + self.timeout
        while True:
            tag, payload = self._packet(deadline, what)
            if tag in (PKT_BEAT, PKT_BEAT_LAST):
                self._beats.append((payload, int(tag == PKT_BEAT_LAST)))
                continue
            if tag != want:
                raise DriverError(f"{self.port}: got response 0x{tag:02x} while waiting for "
                                  f"0x{want:02x} ({what}): the link is out of step")
            return payload

    # -- the bridge -------------------------------------------------------------------
    def sync(self, settle_s: float = 0.1) -> BridgeInfo:
        """Bring the link into step, ask INFO and check it against the build.  A
        command left half-sent by an earlier host is completed by NOPs or dropped by
        the bridge's idle timeout (bitstreams: 20 ms) within ``settle_s``; whatever it
        answers is discarded."""
        self._send(bytes([CMD_NOP]) * 8)
        time.sleep(settle_s)
        with contextlib.suppress(termios.error):
            termios.tcflush(self.fd, termios.TCIFLUSH)
        self._rx.clear()
        self._send(bytes([CMD_INFO]))
        info = BridgeInfo(self._response(RSP_INFO, "INFO"))
        if info.magic != INFO_MAGIC or info.version != PROTOCOL_VERSION:
            raise DriverError(f"{self.port}: the device answers {info!r}, not a fluid-hw UART "
                              f"bridge of protocol version {PROTOCOL_VERSION}")
        if info.in_bytes != self.in_lanes or info.out_bytes != self.out_bytes:
            raise DriverError(
                f"{self.port}: the bridge moves {info.in_bytes}-byte input and "
                f"{info.out_bytes}-byte output beats, but {self.info.get('name')} has "
                f"{self.in_lanes} and {self.out_bytes}: load the bitstream of this build")
        return info

    def bridge_errors(self) -> int:
        """The bridge's error flags (reading clears them)."""
        self._send(bytes([CMD_INFO]))
        return BridgeInfo(self._response(RSP_INFO, "INFO")).errors

    def _check_errors(self, what: str) -> None:
        flags = self.bridge_errors()
        if flags:
            raise DriverError(f"{self.port}: the bridge reports {describe_errors(flags)} "
                              f"during {what}")

    # -- registers ----------------------------------------------------------------------
    def _offset(self, reg: str | int) -> int:
        if isinstance(reg, int):
            return reg
        try:
            return int(self.regs[reg])
        except KeyError:
            raise DriverError(f"{self.info.get('name')} has no register {reg!r}; it has "
                              f"{', '.join(self.regs)}") from None

    def read_register(self, reg: str | int) -> int:
        off = self._offset(reg)
        self._send(bytes([CMD_READ]) + off.to_bytes(2, "little"))
        p = self._response(RSP_READ, f"reading {reg}")
        if p[0]:
            raise DriverError(f"reading {reg} (0x{off:03X}) failed: "
                              f"{_RESP_NAMES.get(p[0], p[0])}")
        return int.from_bytes(p[1:5], "little")

    def write_register(self, reg: str | int, value: int) -> None:
        off = self._offset(reg)
        self._send(bytes([CMD_WRITE]) + off.to_bytes(2, "little")
                   + (int(value) & 0xFFFFFFFF).to_bytes(4, "little"))
        p = self._response(RSP_WRITE, f"writing {reg}")
        if p[0]:
            raise DriverError(f"writing {reg} (0x{off:03X}) failed: "
                              f"{_RESP_NAMES.get(p[0], p[0])}")

    def load_params(self, image: ParamImage) -> int:
        """Each segment: PARAM_ADDR, then its words as WRITE_BURST commands to
        PARAM_DATA (which advances by itself)."""
        if not self.info.get("runtime_params"):
            raise DriverError(f"{self.info['name']} was built with constant weights; there "
                              "is nothing to load (compile with --weights runtime)")
        data = self._offset("PARAM_DATA")
        total = 0
        for base, words in image:
            self.write_register("PARAM_ADDR", int(base))
            w = np.asarray(words, dtype="<u4")
            for k in range(0, len(w), MAX_BURST):
                part = w[k:k + MAX_BURST]
                self._send(bytes([CMD_WRITE_BURST]) + data.to_bytes(2, "little")
                           + len(part).to_bytes(2, "little") + part.tobytes())
                p = self._response(RSP_WRITE_BURST, f"loading parameters at 0x{base:X}")
                if p[0]:
                    raise DriverError(f"loading parameters at word 0x{base:X} failed: "
                                      f"{_RESP_NAMES.get(p[0], p[0])}")
            total += len(w)
        self._check_errors("the parameter load")
        return total

    # -- streams --------------------------------------------------------------------------
    def stream(self, inputs: np.ndarray) -> StreamResult:
        x = np.ascontiguousarray(inputs, dtype=np.int8)
        in_len, out_len = int(self.info["in_len"]), int(self.info["out_len"])
        if x.ndim != 2 or x.shape[1] != in_len:
            raise DriverError(f"stream: inputs must be int8 [N, {in_len}], got "
                              f"{list(np.shape(inputs))}")
        n = len(x)
        in_beats, out_beats = in_len // self.in_lanes, out_len // self.out_lanes
        if in_beats > 0xFFFF:
            raise DriverError(f"an input vector of {in_beats} beats is beyond one STREAM_IN "
                              "command (65535)")
        head = bytes([CMD_STREAM_IN]) + in_beats.to_bytes(2, "little") + bytes([1])
        out = bytearray()
        got_beats = 0
        sent = 0
        want = n * out_beats
        self._beats_clear_check()
        while got_beats < want:
            done_vectors = got_beats // out_beats
            while sent < n and sent - done_vectors < self.window:
                self._send(head + x[sent].tobytes())
                sent += 1
            deadline = time.monotonic() + self.timeout
            tag, payload = self._packet(deadline, f"output beat {got_beats} of {want}")
            if tag not in (PKT_BEAT, PKT_BEAT_LAST):
                raise DriverError(f"{self.port}: response 0x{tag:02x} in the middle of a "
                                  "stream: the link is out of step")
            last = int(tag == PKT_BEAT_LAST)
            if last != int(got_beats % out_beats == out_beats - 1):
                raise DriverError(f"output beat {got_beats} (vector {got_beats // out_beats}) "
                                  f"has tlast={last}; the accelerator's output framing is "
                                  "off (see STATUS.TLAST_ERROR)")
            out += payload
            got_beats += 1
        self._check_errors("the stream")
        dtype = np.dtype("<i4") if self.out_bits == 32 else np.dtype(np.int8)
        outputs = np.frombuffer(bytes(out), dtype=dtype).reshape(n, out_len)
        return StreamResult(outputs.astype(np.int32 if self.out_bits == 32 else np.int8),
                            None, None)

    def _beats_clear_check(self) -> None:
        if self._beats:
            k = len(self._beats)
            self._beats.clear()
            raise DriverError(f"{self.port}: {k} output beats arrived outside a stream "
                              "(a previous stream was interrupted); reset the accelerator "
                              "(CONTROL.SOFT_RESET) and retry")

    def close(self) -> None:
        fd, self.fd = getattr(self, "fd", -1), -1
        if fd >= 0:
            os.close(fd)


register_transport("serial", SerialTransport)
