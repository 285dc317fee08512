"""``fluid-hw bench MODEL_DIR [--fpga BUILD_DIR]``: the model on every back end present."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ..bench import BenchOptions, PowerEstimate, format_table, run_bench, write_outputs
    from ..errors import BenchError

    if (args.fpga_power is None) != (args.fpga_power_source is None):
        raise BenchError("--fpga-power and --fpga-power-source go together: the watts and "
                         "where they come from")
    power = None if args.fpga_power is None else PowerEstimate(args.fpga_power,
                                                               args.fpga_power_source)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    opts = BenchOptions(quick=args.quick, budget_s=args.budget, test=args.test,
                        int8_model=args.int8, fpga_power=power, merge=args.merge or [],
                        backends=backends,
                        batches=[int(b) for b in args.batches.split(",")] if args.batches
                        else None)
    report = run_bench(args.model_dir, args.fpga, opts, out_dir=args.out)
    paths = write_outputs(report, args.out)
    print(format_table(report))
    print(f"\nbench.json: {paths['json']}\nbench.html: {paths['html']}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmark one saved model on the CPU, onnxruntime, the "
                       "GPU and the FPGA (latency, throughput, accuracy, energy)")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a saved inference model (float or "
                   "int8)")
    p.add_argument("--fpga", metavar="BUILD_DIR", help="a build folder (fluid-hw compile + "
                   "simulate [+ bitstream]) for the FPGA row")
    p.add_argument("--int8", metavar="DIR", help="the int8 model for the int8 rows when "
                   "MODEL_DIR is float (default: the build's model/)")
    p.add_argument("--test", default="digits", metavar="SET",
                   help="test set: 'digits' (default), FILE.npz (one array per input and "
                   "'labels') or FILE.npy")
    p.add_argument("--out", default="build/bench", help="output folder (default build/bench)")
    p.add_argument("--quick", action="store_true", help="batches 1, 64, 1024 and a short "
                   "budget (what make demo runs)")
    p.add_argument("--batches", metavar="B1,B2,..", help="batch sizes (default 1,4,16,...,"
                   "4096)")
    p.add_argument("--budget", type=float, metavar="S", help="seconds of timed runs per "
                   "measurement (default 0.4, quick 0.05; at least 5 runs)")
    p.add_argument("--backends", default="cpu,onnxruntime,cuda,fpga",
                   help="which back ends (default all: cpu,onnxruntime,cuda,fpga)")
    p.add_argument("--merge", action="append", metavar="BENCH_JSON",
                   help="take the measured cuda rows of this bench.json (make gpu-check's "
                   "build/gpu-check/bench/bench.json, same model); repeatable")
    p.add_argument("--fpga-power", type=float, metavar="WATTS",
                   help="the FPGA's power for this design, from a documented estimate")
    p.add_argument("--fpga-power-source", metavar="TEXT",
                   help="where --fpga-power comes from (tool, utilisation, clock)")
    p.set_defaults(fn=_run)
