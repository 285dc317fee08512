"""``fluid-hw simulate``: run a build's accelerator in Verilator over a set of inputs and
check it bit for bit against the golden model (the CPU executor on the quantised
program in ``model/``).

Steps (:data:`SIMULATE_STEPS`):

================  =====================================================================
``load_build``    ``report.json``, ``model/``; the model is lowered again with the
                  recorded folding and must give the design hash of ``design.json``
``golden``        the golden model on the inputs: the outputs, the accelerator's input
                  and output values, every stage's value, every int8 activation
                  (-> ``activations_at_rails``: the fraction at -128 or 127)
``hardware``      ``drivers.Accelerator`` over the ``sim`` transport: host programs +
                  Verilator harness (+ ``--trace``)
``compare``       ``bit_exact``, ``mismatches`` (inputs with any differing output bit),
                  ``inputs``
``measure``       ``measured{initiation_interval, latency_cycles, cycles_per_inference}``
                  from the handshake timestamps and counters (never the estimates);
                  ``mac_utilisation`` per matrix stage
``accuracy``      with labels: ``accuracy{float, golden_int8, hardware_int8}``, the last
                  from ``outputs.npy``
``debug_stages``  (``--debug-stages``) every stage's stream from the stage models vs the
                  golden value, the first stage and element that diverge
``cocotb``        (``cocotb=N``) the protocol-level cocotb bench on the first N inputs
``write_outputs`` ``outputs.npy`` (the model's first output; more in ``outputs.npz``),
                  ``report.json``
================  =====================================================================
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers import Accelerator
from ...drivers.build_dir import REPORT_KEYS, BuildDir
from ...errors import FluidError
from ...frontend import io as fio
from ...hls.lower import Lowered, lower, lowering_hash, mac_count
from ...ir import dtypes
from ...ir.lod import LoDTensor
from ...ir.program import Program
from ...ir.scope import Scope
from ...rtl import pipeline_model
from ...sim.harness import measure
from ..cpu import Executor
from .compile import load_inputs
from .lod_io import item_count, lod_value
from .report import read_report
from .steps import BuildError, Step, run_steps

__all__ = ["SimulateState", "SIMULATE_STEPS", "simulate", "load_build", "Build",
           "param_image_for", "compare_stages"]


@dataclass
class Build:
    """A build folder read back: its report, the quantised model and its lowering."""

    directory: Path
    report: dict[str, Any]
    program: Program
    scope: Scope
    feeds: list[str]
    fetches: list[str]
    lowered: Lowered


def load_build(build_dir: str | os.PathLike[str]) -> Build:
    """Read ``report.json`` and ``model/``, and lower the model again with the recorded
    folding; the design must be the one in ``design.json``."""
    d = Path(build_dir)
    bd = BuildDir(d)
    bd.verify()
    report = read_report(d, missing_ok=False)  # verified above
    if "stages" not in report:
        raise BuildError(f"{d}/report.json: the compile step has not finished; recompile")
    scope = Scope()
    try:
        program, feeds, fetch_vars = fio.load_inference_model(bd.model_dir, Executor(),
                                                              scope=scope)
    except FluidError as e:
        raise BuildError(f"{d}/model: cannot load the compiled model ({e}); recompile") from e
    folding = {k: (v["pe"], v["simd"]) for k, v in report.get("folding", {}).items()}
    lut = (report.get("autofold") or {}).get("lut_mults") or {}  # LUT multipliers
    low = lower(program, scope, folding=folding, weights=report.get("weights", "const"),
                feed_names=feeds, fetch_names=[v.name for v in fetch_vars], lut_mults=lut,
                stream_input=(report.get("options") or {}).get("optimize") == "latency")
    if lowering_hash(low) != report.get("lowering_hash"):
        raise BuildError(f"{d}: model/ does not lower to the stages this build was compiled "
                         "with (edited, or compiled by another version); recompile")
    return Build(d, report, program, scope, feeds, [v.name for v in fetch_vars], low)


def param_image_for(build: Build | str | os.PathLike[str], values: Mapping[str, Any]
                    ) -> list[tuple[int, np.ndarray]]:
    """The runtime parameter image of a build's design with other parameter values
    (``values``: program variable -> array, e.g. new int8 weights, biases,
    multipliers, shifts); load it with ``Accelerator.load(image)``."""
    from ...rtl import param_image

    b = build if isinstance(build, Build) else load_build(build)
    if b.lowered.weights_mode != "runtime":
        raise BuildError(f"{b.directory} has constant weights; compile with --weights "
                         "runtime to load others")

    return param_image(b.lowered.specs_with(_Overlay(values, b.scope)))


class _Overlay:
    """Parameter values: the given ones first, then a scope's."""

    def __init__(self, values: Mapping[str, Any], scope: Scope) -> None:
        self.values, self.scope = values, scope

    def find_value(self, name: str) -> Any:
        return self.values[name] if name in self.values else self.scope.find_value(name)


