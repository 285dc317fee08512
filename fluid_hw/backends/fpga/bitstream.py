# amaranth: UnusedElaboratable=no
"""``fluid-hw bitstream BUILD_DIR``: a compiled build folder -> a bitstream for its board.

    res = bitstream("build/mlp", board="ulx3s-85f")       # or the build's target board
    res["fmax_mhz"], res["timing_met"], res["resources_estimate_vs_actual"]

Steps: read ``accelerator.v``, ``design.json`` and ``report.json``; wrap the Verilog
in the accelerator board top (:class:`fluid_hw.boards.AcceleratorBoardTop`: PLL ->
design clock, reset synchroniser, :class:`fluid_hw.rtl.UartBridge` on the USB-serial
pins, nothing tied off); check the device-aware estimate against the device
(:func:`fluid_hw.hls.autofold.device_estimate`); run Yosys -> nextpnr -> ecppack /
icepack in the build folder (tool logs ``yosys.log``, ``nextpnr.log``...); rename the
result ``accelerator.bit`` / ``accelerator.bin``; merge into ``report.json``
(atomically) ``fmax_mhz``, ``timing_met``, ``critical_path``, ``resources_used``,
``resources_available``, ``throughput_per_s`` and ``latency_us`` at Fmax,
``resources_estimate_vs_actual`` (per resource: estimate, Yosys, nextpnr, error %) and
``bitstream`` (board, clock, PLL, UART, tool times, logs).  Timing that is not met is
reported (``timing_met: false`` and a warning with nextpnr's critical path), never
hidden; a failing tool's error names its log.

A build of several accelerator regions (``segments.json``) goes to
:mod:`.bitstream_regions`: one board top holding every region's accelerator behind one
bridge with a region address, the budget and the report summed over the regions.

:class:`BoardSimulation` runs the same board top (its bridge at ``divisor`` clock
cycles a bit, no PLL) in Verilator, its serial pins behind a pseudo-terminal, so the
host's :class:`fluid_hw.drivers.serial.SerialTransport` can be tested end to end
without a board.  :func:`calibrate` measures the LUT/FF calibration of
:data:`fluid_hw.hls.autofold.CALIBRATION`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from amaranth.hdl import ClockDomain, ClockSignal, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from ...boards import (
    AcceleratorBoardTop,
    Board,
    ResourceBudgetError,
    VerilogCore,
    build_bitstream,
    get_board,
)
from ...boards.toolchain import RESULT_FILE, BitstreamResult, print_progress, synthesize
from ...drivers.build_dir import REPORT_KEYS, BuildDir, BuildDirError
from ...errors import UnknownNameError
from ...hls.autofold import device_estimate, specs_from_design
from ...hls.lower import mac_count
from ...rtl import AcceleratorTop, AXILiteSignature, StageGraph, StageSpec
from ...rtl.uart_bridge import UartBridge
from ...sim.build import VERILATOR_FLAGS, build_lock, sim_cells, verilate
from ...tools import cache_dir, ensure_yosys, verilator_version
from .compile import DEFAULT_CLOCK_MHZ
from .steps import BuildError

__all__ = ["DEFAULT_BAUD", "DEFAULT_CLOCK_MHZ", "BITSTREAM_KEYS", "BuildFolder", "read_build",
           "resolve_board", "make_bridge", "accelerator_board_top", "bitstream",
           "estimate_on", "BoardSimulation", "build_board_sim", "calibrate",
           "calibration_designs"]

#: the FT231X (ULX3S) and FT2232H (iCEBreaker) both run 3 Mbaud
DEFAULT_BAUD = 3_000_000
#: a half-received command is dropped after this long without a byte
IDLE_TIMEOUT_S = 0.02
#: report.json keys this step writes
BITSTREAM_KEYS = REPORT_KEYS["bitstream"]

Progress = Callable[[str], None] | None


# ---- the build folder ------------------------------------------------------------------

@dataclass
class BuildFolder:
    """What the bitstream step reads from a build folder."""

    path: Path
    verilog: Path
    info: dict[str, Any]
    report: dict[str, Any]

    @property
    def in_bytes(self) -> int:
        return int(self.info["in_lanes"])

    @property
    def out_bytes(self) -> int:
        return int(self.info["out_lanes"]) * int(self.info["out_bits"]) // 8

    def specs(self) -> list[StageSpec]:
        return specs_from_design(self.info.get("stages", []))

    def graph(self) -> StageGraph:
        """How the design's stages connect (design.json: each stage's ``inputs``, the
        joins' ``edge_fifo`` depths; a chain where absent)."""
        stages = self.info.get("stages", [])
        try:
            inputs = [tuple(int(p) for p in st.get("inputs", [k - 1]))
                      for k, st in enumerate(stages)]
            fifo = {(int(k), int(p)): int(d) for k, p, d in self.info.get("edge_fifo", [])}
        except (TypeError, ValueError) as e:
            raise BuildError(f"{self.path / 'design.json'}: malformed stage graph ({e}); "
                             "recompile the build") from None
        return StageGraph.of(inputs, fifo)


