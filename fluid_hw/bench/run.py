"""``run_bench``: one saved model on every back end present, one report.

The report (``bench.json``, schema ``fluid-hw/bench/1``)::

    {"schema", "created", "machine": {...}, "model": {"dir", "fingerprint", ...},
     "test_set": {"source", "inputs", "labels"}, "options": {...},
     "rows": [{"backend": "cpu" | "onnxruntime" | "cuda" | "fpga:<target>",
               "variant": str, "status": "measured" | "skipped" | "merged",
               "reason": str (skipped),
               "latency_us": {"device": {median_us, p99_us, how} | null,
                              "host": {median_us, p99_us, runs}},   # batch 1, warm
               "throughput": [{"batch", "latency_us", "per_s", ...}],  # per_s = batch /
               "accuracy": float | null, "agreement": float | null,    #  latency
               "energy": {"source": str, "j_per_inference_batch<b>": float, ...}, ...}],
     "goals": [{"goal", "status": "met" | "NOT met" | "not measured", "detail"}],
     "published": [...]}

``agreement``: the share of test inputs whose top-1 class equals the reference's (the
CPU executor's float model for float rows, its int8 golden model for int8 rows).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BenchError
from ..tools import Progress, say, tell
from .energy import PowerEstimate, cpu_meter
from .host_rows import Skip, cpu_row, onnxruntime_row, skipped_row
from .model import Model, load_model, load_test_set
from .published import PUBLISHED

__all__ = ["BATCHES", "QUICK_BATCHES", "SCHEMA", "BenchOptions", "goals", "merge_rows",
           "run_bench"]

SCHEMA = "fluid-hw/bench/1"
BATCHES = [1, 4, 16, 64, 256, 1024, 4096]
QUICK_BATCHES = [1, 64, 1024]
BACKENDS = ("cpu", "onnxruntime", "cuda", "fpga")


@dataclass
class BenchOptions:
    """What to run and how long.  ``budget_s``: seconds of timed calls per measurement
    (at least 5 calls each); ``quick``: fewer batch sizes and a short budget."""

    quick: bool = False
    batches: list[int] | None = None
    budget_s: float | None = None
    test: str = "digits"
    int8_model: str | None = None
    fpga_power: PowerEstimate | None = None
    merge: list[str] = field(default_factory=list)
    backends: tuple[str, ...] = BACKENDS

    def resolved_batches(self) -> list[int]:
        b = self.batches or (QUICK_BATCHES if self.quick else BATCHES)
        if not b or any(int(x) < 1 for x in b):
            raise BenchError(f"batch sizes must be >= 1, got {b}")
        return sorted({int(x) for x in b})

    def resolved_budget(self) -> float:
        return self.budget_s if self.budget_s is not None else (0.05 if self.quick else 0.4)


def _machine() -> dict[str, Any]:
    return {"processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "system": platform.platform(),
            # other work on the machine while measuring: the CPU figures depend on it
            "load_average_1min_at_start": os.getloadavg()[0]}


def _int8_model(model: Model, opts: BenchOptions, fpga: str | None) -> tuple[Model | None, str]:
    if model.quantized:
        return model, "MODEL_DIR"
    if opts.int8_model:
        return load_model(opts.int8_model, "--int8"), "--int8"
    if fpga and (Path(fpga) / "model" / "__model__").is_file():
        return load_model(Path(fpga) / "model", "the build's model/"), "the build's model/"
    return None, "no int8 model: give --int8 DIR (a quantised saved model) or --fpga BUILD"


def _float_model(model: Model, fpga: str | None) -> tuple[Model | None, str]:
    if not model.quantized:
        return model, "MODEL_DIR"
    if fpga and (Path(fpga) / "float_model" / "__model__").is_file():
        return load_model(Path(fpga) / "float_model", "the build's float_model/"), \
            "the build's float_model/"
    return None, ("MODEL_DIR is quantised and no float model is known: bench the float "
                  "model (with --int8 DIR) for float rows")


def run_bench(model_dir: str | os.PathLike[str], fpga: str | os.PathLike[str] | None = None,
              options: BenchOptions | None = None, out_dir: str | os.PathLike[str] | None = None,
              progress: Progress = say) -> dict[str, Any]:
    """Run the model in ``model_dir`` on every back end in ``options.backends`` that is
    present (the FPGA from the build folder ``fpga``) and return the report.  With
    ``out_dir`` the ONNX exports are kept there."""
    opts = options or BenchOptions()
    unknown = [b for b in opts.backends if b not in BACKENDS]
    if unknown:
        raise BenchError(f"unknown back end(s) {unknown}; known: {', '.join(BACKENDS)}")
    fpga_s = None if fpga is None else str(fpga)
    if fpga_s is not None and not Path(fpga_s).is_dir():
        raise BenchError(f"--fpga {fpga_s}: no such build folder; make one with `fluid-hw "
                         "compile MODEL_DIR --out BUILD` and `fluid-hw simulate BUILD ...`")
    batches, budget = opts.resolved_batches(), opts.resolved_budget()
    model = load_model(model_dir)
    test = load_test_set(opts.test, model)
    fmodel, fwhy = _float_model(model, fpga_s)
    qmodel, qwhy = _int8_model(model, opts, fpga_s)
    meter = cpu_meter()
    rows: list[dict[str, Any]] = []
    keep = Path(out_dir) if out_dir is not None else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)

    def attempt(backend: str, variant: str, fn: Any) -> Any:
        tell(progress, f"{backend} {variant} ...")
        try:
            return fn()
        except Skip as e:
            tell(progress, f"{backend} {variant}: skipped: {e}")
            rows.append(skipped_row(backend, variant, str(e)))
            return None

    ref_f = ref_q = None
    if "cpu" in opts.backends:
        for m, why, variant in ((fmodel, fwhy, "float32"), (qmodel, qwhy, "int8 golden model")):
            if m is None:
                rows.append(skipped_row("cpu", variant, why))
                continue
            # the int8 golden model's agreement: with the float model
            row, outs = cpu_row(m, variant, test, batches, budget, meter,
                                ref_f if m is qmodel else None, progress)
            row["model_source"] = why
            rows.append(row)
            if m is qmodel:
                ref_q = outs
            else:
                ref_f = outs
    if "onnxruntime" in opts.backends:
        for m, why, variant, ref in ((fmodel, fwhy, "float32", ref_f),
                                     (qmodel, qwhy, "int8 (QDQ export)", ref_q)):
            if m is None:
                rows.append(skipped_row("onnxruntime", variant, why))
                continue
            path = keep / f"model.{'int8' if m is qmodel else 'float'}.onnx" if keep else None
            r = attempt("onnxruntime", variant,
                        lambda m=m, v=variant, ref=ref, path=path: onnxruntime_row(
                            m, v, test, batches, budget, meter, ref, path, progress))
            if r is not None:
                rows.append(r)
    if "cuda" in opts.backends:
        from .cuda_row import cuda_rows, gpu_status

        present, gpu_why = gpu_status()
        if not present:
            rows.append(skipped_row("cuda", "float32", gpu_why))
        elif fmodel is None:
            rows.append(skipped_row("cuda", "float32", fwhy))
        else:
            got = attempt("cuda", "float32", lambda: cuda_rows(fmodel, test, batches, budget,
                                                               ref_f, progress))
            rows.extend(got or [])
    if "fpga" in opts.backends:
        if fpga_s is None:
            rows.append(skipped_row("fpga", "int8 accelerator",
                                    "no build folder: give --fpga BUILD (fluid-hw compile + "
                                    "simulate [+ bitstream])"))
        else:
            from .fpga_row import fpga_row

            r = attempt("fpga", "int8 accelerator", lambda: fpga_row(
                fpga_s, test, batches, budget, opts.fpga_power, ref_q, progress))
            if r is not None:
                rows.append(r)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "model": {"dir": str(model.path), "fingerprint": model.fingerprint,
                  "feeds": model.feeds, "fetches": model.fetches,
                  "quantized": model.quantized},
        "test_set": {"source": test.source, "inputs": test.n,
                     "labels": test.labels is not None},
        "options": {"quick": opts.quick, "batches": batches, "budget_s": budget,
                    "cpu_energy": meter[1]},
        "rows": rows,
        "published": PUBLISHED,
    }
    for merged in opts.merge:
        merge_rows(report, merged)
    report["goals"] = goals(report)
    return report


def merge_rows(report: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Take the measured ``cuda`` rows of another bench.json (``make gpu-check`` on a GPU
    machine) for the same model: they replace the skipped ``cuda`` rows."""
    p = Path(path)
    try:
        other = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise BenchError(f"--merge {p}: unreadable ({e}); give a bench.json written by "
                         "`fluid-hw bench` (make gpu-check writes build/gpu-check/bench/"
                         "bench.json)") from None
    if not isinstance(other, dict) or other.get("schema") != SCHEMA:
        raise BenchError(f"--merge {p}: not a {SCHEMA} report")
    if other.get("model", {}).get("fingerprint") != report["model"]["fingerprint"]:
        raise BenchError(f"--merge {p}: measured another model ({other.get('model', {}).get('dir')}"
                         f"); its rows cannot be compared with {report['model']['dir']}")
    got = [r for r in other.get("rows", []) if r.get("backend") == "cuda"
           and r.get("status") == "measured"]
    if not got:
        raise BenchError(f"--merge {p}: holds no measured cuda row")
    machine = other.get("machine", {})
    for r in got:
        r = dict(r, status="merged", merged_from=str(p), machine=machine)
        report["rows"] = [x for x in report["rows"]
                          if not (x["backend"] == "cuda" and x["status"] == "skipped")]
        report["rows"].append(r)


