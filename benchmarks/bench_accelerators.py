"""The accelerator benchmark of issue 17: for each model, compile for the ULX3S-85F with
automatic folding, simulate in Verilator bit for bit against the golden model, build
the bitstream, and put the measured cycles at the post-route Fmax against the device's
multiplier bound.

    python benchmarks/bench_accelerators.py [--model NAME ...] [--fraction 0.85]
        [--no-bitstream] [--inputs N] [--out build/bench_accelerators]
        [--[no-]lut-multipliers] [--target-fps N] [--optimize throughput|latency]

The digits models default to LUT multipliers beside the DSPs and the cheapest folding
reaching a target rate (``BenchModel.lut_multipliers``, ``target_fps``; the int8 one in
latency mode); the options override a model's defaults (docs/accelerators.md).

Models (``--model``, default all): ``digits_mlp`` (64-128-64-10, int8, trained briefly
on the digits), ``mlp_w4a4`` (the same trained MLP quantised post-training to 4-bit
weights and activations; the input and the last layer's weights and outputs at 8 bits
as in FINN, the first layer's weights at 4 bits: :data:`W4A4_QUANT`), ``lenet5`` (28x28x1),
``ds_cnn`` and ``resnet8`` (MLPerf Tiny), ``jet_mlp`` (hls4ml's 16-64-32-32-5); those
without data in the repository are randomly initialised and calibrated on random
inputs (accuracy is not the point: bit-exactness and cycles are).

Per model, in ``OUT/<model>/``: ``float_model/`` (the saved inference model) and
``build/`` (``fluid-hw compile --target ulx3s-85f``, ``simulate``, ``bitstream``).
The figures:

* **II** (initiation interval): the median spacing of the last output beats of
  back-to-back inferences; **latency**: first input beat to last output beat of the
  first inference (batch 1); both simulated cycles (``fluid-hw simulate``'s
  ``measured``), never the estimates;
* **Fmax**: nextpnr's post-route figure; with ``--no-bitstream`` the build's target
  clock, *assumed* (marked so in the table and in ``clock_how``);
* throughput = Fmax / II, latency_us = latency cycles / Fmax;
* **bound** = DSPs of the device (156) x Fmax / MACs per inference (the model's
  MACs), ``bound_ratio`` = throughput / bound;
* **efficiency** = MACs / (multipliers x II): the share of every multiplier the design
  instantiates (sum of PE x SIMD, DSP or LUT) doing useful work;
* resources (LUT/FF/DSP/BRAM: nextpnr's after place and route, else the compile's
  estimate, marked so), place-and-route seconds (nextpnr), and the issue's goal with
  pass/miss.

The bitstream is reused when nothing that goes into it changed: the cache in
``OUT/cache/<key>/`` is keyed on a hash of the compiled design (``accelerator.v``,
``design.json``), the board, clock and place-and-route options, the board-top sources
and the tool versions (``fluid_hw.tools``: ``FLUID_HW_YOSYS``,
``FLUID_HW_NEXTPNR_ECP5``, ``FLUID_HW_ECPPACK`` select native tools instead of the
WebAssembly ones).  Results merge into ``OUT/results.json`` (one model at a time
replaces its own entry), each with the git commit (and the tracked files modified in
the working tree) it was measured on.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import fluid_hw as fluid  # noqa: E402
from fluid_hw.backends.fpga import bitstream, compile_model, read_report, simulate  # noqa: E402
from fluid_hw.backends.fpga.options import CompileOptions, FoldingPolicy  # noqa: E402
from fluid_hw.boards import get_board  # noqa: E402
from fluid_hw.drivers.build_dir import BuildDir  # noqa: E402
from fluid_hw.frontend import models  # noqa: E402
from fluid_hw.hls.lower import mac_count  # noqa: E402
from fluid_hw.passes import QuantConfig  # noqa: E402
from fluid_hw.passes.precision import Precision  # noqa: E402
from fluid_hw.tools import TOOLS  # noqa: E402

BOARD = "ulx3s-85f"
DEFAULT_OUT = ROOT / "build" / "bench_accelerators"
#: the tools whose versions key the bitstream cache (with their override commands)
BITSTREAM_TOOLS = ("yosys", "nextpnr-ecp5", "ecppack")
#: sources of the board top wrapped around the accelerator (PLL, reset, UART bridge)
BOARD_TOP_SOURCES = ("fluid_hw/boards", "fluid_hw/backends/fpga/board_top.py",
                     "fluid_hw/backends/fpga/bitstream.py", "fluid_hw/rtl/uart.py",
                     "fluid_hw/rtl/uart_bridge.py")


def say(msg: str) -> None:
    """A progress line (the bench is long): UTC time, then the message."""
    print(f"[bench {datetime.datetime.now(datetime.UTC):%H:%M:%S}] {msg}", flush=True)


# ---- the goals ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Goal:
    """Issue 17's acceptance figure for a model (any of these that are set)."""

    text: str
    min_throughput: float | None = None    # inferences per second
    above_bound: bool = False              # throughput above the DSP-only bound
    max_latency_us: float | None = None
    min_bound_ratio: float | None = None

    def met(self, r: Mapping[str, Any]) -> bool | None:
        """Whether the figures in ``r`` meet the goal; None when one is missing."""
        checks: list[bool] = []
        tput, lat, ratio = r.get("throughput_per_s"), r.get("latency_us"), r.get("bound_ratio")
        if self.min_throughput is not None:
            if tput is None:
                return None
            checks.append(tput >= self.min_throughput)
        if self.above_bound:
            if ratio is None:
                return None
            checks.append(ratio > 1.0)
        if self.max_latency_us is not None:
            if lat is None:
                return None
            checks.append(lat <= self.max_latency_us)
        if self.min_bound_ratio is not None:
            if ratio is None:
                return None
            checks.append(ratio >= self.min_bound_ratio)
        return all(checks)