def read_build(build_dir: str | os.PathLike[str]) -> BuildFolder:
    """A single-region build folder, checked against its manifest."""
    d = Path(build_dir)
    if not d.is_dir():
        raise BuildError(f"build folder {d} does not exist; make one with `fluid-hw compile "
                         "MODEL --out BUILD_DIR`")
    bd = BuildDir(d)
    try:
        info = bd.design()
        bd.verilog()  # present, whole and this build's (synthesis reads the file)
        report = bd.report()
    except BuildDirError as e:
        raise BuildError(str(e)) from None
    return BuildFolder(d, bd.file("verilog"), info, report)


def resolve_board(build: BuildFolder, board: str | Board | None) -> Board:
    """``board``, else the build's target when that is a board."""
    if board is not None:
        return get_board(board)
    target = build.report.get("target")
    try:
        return get_board(str(target))
    except UnknownNameError:
        raise BuildError(f"{build.path}: its target {target!r} is not a board; say which board "
                         "to build for (--board ulx3s-85f, icebreaker, ...)") from None


def _builds(build: BuildFolder | Sequence[BuildFolder]) -> list[BuildFolder]:
    return [build] if isinstance(build, BuildFolder) else list(build)


def make_bridge(build: BuildFolder | Sequence[BuildFolder], *, clk_hz: float | None = None,
                baud: float | None = None, divisor: int | None = None,
                idle_timeout: int | None = None) -> UartBridge:
    """The UART bridge sized for the build's stream beats (a list of region builds: one
    region address each, in order)."""
    builds = _builds(build)
    if len(builds) == 1:
        return UartBridge(in_bytes=builds[0].in_bytes, out_bytes=builds[0].out_bytes,
                          divisor=divisor, clk_hz=clk_hz, baud=baud, idle_timeout=idle_timeout)
    return UartBridge(regions=[(b.in_bytes, b.out_bytes) for b in builds], divisor=divisor,
                      clk_hz=clk_hz, baud=baud, idle_timeout=idle_timeout)


def accelerator_board_top(build: BuildFolder | Sequence[BuildFolder], board: Board, *,
                          clock_mhz: float | None, baud: float = DEFAULT_BAUD,
                          pll: bool = True, divisor: int | None = None
                          ) -> AcceleratorBoardTop:
    """``accelerator.v`` (as a :class:`VerilogCore`) behind a UART bridge on ``board``;
    a list of region builds: each region's, behind one bridge with a region address.
    ``pll=False`` with ``divisor``: the simulation variant (oscillator clock, free baud
    divisor, no idle timeout)."""
    cores = [VerilogCore(b.verilog, top=str(b.info["name"])) for b in _builds(build)]
    core = cores[0] if len(cores) == 1 else cores
    if pll:
        def factory(clk_hz: float) -> UartBridge:
            return make_bridge(build, clk_hz=clk_hz, baud=baud,
                               idle_timeout=int(clk_hz * IDLE_TIMEOUT_S))
        return AcceleratorBoardTop(core, board, clock_mhz=clock_mhz, bridge=factory)
    return AcceleratorBoardTop(core, board, bridge=make_bridge(build, divisor=divisor or 8),
                               pll=False)


# ---- the step -------------------------------------------------------------------------

def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _default_clock(build: BuildFolder, board: Board) -> float:
    if build.report.get("target") in (board.name, *board.aliases) and \
            build.report.get("clock_mhz"):
        return float(build.report["clock_mhz"])
    return DEFAULT_CLOCK_MHZ[board.family.name]


def _check_estimate(build: BuildFolder, board: Board, est: Mapping[str, int]) -> None:
    """Multipliers and block RAMs are counted exactly: fail before synthesis when the
    design cannot fit (LUTs are left to Yosys' count)."""
    dev = board.device
    over = {r: est[r] - dev.resources[r] for r in ("dsp", "bram")
            if est.get(r, 0) > dev.resources.get(r, 0)}
    if not over:
        return
    names = {"dsp": dev.describe("dsp"), "bram": dev.describe("bram")}
    parts = [f"{est[r]} {names[r]} but {dev.name} has {dev.resources[r]} ({n} over)"
             for r, n in over.items()]
    tips = []
    if "bram" in over and dev.resources.get("spram"):
        tips.append(f"runtime weights in the {dev.resources['spram']} SPRAMs (not implemented "
                    "yet)")
    tips.append("recompile with a folding for this device (`fluid-hw compile ... --fold "
                "auto --target BOARD`) or fewer layers")
    raise ResourceBudgetError(f"{build.info.get('name')} (estimate) needs " + "; ".join(parts)
                              + ". Fix: " + "; or ".join(tips))


