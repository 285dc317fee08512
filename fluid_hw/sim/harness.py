"""The fast batch harness: a Verilated accelerator driven by a C++ stimulus loop,
called through ctypes.  Whole test sets run in one call::

    h = Harness(top)                      # builds (or reuses) the library
    h.load_params(top.specs)              # runtime weights, through AXI4-Lite
    res = h.run(x)                        # x: int8 [N, in_len]
    res.outputs, res.cycles, res.timestamps["out_last"]
    h.read("INFERENCES")

Timestamps (cycles from the start of the call) per inference: ``in_first``,
``in_last`` (its first/last input beat accepted), ``out_first``, ``out_last``
(first/last output beat, the one with ``m_axis_tlast``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from fluid_hw.rtl import AcceleratorTop, StageSpec, param_image
from fluid_hw.rtl.regmap import OKAY

from ._tools import SimulationError
from .build import HarnessBuild, build_harness

__all__ = ["Harness", "RunResult", "TIMESTAMP_DTYPE", "measure"]

TIMESTAMP_DTYPE = np.dtype([("in_first", np.int64), ("in_last", np.int64),
                            ("out_first", np.int64), ("out_last", np.int64)])

_i64p = ctypes.POINTER(ctypes.c_int64)
_libs: dict[str, ctypes.CDLL] = {}
_libs_lock = threading.Lock()


class RunResult(NamedTuple):
    """``outputs`` int8 (or int32) [N, out_len]; ``cycles`` the call took;
    ``timestamps`` a structured array [N] (:data:`TIMESTAMP_DTYPE`)."""

    outputs: np.ndarray
    cycles: int
    timestamps: np.ndarray


def _load(path: Path) -> ctypes.CDLL:
    with _libs_lock:
        if str(path) not in _libs:
            lib = ctypes.CDLL(str(path))
            lib.fh_new.restype = ctypes.c_void_p
            lib.fh_new.argtypes = [ctypes.c_char_p]
            lib.fh_free.argtypes = [ctypes.c_void_p]
            lib.fh_reset.argtypes = [ctypes.c_void_p, ctypes.c_int]
            lib.fh_cycle.restype = ctypes.c_uint64
            lib.fh_cycle.argtypes = [ctypes.c_void_p]
            lib.fh_trace_compiled.restype = ctypes.c_int
            lib.fh_run.restype = ctypes.c_int
            lib.fh_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                   ctypes.c_uint64, ctypes.c_int64, _i64p, _i64p]
            if hasattr(lib, "fh_run_seq"):  # designs with a recurrent first stage
                lib.fh_run_seq.restype = ctypes.c_int
                lib.fh_run_seq.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                           ctypes.c_uint64, ctypes.c_int64, _i64p, _i64p]
            lib.fh_axil_write.restype = ctypes.c_uint32
            lib.fh_axil_write.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                          ctypes.c_uint32, ctypes.c_int]
            lib.fh_axil_read.restype = ctypes.c_uint32
            lib.fh_axil_read.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                         ctypes.POINTER(ctypes.c_uint32)]
            lib.fh_axil_write_words.restype = ctypes.c_int64
            lib.fh_axil_write_words.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                                ctypes.c_void_p, ctypes.c_int64]
            _libs[str(path)] = lib
        return _libs[str(path)]


class Harness:
    """One simulated accelerator instance (reset on creation).

    ``top``: the design (built or taken from the cache); ``trace``: a ``.vcd`` or
    ``.fst`` path to record every cycle of this instance (a separate, traced build).
    """

    def __init__(self, top: AcceleratorTop | HarnessBuild, *, trace: str | os.PathLike[str]
                 | None = None) -> None:
        kind = None
        if trace is not None:
            kind = "fst" if str(trace).endswith(".fst") else "vcd"
        self.build = top if isinstance(top, HarnessBuild) else build_harness(top, trace=kind)
        if trace is not None and self.build.trace is None:
            raise SimulationError("tracing needs a harness built with trace='vcd' or 'fst'")
        self.info: dict[str, Any] = self.build.info
        self.regs: dict[str, int] = self.info["registers"]
        self._lib = _load(self.build.library)
        self._h = self._lib.fh_new(str(trace or "").encode())
        self.reset()

    def close(self) -> None:
        """Free the model (and close the trace file)."""
        if getattr(self, "_h", None):
            self._lib.fh_free(self._h)
            self._h = None

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    @property
    def cycle(self) -> int:
        """Cycles simulated since creation."""
        return int(self._lib.fh_cycle(self._h))

    def reset(self, cycles: int = 4) -> None:
        """Hold ``rst`` for ``cycles`` (resets everything but memory contents)."""
        self._lib.fh_reset(self._h, cycles)

    # ---- AXI4-Lite -------------------------------------------------------------------
    def _addr(self, reg: str | int) -> int:
        if isinstance(reg, int):
            return reg
        try:
            return self.regs[reg]
        except KeyError:
            raise SimulationError(f"no register {reg!r}; registers: "
                                  f"{', '.join(self.regs)}") from None

    def read_resp(self, reg: str | int) -> tuple[int, int]:
        """AXI4-Lite read: (data, RRESP)."""
        v = ctypes.c_uint32()
        resp = self._lib.fh_axil_read(self._h, self._addr(reg), ctypes.byref(v))
        if resp == 0xFF:
            raise SimulationError(f"AXI4-Lite read of {reg!r} hung")
        return int(v.value), int(resp)

    def read(self, reg: str | int) -> int:
        """Read a register (by name or byte address); a SLVERR raises."""
        data, resp = self.read_resp(reg)
        if resp != OKAY:
            raise SimulationError(f"AXI4-Lite read of {reg!r} answered RRESP={resp}")
        return data

    def write_resp(self, reg: str | int, value: int, strb: int = 0xF, order: str = "together"
                   ) -> int:
        """AXI4-Lite write; ``order``: ``together``, ``aw_first`` or ``w_first``.
        Returns BRESP."""
        o = {"together": 0, "aw_first": 1, "w_first": 2}[order]
        resp = self._lib.fh_axil_write(self._h, self._addr(reg), value & 0xFFFFFFFF, strb, o)
        if resp == 0xFF:
            raise SimulationError(f"AXI4-Lite write to {reg!r} hung")
        return int(resp)

    def write(self, reg: str | int, value: int) -> None:
        """Write a register; a SLVERR raises."""
        resp = self.write_resp(reg, value)
        if resp != OKAY:
            raise SimulationError(f"AXI4-Lite write to {reg!r} answered BRESP={resp}")

    def counters(self) -> dict[str, int]:
        """All counter registers (CYCLES as one 64-bit value)."""
        lo = self.read("CYCLES_LO")
        out = {"CYCLES": lo | self.read("CYCLES_HI") << 32}
        for n in ("BUSY_CYCLES", "INFERENCES", "INPUTS", "IN_STALL_CYCLES",
                  "IN_STARVE_CYCLES", "OUT_STALL_CYCLES"):
            out[n] = self.read(n)
        return out

    def load_params(self, specs: list[StageSpec]) -> int:
        """Load the runtime stages' current arrays through PARAM_ADDR/PARAM_DATA;
        returns the number of words written."""
        if not self.info["runtime_params"]:
            raise SimulationError(f"{self.info['name']} has no runtime parameters")
        total = 0
        for base, words in param_image(specs):
            self.write("PARAM_ADDR", base)
            w = np.ascontiguousarray(words, np.uint32)
            bad = self._lib.fh_axil_write_words(self._h, self.regs["PARAM_DATA"],
                                                w.ctypes.data, len(w))
            if bad:
                raise SimulationError(f"{bad} PARAM_DATA writes were not answered OKAY")
            total += len(w)
        return total

    # ---- streaming -------------------------------------------------------------------------
    def _max_idle(self, max_idle: int | None, ready_prob: float, valid_prob: float) -> int:
        """``max_idle`` or, by default, the design's ``cycle_bound`` stretched by the
        slower of the two handshake probabilities."""
        if max_idle is not None:
            return max_idle
        slow = 1.0 / max(0.01, min(ready_prob, valid_prob))
        return int(10_000 + 2 * slow * self.info.get("cycle_bound", 100_000))

    def _check(self, status: int, max_idle: int, progress: str, unit: str) -> None:
        """The C runner's status as an error: 1 a hang, 2 a misplaced TLAST."""
        if status == 1:
            raise SimulationError(f"{self.info['name']}: no stream transfer for {max_idle} "
                                  f"cycles after {progress} (hang)")
        if status == 2:
            raise SimulationError(f"{self.info['name']}: m_axis_tlast was not on the last "
                                  f"beat of an output {unit}")

    def run(self, inputs: np.ndarray, *, ready_prob: float = 1.0, valid_prob: float = 1.0,
            seed: int = 0, max_idle: int | None = None) -> RunResult:
        """Stream ``inputs`` (int8 [N, in_len], images in HWC order) and collect the N
        outputs.  ``ready_prob``: probability of ``m_axis_tready`` each cycle (random
        back-pressure); ``valid_prob``: of offering the next input beat.  Raises
        :class:`SimulationError` if nothing moves for ``max_idle`` cycles (default: from
        the design's ``cycle_bound`` and the probabilities)."""
        max_idle = self._max_idle(max_idle, ready_prob, valid_prob)
        x = np.asarray(inputs)
        in_len, out_len = self.info["in_len"], self.info["out_len"]
        if x.ndim != 2 or x.shape[1] != in_len:
            raise SimulationError(f"inputs must be [N, {in_len}], got {x.shape}")
        x = _int8(x)
        n = len(x)
        out_dtype = np.int8 if self.info["out_bits"] == 8 else np.int32
        out = np.zeros((n, out_len), out_dtype)
        ts = np.full(n, -1, TIMESTAMP_DTYPE)
        cycles, done = ctypes.c_int64(0), ctypes.c_int64(0)
        status = self._lib.fh_run(self._h, x.ctypes.data, n, in_len, out.ctypes.data, out_len,
                                  ts.ctypes.data, round(valid_prob * 1000),
                                  round(ready_prob * 1000), seed, max_idle,
                                  ctypes.byref(cycles), ctypes.byref(done))
        self._check(status, max_idle, f"{done.value} of {n} outputs", "vector")
        return RunResult(out, int(cycles.value), ts)

    def run_sequences(self, steps: np.ndarray, lengths: np.ndarray | list[int], *,
                      ready_prob: float = 1.0, valid_prob: float = 1.0, seed: int = 0,
                      max_idle: int | None = None) -> RunResult:
        """Stream sequences to a design whose first stage is recurrent (``design.json``
        ``sequence``): ``steps`` int8 ``[sum(lengths), in_len]``, every sequence's steps
        back to back (no padding), TLAST on each sequence's last beat.  Outputs:
        ``[N, out_len]`` (mode ``"last"``) or ``[sum(lengths), out_len]`` (mode
        ``"sequence"``: one beat a step, ``m_axis_tlast`` checked on each sequence's
        last); timestamps per sequence."""
        mode = self.info.get("sequence")
        if mode is None:
            raise SimulationError(f"{self.info['name']} takes fixed-size items, not "
                                  "sequences (its first stage is not recurrent): use run()")
        max_idle = self._max_idle(max_idle, ready_prob, valid_prob)
        in_len, out_len = self.info["in_len"], self.info["out_len"]
        ln = np.asarray(lengths, np.int64).reshape(-1)
        x = np.asarray(steps)
        if x.ndim != 2 or x.shape[1] != in_len or len(x) != int(ln.sum()):
            raise SimulationError(f"steps must be [sum(lengths) = {int(ln.sum())}, {in_len}], "
                                  f"got {x.shape}")
        if ln.size and ln.min() < 1:
            raise SimulationError("every sequence needs at least one step")
        x = _int8(x)
        n = len(ln)
        in_beats = np.ascontiguousarray(ln * (in_len // self.info["in_lanes"]), np.int64)
        per = ln if mode == "sequence" else np.full(n, out_len // self.info["out_lanes"])
        out_beats = np.ascontiguousarray(per, np.int64)
        rows = int(ln.sum()) if mode == "sequence" else n
        out_dtype = np.int8 if self.info["out_bits"] == 8 else np.int32
        out = np.zeros((rows, out_len), out_dtype)
        ts = np.full(n, -1, TIMESTAMP_DTYPE)
        cycles, done = ctypes.c_int64(0), ctypes.c_int64(0)
        status = self._lib.fh_run_seq(self._h, x.ctypes.data, n, in_beats.ctypes.data,
                                      out.ctypes.data, out_beats.ctypes.data, ts.ctypes.data,
                                      round(valid_prob * 1000), round(ready_prob * 1000),
                                      seed, max_idle, ctypes.byref(cycles),
                                      ctypes.byref(done))
        self._check(status, max_idle, f"{done.value} of {n} sequences", "packet")
        return RunResult(out, int(cycles.value), ts)


def _int8(x: np.ndarray) -> np.ndarray:
    """``x`` as contiguous int8, refused when a value does not fit."""
    if x.size and (x.min() < -128 or x.max() > 127):
        raise SimulationError("inputs must be int8 values")
    return np.ascontiguousarray(x, np.int8)


def measure(ts: np.ndarray) -> dict[str, float]:
    """Initiation interval (median spacing of the last output beats, second half of the
    run) and latency (first input beat to last output beat of the first inference)
    from a run's timestamps."""
    out = ts["out_last"]
    half = out[len(out) // 2:]
    ii = float(np.median(np.diff(half))) if len(half) > 1 else float("nan")
    return {"initiation_interval": ii,
            "latency_cycles": float(ts["out_last"][0] - ts["in_first"][0])}