def _device_b1(row: dict[str, Any]) -> float | None:
    d = (row.get("latency_us") or {}).get("device")
    return None if not d else d.get("median_us")


def goals(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The FPGA-vs-GPU goals at batch 1 (issue 19): device latency >= 10x lower and
    energy per inference >= 100x lower than the GPU back end's."""
    rows = [r for r in report["rows"] if r["status"] in ("measured", "merged")]
    fpga = next((r for r in rows if r["backend"].startswith("fpga:")), None)
    gpu = [r for r in rows if r["backend"] == "cuda" and _device_b1(r) is not None]
    gpu_row = min(gpu, key=lambda r: _device_b1(r) or np.inf) if gpu else None
    out = []
    lat_goal = "FPGA device latency at batch 1 >= 10x lower than the GPU's"
    en_goal = "FPGA energy per inference at batch 1 >= 100x lower than the GPU's"
    if fpga is None or gpu_row is None:
        why = "not measured (" + ", ".join(
            w for w, missing in (("no FPGA build", fpga is None),
                                 ("no GPU measured", gpu_row is None)) if missing) + ")"
        return [{"goal": lat_goal, "status": why}, {"goal": en_goal, "status": why}]
    f, g = _device_b1(fpga), _device_b1(gpu_row)
    assert f is not None and g is not None
    out.append({"goal": lat_goal, "status": "met" if g / f >= 10 else "NOT met",
                "detail": f"FPGA {f:.3g} us, GPU ({gpu_row['variant']}) {g:.3g} us: "
                          f"{g / f:.1f}x"})
    fe = fpga.get("energy", {}).get("j_per_inference_batch1")
    ge = gpu_row.get("energy", {}).get("j_per_inference_batch1")
    if fe is None or ge is None:
        out.append({"goal": en_goal, "status": "not measured (" + (
            "no FPGA power estimate" if fe is None else "no GPU energy") + ")"})
    else:
        out.append({"goal": en_goal, "status": "met" if ge / fe >= 100 else "NOT met",
                    "detail": f"FPGA {fe:.3g} J, GPU {ge:.3g} J: {ge / fe:.0f}x"})
    return out