def _compare(est: Mapping[str, int], synth: Mapping[str, int], placed: Mapping[str, int]
             ) -> dict[str, dict[str, Any]]:
    out = {}
    for r in ("lut", "ff", "dsp", "bram"):
        a = synth.get(r)
        e = est.get(r)
        row: dict[str, Any] = {"estimate": e, "actual": a, "placed": placed.get(r)}
        row["error_pct"] = None if not a or e is None else round(100 * (e - a) / a, 1)
        out[r] = row
    return out


def estimate_on(build: BuildFolder, board: Board, *, board_top: bool = True
                ) -> dict[str, int]:
    """The device-aware estimate of the build's accelerator on ``board``'s device (with
    ``board_top``: plus the UART bridge and board logic)."""
    return device_estimate(build.specs(), board.device,
                           fifo_depth=int(build.info.get("fifo_depth", 2)),
                           in_lanes=build.in_bytes, out_lanes=int(build.info["out_lanes"]),
                           dsp_registers=build.info.get("ff_style") == "trellis",
                           graph=build.graph(), board_top=board_top)


def say_estimate(progress: Progress, board: Board, est: Mapping[str, int]) -> None:
    _say(progress, f"estimate for {board.device.name}: " + ", ".join(
        f"{k} {v}/{board.device.resources.get(k, '?')}" for k, v in est.items()))


def bitstream(build_dir: str | os.PathLike[str], *, board: str | Board | None = None,
              clock_mhz: float | None = None, baud: float = DEFAULT_BAUD, seed: int = 1,
              placer: str | None = None, nextpnr_args: Sequence[str] = (),
              check_resources: bool = True, progress: Progress = print_progress,
              timeout_s: float | None = None) -> dict[str, Any]:
    """Build the bitstream of a compiled build folder (see the module docstring);
    returns the keys merged into ``report.json``.  A build of several regions gets one
    bitstream holding all of them (:mod:`.bitstream_regions`)."""
    flow = dict(seed=seed, placer=placer, nextpnr_args=nextpnr_args,
                check_resources=check_resources, progress=progress, timeout_s=timeout_s)
    bd = BuildDir(build_dir)
    if not bd.path.is_dir():
        raise BuildError(f"build folder {bd.path} does not exist; make one with `fluid-hw "
                         "compile MODEL --out BUILD_DIR`")
    with bd.writing("bitstream"):
        try:
            bd.verify(force=True)
        except BuildDirError as e:
            raise BuildError(str(e)) from None
        return _bitstream(bd, board, clock_mhz, baud, flow)


def _bitstream(bd: BuildDir, board: str | Board | None, clock_mhz: float | None,
               baud: float, flow: dict[str, Any]) -> dict[str, Any]:
    build_dir = bd.path
    if bd.is_regioned:
        from .bitstream_regions import bitstream_regions

        return bitstream_regions(build_dir, board=board, clock_mhz=clock_mhz, baud=baud,
                                 **flow)  # type: ignore[arg-type]
    build = read_build(build_dir)
    b = resolve_board(build, board)
    clock = float(clock_mhz) if clock_mhz is not None else _default_clock(build, b)
    est = estimate_on(build, b)
    say_estimate(flow["progress"], b, est)
    if flow["check_resources"]:
        _check_estimate(build, b, est)
    top = accelerator_board_top(build, b, clock_mhz=clock, baud=baud)
    return build_and_report(build.path, top, build.report, build.specs(), est,
                            **flow)  # type: ignore[arg-type]


