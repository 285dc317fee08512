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

A multi-region build's bitstream holds every region behind one bridge, region ``k``
at region address ``k``: ``Accelerator.open(BUILD, transport="serial", port=...)``
opens one :class:`~.serial_link.SerialLink` on the port and one transport per region
(:func:`open_region_transports`), each selecting its region (the REGION command)
before it talks; the bytes and packets are :mod:`.serial_link`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .build_dir import BuildDir
from .regions import register_region_opener
from .serial_link import (
    CMD_READ,
    CMD_STREAM_IN,
    CMD_WRITE,
    CMD_WRITE_BURST,
    DEFAULT_BAUD,
    REGIONS_PROTOCOL_VERSION,
    RSP_READ,
    RSP_WRITE,
    RSP_WRITE_BURST,
    BridgeInfo,
    SerialLink,
    describe_errors,
    open_tty,
    resp_name,
)
from .transport import DriverError, ParamImage, StreamResult, Transport, register_transport

__all__ = ["SerialTransport", "SerialLink", "open_tty", "BridgeInfo", "DEFAULT_BAUD",
           "describe_errors", "open_region_transports"]
MAX_BURST = 0xFFFF
#: CONTROL and STATUS bits (registers.md: "SOFT_RESET", "What clears what")
CONTROL_ENABLE, CONTROL_SOFT_RESET = 0b001, 0b010
STATUS_BUSY, STATUS_DROPPING = 0b00001, 0b10000


def _read_design(d: Path) -> dict[str, Any]:
    return BuildDir(d).design()


def _report_baud(d: Path) -> int | None:
    try:
        rep = BuildDir(d).report()
        return int(rep["bitstream"]["uart"]["baud"])
    except (DriverError, ValueError, KeyError, TypeError):
        return None


