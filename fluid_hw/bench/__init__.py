"""``fluid-hw bench``: one saved model on every back end present, measured alike.

    from fluid_hw.bench import BenchOptions, run_bench, write_outputs, format_table
    report = run_bench("build/demo/mlp_inference", fpga="build/demo/build",
                       options=BenchOptions(int8_model="build/demo/mlp_int8"))
    write_outputs(report, "build/bench")   # bench.json, bench.html, bench.txt
    print(format_table(report))

Back ends: the CPU executor (float, and the int8 golden model), onnxruntime (the
model exported to ONNX; QDQ for the int8 model), CUDA (the CUDA executor and a CUDA
graph, on a GPU; ``make gpu-check`` measures it there and ``--merge`` brings its rows
in) and the FPGA from a build folder (simulated cycles x post-route Fmax, the host
programs timed, the UART link at its baud rate).  A back end that cannot run is a
row with the reason.  Published results of other tools are labelled rows, never
measured ones.  See docs/bench.md.
"""

from .energy import PowerEstimate
from .render import format_table, render_html, write_outputs
from .run import BATCHES, QUICK_BATCHES, SCHEMA, BenchOptions, goals, merge_rows, run_bench

__all__ = ["BATCHES", "QUICK_BATCHES", "SCHEMA", "BenchOptions", "PowerEstimate",
           "format_table", "goals", "merge_rows", "render_html", "run_bench", "write_outputs"]
