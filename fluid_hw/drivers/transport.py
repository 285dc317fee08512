"""Transports: how the host reaches an accelerator.

A transport moves bits; it knows nothing about models.  Four operations, the same
for the Verilator simulation (:class:`~.sim.SimTransport`) and, later, a serial link
to a board whose bitstream carries the matching bridge:

* :meth:`Transport.read_register` / :meth:`Transport.write_register`: one AXI4-Lite
  access, by register name (from the build's ``design.json``) or byte offset;
* :meth:`Transport.load_params`: runtime parameters, a list of ``(word address,
  uint32 words)`` segments written through PARAM_ADDR / PARAM_DATA;
* :meth:`Transport.stream`: int8 input vectors ``[N, in_len]`` (stream order) in,
  output vectors ``[N, out_len]`` out, with what the transport can observe of the
  timing (:class:`StreamResult`).

Transports are found by name (:func:`get_transport`); a new one registers itself
with :func:`register_transport`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DriverError, unknown_name

__all__ = ["DriverError", "StreamResult", "Transport", "ParamImage", "COUNTERS",
           "register_transport", "get_transport", "transport_names", "check_param_image"]

#: uint32 words per segment, as ``(first word address, words)``
ParamImage = Sequence[tuple[int, np.ndarray]]

#: counter registers (CYCLES is the 64-bit CYCLES_LO/CYCLES_HI pair)
COUNTERS = ("BUSY_CYCLES", "INFERENCES", "INPUTS", "IN_STALL_CYCLES", "IN_STARVE_CYCLES",
            "OUT_STALL_CYCLES")


def check_param_image(info: dict[str, Any], image: ParamImage, source: str) -> None:
    """Refuse an image whose segments are not whole parameter memories of the design
    ``info`` (``design.json``): one made for another design, folding or model."""
    segs = {int(s["base"]): s for s in info.get("param_segments", [])}
    fix = ("the image was made for another design; make one for this build with "
           "fluid_hw.backends.fpga.param_image_for(BUILD, values), or recompile the model "
           "with --weights runtime for its weights.npz")
    for k, (base, words) in enumerate(image):
        seg = segs.get(int(base))
        if seg is None:
            starts = ", ".join(f"0x{b:X}" for b in sorted(segs)) or "none"
            raise DriverError(f"{source}: segment {k} starts at word 0x{int(base):X}, where "
                              f"no parameter memory of {info.get('name')!r} starts (they "
                              f"start at {starts}); {fix}")
        n, want = np.shape(words), seg["depth"] * seg["words_per_entry"]
        if n != (want,):
            raise DriverError(
                f"{source}: segment {k} (stage {seg['stage']!r}, its {seg['kind']} memory "
                f"{seg['pe']}) holds {list(n)} words, but that memory takes {want} "
                f"({seg['depth']} entries of {seg['words_per_entry']} words); {fix}")


@dataclass(frozen=True)
class StreamResult:
    """``outputs`` [N, out_len] (int8 or int32, stream order); ``cycles`` the stream
    took; ``timestamps``: per inference the cycle of its first/last input beat and
    first/last output beat (a structured array with fields ``in_first``, ``in_last``,
    ``out_first``, ``out_last``), or None where the transport cannot see them."""

    outputs: np.ndarray
    cycles: int | None
    timestamps: np.ndarray | None


class Transport(ABC):
    """One accelerator behind some link (see the module docstring).  ``info`` is the
    build's ``design.json`` (stream formats, register offsets, parameter layout)."""

    name = "transport"
    info: dict[str, Any]

    @abstractmethod
    def read_register(self, reg: str | int) -> int:
        """Read a 32-bit register (by name or byte offset)."""

    @abstractmethod
    def write_register(self, reg: str | int, value: int) -> None:
        """Write a 32-bit register (by name or byte offset)."""

    @abstractmethod
    def stream(self, inputs: np.ndarray) -> StreamResult:
        """Send ``inputs`` (int8 [N, in_len], stream order) and collect the N outputs."""

    def stream_sequences(self, inputs: np.ndarray, lengths: Sequence[int]) -> StreamResult:
        """A design whose first stage is recurrent: ``inputs`` int8 ``[sum(lengths),
        in_len]`` (every sequence's steps back to back, stream order), one packet a
        sequence; the outputs ``[N, out_len]`` (one per sequence) or ``[sum(lengths),
        out_len]`` (one per step), timestamps per sequence."""
        raise DriverError(f"the {self.name} transport cannot stream variable-length "
                          "sequences yet; use the sim transport")

    def load_params(self, image: ParamImage) -> int:
        """Write runtime parameters; returns the number of words written.  The default
        goes through :meth:`write_register`, one word at a time."""
        total = 0
        for base, words in image:
            self.write_register("PARAM_ADDR", int(base))
            for w in np.asarray(words, np.uint32):
                self.write_register("PARAM_DATA", int(w))
            total += len(words)
        return total

    def counters(self) -> dict[str, int]:
        """Every counter register; ``CYCLES`` as one 64-bit value."""
        lo = self.read_register("CYCLES_LO")
        out = {"CYCLES": lo | self.read_register("CYCLES_HI") << 32}
        for n in COUNTERS:
            out[n] = self.read_register(n)
        return out

    def close(self) -> None:  # noqa: B027 - optional: most links hold nothing to free
        """Release the link."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TRANSPORTS: dict[str, Callable[..., Transport]] = {}


def register_transport(name: str, factory: Callable[..., Transport]) -> None:
    """Make ``factory(build_dir, **options)`` available as ``transport=name``."""
    _TRANSPORTS[name] = factory


def transport_names() -> list[str]:
    return sorted(_TRANSPORTS)


def get_transport(name: str, build_dir: str | os.PathLike[str], **options: Any) -> Transport:
    """The transport ``name`` connected to the accelerator of ``build_dir``."""
    if name not in _TRANSPORTS:
        raise unknown_name("transport", name, _TRANSPORTS)
    return _TRANSPORTS[name](build_dir, **options)