_CNN_GOAL = Goal(">= 50 % of the bound (stretch 70 %)", min_bound_ratio=0.5)


# ---- the models -----------------------------------------------------------------------------

@dataclass(frozen=True)
class BenchModel:
    """A model of the benchmark: its builder, input, data, quantisation and goal."""

    name: str
    title: str
    build: Callable[..., Any]         # -> frontend.models.Model
    input_shape: tuple[int, ...]
    data: str                          # "digits" (trained briefly) or "random"
    goal: Goal
    quant: QuantConfig | None = None   # None: int8
    precision: str = "int8"
    optimize: str = "throughput"
    #: the bench's default: automatic folding may add LUT multipliers (``--lut-multipliers``
    #: / ``--no-lut-multipliers`` override it)
    lut_multipliers: bool = False
    #: the bench's default ``--target-fps`` (at the 100 MHz target clock): the cheapest
    #: folding reaching it instead of the fastest within the budget; None: the fastest
    target_fps: float | None = None
    #: the bench's default nextpnr placer (``--placer`` overrides it); None: the board's
    placer: str | None = None
    #: the bench's default nextpnr router (``--router`` overrides it); None: nextpnr's
    router: str | None = None


#: the digits MLPs' default targets at the 100 MHz target clock (docs/accelerators.md):
#: int8 II 64 (1.3 M/s needs II <= 76 there; latency mode, 244 cycles), LUT products
#: beside the DSPs; w4a4 II 32 (the fastest the 85 % budget holds)
DIGITS_FPS = 1.3e6
W4A4_FPS = 3.0e6
#: the w4a4 MLP's quantisation: 4-bit weights and activations, FINN's 8-bit input and
#: last layer, and the first layer's weights at 4 bits too (FINN keeps them at 8): its
#: 256 int8 x int4 products then share DSPs two by two instead of filling 158 int8 LUT
#: products.  Post-training on the 360 test digits: 96.67 %, as float (FINN's: 96.94 %)
W4A4_QUANT = QuantConfig(weight_bits=4, activation_bits=4,
                         overrides={"fc_0": Precision(w=4, a=4)})
#: LeNet-5's default target at the 100 MHz target clock: 80 % of the DSP-only bound
#: (37,453/s there), past the 70 % stretch goal
LENET_FPS = 30_000.0

