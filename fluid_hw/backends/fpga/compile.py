"""``fluid-hw compile``: a saved model -> a build folder with the accelerator's Verilog,
its register map, the quantised model and the host programs.

Steps (:data:`COMPILE_STEPS`, stop after any with ``stop_after=``):

==================  ===================================================================
``load_model``      ``io.load_inference_model(MODEL_DIR)``
``quantize``        float model + calibration data: ``inference_pipeline`` then
                    ``passes.quantize`` (int8); an already quantised model passes as is
``lower``           ``hls.lower``: partition (host pre / accelerator / host post), stages,
                    folding (board targets: ``hls.autofold`` for the board's device,
                    85 % of its multipliers, LUTs and block RAMs; ``sim``: balanced
                    within the target's budget; ``--fold`` overrides either),
                    estimates -> ``lowering.json``
``generate_verilog``  ``accelerator.v`` and ``design.json`` (rtl + sim.verilog)
``write_registers``   ``registers.md``, ``registers.h``
``write_model``     ``model/``: the quantised program exactly as compiled (loadable with
                    ``io.load_inference_model``); ``float_model/`` when quantised here
``write_host``      ``host/``: ``pre.pb`` / ``post.pb`` host programs, their
                    ``params.npz``, ``host.json``; ``weights.npz`` for runtime weights
``write_report``    ``report.json``: target, clock, weights, stages[], estimate,
                    throughput and latency at the clock
==================  ===================================================================
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...boards import all_boards, get_board
from ...drivers.build_dir import (
    REPORT_KEYS,
    STEP_FILES,
    BuildDir,
    atomic_write_file,
    normalise_modes,
)
from ...errors import FluidError, UnknownNameError, unknown_name
from ...frontend import io as fio
from ...hls.autofold import AutoFold, autofold
from ...hls.folding import DEFAULT_BUDGET, FoldingBudget, format_folding, ii_for_rate
from ...hls.lower import Lowered, build, discover, lower, lowering_hash
from ...hls.partition import LoweringError, Segmentation, segment
from ...ir.lod import LoDTensor
from ...ir.program import Program
from ...ir.registry import op_has_category
from ...ir.scope import Scope, scope_guard
from ...ir.serialization import program_to_bytes
from ...passes import PassContext, QuantConfig, inference_pipeline, quantize
from ...rtl import AcceleratorTop, emit_c_header, emit_markdown, param_image
from ...sim.verilog import emit_verilog
from ..cpu import Executor
from .lod_io import is_lod_npz, item_count, lod_batches, lod_inputs
from .options import CompileOptions, FoldingPolicy
from .regions import RegionBuild, compile_regions, region_report, write_region_host
from .report import to_json
from .steps import BuildError, Step, run_steps

__all__ = ["Target", "TARGETS", "DEFAULT_CLOCK_MHZ", "get_target", "CompileState",
           "CompileOptions", "FoldingPolicy",
           "COMPILE_STEPS", "compile_model", "compile_program", "is_quantized", "load_inputs"]



#: design clock of a board target by family (the PLL makes it from the oscillator)
DEFAULT_CLOCK_MHZ = {"ecp5": 100.0, "ice40": 30.0}


@dataclass(frozen=True)
class Target:
    """What a build is for: its clock, the folding budget and, for a board, its name
    (the folding is then automatic for the board's device)."""

    name: str
    clock_mhz: float
    budget: FoldingBudget
    doc: str
    board: str | None = None
    #: registers synthesis must keep apart (rtl._ff): explicit TRELLIS_FF copies on ECP5
    ff_style: str = "plain"


def _targets() -> dict[str, Target]:
    out = {"sim": Target("sim", 100.0, DEFAULT_BUDGET,
                         "Verilator simulation (clock assumed 100 MHz for the time figures)")}
    for name, b in all_boards().items():
        out[name] = Target(name, DEFAULT_CLOCK_MHZ[b.family.name], DEFAULT_BUDGET,
                           b.description, board=name,
                           ff_style="trellis" if b.family.name == "ecp5" else "plain")
    return out


TARGETS: dict[str, Target] = _targets()


def get_target(name: str) -> Target:
    """A target by name: ``sim`` or a board (also by its device: ``ecp5-85f``,
    ``LFE5U-85F``, ``up5k``)."""
    if name in TARGETS:
        return TARGETS[name]
    try:
        return TARGETS[get_board(name).name]
    except UnknownNameError:
        raise unknown_name("target", name, TARGETS) from None


def is_quantized(program: Program) -> bool:
    return any(op.type == "quantize" or op_has_category(op.type, "quantised")
               for op in program.global_block().ops)


def load_inputs(path: str | os.PathLike[str], feeds: Sequence[str], what: str
                ) -> dict[str, np.ndarray]:
    """``X.npy`` (the single input) or ``X.npz`` (one array per input name)."""
    p = Path(path)
    try:
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        else:
            data = {feeds[0]: np.load(p, allow_pickle=False)} if len(feeds) == 1 else {}
            if not data:
                raise BuildError(f"{p}: the model has inputs {list(feeds)}; give {what} as an "
                                 ".npz with one array per input name")
    except FileNotFoundError:
        raise BuildError(f"{what} file {p} not found") from None
    except (OSError, ValueError) as e:
        raise BuildError(f"{p}: not a .npy/.npz array file ({e})") from None
    if is_lod_npz(data):  # sequences: NAME and NAME.lengths (lod_io)
        return lod_inputs(data, feeds, p)  # type: ignore[return-value]
    missing = [f for f in feeds if f not in data]
    if missing:
        raise BuildError(f"{p}: no array for input(s) {missing} (it holds {sorted(data)})")
    n = {len(data[f]) for f in feeds}
    if len(n) != 1:
        raise BuildError(f"{p}: the inputs hold different numbers of examples: {n}")
    return {f: data[f] for f in feeds}


@dataclass
class CompileState:
    """Everything the compile steps share."""

    out: Path
    options: CompileOptions
    model_dir: Path | None = None
    calibration: Mapping[str, np.ndarray] | str | os.PathLike[str] | None = None
    # filled in by the steps
    program: Program | None = None
    scope: Scope | None = None
    feeds: list[str] = field(default_factory=list)
    fetches: list[str] = field(default_factory=list)
    float_program: Program | None = None
    quantized_here: bool = False
    lowered: Lowered | None = None
    autofold: AutoFold | None = None
    top: AcceleratorTop | None = None
    #: several accelerator regions (CPU fallback in the middle): the cut and the regions'
    #: own builds (backends/fpga/regions.py); None for a single-region build
    segmentation: Segmentation | None = None
    regions: list[RegionBuild] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.target: Target = get_target(self.options.target)

    # the options, by the names the steps use
    @property
    def weights(self) -> str:
        return self.options.weights

    @property
    def folding(self) -> dict[str, tuple[int, int]]:
        return dict(self.options.folding.overrides)

    @property
    def budget(self) -> FoldingBudget | None:
        return self.options.folding.budget

    @property
    def ii_target(self) -> int | None:
        return self.options.folding.ii_target

    @property
    def clock_mhz(self) -> float | None:
        return self.options.clock_mhz

    @property
    def name(self) -> str:
        return self.options.name

    @property
    def quant_config(self) -> QuantConfig | None:
        return self.options.quant

    @property
    def auto_fold(self) -> bool | None:
        """Fold automatically for the target board's device (None: on board targets,
        unless a multiplier budget or an initiation interval is given)."""
        return self.options.folding.auto_fold

    @property
    def target_fps(self) -> float | None:
        return self.options.folding.target_fps

    @property
    def fraction(self) -> float:
        return self.options.folding.fraction

    @property
    def clock(self) -> float:
        return self.clock_mhz or self.target.clock_mhz


def _step_load_model(st: CompileState) -> str:
    if st.program is not None:
        return "program given"
    assert st.model_dir is not None
    if not st.model_dir.is_dir():
        raise BuildError(f"{st.model_dir}: no such model folder (save one with "
                         "io.save_inference_model)")
    st.scope = Scope()
    try:
        st.program, st.feeds, fetch_vars = fio.load_inference_model(st.model_dir, Executor(),
                                                                    scope=st.scope)
    except FluidError as e:
        raise BuildError(f"cannot load the model in {st.model_dir}: {e}") from e
    st.fetches = [v.name for v in fetch_vars]
    kind = "quantised" if is_quantized(st.program) else "float"
    return f"{kind} model, inputs {st.feeds}, outputs {st.fetches}"


def _batches(data: Mapping[str, np.ndarray], size: int = 128) -> list[dict[str, np.ndarray]]:
    if any(isinstance(v, LoDTensor) for v in data.values()):
        return lod_batches(data, size)
    n = len(next(iter(data.values())))
    return [{k: np.ascontiguousarray(v[i:i + size], np.float32) for k, v in data.items()}
            for i in range(0, n, size)]


def _step_quantize(st: CompileState) -> str:
    assert st.program is not None and st.scope is not None
    if any(op.type in ("quantize_linear", "requantize_linear", "int_quant")
           for op in st.program.global_block().ops):  # an imported quantised ONNX model
        from ...passes.qdq_fold import fold_qdq

        try:
            folded = fold_qdq(st.program, st.scope)
        except FluidError as e:
            raise BuildError(f"the quantised ONNX model cannot become fixed point: {e}") from e
        if not is_quantized(folded):
            raise BuildError("the quantised ONNX model has no layer qdq_fold turns into fixed "
                             "point (docs/onnx_quant.md says which patterns it takes)")
        st.program = folded
        return "quantised ONNX model folded to fixed point with its own scales (qdq_fold)"
    if is_quantized(st.program):
        return "already quantised" + (" (calibration data ignored)" if st.calibration is not
                                      None else "")
    if st.calibration is None:
        src = st.model_dir or "the program"
        raise BuildError(f"{src} holds a float model: give calibration data to quantise it "
                         "(--calibration X.npy: a few hundred typical inputs, e.g. training "
                         "examples), or compile an already quantised model")
    calib = st.calibration
    if not isinstance(calib, Mapping):
        calib = load_inputs(calib, st.feeds, "calibration")
    exe = Executor()
    ctx = PassContext(scope=st.scope, executor=exe, feed_names=st.feeds,
                      fetch_names=st.fetches)
    st.float_program = st.program
    try:
        opt = inference_pipeline(fuse_elementwise=False,
                                 fused_activations=("relu",)).run(st.program, ctx)
        # an op without a fixed-point rule becomes a float island (dequantize before,
        # quantize after): the accelerator splits into regions around it
        cfg = st.quant_config if st.quant_config is not None else \
            QuantConfig(float_fallback=True)
        st.program = quantize(opt, _batches(calib), cfg, scope=st.scope,
                              executor=exe, fetch_names=st.fetches, feed_names=st.feeds)
    except FluidError as e:
        raise BuildError(f"quantisation failed: {e}") from e
    st.quantized_here = True
    n = item_count(next(iter(calib.values())))
    p = cfg.default_precision
    what = "int8" if (p.w, p.a) == (8, 8) else f"w{p.w}a{p.a} (first/last layers 8-bit)" \
        if cfg.first_last_8bit else f"w{p.w}a{p.a}"
    return f"{what}, calibrated on {n} examples"


def _step_lower(st: CompileState) -> str:
    assert st.program is not None and st.scope is not None
    # inputs the (quantised) model no longer reads, e.g. a label saved with it, are dropped
    read = {n for op in st.program.global_block().ops if op.type != "feed"
            for n in op.input_arg_names}
    st.feeds = [f for f in st.feeds if f in read] or st.feeds
    seg = _segmentation(st)
    if seg is not None:
        st.segmentation = seg
        st.regions = compile_regions(st, seg)
        where = "; ".join(f"{d['where']}: {', '.join(d['ops']) or '-'}"
                          for d in seg.describe()["segments"])
        return f"{len(seg.regions)} accelerator regions, host segments between: {where}"
    BuildDir(st.out).remove("regions", "segments")
    if _auto(st):
        _autofold(st)
    else:
        ii = st.ii_target
        if st.target_fps is not None and ii is None:
            ii = ii_for_rate(st.target_fps, st.clock)
        st.lowered = lower(st.program, st.scope, folding=st.folding,
                           budget=st.budget if st.budget is not None else st.target.budget,
                           ii_target=ii, weights=st.weights, feed_names=st.feeds,
                           fetch_names=st.fetches,
                           stream_input=st.options.optimize == "latency")
    assert st.lowered is not None
    st.out.mkdir(parents=True, exist_ok=True)
    BuildDir(st.out).write_text("lowering", _dumps(st.lowered.describe()))
    e = st.lowered.estimate()
    how = (f"automatic for {st.autofold.device} ({round(100 * st.fraction)} % budget)"
           if st.autofold is not None else "balanced")
    if st.autofold is not None and st.autofold.folding and \
            set(st.autofold.overrides) >= set(st.autofold.folding):
        how = f"given, within {round(100 * st.fraction)} % of {st.autofold.device}"
    lut = st.lowered.lut_mults
    luts = (" with LUT multipliers " + ",".join(f"{k}={n}" for k, n in lut.items())
            if lut else "")
    bound = st.autofold.bound if st.autofold is not None else None
    return (f"{len(st.lowered.stages)} stages, folding {format_folding(st.lowered.folding)}"
            f"{luts} ({how}); "
            f"estimated II {e.initiation_interval}, latency {e.latency_cycles} cycles"
            + (f"; multiplier bound: {bound.describe()}" if bound is not None else ""))


def _segmentation(st: CompileState) -> Segmentation | None:
    """The program's accelerator regions when there are several (ops without a lowering
    in the middle), else None: the single-region path with its own checks."""
    assert st.program is not None
    try:
        seg = segment(st.program, st.feeds, st.fetches)
    except LoweringError:
        return None
    return seg if len(seg.regions) > 1 else None


def _auto(st: CompileState) -> bool:
    if st.auto_fold is None:
        return st.target.board is not None and st.budget is None and st.ii_target is None
    if st.auto_fold and st.target.board is None:
        raise BuildError(f"automatic folding needs a board target (--target ulx3s-85f, "
                         f"icebreaker, ...); target {st.target.name!r} has no device")
    if st.auto_fold and (st.budget is not None or st.ii_target is not None):
        raise BuildError("automatic folding chooses the folding from the device's budget: "
                         "give --target-fps instead of --ii, and no --macs")
    return st.auto_fold


def _autofold(st: CompileState) -> None:
    """Find the stages once, fold them for the board's device (from a trial build),
    build them with that folding."""
    assert st.program is not None and st.scope is not None and st.target.board
    found = discover(st.program, st.feeds, st.fetches)
    stream = st.options.optimize == "latency"
    trial = build(found, st.scope, folding=st.folding, budget=None, weights=st.weights,
                  stream_input=stream)
    device = get_board(st.target.board).device
    st.autofold = autofold(trial.specs, device, fraction=st.fraction, overrides=st.folding,
                           target_fps=st.target_fps, clock_mhz=st.clock,
                           fifo_depth=trial.fifo_depth, graph=trial.graph,
                           lut_multipliers=st.options.folding.lut_multipliers,
                           optimize=st.options.optimize)
    st.lowered = build(found, st.scope, folding=st.autofold.folding, budget=None,
                       weights=st.weights, lut_mults=st.autofold.lut_mults,
                       stream_input=stream)


def _dumps(obj: Any) -> str:
    import json

    return json.dumps(to_json(obj), indent=1) + "\n"


def _step_generate_verilog(st: CompileState) -> str:
    if st.regions is not None:
        return "in regions/<k>/ (one accelerator per region)"
    assert st.lowered is not None
    st.top = st.lowered.top(st.name, ff_style=st.target.ff_style)
    res = emit_verilog(st.top)
    st.info = res.info
    bd = BuildDir(st.out)
    bd.write_text("verilog", res.text)
    bd.write_text("design", _dumps(res.info))
    lines = res.text.count("\n")
    return f"accelerator.v ({lines} lines, {'cached' if res.cached else 'emitted'})"


def _step_write_registers(st: CompileState) -> str:
    if st.regions is not None:
        return "in regions/<k>/"
    assert st.top is not None
    bd = BuildDir(st.out)
    bd.write_text("registers_md", emit_markdown(st.top.registers, st.info))
    bd.write_text("registers_h", emit_c_header(st.top.registers, st.info))
    return f"{len(st.top.registers)} registers"


def _save_model(program: Program, scope: Scope, feeds: list[str], fetches: list[str],
                d: Path) -> None:
    tmp = d.with_name(f".{d.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    gb = program.global_block()
    with scope_guard(scope):
        fio.save_inference_model(str(tmp), feeds, [gb.var(n) for n in fetches], Executor(),
                                 main_program=program)
    normalise_modes(tmp)
    shutil.rmtree(d, ignore_errors=True)
    os.replace(tmp, d)


def _step_write_model(st: CompileState) -> str:
    assert st.program is not None and st.scope is not None
    bd = BuildDir(st.out)
    _save_model(st.program, st.scope, st.feeds, st.fetches, bd.file("model"))
    if st.float_program is not None:
        _save_model(st.float_program, st.scope, st.feeds, st.fetches, bd.file("float_model"))
    else:
        bd.remove("float_model")
    return "model/" + (" and float_model/" if st.float_program is not None else "")


def _step_write_host(st: CompileState) -> str:
    if st.regions is not None:
        assert st.segmentation is not None
        return write_region_host(st, st.segmentation, st.regions)
    assert st.lowered is not None and st.scope is not None and st.top is not None
    low = st.lowered
    part = low.partition
    bd = BuildDir(st.out)
    host = bd.file("host")
    host.mkdir(parents=True, exist_ok=True)
    write_host_programs(host, part.host_programs, st.scope)
    info: dict[str, Any] = {
        "feeds": part.feeds, "fetches": part.fetches, "hw_input": part.hw_input,
        "hw_output": part.hw_output, "in_perm": low.in_perm, "out_perm": low.out_perm,
        "in_shape": low.in_shape, "out_shape": low.out_shape, "weights": low.weights_mode,
        "design_hash": st.top.design_hash,
        "pre_ops": [op.type for op in part.pre_program.global_block().ops],
        "post_ops": [op.type for op in part.post_program.global_block().ops]}
    if any(s.kind == "recurrent" and s.layout.get("reverse") for s in low.stages):
        # is_reverse: the driver streams each sequence last step first
        info["reverse_sequences"] = True
    bd.write_text("host_json", _dumps(info))
    wfile = bd.file("weights")
    if low.weights_mode == "runtime":
        from ...drivers import save_param_image

        image = param_image(low.specs)
        save_param_image(wfile, image)
        words = sum(len(w) for _, w in image)
        extra = f"; weights.npz ({words} words)"
    else:
        wfile.unlink(missing_ok=True)
        extra = ""
    return (f"pre {info['pre_ops']}, post {info['post_ops']}" + extra)


def write_host_programs(host: Path, programs: Mapping[str, Program], scope: Scope) -> None:
    """``host/<name>.pb`` for every host program and ``host/params.npz`` with the
    persistable values they read (from ``scope``)."""
    params: dict[str, np.ndarray] = {}
    for what, prog in programs.items():
        atomic_write_file(host / f"{what}.pb", program_to_bytes(prog))
        for v in prog.global_block().vars.values():
            if v.persistable and v.name not in ("feed", "fetch"):
                val = scope.find_value(v.name)
                if val is not None:
                    params[v.name] = np.asarray(getattr(val, "data", val))
    BuildDir(host.parent).write_npz("host_params", params)


def stage_reports(low: Lowered) -> list[dict[str, Any]]:
    """``stages[]`` of report.json: the hls estimate of each stage plus the program ops
    it implements."""
    ops = low.partition.program.global_block().ops
    out = []
    for s, e in zip(low.stages, low.estimate().stages):
        r = e.as_report()
        r["op"] = s.op  # the program op the stage implements
        r["ops"] = [ops[i].type for i in s.ops]
        r["in"], r["out"] = s.in_var, s.out_var
        r["in_format"], r["out_format"] = s.in_format.as_dict(), s.out_format.as_dict()
        out.append(r)
    return out


def _step_write_report(st: CompileState) -> str:
    if st.regions is not None:
        assert st.segmentation is not None
        return region_report(st, st.segmentation, st.regions)
    assert st.lowered is not None and st.top is not None
    low = st.lowered
    e = low.estimate()
    old = BuildDir(st.out).report(check=False)
    drop: list[str] = []
    if old.get("design_hash") != st.top.design_hash:  # a new design: later results are stale
        drop = [k for step, keys in REPORT_KEYS.items() if step != "compile" for k in keys]
        # and the files of those steps: a mixed folder would pass for this build's
        BuildDir(st.out).remove(*STEP_FILES["simulate"], *STEP_FILES["bitstream"])
    clock = st.clock
    keys = {
        "target": st.target.name, "clock_mhz": clock, "weights": low.weights_mode,
        "design_hash": st.top.design_hash, "lowering_hash": lowering_hash(low),
        "model": str(st.model_dir) if st.model_dir is not None else None,
        "quantized": "here" if st.quantized_here else "given",
        "folding": {k: {"pe": pe, "simd": simd} for k, (pe, simd) in low.folding.items()},
        "fifo_depths": low.fifo,
        "partition": low.partition.describe(),
        "stages": stage_reports(low),
        "estimate": e.as_report(),
        "throughput_per_s": clock * 1e6 / e.initiation_interval,
        "latency_us": e.latency_cycles / clock,
        "compile_seconds": round(time.perf_counter() - st.t0, 2),
        "autofold": st.autofold.as_report() if st.autofold is not None else None,
        "options": st.options.as_report(),
    }
    BuildDir(st.out).update_report("compile", keys, drop=drop)
    return (f"II {e.initiation_interval} cycles, latency {e.latency_cycles} cycles; "
            f"{keys['throughput_per_s']:.0f} inferences/s at {clock:g} MHz; "
            f"{e.resources.dsp} DSP, {e.resources.bram} BRAM, {e.resources.lut} LUT")


COMPILE_STEPS: list[Step] = [
    Step("load_model", _step_load_model, "io.load_inference_model(MODEL_DIR)"),
    Step("quantize", _step_quantize, "inference_pipeline + quantize (float models)"),
    Step("lower", _step_lower, "partition, stages, folding, estimates -> lowering.json"),
    Step("generate_verilog", _step_generate_verilog, "accelerator.v, design.json"),
    Step("write_registers", _step_write_registers, "registers.md, registers.h"),
    Step("write_model", _step_write_model, "model/ (and float_model/)"),
    Step("write_host", _step_write_host, "host/ programs, weights.npz"),
    Step("write_report", _step_write_report, "report.json"),
]


def _options(options: CompileOptions | None, kwargs: dict[str, Any]) -> CompileOptions:
    if options is not None and kwargs:
        raise BuildError(f"give either a CompileOptions or keyword options "
                         f"({', '.join(sorted(kwargs))}), not both")
    return options if options is not None else CompileOptions.from_kwargs(**kwargs)


def compile_model(model_dir: str | os.PathLike[str], out: str | os.PathLike[str],
                  options: CompileOptions | None = None, *,
                  calibration: Mapping[str, np.ndarray] | str | os.PathLike[str] | None = None,
                  stop_after: str | None = None, **kwargs: Any) -> CompileState:
    """Compile the saved inference model in ``model_dir`` into the build folder ``out``
    (see the module docstring) with ``options`` (a :class:`CompileOptions`, or its
    fields as keywords: ``target``, ``weights``, ``folding``, ``budget``, ``ii_target``,
    ``clock_mhz``, ``quant_config``, ``auto_fold``, ``target_fps``, ``fraction``,
    ``lut_multipliers``, ``optimize``).
    Returns the build state (``.lowered``, ``.top``...).

    On a board target the folding is automatic (:func:`fluid_hw.hls.autofold`, a
    ``fraction`` of the device's resources; ``folding`` fixes layers, ``target_fps``
    asks for the cheapest folding reaching that rate) unless the policy is
    ``balanced`` or a ``budget`` / ``ii_target`` is given."""
    st = CompileState(Path(out), _options(options, kwargs), Path(model_dir), calibration)
    _run_compile(st, stop_after)
    return st


def compile_program(program: Program, scope: Scope, out: str | os.PathLike[str],
                    options: CompileOptions | None = None, *,
                    feeds: Sequence[str], fetches: Sequence[str],
                    calibration: Mapping[str, np.ndarray] | None = None,
                    stop_after: str | None = None, **kwargs: Any) -> CompileState:
    """Like :func:`compile_model` for a program and its parameters in memory."""
    st = CompileState(Path(out), _options(options, kwargs), None, calibration)
    st.program, st.scope, st.feeds, st.fetches = program, scope, list(feeds), list(fetches)
    _run_compile(st, stop_after)
    return st


def _run_compile(st: CompileState, stop_after: str | None) -> None:
    """The compile steps under the build folder's lock; the manifest goes first (the
    folder is no build until it is written again) and is written again last, only
    when every step ran."""
    whole = stop_after is None or stop_after == COMPILE_STEPS[-1].name
    with BuildDir(st.out).writing("compile", fresh=True, manifest=whole):
        run_steps("compile", COMPILE_STEPS, st, stop_after)
