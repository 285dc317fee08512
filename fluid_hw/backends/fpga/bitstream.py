# amaranth: UnusedElaboratable=no
"""``fluid-hw bitstream BUILD_DIR``: a compiled build folder -> a bitstream for its board.

    res = bitstream("build/mlp", board="ulx3s-85f")       # or the build's target board
    res["fmax_mhz"], res["timing_met"], res["resources_estimate_vs_actual"]
    bitstream("build/mlp", stop_after="synthesis")        # yosys.log, board_top.json

The build is a flat list of named steps (:data:`BITSTREAM_STEPS`, run by
:func:`~.steps.run_steps` like compile and simulate; stop after any with
``stop_after=`` / ``--stop-after``):

1. ``read_build``: ``accelerator.v``, ``design.json`` and ``report.json``
   (:func:`.board_top.read_build`), the board and the design clock;
2. ``budget_check``: the device-aware estimate
   (:func:`fluid_hw.hls.autofold.device_estimate`) against the device: multipliers and
   block RAMs that cannot fit stop the build before any tool;
3. ``board_top``: the Verilog in the accelerator board top
   (:class:`fluid_hw.boards.AcceleratorBoardTop`: PLL -> design clock, reset
   synchroniser, :class:`fluid_hw.rtl.UartBridge` on the USB-serial pins, nothing tied
   off) as RTLIL, and the pin constraints;
4. ``synthesis``: Yosys (``yosys.log``), its cell counts checked against the device;
5. ``place_and_route``: nextpnr (``nextpnr.log``);
6. ``pack``: ecppack / icepack;
7. ``write_report``: the result renamed ``accelerator.bit`` / ``accelerator.bin``,
   ``bitstream.json``, and merged into ``report.json`` (atomically) ``fmax_mhz``,
   ``timing_met``, ``critical_path``, ``resources_used``, ``resources_available``,
   ``throughput_per_s`` and ``latency_us`` at Fmax, ``resources_estimate_vs_actual``
   (per resource: estimate, Yosys, nextpnr, error %) and ``bitstream`` (board, clock,
   PLL, UART, tool times, logs).

All of it under the build folder's lock; the manifest is written last, only when every
step ran.  Timing that is not met is reported (``timing_met: false`` and a warning with
nextpnr's critical path), never hidden; a failing tool's error names its log.

A build of several accelerator regions (``segments.json``) runs the same steps with the
parts of :mod:`.bitstream_regions`: one board top holding every region's accelerator
behind one bridge with a region address, the budget and the report summed over the
regions.

Also here, as before, under their old names: :class:`.board_sim.BoardSimulation` (the
board top in Verilator behind a pseudo-terminal) and :func:`.calibration.calibrate`
(the LUT/FF calibration of :data:`fluid_hw.hls.autofold.CALIBRATION`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...boards import AcceleratorBoardTop, Board, ResourceBudgetError, constraints_text
from ...boards.toolchain import (
    RESULT_FILE,
    BitstreamResult,
    PnRResult,
    SynthResult,
    check_budget,
    check_router,
    flow_result,
    pack,
    place_and_route,
    print_progress,
    synthesize,
    write_board_top,
)
from ...drivers.build_dir import REPORT_KEYS, BuildDir, BuildDirError
from ...hls.lower import mac_count
from ...rtl import StageSpec
from ...tools import Progress, tell
from .bitstream_regions import check_regions_fit, read_regions, region_estimates, region_rows
from .board_sim import BoardSimulation, build_board_sim
from .board_top import (
    DEFAULT_BAUD,
    IDLE_TIMEOUT_S,
    BuildFolder,
    accelerator_board_top,
    estimate_on,
    make_bridge,
    read_build,
    resolve_board,
)
from .calibration import calibrate, calibration_designs
from .compile import DEFAULT_CLOCK_MHZ
from .steps import BuildError, Step, run_steps

__all__ = ["DEFAULT_BAUD", "DEFAULT_CLOCK_MHZ", "BITSTREAM_KEYS", "BITSTREAM_STEPS",
           "BitstreamOptions", "BitstreamState", "BuildFolder", "read_build",
           "resolve_board", "make_bridge", "accelerator_board_top", "bitstream",
           "run_bitstream", "estimate_on", "BoardSimulation", "build_board_sim", "calibrate",
           "calibration_designs", "IDLE_TIMEOUT_S"]

#: report.json keys this step writes
BITSTREAM_KEYS = REPORT_KEYS["bitstream"]
#: the board top's name in the build folder (``board_top.il``, ``board_top.json``, ...)
TOP_NAME = "board_top"


@dataclass(frozen=True)
class BitstreamOptions:
    """How to build (the arguments of :func:`bitstream`); the steps' results are in
    :class:`BitstreamState`."""

    board: str | Board | None = None
    clock_mhz: float | None = None
    baud: float = DEFAULT_BAUD
    seed: int = 1
    placer: str | None = None
    router: str | None = None
    nextpnr_args: Sequence[str] = ()
    check_resources: bool = True
    progress: Progress = print_progress
    timeout_s: float | None = None


@dataclass
class BitstreamState:
    """Everything the bitstream steps share: the folder, the options, and what each
    step made."""

    path: Path
    options: BitstreamOptions
    #: several accelerator regions (``segments.json``): :mod:`.bitstream_regions`
    regioned: bool = False
    # filled in by the steps
    builds: list[BuildFolder] = field(default_factory=list)
    board: Board | None = None
    clock_mhz: float = 0.0
    #: the whole design's device-aware estimate (with the board top), and each region's
    estimate: dict[str, int] = field(default_factory=dict)
    region_estimates: list[dict[str, int]] = field(default_factory=list)
    top: AcceleratorBoardTop | None = None
    constraints: Path | None = None
    sources: list[Path] = field(default_factory=list)
    synth: SynthResult | None = None
    pnr: PnRResult | None = None
    pnr_out: Path | None = None
    packed: Path | None = None
    #: tool seconds, in flow order (``rtlil``, ``yosys``, ``nextpnr``, the packer)
    seconds: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0
    #: the keys merged into report.json (by ``write_report``)
    keys: dict[str, Any] = field(default_factory=dict)

    def need_board(self) -> Board:
        assert self.board is not None, "the read_build step has not run"
        return self.board

    def need_top(self) -> AcceleratorBoardTop:
        assert self.top is not None, "the board_top step has not run"
        return self.top


# ---- the steps --------------------------------------------------------------------------

def _default_clock(build: BuildFolder, board: Board) -> float:
    if build.report.get("target") in (board.name, *board.aliases) and \
            build.report.get("clock_mhz"):
        return float(build.report["clock_mhz"])
    return DEFAULT_CLOCK_MHZ[board.family.name]


def _step_read_build(st: BitstreamState) -> str:
    st.builds = read_regions(st.path) if st.regioned else [read_build(st.path)]
    opt = st.options
    st.board = b = resolve_board(st.builds[0], opt.board)
    st.clock_mhz = (float(opt.clock_mhz) if opt.clock_mhz is not None
                    else _default_clock(st.builds[0], b))
    names = ", ".join(str(bf.info.get("name")) for bf in st.builds)
    return f"{names} for {b.name} ({b.device.name}) at {st.clock_mhz:g} MHz"


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


def say_estimate(progress: Progress, board: Board, est: Mapping[str, int]) -> None:
    tell(progress, f"estimate for {board.device.name}: " + ", ".join(
        f"{k} {v}/{board.device.resources.get(k, '?')}" for k, v in est.items()))


def _step_budget_check(st: BitstreamState) -> str:
    b, check = st.need_board(), st.options.check_resources
    if st.regioned:
        per, st.estimate = region_estimates(st.builds, b)
        st.region_estimates = [dict(e) for e in per]
    else:
        st.estimate = estimate_on(st.builds[0], b)
    say_estimate(st.options.progress, b, st.estimate)
    if check:
        if st.regioned:
            check_regions_fit(st.builds, b, st.region_estimates, st.estimate)
        else:
            _check_estimate(st.builds[0], b, st.estimate)
    return ("the estimate fits" if check else "skipped (check_resources=False)") + \
        f": dsp {st.estimate.get('dsp', 0)}, bram {st.estimate.get('bram', 0)}"


def _step_board_top(st: BitstreamState) -> str:
    opt, b = st.options, st.need_board()
    build = st.builds if st.regioned else st.builds[0]
    st.top = top = accelerator_board_top(build, b, clock_mhz=st.clock_mhz, baud=opt.baud)
    uart = top.bridge.describe()  # type: ignore[union-attr]
    tell(opt.progress, f"UART bridge: {uart['baud']:.0f} baud (divisor {uart['divisor']} at "
                       f"{top.clock_mhz:.3f} MHz)")
    st.t0 = time.monotonic()
    il, st.seconds["rtlil"] = write_board_top(top, st.path, name=TOP_NAME,
                                              progress=opt.progress)
    st.sources = [*top.verilog_sources, il]
    st.constraints = st.path / f"{TOP_NAME}{b.family.constraints_suffix}"
    st.constraints.write_text(constraints_text(b, top.pins, {top.clock_port: b.clock_mhz}))
    return f"{il.name}, {st.constraints.name}"


def _step_synthesis(st: BitstreamState) -> str:
    opt, b = st.options, st.need_board()
    st.synth = syn = synthesize(b, st.path, st.sources, TOP_NAME, progress=opt.progress,
                                timeout_s=opt.timeout_s, step="synthesis")
    st.seconds["yosys"] = syn.seconds
    if opt.check_resources:
        check_budget(b.device, syn.resources, design=f"design {TOP_NAME!r} (Yosys counts)")
    return ", ".join(f"{k} {syn.resources.get(k, 0)}" for k in ("lut", "ff", "dsp", "bram"))


def _step_place_and_route(st: BitstreamState) -> str:
    opt, b, top = st.options, st.need_board(), st.need_top()
    assert st.synth is not None and st.constraints is not None
    st.pnr, st.pnr_out, st.seconds["nextpnr"] = place_and_route(
        b, st.path, st.synth.netlist, st.constraints, top.clock_mhz, seed=opt.seed,
        placer=opt.placer, router=opt.router, extra_args=opt.nextpnr_args, progress=opt.progress,
        timeout_s=opt.timeout_s, step="place and route")
    return f"Fmax {st.pnr.fmax_mhz} MHz, timing {'met' if st.pnr.timing_met else 'NOT met'}"


def _step_pack(st: BitstreamState) -> str:
    b = st.need_board()
    assert st.pnr_out is not None
    st.packed, st.seconds[b.family.pack_tool] = pack(
        b, st.path, st.pnr_out, progress=st.options.progress,
        timeout_s=st.options.timeout_s, step="bitstream")
    return st.packed.name


def _step_write_report(st: BitstreamState) -> str:
    """Rename the bitstream ``accelerator.bit`` / ``.bin``, write ``bitstream.json`` and
    merge the keys into ``report.json``."""
    opt, b, top = st.options, st.need_board(), st.need_top()
    assert st.synth is not None and st.pnr is not None and st.packed is not None
    pll = top.pll_params
    res = flow_result(b, st.path, st.synth, st.pnr, st.packed, freq_mhz=top.clock_mhz,
                      requested_clock_mhz=top.requested_clock_mhz,
                      pll=pll.as_dict() if pll is not None else None, seconds=st.seconds)
    tell(opt.progress, res.summary())
    final = st.path / f"accelerator{res.bitstream.suffix}"
    os.replace(res.bitstream, final)
    res.bitstream = final
    bd = BuildDir(st.path)
    bd.write_json(RESULT_FILE, res.to_json())  # bitstream.json, atomic
    if st.regioned:
        report = bd.report(check=False)
        specs = [s for bf in st.builds for s in bf.specs()]
        extra: dict[str, Any] = {"regions": region_rows(st.builds, st.region_estimates),
                                 "registers": "registers.md"}
    else:
        report, specs, extra = st.builds[0].report, st.builds[0].specs(), {}
    uart = top.bridge.describe()  # type: ignore[union-attr]
    keys = _report_keys(report, specs, res, st.estimate, uart, top,
                        time.monotonic() - st.t0)
    keys["bitstream"]["pnr_options"] = _pnr_options(st.options, st.need_board())
    keys["bitstream"].update(extra)
    # a new Fmax: simulate's figures at the old one go (with a measured II, this step's
    # throughput_per_s is already measured cycles x Fmax: bitstream.ii_source)
    bd.update_report("bitstream", keys, drop=("measured_at_fmax",))
    if not res.timing_met:
        cp = res.critical_path
        tell(opt.progress, f"WARNING: timing NOT met: Fmax {res.fmax_mhz} MHz < "
                           f"{res.clock_mhz:.2f} MHz; critical path {cp.get('delay_ns')} ns "
                           f"from {cp.get('start')} to {cp.get('end')} (nextpnr.log)")
    st.keys = keys
    return f"{final.name}, {RESULT_FILE}, report.json"


BITSTREAM_STEPS: list[Step] = [
    Step("read_build", _step_read_build, "accelerator.v, design.json, report.json; board, "
         "clock"),
    Step("budget_check", _step_budget_check, "device-aware estimate against the device"),
    Step("board_top", _step_board_top, "board_top.il (PLL, reset, UART bridge), constraints"),
    Step("synthesis", _step_synthesis, "Yosys, its counts against the device"),
    Step("place_and_route", _step_place_and_route, "nextpnr: Fmax, timing, utilisation"),
    Step("pack", _step_pack, "ecppack / icepack"),
    Step("write_report", _step_write_report, "accelerator.bit/.bin, bitstream.json, "
         "report.json"),
]


def bitstream(build_dir: str | os.PathLike[str], *, board: str | Board | None = None,
              clock_mhz: float | None = None, baud: float = DEFAULT_BAUD, seed: int = 1,
              placer: str | None = None, router: str | None = None,
              nextpnr_args: Sequence[str] = (), check_resources: bool = True,
              progress: Progress = print_progress, timeout_s: float | None = None,
              stop_after: str | None = None
              ) -> dict[str, Any]:
    """Build the bitstream of a compiled build folder (see the module docstring);
    returns the keys merged into ``report.json`` (none when stopped before
    ``write_report``).  A build of several regions gets one bitstream holding all of
    them (:mod:`.bitstream_regions`)."""
    check_router(router)  # before any work
    opts = BitstreamOptions(board=board, clock_mhz=clock_mhz, baud=baud, seed=seed,
                            placer=placer, router=router, nextpnr_args=tuple(nextpnr_args),
                            check_resources=check_resources, progress=progress,
                            timeout_s=timeout_s)
    bd = BuildDir(build_dir)
    if not bd.path.is_dir():
        raise BuildError(f"build folder {bd.path} does not exist; make one with `fluid-hw "
                         "compile MODEL --out BUILD_DIR`")
    whole = stop_after is None or stop_after == BITSTREAM_STEPS[-1].name
    with bd.writing("bitstream", manifest=whole):
        try:
            bd.verify(force=True)
        except BuildDirError as e:
            raise BuildError(str(e)) from None
        return run_bitstream(bd.path, opts, stop_after=stop_after)


def run_bitstream(build_dir: str | os.PathLike[str], options: BitstreamOptions, *,
                  stop_after: str | None = None, regioned: bool | None = None
                  ) -> dict[str, Any]:
    """:data:`BITSTREAM_STEPS` on a build folder (the caller holds its lock: see
    :func:`bitstream`); ``regioned``: whether it is a build of several regions (default:
    whether it has ``segments.json``).  Returns the keys merged into ``report.json``."""
    path = Path(build_dir)
    if regioned is None:
        regioned = BuildDir(path).is_regioned
    st = BitstreamState(path, options, regioned=regioned)
    run_steps("bitstream", BITSTREAM_STEPS, st, stop_after)
    return st.keys


# ---- the report ---------------------------------------------------------------------------

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


def _pnr_options(opt: BitstreamOptions, board: Board) -> dict[str, Any]:
    """``report.json``'s ``bitstream.pnr_options``: the placer, router and seed nextpnr
    ran with (the family's / nextpnr's defaults where none was asked for) and any
    further arguments."""
    fam = board.family
    return {"placer": opt.placer or fam.default_placer,
            "router": opt.router or fam.default_router, "seed": opt.seed,
            "nextpnr_args": list(opt.nextpnr_args)}


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
        "ii_source": "measured" if measured.get("initiation_interval") else "estimate",
        "throughput_at_clock_per_s": res.clock_mhz * 1e6 / ii if ii else None,
        "latency_at_clock_us": lat / res.clock_mhz if lat else None,
        "estimate": dict(est),
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



if __name__ == "__main__":  # pragma: no cover - the calibration's old entry point
    from .calibration import main

    sys.exit(main(sys.argv[1:]))