BENCH_MODELS: dict[str, BenchModel] = {m.name: m for m in (
    BenchModel("digits_mlp", "digits MLP 64-128-64-10", models.digits_mlp, (64,), "digits",
               Goal(">= 1.3 M/s and above the bound, latency <= 2.5 us (stretch 1.8 M/s, "
                    "2 us)", min_throughput=1.3e6, above_bound=True, max_latency_us=2.5),
               optimize="latency", lut_multipliers=True, target_fps=DIGITS_FPS,
               # the heap placer: this design (33 k LUT) routed at 87.6 MHz in 3,485 s;
               # the static placer's routing had not finished 10 % of it in 586 s
               placer="heap"),
    BenchModel("mlp_w4a4", "digits MLP 64-128-64-10 w4a4", models.digits_mlp, (64,),
               "digits", Goal(">= 2.5 M/s (stretch 4 M/s)", min_throughput=2.5e6),
               quant=W4A4_QUANT, precision="w4a4",
               lut_multipliers=True, target_fps=W4A4_FPS, placer="heap"),
    # II 3,200 (83 % of the bound) with 25 LUT products beside the DSPs; the DSPs
    # alone stop at II 4,000 (67 %)
    BenchModel("lenet5", "LeNet-5 28x28x1", models.lenet5, (1, 28, 28), "random", _CNN_GOAL,
               lut_multipliers=True, target_fps=LENET_FPS),
    BenchModel("ds_cnn", "DS-CNN (MLPerf Tiny KWS)", models.ds_cnn, (1, 49, 10), "random",
               _CNN_GOAL),
    BenchModel("resnet8", "ResNet-8 (MLPerf Tiny IC)", models.resnet8, (3, 32, 32),
               "random", _CNN_GOAL),
    BenchModel("jet_mlp", "jet-tagging MLP 16-64-32-32-5", models.jet_mlp, (16,), "random",
               Goal("latency mode: <= 1.5 us (stretch 1 us)", max_latency_us=1.5),
               # LUT products: 141 cycles at 100.2 MHz post-route = 1.41 us (bd1bb4a);
               # DSPs alone do not reach 1.5 us (docs/latency_mode.md)
               optimize="latency", lut_multipliers=True),
)}

#: epochs of the brief training of the digits models (Adam, batch 32)
DIGITS_EPOCHS = 10
CALIBRATION = 64  # random calibration inputs of the untrained models


@dataclass(frozen=True)
class BenchOptions:
    out: Path = DEFAULT_OUT
    fraction: float = 0.85
    bitstream: bool = True
    inputs: int = 32          # simulated inputs of the random-data models
    placer: str | None = None
    router: str | None = None
    pnr_timeout_s: float | None = None
    #: automatic folding may add LUT multipliers; None: each model's default
    lut_multipliers: bool | None = None
    #: the cheapest folding reaching this rate at the target clock; None: each model's
    #: default (0: the fastest folding within the budget)
    target_fps: float | None = None
    #: ``throughput`` or ``latency``; None: each model's default
    optimize: str | None = None


# ---- provenance -----------------------------------------------------------------------------

def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def provenance() -> dict[str, Any]:
    """The commit measured, and the tracked source files modified in the working tree
    (others' uncommitted work measured with it)."""
    dirty = [line[3:] for line in _git("status", "--porcelain", "--untracked-files=no",
                                       "--", "fluid_hw").splitlines()]
    return {"commit": _git("rev-parse", "HEAD") or None,
            "commit_date": _git("log", "-1", "--format=%cI") or None,
            "modified_sources": dirty,
            "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}


# ---- building the model ---------------------------------------------------------------------

def _prepare(bm: BenchModel, d: Path, n_inputs: int
             ) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray | None,
                        str, int]:
    """Build the model, train it briefly (digits) or initialise it randomly, save its
    inference model; returns (model dir, calibration feed, simulation feed, labels,
    how it was made, its MACs)."""
    digits = bm.data == "digits"
    m = bm.build(optimizer=fluid.optimizer.Adam(learning_rate=0.002)) if digits else bm.build()
    exe = fluid.Executor(fluid.CPUPlace())
    model_dir = d / "float_model"
    feed = m.image.name
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        labels = None
        if digits:
            from fluid_hw.backends.cpu.trainer import train
            from fluid_hw.datasets import load_digits_split

            xtr, xte, ytr, yte = load_digits_split()
            train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), DIGITS_EPOCHS, batch_size=32,
                  seed=0, log=None)
            calib = {feed: xtr[:512].astype(np.float32)}
            sim = {feed: xte.astype(np.float32)}
            labels = yte[:, 0]
            how = (f"trained {DIGITS_EPOCHS} epochs (Adam) on the digits; calibrated on 512 "
                   f"training images; simulated on the {len(xte)} test images")
        else:
            rng = np.random.default_rng(0)
            calib = {feed: rng.standard_normal((CALIBRATION, *bm.input_shape)
                                               ).astype(np.float32)}
            sim = {feed: rng.standard_normal((n_inputs, *bm.input_shape)).astype(np.float32)}
            how = (f"random initialisation; calibrated on {CALIBRATION} random N(0,1) inputs; "
                   f"simulated on {n_inputs}")
        fluid.io.save_inference_model(str(model_dir), [feed], [m.prediction], exe, m.main)
    return model_dir, calib, sim, labels, how, int(models.macs(m.test_program))


