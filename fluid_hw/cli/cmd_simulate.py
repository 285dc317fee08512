"""``fluid-hw simulate BUILD_DIR --inputs X.npy``: run a build's accelerator in
Verilator over the inputs, compare every output bit with the golden model, measure
the initiation interval and latency, and write outputs.npy and report.json."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..backends.fpga import simulate

    keys = simulate(args.build, args.inputs, labels=args.labels,
                    debug_stages=args.debug_stages, trace=args.trace, cocotb=args.cocotb,
                    ready_prob=args.ready_prob, stop_after=args.stop_after)
    if "bit_exact" not in keys:
        print(f"simulated {args.build} (through step {args.stop_after})")
        return 0
    n, bad = keys["inputs"], keys["mismatches"]
    print(f"{args.build}: {'bit-exact' if keys['bit_exact'] else 'NOT bit-exact'} on "
          f"{n - bad} of {n} inputs")
    m = keys.get("measured", {})
    if m:
        print(f"  measured II {m['initiation_interval']:g} cycles, latency "
              f"{m['latency_cycles']:g} cycles, {m['cycles_per_inference']:.1f} cycles per "
              "inference")
    for r in keys.get("regions") or []:
        sim = r.get("simulate", r)
        rm = sim.get("measured") or {}
        ok = "bit-exact" if sim.get("bit_exact") else "NOT bit-exact"
        print(f"  region {r.get('index')}: {ok}"
              + (f", II {rm['initiation_interval']:g} cycles" if rm else ""))
    acc = keys.get("accuracy")
    if acc:
        print("  accuracy " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()
                                        if v is not None))
    dbg = keys.get("debug_stages")
    if dbg:
        for r in dbg["stages"]:
            print(f"  stage {r['stage']:12s} {r['op']:18s} {r['mismatches']} mismatching "
                  "elements")
        if dbg["first_divergence"]:
            print(f"  first divergence: {dbg['first_divergence']}")
        if dbg["hardware_vs_model"]["mismatches"]:
            print(f"  hardware vs stage models: {dbg['hardware_vs_model']}")
    return 0 if keys["bit_exact"] else 1


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="simulate a compiled accelerator against the "
                       "golden model", description=__doc__)
    p.add_argument("build", metavar="BUILD_DIR", help="a folder made by `fluid-hw compile`")
    p.add_argument("--inputs", required=True, metavar="X.npy",
                   help="float inputs (.npy, or .npz per input name; variable-length "
                   "sequences as NAME (the steps concatenated) and NAME.lengths (int64, "
                   "one per sequence); a sequence output also writes outputs.lengths.npy)")
    p.add_argument("--labels", metavar="y.npy", help="labels: report accuracies")
    p.add_argument("--debug-stages", action="store_true",
                   help="compare every stage's stream with the golden model's value and "
                   "report the first stage and element that diverge")
    p.add_argument("--trace", metavar="out.fst", help="record a waveform (.fst or .vcd)")
    p.add_argument("--cocotb", type=int, default=0, metavar="N",
                   help="also run the cocotb bench (random stalls) on the first N inputs")
    p.add_argument("--ready-prob", type=float, default=1.0,
                   help="probability of m_axis_tready each cycle (default 1: full rate)")
    p.add_argument("--stop-after", metavar="STEP", help="stop after this step (load_build, "
                   "golden, hardware, compare, measure, accuracy, debug_stages, cocotb, "
                   "write_outputs)")
    p.set_defaults(fn=_run)