def _design(d: Path) -> dict[str, Any]:
    return BuildDir(d).design()


@dataclass
class SimulateState:
    directory: Path
    inputs: Mapping[str, np.ndarray] | str | os.PathLike[str]
    labels: np.ndarray | str | os.PathLike[str] | None = None
    debug_stages: bool = False
    trace: str | None = None
    cocotb: int = 0
    ready_prob: float = 1.0
    valid_prob: float = 1.0
    build: Build | None = None
    x: dict[str, np.ndarray] = field(default_factory=dict)
    y: np.ndarray | None = None
    golden: dict[str, np.ndarray] = field(default_factory=dict)
    golden_outputs: list[np.ndarray] = field(default_factory=list)
    outputs: list[np.ndarray] = field(default_factory=list)
    output_lengths: list[np.ndarray | None] = field(default_factory=list)  # LoD outputs
    golden_lengths: list[np.ndarray | None] = field(default_factory=list)
    steps: int | None = None  # time steps streamed (a recurrent first stage)
    acc_record: Any = None
    keys: dict[str, Any] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)


def _step_load_build(st: SimulateState) -> str:
    st.build = b = load_build(st.directory)
    st.x = dict(st.inputs) if isinstance(st.inputs, Mapping) else \
        load_inputs(st.inputs, b.feeds, "--inputs")
    gb = b.program.global_block()
    for k, v in st.x.items():
        want = dtypes.to_numpy(gb.var(k).dtype)
        st.x[k] = LoDTensor(np.ascontiguousarray(v.data, want), v.lod()) \
            if isinstance(v, LoDTensor) else np.ascontiguousarray(v, want)
    if st.labels is not None:
        y = st.labels if isinstance(st.labels, np.ndarray) else \
            np.load(st.labels, allow_pickle=False)
        n = item_count(next(iter(st.x.values())))
        if len(y) != n:
            raise BuildError(f"--labels holds {len(y)} labels for {n} inputs")
        st.y = np.asarray(y).reshape(n, -1)[:, 0]
    n = item_count(next(iter(st.x.values())))
    return f"{len(b.lowered.stages)} stages, {n} inputs"


def _activations(program: Program) -> list[str]:
    """int8 activations: the outputs of quantize and requantize."""
    out = []
    for op in program.global_block().ops:
        if op.type in ("quantize", "requantize"):
            name = op.output("Out")[0]
            if program.global_block().var(name).dtype == dtypes.VarType.INT8:
                out.append(name)
    return out


def _step_golden(st: SimulateState) -> str:
    b = st.build
    assert b is not None
    low = b.lowered
    part = low.partition
    names = list(dict.fromkeys([part.hw_input, part.hw_output,
                                *(s.out_var for s in low.stages), *_activations(b.program)]))
    vals = Executor().run(b.program, feed=st.x, fetch_list=b.fetches + names,
                          scope=Scope(b.scope), return_numpy=False)
    st.golden_lengths = [lod_value(v)[1] for v in vals[:len(b.fetches)]]
    vals = [lod_value(v)[0] for v in vals]
    st.golden_outputs = [np.asarray(v) for v in vals[:len(b.fetches)]]
    st.golden = {n: np.asarray(v) for n, v in zip(names, vals[len(b.fetches):])}
    rails: dict[str, float] = {}
    total = hits = 0
    for n in _activations(b.program):
        v = st.golden[n]
        h = int(np.count_nonzero((v == -128) | (v == 127)))
        rails[n] = h / max(1, v.size)
        total += v.size
        hits += h
    st.keys["activations_at_rails"] = {"overall": hits / max(1, total), "per_tensor": rails}
    return f"{100 * hits / max(1, total):.2f} % of int8 activations at -128/127"


