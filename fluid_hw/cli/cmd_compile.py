"""``fluid-hw compile MODEL_DIR --target sim --out BUILD_DIR``: a saved model -> an
FPGA build folder (Verilog, register map, quantised model, host programs, report)."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..backends.fpga import COMPILE_STEPS, compile_model
    from ..hls.folding import FoldingBudget, parse_folding

    budget = FoldingBudget(macs=args.macs) if args.macs else None
    st = compile_model(args.model, args.out, target=args.target, weights=args.weights,
                       calibration=args.calibration, folding=parse_folding(args.fold),
                       budget=budget, ii_target=args.ii, clock_mhz=args.clock_mhz,
                       stop_after=args.stop_after)
    last = args.stop_after or COMPILE_STEPS[-1].name
    print(f"compiled {args.model} -> {args.out} (through step {last})")
    if st.lowered is not None and last == COMPILE_STEPS[-1].name:
        e = st.lowered.estimate()
        for s, est in zip(st.lowered.stages, e.stages):
            fold = ", ".join(f"{k} {v}" for k, v in est.folding.items())
            print(f"  {s.name:12s} {s.op:18s} {fold:16s} ~{est.ii} cycles")
        print(f"  estimated II {e.initiation_interval} cycles, latency {e.latency_cycles} "
              f"cycles, {e.resources.dsp} DSP / {e.resources.bram} BRAM / "
              f"{e.resources.lut} LUT")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("compile", help="compile a saved model to an FPGA accelerator",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL_DIR", help="a model saved with "
                   "io.save_inference_model (float, or already quantised)")
    p.add_argument("--target", default="sim", help="what to build for (default sim: the "
                   "Verilator simulation)")
    p.add_argument("--out", required=True, metavar="BUILD_DIR", help="the build folder")
    p.add_argument("--weights", choices=("const", "runtime"), default="const",
                   help="weights built into the design (const, default) or loaded at run "
                   "time through the register interface (runtime)")
    p.add_argument("--calibration", metavar="X.npy", help="calibration inputs (.npy, or "
                   ".npz per input name) to quantise a float model to int8")
    p.add_argument("--fold", metavar="LAYER=PExSIMD,...", help="per-layer folding, e.g. "
                   "fc_0=4x8,fc_1=2x8; other layers are balanced")
    p.add_argument("--macs", type=int, help="multiplier budget of the balanced folding "
                   "(default: the target's, 128 for sim)")
    p.add_argument("--ii", type=int, help="fold for this initiation interval (cycles) "
                   "instead of the fastest within the budget")
    p.add_argument("--clock-mhz", type=float, help="clock for the time figures "
                   "(default: the target's)")
    p.add_argument("--stop-after", metavar="STEP",
                   help="stop after this step to inspect the build folder (load_model, "
                   "quantize, lower, generate_verilog, write_registers, write_model, "
                   "write_host, write_report)")
    p.set_defaults(fn=_run)