def build_and_report(path: Path, top: AcceleratorBoardTop, report: Mapping[str, Any],
                     specs: Sequence[StageSpec], est: Mapping[str, int], *, seed: int,
                     placer: str | None, nextpnr_args: Sequence[str], check_resources: bool,
                     progress: Progress, timeout_s: float | None,
                     extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the flow on ``top`` in ``path``, rename the bitstream ``accelerator.bit`` /
    ``.bin``, write ``bitstream.json`` and merge the keys (``extra`` into
    ``bitstream``) into ``path/report.json``."""
    uart = top.bridge.describe()  # type: ignore[union-attr]
    _say(progress, f"UART bridge: {uart['baud']:.0f} baud (divisor {uart['divisor']} at "
                   f"{top.clock_mhz:.3f} MHz)")
    t0 = time.monotonic()
    res = build_bitstream(top, path, name="board_top", seed=seed, placer=placer,
                          check_resources=check_resources, nextpnr_args=nextpnr_args,
                          progress=progress, timeout_s=timeout_s)
    final = path / f"accelerator{res.bitstream.suffix}"
    os.replace(res.bitstream, final)
    res.bitstream = final
    BuildDir(path).write_json(RESULT_FILE, res.to_json())  # bitstream.json, atomic
    keys = _report_keys(report, specs, res, est, uart, top, time.monotonic() - t0)
    keys["bitstream"].update(extra or {})
    BuildDir(path).update_report("bitstream", keys)
    if not res.timing_met:
        cp = res.critical_path
        _say(progress, f"WARNING: timing NOT met: Fmax {res.fmax_mhz} MHz < "
                       f"{res.clock_mhz:.2f} MHz; critical path {cp.get('delay_ns')} ns "
                       f"from {cp.get('start')} to {cp.get('end')} (nextpnr.log)")
    return keys


def _report_keys(rep: Mapping[str, Any], specs: Sequence[StageSpec], res: BitstreamResult,
                 est: Mapping[str, int], uart: Mapping[str, Any], top: AcceleratorBoardTop,
                 seconds: float) -> dict[str, Any]:
    measured = rep.get("measured") or {}
    estimate = rep.get("estimate") or {}
    ii = measured.get("initiation_interval") or estimate.get("initiation_interval")
    lat = measured.get("latency_cycles") or estimate.get("latency_cycles")
    keys = res.report()
    fmax = res.fmax_mhz
    keys["throughput_per_s"] = fmax * 1e6 / ii if fmax and ii else None
    keys["latency_us"] = lat / fmax if fmax and lat else None
    keys["resources_estimate_vs_actual"] = _compare(est, res.resources_synth,
                                                    res.resources_used)
    info = keys["bitstream"]
    info.update({
        "file": res.bitstream.name, "uart": dict(uart),
        "throughput_at_clock_per_s": res.clock_mhz * 1e6 / ii if ii else None,
        "latency_at_clock_us": lat / res.clock_mhz if lat else None,
        "estimate": dict(est), "placer": info.get("placer"),
        "board_top": {k: v for k, v in top.describe().items() if k != "uart"},
        "total_seconds": round(seconds, 1),
        "goals": _goals(specs, keys),
    })
    return keys


#: issue 7's goals for the ECP5 builds, reported (never enforced)
THROUGHPUT_GOAL = 0.5    # of the device's multiplier-bound rate
LATENCY_GOAL_US = 4.0    # batch 1 (one CPU core running onnxruntime: ~7.7 us)


def _goals(specs: Sequence[StageSpec], keys: Mapping[str, Any]) -> dict[str, Any]:
    """Throughput at Fmax against the device's multiplier bound (every multiplier
    doing one int8 product a cycle at Fmax) and batch-1 latency at Fmax."""
    macs = sum(mac_count(s) for s in specs)
    dsp = (keys.get("resources_available") or {}).get("dsp")
    fmax, tput, lat = keys.get("fmax_mhz"), keys.get("throughput_per_s"), keys.get("latency_us")
    bound = dsp * fmax * 1e6 / macs if dsp and fmax and macs else None
    ratio = tput / bound if bound and tput else None
    return {"macs_per_inference": macs, "multiplier_bound_per_s": bound,
            "throughput_vs_multiplier_bound": ratio, "throughput_goal": THROUGHPUT_GOAL,
            "throughput_goal_met": ratio is not None and ratio >= THROUGHPUT_GOAL,
            "latency_goal_us": LATENCY_GOAL_US,
            "latency_goal_met": lat is not None and lat < LATENCY_GOAL_US}


# ---- the board top in Verilator, behind a pseudo-terminal -------------------------------

BOARD_SIM_CPP = Template(r"""
// Generated by fluid_hw.backends.fpga.bitstream: the board top in Verilator, its
// serial pins bridged to a pseudo-terminal (argv[1]: the pty master's descriptor).
// Exits when stdin reaches end of file (the parent closed it or died).
#include "Vaccel.h"
#include "verilated.h"
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <vector>