def _step_hardware(st: SimulateState) -> str:
    assert st.build is not None
    with Accelerator.open(st.directory, "sim", trace=st.trace, ready_prob=st.ready_prob,
                          valid_prob=st.valid_prob) as acc:
        feed = st.x if len(st.x) > 1 else next(iter(st.x.values()))
        outs = [lod_value(o) for o in acc.run(feed)]
        st.outputs = [o for o, _ in outs]
        st.output_lengths = [ln for _, ln in outs]
        st.acc_record = acc.last
        if acc.info.get("sequence") is not None:  # the hardware's input rows are steps
            assert acc.last is not None
            st.steps = len(acc.last.hw_inputs)
    rec = st.acc_record
    return f"{len(rec.hw_outputs)} inferences in {rec.stream.cycles} cycles"


def _step_compare(st: SimulateState) -> str:
    b = st.build
    assert b is not None and st.acc_record is not None
    hw = st.acc_record.hw_outputs
    gold = st.golden[b.lowered.partition.hw_output]
    n = len(hw)
    bad = np.zeros(n, bool)
    bad |= (hw.reshape(n, -1) != gold.reshape(n, -1)).any(axis=1)
    for got, want in zip(st.outputs, st.golden_outputs):
        g = np.ascontiguousarray(got).view(np.uint8).reshape(n, -1)
        w = np.ascontiguousarray(want).view(np.uint8).reshape(n, -1)
        if got.dtype != want.dtype or got.shape != want.shape:
            bad[:] = True
        else:
            bad |= (g != w).any(axis=1)
    for got_ln, want_ln in zip(st.output_lengths, st.golden_lengths):  # LoD outputs
        if got_ln is None or want_ln is None:
            if got_ln is not want_ln:
                bad[:] = True
        elif not np.array_equal(got_ln, want_ln):
            bad[:] = True
    mism = int(bad.sum())
    st.keys.update({"bit_exact": mism == 0, "mismatches": mism, "inputs": n})
    if mism:
        i = int(np.flatnonzero(bad)[0])
        diff = np.flatnonzero(hw[i].reshape(-1) != gold[i].reshape(-1))
        j = int(diff[0]) if diff.size else -1
        st.keys["first_mismatch"] = {
            "input": i, "element": j,
            "hardware": int(hw[i].reshape(-1)[j]) if j >= 0 else None,
            "golden": int(gold[i].reshape(-1)[j]) if j >= 0 else None}
        return f"NOT bit-exact: {mism} of {n} inputs differ (first: input {i})"
    return f"bit-exact on all {n} inputs"


