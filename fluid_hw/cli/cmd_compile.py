"""``fluid-hw compile MODEL_DIR --target sim --out BUILD_DIR``: a saved model -> an
FPGA build folder (Verilog, register map, quantised model, host programs, report).

``--target ulx3s-85f`` (or ``ecp5-85f``, ``ulx3s-25f/45f``, ``icebreaker``/``up5k``)
compiles for a board: the folding is chosen automatically for its device (85 % of its
multipliers, LUTs and block RAMs, ``--fold`` fixes layers, ``--target-fps`` asks for the
cheapest folding reaching a rate), and ``--bitstream`` goes on to build the bitstream
(as ``fluid-hw bitstream BUILD_DIR``)."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..backends.fpga import COMPILE_STEPS, compile_model
    from ..hls.folding import FoldingBudget, parse_folding

    budget = FoldingBudget(macs=args.macs) if args.macs else None
    parts = [p.strip() for p in (args.fold or "").split(",") if p.strip()]
    auto = True if "auto" in parts else None
    folding = parse_folding(",".join(p for p in parts if p != "auto") or None)
    st = compile_model(args.model, args.out, target=args.target, weights=args.weights,
                       calibration=args.calibration, folding=folding,
                       budget=budget, ii_target=args.ii, clock_mhz=args.clock_mhz,
                       auto_fold=auto, target_fps=args.target_fps,
                       fraction=args.budget_fraction, stop_after=args.stop_after,
                       lut_multipliers=args.lut_multipliers, optimize=args.optimize)
    last = args.stop_after or COMPILE_STEPS[-1].name
    print(f"compiled {args.model} -> {args.out} (through step {last})")
    if st.segmentation is not None:  # which ops run where
        for d in st.segmentation.describe()["segments"]:
            print(f"  {d['where']:14s} {', '.join(d['ops']) or '-'}")
            for note in d.get("notes", []):
                print(f"  {'':14s} ({note})")
        for rb in st.regions or []:
            if rb.state.lowered is not None:
                e = rb.state.lowered.estimate()
                print(f"  region {rb.index} ({rb.path}): {len(rb.state.lowered.stages)} stages, "
                      f"estimated II {e.initiation_interval} cycles")
    if st.lowered is not None and last == COMPILE_STEPS[-1].name:
        e = st.lowered.estimate()
        for note in st.lowered.partition.describe().get("notes", []):
            print(f"  ({note})")
        for s, est in zip(st.lowered.stages, e.stages):
            fold = ", ".join(f"{k} {v}" for k, v in est.folding.items())
            print(f"  {s.name:12s} {s.op:18s} {fold:16s} ~{est.ii} cycles")
        print(f"  estimated II {e.initiation_interval} cycles, latency {e.latency_cycles} "
              f"cycles, {e.resources.dsp} DSP / {e.resources.bram} BRAM / "
              f"{e.resources.lut} LUT")
        if st.autofold is not None:
            a = st.autofold
            print(f"  folded automatically for {a.device}: "
                  + ", ".join(f"{r} {a.resources[r]}/{a.limits[r]}" for r in a.limits)
                  + f" (budget {round(100 * a.fraction)} % of the device)")
    if args.bitstream:
        if args.stop_after:
            raise SystemExit("--bitstream needs the whole compile (drop --stop-after)")
        from ..backends.fpga import bitstream, write_report_html
        from .cmd_bitstream import print_bitstream

        print_bitstream(args.out, bitstream(args.out))
        print(f"  report: {write_report_html(args.out)}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("compile", help="compile a saved model to an FPGA accelerator",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL_DIR", help="a model saved with "
                   "io.save_inference_model (float, or already quantised)")
    p.add_argument("--target", default="sim", help="what to build for: sim (default, the "
                   "Verilator simulation) or a board (ulx3s-25f/45f/85f, icebreaker; also "
                   "by device: ecp5-85f, up5k), folded automatically for its device")
    p.add_argument("--out", required=True, metavar="BUILD_DIR", help="the build folder")
    p.add_argument("--weights", choices=("const", "runtime"), default="const",
                   help="weights built into the design (const, default) or loaded at run "
                   "time through the register interface (runtime)")
    p.add_argument("--calibration", metavar="X.npy", help="calibration inputs (.npy, or "
                   ".npz per input name; variable-length sequences as NAME, the steps "
                   "concatenated, and NAME.lengths, int64 one per sequence) to quantise a "
                   "float model to int8")
    p.add_argument("--fold", metavar="LAYER=PExSIMD,...", help="per-layer folding, e.g. "
                   "fc_0=4x8,fc_1=2x8; other layers are balanced (board targets: folded "
                   "automatically for the device); 'auto' asks for automatic folding")
    p.add_argument("--target-fps", type=float, metavar="FPS", help="the cheapest folding "
                   "reaching this many inferences per second at the clock, instead of "
                   "the fastest that fits")
    p.add_argument("--budget-fraction", type=float, default=0.85, metavar="F",
                   help="share of the device's multipliers, LUTs and block RAMs automatic "
                   "folding may use (default 0.85)")
    p.add_argument("--lut-multipliers", action="store_true", help="automatic folding: "
                   "where the DSPs run out, build the further products as LUT multipliers "
                   "within the LUT budget (faster than the DSP-only bound; a much larger "
                   "design, slower to emit, simulate and place and route)")
    p.add_argument("--optimize", choices=("throughput", "latency"), default="throughput",
                   help="throughput (default): the smallest initiation interval; latency: "
                   "the shortest time from first input beat to last output beat (MVAUs "
                   "start on partial input, requantisers unshared, automatic folding "
                   "prefers wide SIMD)")
    p.add_argument("--macs", type=int, help="multiplier budget of the balanced folding "
                   "(default: the target's, 128 for sim)")
    p.add_argument("--ii", type=int, help="fold for this initiation interval (cycles) "
                   "instead of the fastest within the budget")
    p.add_argument("--clock-mhz", type=float, help="clock for the time figures "
                   "(default: the target's)")
    p.add_argument("--bitstream", action="store_true", help="then build the bitstream for "
                   "the target board (as `fluid-hw bitstream BUILD_DIR`)")
    p.add_argument("--stop-after", metavar="STEP",
                   help="stop after this step to inspect the build folder (load_model, "
                   "quantize, lower, generate_verilog, write_registers, write_model, "
                   "write_host, write_report)")
    p.set_defaults(fn=_run)
