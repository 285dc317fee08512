"""``fluid-hw simulate`` of a build with several accelerator regions (see
:mod:`.regions`): the whole model bit for bit against the golden model.

1. the golden model (the CPU executor on ``model/``) on the inputs: the outputs and
   every region's input and output values;
2. every region simulated on its golden input (``regions/<k>``, the single-region
   :func:`.simulate.simulate`): bit-exact against its golden output, its measured II;
3. the whole model through the driver (host segments on the CPU executor, each region
   in its own Verilator model): the outputs against the golden outputs.

``report.json``: ``bit_exact`` (every region and the whole), ``mismatches`` (inputs
with any differing output), ``inputs``, ``regions[]`` (per region its simulate keys),
``measured`` (the regions' initiation intervals and latencies summed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.build_dir import BuildDir
from ...drivers.regions import RegionedAccelerator
from ...errors import FluidError
from ...frontend import io as fio
from ...ir import dtypes
from ...ir.lod import LoDTensor
from ...ir.scope import Scope
from ..cpu import Executor
from .compile import load_inputs
from .lod_io import item_count, lod_value
from .steps import BuildError, log

__all__ = ["simulate_regions"]


def simulate_regions(build_dir: str | os.PathLike[str],
                     inputs: Mapping[str, np.ndarray] | str | os.PathLike[str], *,
                     labels: np.ndarray | str | os.PathLike[str] | None = None,
                     ready_prob: float = 1.0, valid_prob: float = 1.0,
                     **region_options: Any) -> dict[str, Any]:
    """Simulate a multi-region build (see the module docstring); returns the keys
    written to report.json."""
    from .simulate import _accuracy, simulate

    t0 = time.perf_counter()
    d = Path(build_dir)
    bd = BuildDir(d)
    doc = bd.segments()
    feeds, fetches, regions = list(doc["feeds"]), list(doc["fetches"]), doc["regions"]
    scope = Scope()
    try:
        program, _, _ = fio.load_inference_model(bd.model_dir, Executor(), scope=scope)
    except FluidError as e:
        raise BuildError(f"{d}/model: cannot load the compiled model ({e}); recompile") from e
    x = dict(inputs) if isinstance(inputs, Mapping) else load_inputs(inputs, feeds, "--inputs")
    gb = program.global_block()
    for k, v in x.items():
        if gb.has_var(k):
            want = dtypes.to_numpy(gb.var(k).dtype)
            x[k] = LoDTensor(np.ascontiguousarray(v.data, want), v.lod()) \
                if isinstance(v, LoDTensor) else np.ascontiguousarray(v, want)
    n = item_count(next(iter(x.values())))
    names = [v for r in regions for v in (r["hw_input"], r["hw_output"])]
    vals = Executor().run(program, feed=x, fetch_list=fetches + names, scope=Scope(scope),
                          return_numpy=False)
    golden_out = [lod_value(v) for v in vals[:len(fetches)]]
    # (sequences stay LoD tensors: a region with a recurrent first stage takes them)
    golden = {nm: v if lod_value(v)[1] is not None else np.asarray(v)
              for nm, v in zip(names, vals[len(fetches):])}
    log("simulate", f"golden model: {n} inputs, {len(regions)} regions")
    per: list[dict[str, Any]] = []
    for r in regions:
        res = simulate(d / r["dir"], {r["hw_input"]: golden[r["hw_input"]]},
                       ready_prob=ready_prob, valid_prob=valid_prob, **region_options)
        per.append({"index": r["index"], "dir": r["dir"], "bit_exact": res.get("bit_exact"),
                    "mismatches": res.get("mismatches"), "measured": res.get("measured"),
                    "first_mismatch": res.get("first_mismatch")})
        log("simulate", f"region {r['index']}: "
            + ("bit-exact" if res.get("bit_exact") else f"{res.get('mismatches')} mismatches"))
    acc = RegionedAccelerator.open(d, "sim", ready_prob=ready_prob, valid_prob=valid_prob)
    try:
        got = [lod_value(o) for o in acc.run(x)]
    finally:
        acc.close()
    outs = [o for o, _ in got]
    n = len(outs[0])  # rows: items, or steps of a sequence output
    bad = np.zeros(n, bool)
    for (g, g_ln), (h, h_ln) in zip(golden_out, got):
        if g.shape != h.shape:
            raise BuildError(f"output shape {h.shape} differs from the golden {g.shape}")
        bad |= np.any((g != h).reshape(n, -1), axis=1)
        # a sequence output: its lengths too (a dense output where the golden one is a
        # sequence, or other lengths, is wrong everywhere)
        if g_ln is None or h_ln is None:
            if g_ln is not h_ln:
                bad[:] = True
        elif not np.array_equal(g_ln, h_ln):
            bad[:] = True
    mism = int(bad.sum())
    measured = {"initiation_interval": sum(float(p["measured"]["initiation_interval"])
                                           for p in per if p.get("measured")),
                "latency_cycles": sum(float(p["measured"]["latency_cycles"])
                                      for p in per if p.get("measured")),
                "cycles_per_inference": sum(float(p["measured"]["cycles_per_inference"])
                                            for p in per if p.get("measured")),
                "note": "regions' figures summed: a batch passes the regions in turn"}
    keys: dict[str, Any] = {
        "bit_exact": mism == 0 and all(p["bit_exact"] for p in per), "mismatches": mism,
        "inputs": n, "regions": per, "measured": measured,
        "simulate_seconds": round(time.perf_counter() - t0, 2)}
    if labels is not None:
        y = labels if isinstance(labels, np.ndarray) else np.load(labels, allow_pickle=False)
        keys["accuracy"] = {"hardware_int8": _accuracy(outs[0],
                                                       np.asarray(y).reshape(n, -1)[:, 0])}
    from .simulate import _npy_bytes

    bd.write_bytes("outputs", _npy_bytes(outs[0]))
    if got[0][1] is not None:  # a sequence output: its rows, and here their lengths
        bd.write_bytes("outputs_lengths", _npy_bytes(got[0][1]))
    else:
        bd.remove("outputs_lengths")
    report = bd.report(check=False)
    region_dicts = report.get("regions") or []
    for p, rd in zip(per, region_dicts):
        rd["simulate"] = p
    keys["regions"] = region_dicts or per
    bd.update_report("simulate", keys)
    log("simulate", ("bit-exact" if keys["bit_exact"] else f"NOT bit-exact ({mism} inputs)")
        + f" through {len(regions)} regions and the host segments")
    return keys