def _step_measure(st: SimulateState) -> str:
    b = st.build
    assert b is not None and st.acc_record is not None
    rec = st.acc_record
    ts = rec.stream.timestamps
    m = measure(ts)
    c = rec.counters
    inf = max(1, c["INFERENCES"])
    ii = m["initiation_interval"]
    st.keys["measured"] = {"initiation_interval": ii, "latency_cycles": m["latency_cycles"],
                           "cycles_per_inference": c["BUSY_CYCLES"] / inf,
                           "counters": c}
    util: dict[str, Any] = {}
    if ii and np.isfinite(ii):
        for spec in b.lowered.specs:
            macs = mac_count(spec)
            if macs:
                util[spec.name] = macs / (spec.pe * spec.simd) / ii  # type: ignore[attr-defined]
        if util:
            busiest = max(util, key=lambda k: util[k])
            total = sum(mac_count(s) for s in b.lowered.specs)
            lanes = sum(s.pe * s.simd for s in b.lowered.specs if mac_count(s))  # type: ignore[attr-defined]
            util = {"stages": util, "busiest": busiest, "busiest_utilisation": util[busiest],
                    "overall": total / lanes / ii}
    st.keys["mac_utilisation"] = util
    if st.steps:  # sequences: the recurrent stage's cycles per step, measured
        st.keys["measured"].update(_per_step(b.report, c, st.steps))
    est = b.report.get("estimate", {})
    msg = (f"II {ii:g} (estimated {est.get('initiation_interval')}), latency "
           f"{m['latency_cycles']:g} (estimated {est.get('latency_cycles')}) cycles")
    at_fmax = _at_fmax(b.report, b.lowered.specs, ii, m["latency_cycles"])
    if at_fmax is not None:
        st.keys["measured_at_fmax"] = at_fmax
        msg += (f"; at the bitstream's Fmax {at_fmax['fmax_mhz']:g} MHz: "
                f"{at_fmax['throughput_per_s']:.0f} inferences/s")
        if at_fmax["throughput_vs_multiplier_bound"] is not None:
            msg += f", {100 * at_fmax['throughput_vs_multiplier_bound']:.0f} % of the bound"
    if st.steps:
        ps = st.keys["measured"]
        msg += (f"; {ps['cycles_per_step']:.2f} cycles per step (estimated "
                f"{ps['estimated_cycles_per_step']}), {ps['sequences_per_s']:.0f} sequences/s "
                f"at {ps['clock_mhz']:g} MHz"
                + (" (the bitstream's Fmax)" if b.report.get("fmax_mhz") else "")
                + f" for this length mix (mean {ps['mean_steps_per_sequence']:.1f} steps)")
    return msg


def _per_step(report: dict[str, Any], counters: dict[str, int], steps: int
              ) -> dict[str, Any]:
    """A sequence design's measured cycles per time step (BUSY_CYCLES over the steps
    streamed), the first (recurrent) stage's estimate, and sequences per second at the
    build's clock for this run's length mix."""
    per = counters["BUSY_CYCLES"] / steps
    stages = report.get("stages") or [{}]
    est = (stages[0].get("estimate") or {}).get("cycles")
    seqs = max(1, counters["INFERENCES"])
    clock = report.get("fmax_mhz") or report.get("clock_mhz") or 100.0
    return {"steps": steps, "cycles_per_step": per, "estimated_cycles_per_step": est,
            "cycles_per_step_vs_estimate": per / est if est else None,
            "mean_steps_per_sequence": steps / seqs,
            "sequences_per_s": clock * 1e6 * seqs / max(1, counters["BUSY_CYCLES"]),
            "clock_mhz": clock}


def _at_fmax(report: dict[str, Any], specs: Any, ii: float, latency: float
             ) -> dict[str, Any] | None:
    """Measured cycles x the post-route Fmax of this build's bitstream (when one was
    built: the manifest guarantees it is of this design), and the share of the device's
    multiplier bound (every multiplier one MAC a cycle at Fmax) -- the figures the
    throughput goals are stated in."""
    fmax = report.get("fmax_mhz")
    if not fmax or not ii or not np.isfinite(ii):
        return None
    macs = sum(mac_count(s) for s in specs)
    dsp = (report.get("resources_available") or {}).get("dsp")
    tput = fmax * 1e6 / ii
    bound = dsp * fmax * 1e6 / macs if dsp and macs else None
    return {"fmax_mhz": fmax, "initiation_interval": ii, "throughput_per_s": tput,
            "latency_us": latency / fmax if latency and np.isfinite(latency) else None,
            "macs_per_inference": macs, "multiplier_bound_per_s": bound,
            "throughput_vs_multiplier_bound": tput / bound if bound else None}


def _accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    o = np.asarray(outputs)
    pred = o.reshape(len(o), -1).argmax(axis=1) if o.ndim > 1 and o.shape[-1] > 1 else \
        o.reshape(-1)
    return float((pred == labels).mean())