static const int DIV = $DIVISOR;
static const uint64_t QUIET = 20000;  // idle cycles before waiting for the host

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: board_sim PTY_FD\n"); return 2; }
    const int fd = atoi(argv[1]);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    VerilatedContext* ctx = new VerilatedContext;
    ctx->randReset(0);
    Vaccel* top = new Vaccel(ctx, "board_top");
    uint64_t cycles = 0;
    auto tick = [&]() {
        top->$CLK = 0; top->eval();
        top->$CLK = 1; top->eval();
        cycles++;
    };
    top->$RX = 1;
    top->$RESET = $RESET_ON;
    for (int i = 0; i < 8; i++) tick();
    top->$RESET = !($RESET_ON);
    for (int i = 0; i < 8; i++) tick();

    std::deque<uint8_t> to_dev;      // host -> FPGA, waiting to be sent on rx
    std::vector<uint8_t> to_host;    // FPGA -> host, waiting to be written to the pty
    int ser_bit = -1, ser_cnt = 0;   // rx serialiser: bit index (-1 idle), cycles left
    uint16_t ser_word = 0;
    int des_bit = -1, des_cnt = 0;   // tx deserialiser
    uint8_t des_val = 0;
    uint64_t quiet = 0, bytes_in = 0, bytes_out = 0, framing = 0;
    int idle_polls = 0;
    uint8_t buf[4096];

    auto pull = [&]() {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) { to_dev.insert(to_dev.end(), buf, buf + n); bytes_in += n; idle_polls = 0; }
    };
    auto push = [&]() {
        while (!to_host.empty()) {
            ssize_t n = write(fd, to_host.data(), to_host.size());
            if (n <= 0) break;
            to_host.erase(to_host.begin(), to_host.begin() + n);
        }
    };
    for (;;) {
        if (ser_bit < 0 && !to_dev.empty()) {
            ser_word = (uint16_t)(0x200 | (to_dev.front() << 1));
            to_dev.pop_front();
            ser_bit = 0; ser_cnt = DIV;
        }
        top->$RX = ser_bit < 0 ? 1 : (ser_word >> ser_bit) & 1;
        tick();
        if (ser_bit >= 0 && --ser_cnt == 0) {
            ser_cnt = DIV;
            if (++ser_bit == 10) ser_bit = -1;
        }
        const int txv = top->$TX;
        if (des_bit < 0) {
            if (!txv) { des_bit = 0; des_cnt = DIV / 2; }
        } else if (--des_cnt == 0) {
            des_cnt = DIV;
            if (des_bit == 0) {
                if (txv) des_bit = -1; else { des_bit = 1; des_val = 0; }
            } else if (des_bit <= 8) {
                des_val |= (uint8_t)(txv << (des_bit - 1)); des_bit++;
            } else {
                if (txv) { to_host.push_back(des_val); bytes_out++; } else framing++;
                des_bit = -1;
                push();
            }
        }
        if ((cycles & 63) == 0 && to_dev.size() < 65536) pull();
        const bool busy = ser_bit >= 0 || !to_dev.empty() || des_bit >= 0 || !to_host.empty();
        quiet = busy ? 0 : quiet + 1;
        if ((cycles & 0xFFFF) == 0 || quiet > QUIET) {
            struct pollfd p[2] = {{0, POLLIN, 0}, {fd, POLLIN, 0}};
            const int wait_ms = quiet > QUIET ? (idle_polls < 2000 ? 1 : 20) : 0;
            poll(p, 2, wait_ms);
            if (p[0].revents & (POLLIN | POLLHUP)) {
                char c;
                if (read(0, &c, 1) <= 0) break;
            }
            if (p[1].revents & POLLIN) pull();
            else if (p[1].revents & POLLHUP) usleep(5000);  // no host has the port open
            if (quiet > QUIET) { idle_polls++; quiet = QUIET - 2000; }
        }
    }
    push();
    fprintf(stderr, "board_sim: %llu cycles, %llu bytes in, %llu bytes out, %llu framing "
            "errors\n", (unsigned long long)cycles, (unsigned long long)bytes_in,
            (unsigned long long)bytes_out, (unsigned long long)framing);
    top->final();
    delete top;
    delete ctx;
    return 0;
}
""")


def _board_top_verilog(top: AcceleratorBoardTop) -> str:
    """The board top (without the core, an instance of it) as Verilog, through the same
    Yosys passes :mod:`fluid_hw.sim.verilog` uses."""
    from amaranth._toolchain.yosys import find_yosys
    from amaranth.back import rtlil

    ensure_yosys()
    il = rtlil.convert(top, name="board_top", emit_src=False)
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    script = [f"read_rtlil <<rtlil\n{il}\nrtlil", "proc", "opt_expr", "opt_clean", "opt_dff",
              "opt_clean", "write_verilog -norename"]
    try:
        return str(yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True))
    except Exception as e:
        raise BuildError(f"Verilog emission of the board top failed: {e}") from e


def build_board_sim(build: BuildFolder | Sequence[BuildFolder], board: Board,
                    divisor: int = 8, progress: Progress = print_progress) -> Path:
    """The Verilated board top of ``build`` (bridge at ``divisor`` cycles a bit, no
    PLL) as an executable, built once and cached; a list of region builds: all of them
    behind one bridge with a region address."""
    builds = _builds(build)
    top = accelerator_board_top(builds, board, clock_mhz=None, pll=False, divisor=divisor)
    rst_port, active_high = top.reset_port
    cpp = BOARD_SIM_CPP.substitute(DIVISOR=divisor, CLK=top.clock_port,
                                   RX=top.board.pin("uart_rx").name,
                                   TX=top.board.pin("uart_tx").name, RESET=rst_port,
                                   RESET_ON=int(active_high))
    board_v = _board_top_verilog(top)
    accel_vs = [b.verilog.read_text() for b in builds]
    key = hashlib.sha256("\0".join([board_v, *accel_vs, cpp, " ".join(VERILATOR_FLAGS),
                                    verilator_version()]).encode()).hexdigest()[:24]
    root = cache_dir() / "board_sim"
    final = root / key
    exe = final / "obj" / "board_sim"
    if exe.exists():
        return exe
    with build_lock(root / f"{key}.lock"):
        if exe.exists():
            return exe
        names = ", ".join(str(b.info["name"]) for b in builds)
        _say(progress, f"building the Verilated board top of {names} on {board.name} "
                       f"(key {key}); this takes a minute")
        work = root / f"{key}.{os.getpid()}.tmp"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "board_top.v").write_text(board_v)
        files = [work / ("accelerator.v" if len(builds) == 1 else f"accelerator_r{k}.v")
                 for k in range(len(builds))]
        for f, text in zip(files, accel_vs):
            f.write_text(text)
        (work / "board_sim.cpp").write_text(cpp)
        verilate([work / "board_top.v", *files, *sim_cells("".join(accel_vs), work)],
                 "board_top", work,
                 exe_sources=[work / "board_sim.cpp"], output="board_sim",
                 runtime_tag="exe")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(work, final)
    return exe


class BoardSimulation:
    """A build's board top running in Verilator; ``port`` is the path of a
    pseudo-terminal wired to its serial pins (open it with
    ``SerialTransport(build_dir, port=sim.port)``, or ``Accelerator.open(build_dir,
    transport="serial", port=sim.port)``).  A multi-region build: every region behind
    one bridge with a region address, as in its bitstream.  ``divisor``: clock cycles a
    bit of the simulated UART.  Use as a context manager, or :meth:`close`."""

    def __init__(self, build_dir: str | os.PathLike[str], *, board: str | Board | None = None,
                 divisor: int = 8, progress: Progress = print_progress) -> None:
        if BuildDir(build_dir).is_regioned:
            from .bitstream_regions import read_regions

            builds = read_regions(build_dir)
        else:
            builds = [read_build(build_dir)]
        try:
            b = resolve_board(builds[0], board)
        except BuildError:
            b = get_board("ulx3s-85f")  # the pins only name the ports
        self.exe = build_board_sim(builds, b, divisor, progress)
        self.divisor = divisor
        master, self._slave = os.openpty()
        tty.setraw(self._slave, termios.TCSANOW)  # no echo: set before any byte flows
        self.port = os.ttyname(self._slave)
        self.log = Path(build_dir) / "board_sim.log"
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([str(self.exe), str(master)], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         pass_fds=(master,))
        os.close(master)

    def close(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if getattr(self, "_slave", -1) >= 0:
            os.close(self._slave)
            self._slave = -1

    def __enter__(self) -> BoardSimulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- calibration of the LUT/FF estimates ----------------------------------------------

def calibrate(designs: Mapping[str, Sequence[StageSpec]], boards: Sequence[str],
              work: str | os.PathLike[str], progress: Progress = print_progress
              ) -> dict[str, Any]:
    """Synthesise each accelerator (as its own top) for each board's family and compare
    Yosys' LUT and flip-flop counts with :func:`fluid_hw.hls.stages.estimate_pipeline`:
    the data behind :data:`fluid_hw.hls.autofold.CALIBRATION`.  Also measures the
    board top's share (a ``UartBridge`` with reset and heartbeat).  Returns per family
    the ratios per design and their mean."""
    from amaranth.back import rtlil

    from ...hls.stages import estimate_pipeline

    out: dict[str, Any] = {}
    root = Path(work)
    for board_name in boards:
        board = get_board(board_name)
        fam = board.family.name
        rows = {}
        for name, specs in designs.items():
            d = root / fam / name
            d.mkdir(parents=True, exist_ok=True)
            top = AcceleratorTop(list(specs))
            (d / "accel.il").write_text(rtlil.convert(top, name="accel"))
            syn = synthesize(board, d, [d / "accel.il"], "accel", progress=progress)
            e = estimate_pipeline(list(specs)).resources
            rows[name] = {"estimate": {"lut": e.lut, "ff": e.ff, "dsp": e.dsp, "bram": e.bram},
                          "yosys": {k: syn.resources.get(k, 0) for k in
                                    ("lut", "ff", "dsp", "bram")},
                          "lut_ratio": round(syn.resources.get("lut", 0) / e.lut, 3),
                          "ff_ratio": round(syn.resources.get("ff", 0) / e.ff, 3)}
        d = root / fam / "bridge"
        d.mkdir(parents=True, exist_ok=True)
        bridge = _BridgeOnly(UartBridge(in_bytes=1, out_bytes=1, divisor=33,
                                        idle_timeout=2_000_000))
        (d / "bridge.il").write_text(rtlil.convert(bridge, name="bridge"))
        syn = synthesize(board, d, [d / "bridge.il"], "bridge", progress=progress)
        n = len(rows)
        out[fam] = {"designs": rows,
                    "lut_scale": round(sum(r["lut_ratio"] for r in rows.values()) / n, 3),
                    "ff_scale": round(sum(r["ff_ratio"] for r in rows.values()) / n, 3),
                    "board_top": {k: syn.resources.get(k, 0) for k in ("lut", "ff")}}
    return out


class _BridgeOnly(wiring.Component):
    """A UART bridge with the board top's reset synchroniser and heartbeat, every
    port kept (for :func:`calibrate`)."""

    def __init__(self, bridge: UartBridge) -> None:
        self.bridge = bridge
        super().__init__(wiring.Signature({
            "clk": In(1), "rx": In(1), "tx": Out(1), "rst_in": In(1), "led": Out(1),
            "axil": Out(AXILiteSignature(UartBridge.ADDR_WIDTH)),
            "s_axis": Out(stream.Signature(8 * bridge.in_bytes + 1)),
            "m_axis": In(stream.Signature(8 * bridge.out_bytes + 1))}))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(self.clk)
        m.submodules.bridge = b = self.bridge
        m.submodules.reset_sync = ResetSynchronizer(self.rst_in)
        wiring.connect(m, b.axil, wiring.flipped(self.axil))
        wiring.connect(m, b.s_axis, wiring.flipped(self.s_axis))
        wiring.connect(m, wiring.flipped(self.m_axis), b.m_axis)
        hb = Signal(27)
        m.d.sync += hb.eq(hb + 1)
        m.d.comb += [b.rx.eq(self.rx), self.tx.eq(b.tx), self.led.eq(hb[-1])]
        return m


def calibration_designs() -> dict[str, list[StageSpec]]:
    """The accelerators :func:`calibrate` measures: MLPs folded from 1 x 1 to 2 x 16
    and 1 x 128, PE-heavy and SIMD-heavy, constant and runtime weights, a
    convolution + max pool + fully-connected design, and small convolutions alone and
    followed by each of the issue-13 kinds (depthwise convolution, average and global
    average pooling, table activation)."""
    import numpy as np

    from ...hls.stages import ConvStage, MaxPoolStage, MVAUStage

    rng = np.random.default_rng(0)

    def fc(name: str, mw: int, mh: int, pe: int, simd: int, relu: bool = True,
           mode: str = "const") -> MVAUStage:
        arr = {} if mode == "runtime" else dict(
            weights=rng.integers(-127, 128, (mh, mw)), bias=rng.integers(-5000, 5000, mh),
            multiplier=rng.integers(1, 2**15, mh), shift=rng.integers(16, 24, mh))
        return MVAUStage(name, mw, mh, pe=pe, simd=simd, relu=relu, weights_mode=mode, **arr)

    conv = ConvStage("conv", (1, 8, 8), 8, kernel=3, padding=1, pe=2, simd=3, relu=True,
                     weights=rng.integers(-127, 128, (8, 1, 3, 3)),
                     bias=rng.integers(-500, 500, 8), multiplier=rng.integers(1, 2**15, 8),
                     shift=rng.integers(10, 16, 8))
    designs = {
        "mlp_64_128_64_10": [fc("fc_0", 64, 128, 1, 32), fc("fc_1", 128, 64, 1, 32),
                             fc("fc_2", 64, 10, 1, 4, relu=False)],
        "mlp_64_128_64_10_1x1": [fc("fc_0", 64, 128, 1, 1), fc("fc_1", 128, 64, 1, 1),
                                 fc("fc_2", 64, 10, 1, 1, relu=False)],
        "mlp_64_128_64_10_2x16": [fc("fc_0", 64, 128, 2, 16), fc("fc_1", 128, 64, 2, 16),
                                  fc("fc_2", 64, 10, 1, 2, relu=False)],
        "mlp_64_32_10_1x1": [fc("fc_0", 64, 32, 1, 1), fc("fc_1", 32, 10, 1, 1, relu=False)],
        "mlp_64_32_10_4x8": [fc("fc_0", 64, 32, 4, 8), fc("fc_1", 32, 10, 2, 4, relu=False)],
        "mlp_32_16_10": [fc("fc_0", 32, 16, 1, 2), fc("fc_1", 16, 10, 1, 1, relu=False)],
        "fc_128_10_wide": [fc("fc_0", 128, 10, 1, 128, relu=False)],
        "mlp_16_64_16_pe": [fc("fc_0", 16, 64, 8, 2), fc("fc_1", 64, 16, 4, 4, relu=False)],
        "fc_8_8": [fc("fc_0", 8, 8, 1, 1, relu=False)],
        "mlp_runtime_16": [fc("fc_0", 16, 16, 4, 4, mode="runtime"),
                           fc("fc_1", 16, 16, 4, 4, relu=False, mode="runtime")],
        "mlp_runtime_64_32_10": [fc("fc_0", 64, 32, 1, 8, mode="runtime"),
                                 fc("fc_1", 32, 10, 1, 4, relu=False, mode="runtime")],
        "conv_pool_fc": [conv, MaxPoolStage("pool", (8, 8, 8), kernel=2),
                         fc("fc", 128, 10, 2, 8, relu=False)],
    }
    designs.update(_new_kind_designs(rng))
    return designs


def _new_kind_designs(rng: Any) -> dict[str, list[StageSpec]]:
    """Depthwise convolutions, average pools and table activations (issue 13), each
    behind a small 3x3 convolution (constant and runtime parameters); the convolutions
    alone too, so that each stage's share (a design's count less its convolution's) can
    be read off."""
    from ...hls.stages import ConvStage
    from ...rtl import AvgPoolSpec, DepthwiseSpec, TableSpec

    def conv(cout: int, pe: int, shape: tuple[int, int, int] = (1, 8, 8)) -> ConvStage:
        return ConvStage("conv", shape, cout, kernel=3, padding=1, pe=pe, simd=3, relu=True,
                         weights=rng.integers(-127, 128, (cout, shape[0], 3, 3)),
                         bias=rng.integers(-500, 500, cout),
                         multiplier=rng.integers(1, 2**15, cout),
                         shift=rng.integers(10, 16, cout))

    def dw(c: int, pe: int, k: int = 3, stride: int = 1, mode: str = "const"
           ) -> DepthwiseSpec:
        arr = {} if mode == "runtime" else dict(
            weights=rng.integers(-127, 128, (c, 1, k, k)), bias=rng.integers(-500, 500, c),
            multiplier=rng.integers(1, 2**15, c), shift=rng.integers(10, 16, c))
        return DepthwiseSpec("dw", (c, 8, 8), kernel=k, stride=stride, padding=k // 2,
                             pe=pe, relu=True, weights_mode=mode, **arr)

    def avg(c: int, k: int, mode: str = "const") -> AvgPoolSpec:
        return AvgPoolSpec("pool", (c, 8, 8), kernel=k, multiplier=1234, shift=16,
                           weights_mode=mode)

    def table(mode: str = "const") -> TableSpec:
        return TableSpec("act", (8, 8, 8), rng.integers(-128, 128, 256), weights_mode=mode)

    return {
        "conv_8_pe1": [conv(8, 1)],
        "conv_8_pe4": [conv(8, 4)],
        "conv_64_pe1": [conv(64, 1)],
        "conv_64_pe4": [conv(64, 4)],
        "conv_128_pe1": [conv(128, 1)],
        "conv_dw_8_pe1": [conv(8, 1), dw(8, 1)],
        "conv_dw_8_pe4": [conv(8, 4), dw(8, 4)],
        "conv_dw_8_pe1_runtime": [conv(8, 1), dw(8, 1, mode="runtime")],
        "conv_dw_8_pe4_runtime": [conv(8, 4), dw(8, 4, mode="runtime")],
        "conv_dw_64_pe1": [conv(64, 1), dw(64, 1)],
        "conv_dw_64_5x5s2_pe4": [conv(64, 4), dw(64, 4, k=5, stride=2)],
        "conv_avgpool_8_l1": [conv(8, 1), avg(8, 2)],
        "conv_avgpool_8_l4": [conv(8, 4), avg(8, 2)],
        "conv_gap_8_l1": [conv(8, 1), avg(8, 8)],
        "conv_gap_8_l4": [conv(8, 4), avg(8, 8)],
        "conv_gap_128_l1": [conv(128, 1), avg(128, 8)],
        "conv_table_8_l1": [conv(8, 1), table()],
        "conv_table_8_l4": [conv(8, 4), table()],
        "conv_avgpool_8_l1_runtime": [conv(8, 1), avg(8, 2, "runtime")],
        "conv_avgpool_8_l4_runtime": [conv(8, 4), avg(8, 2, "runtime")],
        "conv_table_8_l1_runtime": [conv(8, 1), table("runtime")],
        "conv_table_8_l4_runtime": [conv(8, 4), table("runtime")],
    }


def _main(argv: Sequence[str]) -> int:  # pragma: no cover - a developer's tool
    """``python -m fluid_hw.backends.fpga.bitstream calibrate WORK_DIR``."""
    if len(argv) != 2 or argv[0] != "calibrate":
        print("usage: python -m fluid_hw.backends.fpga.bitstream calibrate WORK_DIR")
        return 2
    designs = calibration_designs()
    res = calibrate(designs, ["ulx3s-85f", "icebreaker"], argv[1])
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