class SerialTransport(Transport):
    """The accelerator of ``build_dir`` on a board at serial ``port``.

    ``baud``: default from the build's report (the bitstream's bridge), else
    3 Mbaud.  ``timeout``: seconds to wait for any answer.  ``window``: input vectors
    in flight (see the module docstring).

    One region of a multi-region bitstream: ``link=`` (a :class:`SerialLink` shared by
    the regions, instead of ``port``) and ``region=`` (its region address); every
    command first selects the region (REGION) when another one is selected.
    :func:`open_region_transports` makes them for a whole build."""

    name = "serial"

    def __init__(self, build_dir: str | os.PathLike[str], *,
                 port: str | os.PathLike[str] | None = None, baud: int | None = None,
                 timeout: float = 5.0, window: int = 1, link: SerialLink | None = None,
                 region: int | None = None) -> None:
        d = Path(build_dir)
        self.info: dict[str, Any] = _read_design(d)
        if window < 1:
            raise DriverError(f"window must be >= 1 input vector, got {window}")
        if (link is None) == (port is None):
            raise DriverError("SerialTransport: give the serial port= (one accelerator), or "
                              "link= and region= (a region of a multi-region bitstream)")
        if link is not None and region is None:
            raise DriverError("SerialTransport: a shared link needs the region= address")
        self.window = int(window)
        self.region = region
        self.in_lanes = int(self.info["in_lanes"])
        self.out_lanes = int(self.info["out_lanes"])
        self.out_bits = int(self.info["out_bits"])
        self.out_bytes = self.out_lanes * self.out_bits // 8
        self.regs: dict[str, int] = dict(self.info.get("registers", {}))
        if link is None:
            link = SerialLink(port,  # type: ignore[arg-type]
                              int(baud or _report_baud(d) or DEFAULT_BAUD), timeout)
        self.link = link
        link.users += 1
        link.out_bytes[region or 0] = self.out_bytes
        try:
            self.bridge = self._connect()
        except BaseException:
            self.close()
            raise

    @property
    def port(self) -> str:
        return self.link.port

    @property
    def baud(self) -> int:
        return self.link.baud

    @property
    def timeout(self) -> float:
        return self.link.timeout

    @property
    def bytes_sent(self) -> int:
        return self.link.bytes_sent

    @property
    def bytes_received(self) -> int:
        return self.link.bytes_received

    def _connect(self) -> BridgeInfo:
        """Bring the link into step (a link of its own) or select the region, ask INFO
        and check it against the build."""
        if self.region is None:
            info = self.link.sync()
            if info.version == REGIONS_PROTOCOL_VERSION:
                raise DriverError(
                    f"{self.port}: the bitstream holds several accelerator regions (bridge "
                    f"protocol version {info.version}); open the multi-region build folder "
                    "that made it: Accelerator.open(BUILD, transport='serial', port=...)")
        else:
            self._select()
            info = self.link.info()
        if info.in_bytes != self.in_lanes or info.out_bytes != self.out_bytes:
            where = "" if self.region is None else f" (region {self.region})"
            raise DriverError(
                f"{self.port}: the bridge moves {info.in_bytes}-byte input and "
                f"{info.out_bytes}-byte output beats{where}, but {self.info.get('name')} has "
                f"{self.in_lanes} and {self.out_bytes}: load the bitstream of this build")
        return info

    def _select(self) -> None:
        if self.region is not None:
            self.link.select(self.region)

    def sync(self, settle_s: float = 0.1) -> BridgeInfo:
        """Bring the link into step and ask INFO (see :meth:`SerialLink.sync`)."""
        info = self.link.sync(settle_s)
        self.link.regions = None   # the next command selects the region again
        return info

    def bridge_errors(self) -> int:
        """The bridge's error flags (reading clears them)."""
        return self.link.info().errors

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

    def _command(self, data: bytes, want: int, what: str) -> bytes:
        """Select the region, send a command and wait for its answer."""
        self._select()
        self.link.send(data)
        return self.link.response(want, what)

    def read_register(self, reg: str | int) -> int:
        off = self._offset(reg)
        p = self._command(bytes([CMD_READ]) + off.to_bytes(2, "little"), RSP_READ,
                          f"reading {reg}")
        if p[0]:
            raise DriverError(f"reading {reg} (0x{off:03X}) failed: {resp_name(p[0])}")
        return int.from_bytes(p[1:5], "little")

    def write_register(self, reg: str | int, value: int) -> None:
        off = self._offset(reg)
        p = self._command(bytes([CMD_WRITE]) + off.to_bytes(2, "little")
                          + (int(value) & 0xFFFFFFFF).to_bytes(4, "little"), RSP_WRITE,
                          f"writing {reg}")
        if p[0]:
            raise DriverError(f"writing {reg} (0x{off:03X}) failed: {resp_name(p[0])}")

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
                p = self._command(bytes([CMD_WRITE_BURST]) + data.to_bytes(2, "little")
                                  + len(part).to_bytes(2, "little") + part.tobytes(),
                                  RSP_WRITE_BURST, f"loading parameters at 0x{base:X}")
                if p[0]:
                    raise DriverError(f"loading parameters at word 0x{base:X} failed: "
                                      f"{resp_name(p[0])}")
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
        self._select()
        region = self.region or 0
        while got_beats < want:
            done_vectors = got_beats // out_beats
            while sent < n and sent - done_vectors < self.window:
                self.link.send(head + x[sent].tobytes())
                sent += 1
            payload, last = self.link.next_beat(region, f"output beat {got_beats} of {want}")
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

    def stream_sequences(self, inputs: np.ndarray, lengths: Sequence[int]) -> StreamResult:
        """Sequences (a design whose first stage is recurrent): each one's steps as
        STREAM_IN commands of at most 65535 beats, ``tlast`` (flag bit 0) on the last
        command's last beat only; the output packets -- one a sequence, of ``out_len``
        elements (mode ``"last"``) or one beat a step (``"sequence"``) -- checked for
        their ``tlast``."""
        mode = self.info.get("sequence")
        if mode is None:
            raise DriverError(f"{self.info.get('name')} takes fixed-size items, not "
                              "sequences (its first stage is not recurrent)")
        x = np.ascontiguousarray(inputs, dtype=np.int8)
        in_len, out_len = int(self.info["in_len"]), int(self.info["out_len"])
        ln = [int(v) for v in lengths]
        if x.ndim != 2 or x.shape[1] != in_len or len(x) != sum(ln) or min(ln, default=1) < 1:
            raise DriverError(f"stream_sequences: inputs must be int8 [sum(lengths), "
                              f"{in_len}] of sequences of >= 1 step, got "
                              f"{list(np.shape(inputs))} for lengths summing to {sum(ln)}")
        per_step = in_len // self.in_lanes
        out_beats = ln if mode == "sequence" else [out_len // self.out_lanes] * len(ln)
        starts = np.concatenate([[0], np.cumsum(ln)]).astype(int)
        beat_bytes = self.in_lanes
        out = bytearray()
        sent = done = got_in_packet = 0
        self._beats_clear_check()
        self._select()
        region = self.region or 0
        while done < len(ln):
            while sent < len(ln) and sent - done < self.window:
                data = x[starts[sent]:starts[sent + 1]].tobytes()
                beats = ln[sent] * per_step
                for k in range(0, beats, 0xFFFF):
                    count = min(0xFFFF, beats - k)
                    flag = int(k + count == beats)
                    self.link.send(bytes([CMD_STREAM_IN]) + count.to_bytes(2, "little")
                                   + bytes([flag])
                                   + data[k * beat_bytes:(k + count) * beat_bytes])
                sent += 1
            payload, last = self.link.next_beat(region, f"output beat {got_in_packet} of "
                                                f"sequence {done}")
            end = got_in_packet == out_beats[done] - 1
            if last != int(end):
                raise DriverError(f"output beat {got_in_packet} of sequence {done} has "
                                  f"tlast={last}; the accelerator's output framing is off "
                                  "(see STATUS.TLAST_ERROR)")
            out += payload
            got_in_packet = 0 if end else got_in_packet + 1
            done += int(end)
        self._check_errors("the stream")
        dtype = np.dtype("<i4") if self.out_bits == 32 else np.dtype(np.int8)
        outputs = np.frombuffer(bytes(out), dtype=dtype).reshape(-1, out_len)
        return StreamResult(outputs.astype(np.int32 if self.out_bits == 32 else np.int8),
                            None, None)

    def _beats_clear_check(self) -> None:
        kept = self.link.beats.get(self.region or 0)
        if kept:
            k = len(kept)
            kept.clear()
            raise DriverError(f"{self.port}: {k} output beats arrived outside a stream "
                              "(a previous stream was interrupted); reset the accelerator "
                              "(transport.soft_reset(): CONTROL.SOFT_RESET, then what it "
                              "still sends is drained) and retry")

    def soft_reset(self, quiet_s: float = 0.05) -> int:
        """CONTROL.SOFT_RESET, then drain what registers.md ("SOFT_RESET") says can
        still come out, so the next stream starts in step; returns the output beats
        discarded.

        The reset discards every item in the accelerator but keeps packets whole: an
        output packet partly sent (or a beat waiting on ``m_axis``) is completed with
        zero beats, ``tlast`` on its last, while STATUS.BUSY stays set; an input packet
        partly accepted is dropped whole (STATUS.DROPPING), and since no more of it will
        come, SOFT_RESET is written again to end the drop.  Once BUSY falls, beats the
        bridge took are still on the line: they are read until it has been quiet for
        ``quiet_s`` (and until a packet's ``tlast``), then discarded with any beats kept
        from an interrupted stream."""
        region = self.region or 0
        deadline = time.monotonic() + self.timeout
        self.write_register("CONTROL", CONTROL_ENABLE | CONTROL_SOFT_RESET)
        while True:
            status = self.read_register("STATUS")
            if status & STATUS_DROPPING:
                self.write_register("CONTROL", CONTROL_ENABLE | CONTROL_SOFT_RESET)
            elif not status & STATUS_BUSY:
                break
            if time.monotonic() > deadline:
                raise DriverError(f"{self.port}: STATUS is 0x{status:X} {self.timeout:g} s "
                                  "after SOFT_RESET (still busy completing an output "
                                  "packet: is the output stream taken?)")
        self.link.drain(quiet_s, "after SOFT_RESET")
        kept = self.link.beats.setdefault(region, [])
        dropped = list(kept)
        kept.clear()
        while dropped and not dropped[-1][1]:  # a packet's rest is still on its way
            dropped.append(self.link.next_beat(region, "the rest of a packet after "
                                                       "SOFT_RESET"))
        return len(dropped)

    def close(self) -> None:
        link, self.link = getattr(self, "link", None), None  # type: ignore[assignment]
        if link is not None:
            link.release()


def open_region_transports(build_dir: str | os.PathLike[str],
                           region_dirs: list[Path], *, port: str | os.PathLike[str],
                           baud: int | None = None, timeout: float = 5.0, window: int = 1
                           ) -> list[Transport]:
    """One :class:`SerialTransport` per region of a multi-region build, all on one
    serial ``port`` (the build's bitstream: one UART bridge, region ``k`` at region
    address ``k``).  ``baud`` defaults to the build's (``report.json``)."""
    link = SerialLink(port, int(baud or _report_baud(Path(build_dir)) or DEFAULT_BAUD),
                      timeout)
    out: list[Transport] = []
    try:
        info = link.sync()
        if info.version != REGIONS_PROTOCOL_VERSION:
            raise DriverError(
                f"{port}: the bitstream holds one accelerator (bridge protocol version "
                f"{info.version}), but {build_dir} has {len(region_dirs)} regions: load the "
                f"bitstream of {build_dir} (fluid-hw bitstream, then fluid-hw program)")
        for k, d in enumerate(region_dirs):
            out.append(SerialTransport(d, link=link, region=k, window=window))
        if link.regions != len(region_dirs):
            raise DriverError(f"{port}: the bitstream holds {link.regions} accelerator "
                              f"regions, but {build_dir} has {len(region_dirs)}: load the "
                              f"bitstream of {build_dir}")
    except BaseException:
        for t in out:
            t.close()
        link.close()
        raise
    return out


register_transport("serial", SerialTransport)
register_region_opener("serial", open_region_transports)