def _step_accuracy(st: SimulateState) -> str:
    if st.y is None:
        return "no labels"
    b = st.build
    assert b is not None
    acc: dict[str, float | None] = {"float": None}
    fdir = st.directory / "float_model"
    if fdir.is_dir():
        scope = Scope()
        prog, _, fetch_vars = fio.load_inference_model(fdir, Executor(), scope=scope)
        (p,) = Executor().run(prog, feed=st.x, fetch_list=[fetch_vars[0].name], scope=scope)
        acc["float"] = _accuracy(p, st.y)
    acc["golden_int8"] = _accuracy(st.golden_outputs[0], st.y)
    acc["hardware_int8"] = _accuracy(st.outputs[0], st.y)
    st.keys["accuracy"] = acc
    return ", ".join(f"{k} {v:.4f}" for k, v in acc.items() if v is not None)


def compare_stages(low: Lowered, golden: Mapping[str, np.ndarray],
                   hw_stream: np.ndarray | None = None) -> dict[str, Any]:
    """Every stage's model (:func:`~fluid_hw.rtl.pipeline_model` of its spec, fed the
    golden value of its input) against the golden value of its output, in stream order;
    the first stage and element that diverge (``element``: the index into the golden
    value, batch first); and the hardware's output stream against the whole model.
    ``golden``: program variable -> value (the stages' inputs and outputs)."""
    x = low.to_stream(golden[low.partition.hw_input])
    rows: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    inputs = low.graph.inputs if low.graph is not None else \
        [(k - 1,) for k in range(len(low.stages))]
    # every stage starts from the golden values of its inputs: every divergence shows
    streams: dict[int, np.ndarray] = {-1: np.asarray(x, np.int64)}
    for k, (s, spec) in enumerate(zip(low.stages, low.specs)):
        y = np.asarray(spec.model(*(streams[p] for p in inputs[k])), np.int64)
        want = low.stage_stream(k, golden[s.out_var]).astype(np.int64)
        diff = y != want
        rows.append({"stage": s.name, "op": s.op, "golden": s.out_var,
                     "mismatches": int(diff.sum())})
        if diff.any() and first is None:
            i, j = (int(v) for v in np.argwhere(diff)[0])
            idx = np.unravel_index(int(s.stream_perm[j]), s.out_shape)
            first = {"stage": s.name, "golden": s.out_var, "input": i, "stream_position": j,
                     "element": [i, *map(int, idx)], "model": int(y[i, j]),
                     "golden_value": int(want[i, j])}
        streams[k] = want
    out: dict[str, Any] = {"stages": rows, "first_divergence": first}
    if hw_stream is not None:
        model = pipeline_model(low.specs, x, inputs).astype(np.int64)
        hw = np.asarray(hw_stream, np.int64)
        diff = hw != model
        row: dict[str, Any] = {"mismatches": int(diff.sum())}
        if diff.any():
            i, j = (int(v) for v in np.argwhere(diff)[0])
            idx = np.unravel_index(int(low.out_perm[j]), low.out_shape)
            row.update({"input": i, "stream_position": j, "element": [i, *map(int, idx)],
                        "hardware": int(hw[i, j]), "model": int(model[i, j])})
        out["hardware_vs_model"] = row
    return out


def _step_debug_stages(st: SimulateState) -> str:
    if not st.debug_stages:
        return "skipped (--debug-stages to run)"
    if st.steps:
        raise BuildError("--debug-stages does not take sequences yet (a recurrent first "
                         "stage); the compare step already checks every output bit")
    b = st.build
    assert b is not None and st.acc_record is not None
    res = compare_stages(b.lowered, st.golden, st.acc_record.stream.outputs)
    st.keys["debug_stages"] = res
    first, hw_row = res["first_divergence"], res["hardware_vs_model"]
    if first is not None:
        return (f"first divergence: stage {first['stage']}, input {first['input']}, element "
                f"{first['element']} of {first['golden']} (model {first['model']}, golden "
                f"{first['golden_value']})")
    if hw_row["mismatches"]:
        return (f"the stage models agree with the golden model, the hardware output does "
                f"not ({hw_row['mismatches']} elements, first {hw_row['element']}): an RTL "
                "fault")
    return "every stage agrees with the golden model"


