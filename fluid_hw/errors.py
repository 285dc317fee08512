"""Every error fluid-hw raises derives from :class:`FluidError`, and every error
class of the project is defined here, in one hierarchy::

    FluidError
    ├── FormatError                 a malformed program, model folder or file
    ├── UnknownNameError (KeyError) a registry lookup failed (see unknown_name)
    │   └── UnknownOpError
    ├── OpAttrError, ShapeError, VerifyError, GradientError      ir
    ├── ExecutionError              a kernel failed while running
    │   └── NoCUDADeviceError       backends.cuda
    ├── FeedError, FetchError       Executor.run
    │   └── ComposeNotAligned (ValueError)  paddle_compat.reader.compose
    ├── PassError                   passes
    │   ├── QuantizationError
    │   └── NotALoopCell            a loop is not one cell recurrence (stays a loop)
    ├── LoweringError               hls: a program cannot be lowered as it is
    │   └── FoldingError
    │       └── AutoFoldError
    ├── HardwareConfigError         rtl: component parameters it cannot be built with
    ├── ToolNotFoundError           an external tool is missing (sim, boards, cuda)
    ├── ToolFailedError             an external tool exited with an error (boards)
    ├── SimBuildError               Verilog emission / Verilator / C++ build failed (sim)
    ├── SimulationError             a simulation did not complete (sim)
    ├── ResourceBudgetError, PLLError                            boards
    ├── BuildError, ReportError     backends.fpga: a build step, report.json
    ├── DriverError                 drivers
    │   └── BuildDirError           a build folder's file is missing, malformed or mixed
    ├── BuildLockedError            another process is writing the build folder
    ├── ClusterError                backends.cluster
    │   └── TranspileError, WireError, LaunchError, MasterError
    ├── OnnxUnsupportedError        frontend.onnx: a node cannot be converted
    ├── OnnxWorkerError             frontend.onnx: the isolated checker failed
    └── BenchError                  bench: a model, build, test set or GPU result unusable
        └── BackendUnavailableError one back end cannot run here: the row's reason

Errors name the thing that is wrong (op, variable, file) and, where there is
one, the fix.  This module imports nothing of the project, so every unit --
``rtl`` included, which otherwise imports only Amaranth -- may import it.  The
units re-export their errors where they were defined before (``from
fluid_hw.hls.partition import LoweringError`` keeps working).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "unknown_name",
    "FluidError",
    "FormatError",
    "UnknownNameError",
    "UnknownOpError",
    "OpAttrError",
    "ShapeError",
    "VerifyError",
    "ExecutionError",
    "NoCUDADeviceError",
    "FeedError",
    "ComposeNotAligned",
    "FetchError",
    "GradientError",
    "PassError",
    "QuantizationError",
    "NotALoopCell",
    "LoweringError",
    "FoldingError",
    "AutoFoldError",
    "HardwareConfigError",
    "ToolNotFoundError",
    "ToolFailedError",
    "SimBuildError",
    "SimulationError",
    "ResourceBudgetError",
    "PLLError",
    "BuildError",
    "ReportError",
    "DriverError",
    "BuildDirError",
    "BuildLockedError",
    "ClusterError",
    "TranspileError",
    "WireError",
    "LaunchError",
    "MasterError",
    "OnnxUnsupportedError",
    "OnnxWorkerError",
    "BenchError",
    "BackendUnavailableError",
]


class FluidError(Exception):
    """Base class of every error raised by fluid-hw."""


class FormatError(FluidError):
    """A serialized program, model directory or parameter file is malformed:
    truncated, corrupted, of a newer format version, or inconsistent."""


class UnknownNameError(FluidError, KeyError):
    """A name (op type, pass, back end, variable...) was looked up in a
    registry that does not hold it.  The message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UnknownOpError(UnknownNameError):
    """An op type is not registered."""


class OpAttrError(FluidError):
    """An op attribute is missing, of the wrong type or outside its allowed values."""


class ShapeError(FluidError):
    """Shape or dtype inference failed: the op's inputs do not fit together."""


class VerifyError(FluidError):
    """A program is structurally invalid (dangling variable, bad block index...)."""


class ExecutionError(FluidError):
    """A kernel failed while running; names the op type, its index and outputs."""


class NoCUDADeviceError(ExecutionError):
    """A CUDAPlace was used where no CUDA device (or no CuPy) is available."""


class FeedError(FluidError):
    """A value fed to :meth:`Executor.run` does not match its variable."""


class EOFException(FeedError):
    """The ``py_reader`` feeding a run is exhausted: ``reader.reset()``, then
    ``start()`` for the next pass (Fluid's ``fluid.core.EOFException``)."""


class ComposeNotAligned(FeedError, ValueError):
    """``paddle.reader.compose``: the composed readers ended at different lengths."""


class FetchError(FluidError):
    """A fetch target does not exist or was never computed."""


class GradientError(FluidError):
    """A gradient was requested that cannot be built."""


# -- passes ----------------------------------------------------------------------------

class PassError(FluidError):
    """A pass cannot run (a missing scope, executor or target) or produced an invalid
    program.  The message names the pass and the fix."""


