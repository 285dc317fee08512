"""The FPGA row, from a build folder (``fluid-hw compile`` + ``simulate`` [+ ``bitstream``]).

Three times, kept apart:

* **device**: the accelerator alone, the cycles ``simulate`` measured in Verilator
  (latency and initiation interval, ``report.json``'s ``measured``) at the
  post-route Fmax of the build's bitstream (``fmax_mhz``), or at the target clock
  when the build has no bitstream.  A batch of ``b`` takes
  ``latency + (b - 1) x II`` cycles.  Computed from measured cycles, not timed.
* **host**: the build's host programs (``host/pre.pb``: quantise the input;
  ``host/post.pb``: dequantise, softmax...) on the CPU executor, timed here.
* **UART**: the ULX3S's serial link at the bitstream's real baud rate
  (``report.json`` ``bitstream.uart.baud``; 3 Mbaud by default), from the bytes the
  protocol sends per inference (docs/uart_protocol.md: a 4-byte STREAM_IN header and
  the input beats; a tag byte and ``out_bytes`` per output beat), 10 bits a byte
  (8N1), one vector in flight (the driver's default window).  Computed from the
  protocol and the baud rate: it alone is hundreds of microseconds per inference.

Host to host = pre + UART + device + post for each inference.  Accuracy comes from
running the whole test set through the accelerator in Verilator (``Accelerator``
over the ``sim`` transport), bit for bit what the hardware computes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu.executor import Executor
from ..drivers import Accelerator
from ..drivers.build_dir import BuildDir
from ..drivers.serial_link import DEFAULT_BAUD
from ..errors import BenchError, FluidError
from ..ir.scope import Scope
from ..tools import Progress, tell
from .energy import PowerEstimate
from .host_rows import Skip, agreement, predict_all
from .measure import time_calls
from .model import TestSet, batch_of, top1

__all__ = ["fpga_row", "uart_bytes_per_inference"]

#: bits on the wire per byte: 8N1
BITS_PER_BYTE = 10


def uart_bytes_per_inference(design: dict[str, Any]) -> tuple[int, int]:
    """(bytes host -> board, bytes board -> host) for one input vector (protocol v1)."""
    in_bytes = design["in_lanes"] * design.get("in_bits", 8) // 8
    out_bytes = design["out_lanes"] * design["out_bits"] // 8
    in_beats = design["in_len"] // design["in_lanes"]
    out_beats = design["out_len"] // design["out_lanes"]
    return 4 + in_beats * in_bytes, out_beats * (1 + out_bytes)


def _read_build(path: str | os.PathLike[str]) -> tuple[BuildDir, dict[str, Any]]:
    d = Path(path)
    if not d.is_dir():
        raise BenchError(f"--fpga {d}: no such build folder; make one with `fluid-hw compile "
                         "MODEL_DIR --out BUILD` and `fluid-hw simulate BUILD ...`")
    bd = BuildDir(d)
    try:
        report = bd.report(missing_ok=False)
        bd.verify()
    except FluidError as e:
        raise BenchError(f"--fpga {d}: not a usable build folder: {e}") from None
    return bd, report


def fpga_row(build: str | os.PathLike[str], test: TestSet, batches: list[int],
             budget_s: float, power: PowerEstimate | None,
             reference: np.ndarray | None, progress: Progress) -> dict[str, Any]:
    """The row of the accelerator in ``build`` (see the module docstring)."""
    bd, report = _read_build(build)
    target = report.get("target", "?")
    if bd.is_regioned:
        raise Skip("a build with several accelerator regions: not benchmarked yet "
                   "(bench a single-region build)")
    meas = report.get("measured") or {}
    ii, lat = meas.get("initiation_interval"), meas.get("latency_cycles")
    if not ii or not lat or not np.isfinite(ii):
        raise Skip(f"{bd.path} has no measured cycles: run `fluid-hw simulate {bd.path} "
                   "--inputs X.npy` first")
    if report.get("fmax_mhz"):
        mhz, clock_how = float(report["fmax_mhz"]), "post-route Fmax"
    else:
        mhz, clock_how = float(report["clock_mhz"]), "target clock (no bitstream: no Fmax)"
    hz = mhz * 1e6

    def device_s(b: int) -> float:
        return (lat + (b - 1) * ii) / hz

    tell(progress, f"fpga:{target}: the test set through the accelerator in Verilator")
    with Accelerator.open(bd.path, "sim") as acc:
        outputs = predict_all(lambda f: acc.run(f)[0], test)
        hw_out = acc.last.hw_outputs if acc.last is not None else None
        design = acc.info
        pre, post = acc.programs["pre"], acc.programs["post"]
        exe, base = Executor(), acc.scope
        host = acc.host
    assert hw_out is not None
    uart = (report.get("bitstream") or {}).get("uart") or {}
    baud = float(uart.get("baud") or DEFAULT_BAUD)
    up, down = uart_bytes_per_inference(design)
    uart_s = (up + down) * BITS_PER_BYTE / baud

    hw_all = np.concatenate([hw_out] * -(-max(batches) // len(hw_out)))

    def host_parts(feed: dict[str, np.ndarray], b: int) -> None:
        scope = Scope(base)
        pre_feed = {k: v for k, v in feed.items() if pre.global_block().has_var(k)}
        exe.run(pre, feed=pre_feed, fetch_list=[host.hw_input], scope=scope)
        post_feed = {k: v for k, v in feed.items() if post.global_block().has_var(k)}
        post_feed[host.hw_output] = hw_all[:b]
        exe.run(post, feed=post_feed, fetch_list=host.fetches, scope=scope)

    sweep, lat1 = [], None
    for b in batches:
        feed = batch_of(test, b)
        t = time_calls(lambda f=feed, b=b: host_parts(f, b), budget_s)  # type: ignore[misc]
        dev = device_s(b)
        h2h = t.median_s + b * (uart_s + device_s(1))
        row = {"batch": b, "device_latency_us": dev * 1e6, "device_per_s": b / dev,
               "host_programs_us": t.median_s * 1e6, "uart_us": b * uart_s * 1e6,
               "latency_us": h2h * 1e6, "per_s": b / h2h, "runs": t.runs}
        sweep.append(row)
        if b == 1:
            lat1 = {"median_us": h2h * 1e6,
                    "p99_us": (t.p99_s + uart_s + device_s(1)) * 1e6, "runs": t.runs,
                    "host_programs_median_us": t.median_s * 1e6,
                    "host_programs_p99_us": t.p99_s * 1e6}
        tell(progress, f"fpga:{target}: batch {b}: device {dev * 1e6:.2f} us, host to host "
                       f"{h2h * 1e6:.1f} us (UART {b * uart_s * 1e6:.0f} us)")
    energy: dict[str, Any]
    if power is None:
        device = (report.get("bitstream") or {}).get("device") or target
        energy = {"source": f"unavailable: no documented power estimate for {device} at this "
                            "utilisation and clock; give one with --fpga-power WATTS "
                            "--fpga-power-source TEXT (e.g. from Lattice's Power Calculator)"}
    else:
        energy = {"source": f"estimate: {power.watts:g} W ({power.source}) x device time",
                  "watts": power.watts}
        for b in (batches[0], batches[-1]):
            energy[f"j_per_inference_batch{b}"] = power.watts * device_s(b) / b
    used = report.get("resources_used") or (report.get("estimate") or {}).get("resources", {})
    return {
        "backend": f"fpga:{target}", "variant": "int8 accelerator", "status": "measured",
        "build": str(bd.path),
        "clock": {"mhz": mhz, "how": clock_how,
                  "bitstream_clock_mhz": (report.get("bitstream") or {}).get("clock_mhz")},
        "cycles": {"latency": lat, "initiation_interval": ii},
        "latency_us": {"device": {"median_us": device_s(1) * 1e6, "p99_us": device_s(1) * 1e6,
                                  "how": f"simulated cycles x {clock_how} {mhz:g} MHz"},
                       "host": lat1},
        "uart": {"baud": baud, "bytes_in": up, "bytes_out": down, "us_per_inference":
                 uart_s * 1e6, "how": "protocol bytes x 10 bits / baud (8N1), window 1"
                 + ("" if uart.get("baud") else "; no bitstream: the default baud rate")},
        "throughput": sweep,
        "accuracy": top1(outputs, test.labels),
        "agreement": agreement(outputs, reference),
        "bit_exact_build": report.get("bit_exact"),
        "energy": energy,
        "resources": {"used": used, "available": report.get("resources_available") or {},
                      "timing_met": report.get("timing_met")},
    }
