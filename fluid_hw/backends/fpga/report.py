"""``BUILD_DIR/report.json``: one file, filled in by each build step.

Writes are atomic (a temporary file renamed over the report) and merge: a step adds
or replaces its own keys and leaves the others', so an absent key means its step
has not run.  :data:`STEP_KEYS` says which step owns which key.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FluidError

__all__ = ["REPORT", "STEP_KEYS", "ReportError", "read_report", "update_report", "to_json"]

REPORT = "report.json"

#: keys of report.json by the step that writes them (shared/DESIGN.md, Build report)
STEP_KEYS: dict[str, tuple[str, ...]] = {
    "compile": ("target", "clock_mhz", "weights", "stages", "estimate", "throughput_per_s",
                "latency_us", "design_hash", "lowering_hash", "folding", "fifo_depths", "model",
                "quantized", "partition", "compile_seconds", "autofold"),
    "simulate": ("measured", "bit_exact", "mismatches", "first_mismatch", "inputs", "accuracy",
                 "activations_at_rails", "mac_utilisation", "debug_stages", "cocotb",
                 "simulate_seconds"),
    "bitstream": ("fmax_mhz", "timing_met", "critical_path", "resources_used",
                  "resources_available", "resources_estimate_vs_actual", "bitstream"),
}


class ReportError(FluidError):
    """report.json is missing or malformed."""


def to_json(v: Any) -> Any:
    """numpy scalars/arrays and tuples -> plain JSON values."""
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [to_json(x) for x in v]
    if isinstance(v, np.ndarray):
        return to_json(v.tolist())
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        f = float(v)
        return f if np.isfinite(f) else None
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def read_report(build_dir: str | os.PathLike[str], *, missing_ok: bool = True
                ) -> dict[str, Any]:
    path = Path(build_dir) / REPORT
    if not path.exists():
        if missing_ok:
            return {}
        raise ReportError(f"{path}: not found; run `fluid-hw compile` into {build_dir} first")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e}); delete it and recompile") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return data


def update_report(build_dir: str | os.PathLike[str], keys: dict[str, Any],
                  drop: Iterable[str] = ()) -> dict[str, Any]:
    """Merge ``keys`` into the report (removing ``drop``) and write it atomically;
    returns the whole report."""
    d = Path(build_dir)
    d.mkdir(parents=True, exist_ok=True)
    report = read_report(d)
    for k in drop:
        report.pop(k, None)
    report.update(to_json(keys))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".report.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(report, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, d / REPORT)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return report