def _step_cocotb(st: SimulateState) -> str:
    if not st.cocotb:
        return "skipped (cocotb=N to run)"
    if st.steps:
        raise BuildError("the cocotb bench streams fixed-size items, not sequences (a "
                         "recurrent first stage); drop --cocotb (random back-pressure: "
                         "--ready-prob)")
    from ...sim.cocotb_runner import run_cocotb

    b = st.build
    assert b is not None
    low = b.lowered
    n = min(st.cocotb, len(st.golden[low.partition.hw_input]))
    x = low.to_stream(st.golden[low.partition.hw_input][:n])
    want = low.to_out_stream(st.golden[low.partition.hw_output][:n])
    design = _design(st.directory)
    top = low.top(design["name"], ff_style=design.get("ff_style", "plain"))
    params = None
    if low.weights_mode == "runtime":
        from ...rtl import param_image

        params = param_image(low.specs)
    res = run_cocotb(top, x, want, params=params, ready_prob=0.8, valid_prob=0.8)
    ok = bool(np.array_equal(res.outputs.astype(np.int64), want.astype(np.int64)))
    st.keys["cocotb"] = {"inputs": n, "bit_exact": ok, "cycles": res.cycles,
                         "cycles_per_s": res.cycles_per_s}
    return f"{n} inputs, bit-exact {ok}, {res.cycles_per_s:.0f} cycles/s"


def _step_write_outputs(st: SimulateState) -> str:
    bd = BuildDir(st.directory)
    bd.write_bytes("outputs", _npy_bytes(st.outputs[0]))
    lengths = st.output_lengths[0] if st.output_lengths else None
    if lengths is not None:  # a sequence output: its rows, and here their lengths
        bd.write_bytes("outputs_lengths", _npy_bytes(lengths))
    else:
        bd.remove("outputs_lengths")
    if len(st.outputs) > 1:
        assert st.build is not None
        bd.write_npz("outputs_npz", dict(zip(st.build.fetches, st.outputs)))
    else:
        bd.remove("outputs_npz")  # an earlier run's
    st.keys["simulate_seconds"] = round(time.perf_counter() - st.t0, 2)
    # no stale keys of an earlier run
    bd.update_report("simulate", st.keys, drop=REPORT_KEYS["simulate"])
    return "outputs.npy, report.json"


SIMULATE_STEPS: list[Step] = [
    Step("load_build", _step_load_build, "report.json, model/, lowering"),
    Step("golden", _step_golden, "CPU executor on the quantised program"),
    Step("hardware", _step_hardware, "drivers.Accelerator on the sim transport"),
    Step("compare", _step_compare, "bit_exact, mismatches"),
    Step("measure", _step_measure, "II, latency, cycles per inference, MAC utilisation"),
    Step("accuracy", _step_accuracy, "float / golden int8 / hardware int8 (labels)"),
    Step("debug_stages", _step_debug_stages, "per-stage comparison (--debug-stages)"),
    Step("cocotb", _step_cocotb, "protocol-level cocotb bench (cocotb=N)"),
    Step("write_outputs", _step_write_outputs, "outputs.npy, report.json"),
]


def simulate(build_dir: str | os.PathLike[str],
             inputs: Mapping[str, np.ndarray] | str | os.PathLike[str], *,
             labels: np.ndarray | str | os.PathLike[str] | None = None,
             debug_stages: bool = False, trace: str | os.PathLike[str] | None = None,
             cocotb: int = 0, ready_prob: float = 1.0, valid_prob: float = 1.0,
             stop_after: str | None = None) -> dict[str, Any]:
    """Simulate the build in ``build_dir`` on ``inputs`` (see the module docstring);
    returns the keys written to report.json.  ``ready_prob``/``valid_prob`` < 1 add
    random back-pressure (the measured II and latency then include the stalls)."""
    bd = BuildDir(build_dir)
    with bd.writing("simulate"):
        bd.verify(force=True)
        if bd.is_regioned:  # several accelerator regions
            from .simulate_regions import simulate_regions

            return simulate_regions(build_dir, inputs, labels=labels, ready_prob=ready_prob,
                                    valid_prob=valid_prob, debug_stages=debug_stages)
        st = SimulateState(Path(build_dir), inputs, labels, debug_stages,
                           None if trace is None else str(trace), cocotb, ready_prob,
                           valid_prob)
        run_steps("simulate", SIMULATE_STEPS, st, stop_after)
        return st.keys


def _npy_bytes(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()
