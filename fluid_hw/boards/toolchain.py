"""The open-source bitstream flow: Yosys -> nextpnr -> ecppack / icepack.

Tools are data (:data:`TOOLS`): each has a default (the YoWASP build from PyPI),
an environment variable that points to a native build instead, and the package
to install when it is missing.  Each step writes its log into the build folder;
a failing tool raises :class:`ToolFailedError` with the log path and its last
lines.  After synthesis the design's Yosys cell counts are checked against the
device (:func:`check_budget`), so a design with more multipliers or block RAMs
than the device has fails at once with the resource and how far over it is,
instead of deep inside nextpnr.

Entry points:

- :func:`build_bitstream`: a :class:`~fluid_hw.boards.top.BoardTop` to a bitstream;
- :func:`run_flow`: any RTLIL/Verilog top whose ports are board pins;
- the steps :func:`write_board_top`, :func:`synthesize`, :func:`place_and_route`,
  :func:`pack`, and :func:`flow_result` (their results as a :class:`BitstreamResult`);
- parsers :func:`parse_yosys_stat`, :func:`parse_nextpnr_report`,
  :func:`parse_nextpnr_log`.

YoWASP tools need their files under the working directory (they see ``/tmp`` as
a private folder), so every tool runs in the build folder with relative paths,
and sources from elsewhere are copied into ``BUILD_DIR/src/``.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FluidError, ResourceBudgetError, ToolFailedError
from ..tools import BOARD_TOOLS, Progress, Tool, find_tool, print_progress, run_tool, tell
from ..tools import TOOLS as ALL_TOOLS
from .constraints import constraints_text
from .devices import Board, Device, Pin, all_boards, get_board

__all__ = [
    "BitstreamResult",
    "PnRResult",
    "SynthResult",
    "TOOLS",
    "Tool",
    "build_bitstream",
    "check_budget",
    "find_tool",
    "flow_result",
    "pack",
    "parse_nextpnr_log",
    "parse_nextpnr_report",
    "parse_yosys_stat",
    "place_and_route",
    "run_flow",
    "run_tool",
    "synthesize",
    "write_board_top",
]

# the tools (rows, lookup, runs, progress) are fluid_hw.tools'; these names stay here
TOOLS: dict[str, Tool] = {k: ALL_TOOLS[k] for k in BOARD_TOOLS}


# ---------------------------------------------------------------------------
# parsers


def parse_yosys_stat(path: Path) -> dict[str, int]:
    """Cells by type of the whole design from ``stat -json`` output (Yosys'
    internal ``$scopeinfo`` cells left out)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ToolFailedError(f"cannot read Yosys statistics {path}: {e}") from None
    section = data.get("design")
    if section is None:  # one module only
        modules = data.get("modules", {})
        section = next(iter(modules.values()), {}) if len(modules) == 1 else {}
    cells = section.get("num_cells_by_type", {})
    return {str(k): int(v) for k, v in sorted(cells.items()) if not str(k).startswith("$scope")}


def _clock_name(name: str) -> str:
    return name.removeprefix("$glbnet$")


def _critical_path(entry: Mapping[str, Any]) -> dict[str, Any]:
    steps = []
    for seg in entry.get("path", []):
        src, dst = seg.get("from", {}), seg.get("to", {})
        step: dict[str, Any] = {
            "type": seg.get("type", ""),
            "from": f"{src.get('cell', '')}.{src.get('port', '')}",
            "to": f"{dst.get('cell', '')}.{dst.get('port', '')}",
            "delay_ns": round(float(seg.get("delay", 0.0)), 3),
        }
        if seg.get("net"):
            step["net"] = seg["net"]
        steps.append(step)
    return {
        "from_clock": _clock_name(str(entry.get("from", "")).removeprefix("posedge ")),
        "to_clock": _clock_name(str(entry.get("to", "")).removeprefix("posedge ")),
        "delay_ns": round(sum(s["delay_ns"] for s in steps), 3),
        "start": steps[0]["from"] if steps else "",
        "end": steps[-1]["to"] if steps else "",
        "steps": steps,
    }