class QuantizationError(PassError):
    """The program cannot be quantised as asked; the message names the op and the options."""


class NotALoopCell(PassError):
    """Why a DynamicRNN / StaticRNN loop is not one cell recurrence; the loop rewrite
    (passes.quantize_rnn_loop) catches it, logs the reason and leaves the loop as it is."""


# -- hardware: hls and rtl -------------------------------------------------------------

class LoweringError(FluidError):
    """A quantised program cannot be lowered to the FPGA accelerator as it is; the
    message names the op or layer and what to change."""


class FoldingError(LoweringError):
    """A folding cannot be used (does not divide the layer, unknown layer, or no folding
    fits the budget); the message names the layer and the valid choices."""


class AutoFoldError(FoldingError):
    """No folding fits the device budget (or the given folding does not); the message
    names each resource over budget, by how much, and what would fit."""


class HardwareConfigError(FluidError):
    """A hardware component or stage was given parameters it cannot be built with
    (folding that does not divide a dimension, mismatched stage shapes, ...).
    The message names the component or stage and the fix."""


# -- external tools: simulation, boards, CUDA ------------------------------------------

class ToolNotFoundError(FluidError):
    """A required external tool (Verilator, a C++ compiler, make, Yosys, nextpnr,
    ecppack, icepack, openFPGALoader, nvcc) is not installed; the message says what
    to install or which variable to set.  (One class for what ``sim``, ``boards`` and
    ``backends.cuda`` each defined before: they meant the same thing.)"""


class ToolFailedError(FluidError):
    """An external tool exited with an error; the message gives its log path
    and the last lines of the log."""


class SimBuildError(FluidError):
    """An external build step of the simulation flow (Verilog emission, Verilator, C++
    compiler) failed; the message holds the command and the end of its log.
    (``fluid_hw.sim.BuildError`` before; not the FPGA back end's :class:`BuildError`.)"""


class SimulationError(FluidError):
    """A simulation did not complete: no progress (a hang), a protocol violation, or a
    failing cocotb bench."""


class ResourceBudgetError(FluidError):
    """A synthesised design needs more of a resource (multipliers, block RAMs,
    LUTs...) than the device has; the message names the resource and how much
    it is over."""


class PLLError(FluidError):
    """No PLL configuration reaches the requested clock from the board oscillator."""


# -- the FPGA back end and its host runtime --------------------------------------------

class BuildError(FluidError):
    """A build step of the FPGA back end cannot go on; the message names the step, the
    file or layer, and the fix."""


class ReportError(FluidError):
    """report.json is missing or malformed."""


class DriverError(FluidError):
    """The host could not use an accelerator: a missing or inconsistent build folder,
    a design that does not match, a register access that failed."""


class BuildDirError(DriverError):
    """A build folder is missing a file, holds a malformed one, or does not match its
    manifest (half-written, mixed, tampered): the message names the file; recompile."""


class BuildLockedError(FluidError):
    """Another process is writing the build folder."""


# -- the cluster back end --------------------------------------------------------------

class ClusterError(FluidError):
    """A distributed job cannot go on: a peer is missing, a message is malformed,
    the job's layout does not match the programs.  The message names the rank,
    the variable or the setting, and the fix."""


class TranspileError(ClusterError):
    """A program cannot be split into trainer and parameter-server programs."""


class WireError(ClusterError):
    """A message on the wire is malformed or unexpected."""


class LaunchError(ClusterError):
    """``fluid-hw launch`` cannot start or finish the job."""


class MasterError(ClusterError):
    """The job master (``fluid-hw master``) refused a request or cannot be reached:
    a missing or wrong token, an oversized or malformed upload, an unknown job."""


# -- ONNX import and export ------------------------------------------------------------

class OnnxUnsupportedError(FluidError):
    """An ONNX node (or a Fluid op, exporting) cannot be converted; the importer collects
    these and reports them all.  (``Unsupported`` inside ``fluid_hw.frontend.onnx``.)"""


class OnnxWorkerError(FluidError):
    """The worker process that checks an ONNX model crashed, ran out of memory or of
    time: ``reason`` says which.  (``IsolatedFailure`` inside ``fluid_hw.frontend.onnx``.)"""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BenchError(FluidError):
    """``fluid-hw bench`` could not run: a model folder, build folder, test set or GPU
    result file that is missing or does not fit; the message names it and the fix."""


class BackendUnavailableError(BenchError):
    """One back end cannot run here (no GPU, no onnxruntime, a build without measured
    cycles): ``fluid-hw bench`` shows the message as the row's reason and goes on."""


def unknown_name(kind: str, name: str, known: Iterable[object],
                 cls: type[UnknownNameError] = UnknownNameError) -> UnknownNameError:
    """The error for a registry lookup that failed: names ``name``, suggests close
    matches and lists every known name.  ``kind`` reads like "op type" or "pass"."""
    import difflib

    names = sorted(str(k) for k in known)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return cls(f"unknown {kind} {name!r}.{hint} Known: {', '.join(names) or 'none'}")
