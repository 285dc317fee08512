"""The FPGA back end: a saved model -> a streaming dataflow accelerator, simulated bit
for bit against the golden model.

* :func:`compile_model` / ``fluid-hw compile``: load, quantise (float models with
  calibration data), lower to hardware stages (``fluid_hw.hls``), emit Verilog and the
  register map (``fluid_hw.rtl``, ``fluid_hw.sim``), save the model and the host
  programs, write ``report.json`` (:data:`COMPILE_STEPS`);
* :func:`simulate` / ``fluid-hw simulate``: the build in Verilator through the host
  driver (``fluid_hw.drivers``) against the CPU executor (:data:`SIMULATE_STEPS`);
* :func:`bitstream` / ``fluid-hw bitstream``: the build in its board top through Yosys,
  nextpnr and the packer (:data:`BITSTREAM_STEPS`);
* :func:`param_image_for`: runtime weights for a build's design from other values.

Build folder: ``report.json``, ``accelerator.v``, ``design.json``, ``registers.md``,
``registers.h``, ``lowering.json``, ``model/``, ``float_model/`` (when quantised
here), ``host/`` (``pre.pb``, ``post.pb``, ``params.npz``, ``host.json``),
``weights.npz`` (runtime weights), ``outputs.npy`` (after simulate).
"""

from .bitstream import BITSTREAM_STEPS, BoardSimulation, bitstream
from .compile import (
    COMPILE_STEPS,
    TARGETS,
    CompileState,
    Target,
    compile_model,
    compile_program,
    get_target,
    is_quantized,
    load_inputs,
)
from .report import STEP_KEYS, read_report, update_report
from .report_html import render_report, write_report_html
from .simulate import SIMULATE_STEPS, Build, load_build, param_image_for, simulate
from .steps import BuildError, Step, run_steps

__all__ = [
    "BITSTREAM_STEPS", "COMPILE_STEPS", "SIMULATE_STEPS", "BoardSimulation", "bitstream",
    "render_report", "write_report_html", "STEP_KEYS", "TARGETS", "Build", "BuildError",
    "CompileState", "Step", "Target", "compile_model", "compile_program", "get_target",
    "is_quantized", "load_build", "load_inputs", "param_image_for", "read_report",
    "run_steps", "simulate", "update_report",
]