def _compile_options(bm: BenchModel, fraction: float, lut_multipliers: bool = False,
                     target_fps: float | None = None, optimize: str | None = None
                     ) -> tuple[CompileOptions, str]:
    """The compile options (automatic folding for the board within ``fraction``, with LUT
    multipliers when asked, the cheapest folding reaching ``target_fps`` when given); the
    latency mode where this version of the compiler has one."""
    kw: dict[str, Any] = {}
    fold: dict[str, Any] = {}
    if target_fps:
        fold["target_fps"] = target_fps
    if lut_multipliers:
        if "lut_multipliers" not in {f.name for f in dataclasses.fields(FoldingPolicy)}:
            raise RuntimeError("--lut-multipliers: this compiler's automatic folding has no "
                               "LUT multipliers")
        fold["lut_multipliers"] = True
    mode = "throughput"
    want = optimize or bm.optimize
    if want != "throughput":
        names = {f.name for f in dataclasses.fields(CompileOptions)}
        if "optimize" in names:
            kw["optimize"] = mode = want
        else:
            mode = f"throughput (no {want} mode in this compiler)"
    opts = CompileOptions(target=BOARD, folding=FoldingPolicy("device-fit", fraction=fraction,
                                                              **fold),
                          quant=bm.quant, **kw)
    return opts, mode


def model_settings(bm: BenchModel, options: BenchOptions) -> tuple[bool, float | None]:
    """``(lut_multipliers, target_fps)`` of a model's run: the options' where given, else
    the model's defaults (a target of 0 is none: the fastest folding)."""
    lut = bm.lut_multipliers if options.lut_multipliers is None else options.lut_multipliers
    fps = bm.target_fps if options.target_fps is None else options.target_fps
    return lut, fps or None


# ---- the bitstream cache --------------------------------------------------------------------

def _sha_files(h: Any, paths: Sequence[Path]) -> None:
    for p in paths:
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.is_file() else []
        for f in files:
            h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())


def tool_versions() -> dict[str, str]:
    """The versions (and override commands) of the bitstream tools."""
    out = {}
    for key in BITSTREAM_TOOLS:
        t = TOOLS[key]
        ov = t.override()
        out[key] = (t.version() or "not installed") + (f" ({ov[0]}={ov[1]})" if ov else "")
    return out


def bitstream_key(build: Path, options: BenchOptions, versions: Mapping[str, str]) -> str:
    """The cache key of a build's bitstream: the compiled design, the board, its clock,
    the place-and-route options, the board-top sources and the tool versions."""
    bd = BuildDir(build)
    rep = bd.report()
    h = hashlib.sha256()
    for name in ("accelerator.v", "design.json"):
        h.update(name.encode() + b"\0" + (build / name).read_bytes())
    h.update(json.dumps({"board": BOARD, "clock_mhz": rep.get("clock_mhz"),
                         "placer": options.placer, "versions": dict(versions),
                         **({"router": options.router} if options.router else {})},
                        sort_keys=True).encode())
    _sha_files(h, [ROOT / p for p in BOARD_TOP_SOURCES])
    return h.hexdigest()[:32]