@dataclass
class PnRResult:
    """What nextpnr reports: per-clock Fmax, utilisation, critical paths."""

    #: clock -> {"fmax_mhz": achieved, "target_mhz": constraint}
    clocks: dict[str, dict[str, float]]
    #: BEL type -> {"used": n, "available": n}
    utilisation: dict[str, dict[str, int]]
    #: Each as :func:`_critical_path` makes it, worst clock first where known.
    critical_paths: list[dict[str, Any]] = field(default_factory=list)

    @property
    def worst_clock(self) -> str | None:
        if not self.clocks:
            return None
        return min(self.clocks, key=lambda c: (self.clocks[c]["fmax_mhz"]
                                               / max(self.clocks[c]["target_mhz"], 1e-9)))

    @property
    def fmax_mhz(self) -> float | None:
        clk = self.worst_clock
        return None if clk is None else self.clocks[clk]["fmax_mhz"]

    @property
    def timing_met(self) -> bool:
        return all(c["fmax_mhz"] >= c["target_mhz"] for c in self.clocks.values())

    @property
    def critical_path(self) -> dict[str, Any]:
        """The worst clock's register-to-register critical path ({} if none)."""
        clk = self.worst_clock
        for p in self.critical_paths:
            if p["from_clock"] == clk and p["to_clock"] == clk:
                return p
        return self.critical_paths[0] if self.critical_paths else {}