def _bitstream_cached(build: Path, options: BenchOptions, versions: Mapping[str, str]
                      ) -> tuple[dict[str, Any], bool]:
    """The build's bitstream keys (report.json's): from the cache when its key is there,
    else built (one place and route) and stored in the cache."""
    key = bitstream_key(build, options, versions)
    cache = options.out / "cache" / key
    bd = BuildDir(build)
    if (cache / "keys.json").is_file():
        keys = json.loads((cache / "keys.json").read_text())
        with bd.writing("bitstream"):
            for name in ("accelerator.bit", "bitstream.json"):
                if (cache / name).is_file():
                    shutil.copyfile(cache / name, build / name)
            bd.update_report("bitstream", keys, drop=("measured_at_fmax",))
        return keys, True
    keys = bitstream(build, board=BOARD, placer=options.placer, router=options.router,
                     progress=lambda m: say(f"  {m}"), timeout_s=options.pnr_timeout_s)
    tmp = cache.with_name(cache.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in ("accelerator.bit", "bitstream.json"):
        if (build / name).is_file():
            shutil.copyfile(build / name, tmp / name)
    (tmp / "keys.json").write_text(json.dumps(keys, indent=1, default=str) + "\n")
    shutil.rmtree(cache, ignore_errors=True)
    tmp.rename(cache)
    return keys, False


# ---- the figures ----------------------------------------------------------------------------

def figures(report: Mapping[str, Any], macs: int, dsp_available: int,
            assumed_mhz: float | None) -> dict[str, Any]:
    """The benchmark's figures from a simulated (and maybe placed) build's report:
    measured II and latency at the post-route Fmax (or ``assumed_mhz`` without a
    bitstream), the bound, the ratio, the multiplier efficiency, resources."""
    meas = report.get("measured") or {}
    ii = float(meas.get("initiation_interval") or "nan")
    lat = float(meas.get("latency_cycles") or "nan")
    if report.get("fmax_mhz"):
        mhz, how = float(report["fmax_mhz"]), "post-route Fmax"
    else:
        mhz = float(assumed_mhz or report["clock_mhz"])
        how = f"assumed {mhz:g} MHz (no bitstream)"
    tput = mhz * 1e6 / ii if np.isfinite(ii) and ii > 0 else None
    bound = dsp_available * mhz * 1e6 / macs if macs else None
    util = report.get("mac_utilisation") or {}
    used = report.get("resources_used")
    res_how = "nextpnr (placed)"
    if not used:
        used, res_how = (report.get("estimate") or {}).get("resources", {}), "estimate"
    bit = report.get("bitstream") or {}
    secs = bit.get("seconds") or {}
    return {
        "initiation_interval": ii if np.isfinite(ii) else None,
        "latency_cycles": lat if np.isfinite(lat) else None,
        "fmax_mhz": mhz, "clock_how": how, "timing_met": report.get("timing_met"),
        "throughput_per_s": tput,
        "latency_us": lat / mhz if np.isfinite(lat) else None,
        "macs_per_inference": macs, "dsp_available": dsp_available,
        "bound_per_s": bound, "bound_ratio": tput / bound if tput and bound else None,
        "efficiency": util.get("overall"),
        "resources": {k: used.get(k) for k in ("lut", "ff", "dsp", "bram")},
        "resources_how": res_how,
        "resources_available": report.get("resources_available"),
        "pnr_s": secs.get("nextpnr"), "synth_s": secs.get("yosys"),
        "bit_exact": report.get("bit_exact"), "mismatches": report.get("mismatches"),
        "inputs": report.get("inputs"),
        "folding": {k: f"{v['pe']}x{v['simd']}" for k, v in
                    (report.get("folding") or {}).items()},
        "estimate": {k: (report.get("estimate") or {}).get(k)
                     for k in ("initiation_interval", "latency_cycles")},
    }


# ---- one model ------------------------------------------------------------------------------

def model_placer(bm: BenchModel, options: BenchOptions) -> str | None:
    """The nextpnr placer of a model's run: ``--placer`` where given, else the model's
    (None: the board's)."""
    return options.placer if options.placer is not None else bm.placer


def model_router(bm: BenchModel, options: BenchOptions) -> str | None:
    """The nextpnr router of a model's run: ``--router`` where given, else the model's
    (None: nextpnr's default)."""
    return options.router if options.router is not None else bm.router


def run_model(name: str, options: BenchOptions) -> dict[str, Any]:
    """Build, compile, simulate (and place) one model; its results entry."""
    bm = BENCH_MODELS[name]
    d = options.out / name
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    entry: dict[str, Any] = {"title": bm.title, "precision": bm.precision,
                             "goal": bm.goal.text, **provenance()}
    say(f"{name}: building the model ({bm.data} data)")
    model_dir, calib, sim, labels, how, macs = _prepare(bm, d, options.inputs)
    entry["how"] = how
    lut, fps = model_settings(bm, options)
    options = dataclasses.replace(options, placer=model_placer(bm, options),
                                  router=model_router(bm, options))
    entry["placer"] = options.placer
    entry["router"] = options.router
    opts, mode = _compile_options(bm, options.fraction, lut, fps, options.optimize)
    entry["optimize"] = mode
    entry["lut_multipliers"] = lut
    entry["target_fps"] = fps
    say(f"{name}: {macs:,} MACs; compiling for {BOARD} (automatic folding, "
        f"{round(100 * options.fraction)} % budget, {bm.precision}, optimise {mode}"
        + (", LUT multipliers" if lut else "")
        + (f", target {fps:,.0f}/s at the target clock" if fps else "") + ")")
    build = d / "build"
    st = compile_model(model_dir, build, opts, calibration=calib)
    if st.lowered is None:
        raise RuntimeError(f"{name}: compiled into several accelerator regions; the bench "
                           "measures single-accelerator builds")
    e = st.lowered.estimate()
    say(f"{name}: {len(st.lowered.stages)} stages, estimated II {e.initiation_interval}, "
        f"latency {e.latency_cycles} cycles; simulating {len(next(iter(sim.values())))} "
        "inputs in Verilator")
    keys = simulate(build, sim, labels=labels)
    say(f"{name}: bit-exact {keys.get('bit_exact')}, measured II "
        f"{keys['measured']['initiation_interval']:g}, latency "
        f"{keys['measured']['latency_cycles']:g} cycles")
    board = get_board(BOARD)
    dsp = int(board.device.resources["dsp"])
    assumed = None
    if options.bitstream:
        versions = tool_versions()
        entry["tool_versions"] = versions
        say(f"{name}: bitstream (" + ", ".join(f"{k} {v}" for k, v in versions.items())
            + ")")
        _, cached = _bitstream_cached(build, options, versions)
        entry["bitstream_cached"] = cached
    else:
        assumed = float(read_report(build)["clock_mhz"])
    report = read_report(build)
    entry.update(figures(report, macs, dsp, assumed))
    mac_specs = [s for s in st.lowered.specs if mac_count(s)]
    entry["hardware_macs_per_inference"] = sum(mac_count(s) for s in mac_specs)
    entry["multipliers"] = sum(s.pe * s.simd for s in mac_specs)  # type: ignore[attr-defined]
    if report.get("accuracy"):
        entry["accuracy"] = report["accuracy"]
    entry["goal_met"] = bm.goal.met(entry)
    entry["bench_seconds"] = round(time.perf_counter() - t0, 1)
    return entry


# ---- the table ------------------------------------------------------------------------------

def _si(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    for f, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}{unit}".rstrip()
    return f"{v:.3g} {unit}".rstrip()


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The results as a Markdown table (the one in docs/accelerators.md)."""
    head = ["model", "made", "MACs", "Fmax MHz", "bound /s", "II cyc", "throughput /s",
            "latency us", "vs bound", "mult. eff.", "LUT / FF / DSP / BRAM", "P&R s",
            "bit-exact", "goal", "met", "commit"]
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                         r.get("goal", "-"), "error: " + str(r["error"])[:80],
                         (r.get("commit") or "?")[:9]])
            continue
        res = r.get("resources") or {}
        rs = " / ".join("-" if res.get(k) is None else f"{res[k]:,}"
                        for k in ("lut", "ff", "dsp", "bram"))
        if r.get("resources_how") == "estimate":
            rs += " (est.)"
        fmax = f"{r['fmax_mhz']:.1f}" + ("" if r.get("clock_how") == "post-route Fmax"
                                         else " (assumed)")
        if r.get("timing_met") is False:
            fmax += " (timing not met)"
        met = {True: "pass", False: "miss", None: "?"}[r.get("goal_met")]
        eff = r.get("efficiency")
        dirty = " +mod" if r.get("modified_sources") else ""
        rows.append([
            f"{name} ({r.get('precision')}" + (", LUT mults" if r.get("lut_multipliers") else "")
            + (", latency mode" if r.get("optimize") == "latency" else "") + ")",
            "trained" if "trained" in r.get("how", "") else "random",
            f"{r['macs_per_inference']:,}", fmax, _si(r.get("bound_per_s")),
            f"{r['initiation_interval']:g}" if r.get("initiation_interval") else "-",
            _si(r.get("throughput_per_s")),
            f"{r['latency_us']:.2f}" if r.get("latency_us") is not None else "-",
            f"{100 * r['bound_ratio']:.0f} %" if r.get("bound_ratio") is not None else "-",
            f"{100 * eff:.0f} %" if eff is not None else "-", rs,
            f"{r['pnr_s']:.0f}" if r.get("pnr_s") is not None else "-",
            str(r.get("bit_exact")), r.get("goal", "-"), met,
            (r.get("commit") or "?")[:9] + dirty])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(out)


def load_results(path: Path) -> dict[str, Any]:
    if path.is_file():
        try:
            doc = json.loads(path.read_text())
            return doc if isinstance(doc, dict) else {}
        except ValueError:
            return {}
    return {}


def write_results(path: Path, results: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str) + "\n")
    tmp.replace(path)


def run(names: Sequence[str], options: BenchOptions) -> dict[str, Any]:
    """Run the models one after another, merging each entry into ``results.json`` as it
    finishes; returns the whole file's results."""
    path = options.out / "results.json"
    for i, name in enumerate(names, 1):
        say(f"== model {i}/{len(names)}: {name} ==")
        try:
            entry = run_model(name, options)
        except Exception as e:  # one model's failure is recorded; the others still run
            traceback.print_exc()
            entry = {"title": BENCH_MODELS[name].title, "goal": BENCH_MODELS[name].goal.text,
                     "precision": BENCH_MODELS[name].precision,
                     "error": f"{type(e).__name__}: {e}", **provenance()}
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(".results.lock"), "w") as lock:  # several bench processes
            fcntl.flock(lock, fcntl.LOCK_EX)
            results = load_results(path)
            results[name] = entry
            write_results(path, results)
        say(f"{name}: done -> {path}")
    return load_results(path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", choices=sorted(BENCH_MODELS),
                    help="a model to run (repeat; default: all)")
    ap.add_argument("--fraction", type=float, default=0.85, help="share of the device "
                    "automatic folding may use (default 0.85)")
    ap.add_argument("--no-bitstream", action="store_true", help="simulate only: figures at "
                    "the target clock (assumed, marked so) and estimated resources")
    ap.add_argument("--inputs", type=int, default=32, help="simulated inputs of the "
                    "random-data models (default 32)")
    ap.add_argument("--lut-multipliers", action=argparse.BooleanOptionalAction,
                    default=None, help="automatic folding may build products beyond the "
                    "DSPs as LUT multipliers (default: the model's; the digits MLPs use them)")
    ap.add_argument("--target-fps", type=float, default=None, help="the cheapest folding "
                    "reaching this many inferences/s at the 100 MHz target clock (default: "
                    "the model's; 0: the fastest folding within the budget)")
    ap.add_argument("--optimize", choices=("throughput", "latency"), help="the compile's "
                    "optimisation (default: the model's)")
    ap.add_argument("--placer", help="nextpnr placer (default: the model's -- heap for the "
                    "digits MLPs -- else the board's)")
    ap.add_argument("--router", choices=("router1", "router2"), help="nextpnr router "
                    "(default: the model's, else nextpnr's router1)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--table", action="store_true", help="only print the table of "
                    "OUT/results.json (what earlier runs measured)")
    args = ap.parse_args(argv)
    names = args.model or list(BENCH_MODELS)
    if args.table:
        results = load_results(args.out / "results.json")
        print(table({k: results[k] for k in names if k in results}))
        return 0
    opts = BenchOptions(out=args.out, fraction=args.fraction, bitstream=not args.no_bitstream,
                        inputs=args.inputs, placer=args.placer, router=args.router,
                        lut_multipliers=args.lut_multipliers, target_fps=args.target_fps,
                        optimize=args.optimize)
    results = run(names, opts)
    print()
    print(table({k: results[k] for k in names if k in results}))
    return 0 if all("error" not in results.get(k, {"error": 1}) and
                    results[k].get("bit_exact") for k in names) else 1


if __name__ == "__main__":
    sys.exit(main())