def parse_nextpnr_report(path: Path) -> PnRResult:
    """Read nextpnr's ``--report`` JSON (nextpnr 0.4 and later)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ToolFailedError(f"cannot read nextpnr report {path}: {e}") from None
    clocks = {
        _clock_name(name): {"fmax_mhz": float(v["achieved"]), "target_mhz": float(v["constraint"])}
        for name, v in data.get("fmax", {}).items()
    }
    util = {k: {"used": int(v["used"]), "available": int(v["available"])}
            for k, v in data.get("utilization", {}).items()}
    paths = [_critical_path(p) for p in data.get("critical_paths", [])]
    return PnRResult(clocks=clocks, utilisation=util, critical_paths=paths)


_FMAX_LINE = re.compile(
    r"Max frequency for clock\s+'([^']+)':\s+([\d.]+)\s+MHz\s+\((?:PASS|FAIL) at ([\d.]+) MHz\)")
_UTIL_LINE = re.compile(r"^Info:\s+([A-Z][A-Z0-9_]+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)


def parse_nextpnr_log(text: str) -> PnRResult:
    """Fmax and utilisation from a nextpnr log (for builds without ``--report``):
    the last "Max frequency" line per clock is the post-route one; the last
    utilisation table is the final one."""
    clocks: dict[str, dict[str, float]] = {}
    for m in _FMAX_LINE.finditer(text):
        clocks[_clock_name(m.group(1))] = {"fmax_mhz": float(m.group(2)),
                                           "target_mhz": float(m.group(3))}
    util: dict[str, dict[str, int]] = {}
    for m in _UTIL_LINE.finditer(text):
        util[m.group(1)] = {"used": int(m.group(2)), "available": int(m.group(3))}
    return PnRResult(clocks=clocks, utilisation=util)


# ---------------------------------------------------------------------------
# resource budget


def check_budget(device: Device, used: Mapping[str, int], *, design: str = "design") -> None:
    """Raise :class:`ResourceBudgetError` when ``used`` (generic resources, e.g.
    from Yosys' counts) exceeds what ``device`` has, naming each resource, how
    far over it is and which boards of the family would fit."""
    over = {res: n for res, n in used.items()
            if res in device.resources and n > device.resources[res]}
    if not over:
        return
    parts = []
    for res, n in over.items():
        avail = device.resources[res]
        pct = 100.0 * n / avail if avail else float("inf")
        parts.append(f"{n} {device.describe(res)} but {device.name} has {avail} "
                     f"({n - avail} over, {pct:.0f}% of the device)")
    fits = [b.name for b in all_boards().values()
            if b.device.family is device.family and b.device is not device
            and all(b.device.resources.get(r, 0) >= n for r, n in over.items())]
    hint = {"dsp": "lower the folding (fewer PE x SIMD multipliers)",
            "lut": "lower the folding (less parallel logic)",
            "ff": "lower the folding (less parallel logic)",
            "bram": "keep fewer weights on chip (narrower or shallower memories)",
            "spram": "smaller SPRAM buffers"}
    advice = "; ".join(dict.fromkeys(hint[r] for r in over if r in hint))
    msg = f"{design} needs " + "; and ".join(parts) + "."
    if advice:
        msg += f" Fix: {advice}"
    msg += (f"; or build for {', '.join(fits)}." if fits else ".")
    raise ResourceBudgetError(msg)


# ---------------------------------------------------------------------------
# steps


@dataclass
class SynthResult:
    netlist: Path
    cells_by_type: dict[str, int]
    resources: dict[str, int]
    seconds: float
    log: Path


def _local_sources(build_dir: Path, sources: Sequence[Path]) -> list[str]:
    out = []
    for src in sources:
        src = Path(src).resolve()
        try:
            rel = src.relative_to(build_dir.resolve())
        except ValueError:
            dst = build_dir / "src" / src.name
            dst.parent.mkdir(exist_ok=True)
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                shutil.copyfile(src, dst)
            rel = dst.relative_to(build_dir)
        out.append(rel.as_posix())
    return out


def _read_command(src: str) -> str:
    if src.endswith(".il"):
        return f"read_rtlil {src}"
    if src.endswith(".sv"):
        return f"read_verilog -sv {src}"
    return f"read_verilog {src}"


def synthesize(board: Board, build_dir: Path, sources: Sequence[Path], top: str, *,
               progress: Progress = print_progress, timeout_s: float | None = None,
               step: str = "synthesis") -> SynthResult:
    """Yosys: read ``sources`` (``.il`` RTLIL, ``.v``/``.sv`` Verilog), run the
    family's synthesis script, write ``{top}.json`` and ``yosys_stat.json``."""
    family = board.family
    files = _local_sources(build_dir, sources)
    netlist = f"{top}.json"
    script = ["# written by fluid_hw.boards.toolchain", *(_read_command(s) for s in files),
              *(c.format(top=top, netlist=netlist) for c in family.synth_commands),
              "tee -q -o yosys_stat.json stat -json"]
    (build_dir / "synth.ys").write_text("\n".join(script) + "\n")
    seconds = run_tool("yosys", ["-s", "synth.ys"], cwd=build_dir, log="yosys.log",
                       step=f"{step} (synth_{family.name}, {board.device.name})",
                       progress=progress, timeout_s=timeout_s)
    cells = parse_yosys_stat(build_dir / "yosys_stat.json")
    return SynthResult(netlist=build_dir / netlist, cells_by_type=cells,
                       resources=family.count_resources(cells), seconds=seconds,
                       log=build_dir / "yosys.log")


def _format_args(template: Sequence[str], values: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for item in template:
        if item == "{device_args}":
            out += list(values["device_args"])
        else:
            out.append(item.format(**values))
    return out


#: the routers nextpnr offers (``--router``)
ROUTERS = ("router1", "router2")


def check_router(router: str | None) -> None:
    """Refuse a router nextpnr does not have, naming the ones it has."""
    if router is not None and router not in ROUTERS:
        raise FluidError(f"unknown nextpnr router {router!r}; use one of "
                         f"{', '.join(ROUTERS)} (or none: nextpnr's default, router1)")


def place_and_route(board: Board, build_dir: Path, netlist: Path, constraints: Path,
                    freq_mhz: float, *, seed: int = 1, placer: str | None = None,
                    router: str | None = None, extra_args: Sequence[str] = (),
                    progress: Progress = print_progress, timeout_s: float | None = None,
                    step: str = "place and route") -> tuple[PnRResult, Path, float]:
    """nextpnr with ``--freq freq_mhz`` (clocks nextpnr cannot derive from the
    constraints), ``--timing-allow-fail`` and a JSON report; returns the parsed
    report, the placed-and-routed output (``.config``/``.asc``) and seconds.
    ``router``: nextpnr's ``--router`` (:data:`ROUTERS`; default: nextpnr's own)."""
    check_router(router)
    family, dev = board.family, board.device
    pnr_out = f"{netlist.stem}{family.pnr_suffix}"
    values = {"device_args": dev.nextpnr_device, "package": dev.package, "speed": dev.speed,
              "netlist": netlist.name, "constraints": constraints.name,
              "pnr_out": pnr_out, "report": "nextpnr_report.json",
              "freq": f"{freq_mhz:.6f}", "seed": seed,
              "placer": placer or family.default_placer}
    args = _format_args(family.pnr_args, values) + list(extra_args)
    if router is not None:
        args += ["--router", router]
    report = build_dir / "nextpnr_report.json"
    report.unlink(missing_ok=True)
    seconds = run_tool(family.pnr_tool, args, cwd=build_dir, log="nextpnr.log",
                       step=f"{step} ({family.pnr_tool}, target {freq_mhz:.2f} MHz)",
                       progress=progress, timeout_s=timeout_s)
    if report.is_file():
        result = parse_nextpnr_report(report)
    else:  # an old native nextpnr without --report
        result = parse_nextpnr_log((build_dir / "nextpnr.log").read_text(errors="replace"))
    return result, build_dir / pnr_out, seconds


def pack(board: Board, build_dir: Path, pnr_out: Path, *, progress: Progress = print_progress,
         timeout_s: float | None = None, step: str = "bitstream") -> tuple[Path, float]:
    """ecppack / icepack: the placed-and-routed design to a bitstream."""
    family = board.family
    bitstream = build_dir / f"{pnr_out.stem}{family.bitstream_suffix}"
    args = _format_args(family.pack_args, {"pnr_out": pnr_out.name, "bitstream": bitstream.name})
    seconds = run_tool(family.pack_tool, args, cwd=build_dir, log=f"{family.pack_tool}.log",
                       step=f"{step} ({family.pack_tool})", progress=progress,
                       timeout_s=timeout_s)
    if not bitstream.is_file() or bitstream.stat().st_size == 0:
        raise ToolFailedError(f"{family.pack_tool} wrote no bitstream {bitstream}; log: "
                              f"{build_dir / (family.pack_tool + '.log')}")
    return bitstream, seconds


# ---------------------------------------------------------------------------
# the result and the whole flow


@dataclass
class BitstreamResult:
    """Everything a bitstream build produced.  :meth:`report` gives the build
    report keys of DESIGN.md (``fmax_mhz``, ``timing_met``, ``critical_path``,
    ``resources_used``, ``resources_available``)."""

    board: str
    device: str
    family: str
    bitstream: Path
    #: The design clock the build was constrained to (the PLL's achieved output).
    clock_mhz: float
    requested_clock_mhz: float
    fmax_mhz: float | None
    timing_met: bool
    #: The worst clock's critical path: clocks, total delay, start/end, steps
    #: (``type``, ``from``/``to`` cell.port, ``net``, ``delay_ns``) as nextpnr lists them.
    critical_path: dict[str, Any]
    #: clock -> {"fmax_mhz", "target_mhz"}
    clocks: dict[str, dict[str, float]]
    #: Generic resources after place and route (nextpnr), Yosys where nextpnr
    #: has no separate count (ECP5 carries; iCE40 flip-flops and carries).
    resources_used: dict[str, int]
    resources_available: dict[str, int]
    #: Generic resources from Yosys' cells (what the budget check used).
    resources_synth: dict[str, int]
    cells_by_type: dict[str, int]
    #: nextpnr's utilisation by BEL type.
    utilisation: dict[str, dict[str, int]]
    pll: dict[str, Any] | None
    logs: dict[str, Path]
    seconds: dict[str, float]
    build_dir: Path

    def report(self) -> dict[str, Any]:
        """The keys this step contributes to ``BUILD_DIR/report.json``."""
        return {
            "fmax_mhz": None if self.fmax_mhz is None else round(self.fmax_mhz, 2),
            "timing_met": self.timing_met,
            "critical_path": self.critical_path,
            "resources_used": dict(self.resources_used),
            "resources_available": dict(self.resources_available),
            "bitstream": {
                "board": self.board, "device": self.device, "file": self.bitstream.name,
                "clock_mhz": self.clock_mhz, "requested_clock_mhz": self.requested_clock_mhz,
                "clocks": self.clocks, "pll": self.pll, "cells_by_type": self.cells_by_type,
                "resources_synth": self.resources_synth,
                "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
                "logs": {k: p.name for k, p in self.logs.items()},
            },
        }

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("bitstream", "build_dir"):
            d[k] = str(d[k])
        d["logs"] = {k: str(v) for k, v in self.logs.items()}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BitstreamResult:
        d = dict(d)
        d["bitstream"] = Path(d["bitstream"])
        d["build_dir"] = Path(d["build_dir"])
        d["logs"] = {k: Path(v) for k, v in d["logs"].items()}
        return cls(**d)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> BitstreamResult:
        return cls.from_json(json.loads(Path(path).read_text()))

    def summary(self) -> str:
        fmax = "n/a" if self.fmax_mhz is None else f"{self.fmax_mhz:.1f} MHz"
        res = ", ".join(f"{k} {self.resources_used.get(k, 0)}/{v}"
                        for k, v in self.resources_available.items() if k != "io")
        return (f"{self.board} ({self.device}): Fmax {fmax} at {self.clock_mhz:.2f} MHz "
                f"({'met' if self.timing_met else 'NOT met'}); {res}; {self.bitstream}")


RESULT_FILE = "bitstream.json"


def flow_result(board: Board, build_dir: Path, synth: SynthResult, pnr: PnRResult,
                bitstream: Path, *, freq_mhz: float, requested_clock_mhz: float | None,
                pll: Mapping[str, Any] | None, seconds: Mapping[str, float]
                ) -> BitstreamResult:
    """The :class:`BitstreamResult` of the steps' results (resources used: Yosys',
    nextpnr's where it counts them)."""
    family, dev = board.family, board.device
    used = dict(synth.resources)
    for bel, res in family.nextpnr_bels.items():
        if bel in pnr.utilisation:
            used[res] = pnr.utilisation[bel]["used"]
    return BitstreamResult(
        board=board.name, device=dev.name, family=family.name, bitstream=bitstream,
        clock_mhz=freq_mhz, requested_clock_mhz=requested_clock_mhz or freq_mhz,
        fmax_mhz=pnr.fmax_mhz, timing_met=pnr.timing_met, critical_path=pnr.critical_path,
        clocks=pnr.clocks, resources_used=used, resources_available=dict(dev.resources),
        resources_synth=synth.resources, cells_by_type=synth.cells_by_type,
        utilisation=pnr.utilisation, pll=dict(pll) if pll is not None else None,
        logs={"yosys": synth.log, "nextpnr": build_dir / "nextpnr.log",
              family.pack_tool: build_dir / f"{family.pack_tool}.log"},
        seconds=dict(seconds), build_dir=build_dir,
    )


def run_flow(board: str | Board, build_dir: str | Path, sources: Sequence[Path], top: str, *,
             pins: Mapping[str, Pin], clocks: Mapping[str, float], freq_mhz: float,
             requested_clock_mhz: float | None = None, pll: Mapping[str, Any] | None = None,
             seed: int = 1, placer: str | None = None, router: str | None = None,
             check_resources: bool = True, nextpnr_args: Sequence[str] = (),
             progress: Progress = print_progress, timeout_s: float | None = None,
             extra_seconds: Mapping[str, float] | None = None) -> BitstreamResult:
    """Synthesise, check the budget, place and route, pack.

    ``sources``: RTLIL/Verilog files; ``top``: the top module, whose ports are
    the keys of ``pins``; ``clocks``: clock port -> MHz for the constraints;
    ``freq_mhz``: the target nextpnr gives every clock it cannot derive (the
    design clock behind a PLL is derived from its input's constraint).
    ``placer``: nextpnr's placer (default: the family's, ``static``);
    ``router``: nextpnr's router (default: nextpnr's, ``router1``);
    ``nextpnr_args``: more nextpnr arguments.
    Writes ``BUILD_DIR/bitstream.json`` (see :meth:`BitstreamResult.load`).
    """
    board = get_board(board)
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    family, dev = board.family, board.device
    seconds = dict(extra_seconds or {})

    constraints = build_dir / f"{top}{family.constraints_suffix}"
    constraints.write_text(constraints_text(board, pins, clocks))

    synth = synthesize(board, build_dir, sources, top, progress=progress, timeout_s=timeout_s,
                       step="synthesis")
    seconds["yosys"] = synth.seconds
    if check_resources:
        check_budget(dev, synth.resources, design=f"design {top!r} (Yosys counts)")

    pnr, pnr_out, seconds["nextpnr"] = place_and_route(
        board, build_dir, synth.netlist, constraints, freq_mhz, seed=seed, placer=placer,
        router=router, extra_args=nextpnr_args, progress=progress, timeout_s=timeout_s,
        step="place and route")
    bitstream, seconds[family.pack_tool] = pack(board, build_dir, pnr_out, progress=progress,
                                                timeout_s=timeout_s, step="bitstream")

    result = flow_result(board, build_dir, synth, pnr, bitstream, freq_mhz=freq_mhz,
                         requested_clock_mhz=requested_clock_mhz, pll=pll, seconds=seconds)
    result.write(build_dir / RESULT_FILE)
    tell(progress, result.summary())
    return result


def write_board_top(top: Any, build_dir: Path, *, name: str = "board_top",
                    progress: Progress = print_progress) -> tuple[Path, float]:
    """A :class:`~fluid_hw.boards.top.BoardTop` as RTLIL, ``build_dir/{name}.il`` (no
    Verilog round trip needed); returns the file and the seconds it took."""
    from amaranth.back import rtlil

    from .top import BoardTop

    if not isinstance(top, BoardTop):
        raise FluidError(f"build_bitstream needs a BoardTop, not {type(top).__name__}; wrap "
                         "the design: BoardTop(core, board, clock_mhz=...)")
    build_dir.mkdir(parents=True, exist_ok=True)
    board = top.board
    clock_note = (f"PLL {board.clock_mhz:g} -> {top.clock_mhz:.3f} MHz"
                  if top.pll_params is not None else f"oscillator {board.clock_mhz:g} MHz")
    tell(progress, f"bitstream for {board.name} ({board.device.name}), {clock_note}, "
                   f"in {build_dir}")
    tell(progress, "board top: Amaranth -> RTLIL ...")
    start = time.monotonic()
    il = build_dir / f"{name}.il"
    il.write_text(rtlil.convert(top, name=name))
    seconds = time.monotonic() - start
    tell(progress, f"board top: done in {seconds:.1f} s")
    return il, seconds


def build_bitstream(top: Any, build_dir: str | Path, *, name: str = "board_top", seed: int = 1,
                    placer: str | None = None, router: str | None = None,
                    check_resources: bool = True,
                    nextpnr_args: Sequence[str] = (),
                    progress: Progress = print_progress,
                    timeout_s: float | None = None) -> BitstreamResult:
    """A :class:`~fluid_hw.boards.top.BoardTop` to a bitstream in ``build_dir``.

    The top is written as RTLIL (``{name}.il``, no Verilog round trip needed),
    together with the Verilog sources its core or bridge name; constraints
    come from the board data; the design is timed against the PLL's achieved
    frequency.  Returns a :class:`BitstreamResult` (also saved as
    ``BUILD_DIR/bitstream.json``).
    """
    build_dir = Path(build_dir)
    il, rtlil_seconds = write_board_top(top, build_dir, name=name, progress=progress)
    board = top.board
    pll = top.pll_params
    return run_flow(
        board, build_dir, [*top.verilog_sources, il], name, pins=top.pins,
        clocks={top.clock_port: board.clock_mhz}, freq_mhz=top.clock_mhz,
        requested_clock_mhz=top.requested_clock_mhz,
        pll=pll.as_dict() if pll is not None else None, seed=seed, placer=placer,
        router=router, check_resources=check_resources, nextpnr_args=nextpnr_args,
        progress=progress, timeout_s=timeout_s, extra_seconds={"rtlil": rtlil_seconds},
    )
