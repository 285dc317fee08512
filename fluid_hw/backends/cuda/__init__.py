"""The CUDA back end: programs on NVIDIA GPUs through CuPy, with generated kernels.

Importing it needs no GPU and no CuPy; using a CUDAPlace without them raises
:class:`NoCUDADeviceError` ("no CUDA device visible: ...").

* :class:`CUDAExecutor` (what ``Executor(CUDAPlace(i))`` runs): the scope stays on
  the host, values on the device; copies only at feed, fetch and for persistables;
* generated CUDA C kernels (:mod:`.codegen`): fused elementwise + activation
  chains, GEMM bias + activation epilogues, softmax (+ cross-entropy), im2col,
  pool2d; everything else shares the CPU kernels through the array module;
* runtimes (:mod:`.runtime`): CuPy on a GPU, or the host shim that compiles the
  same CUDA C as C++ so CI checks every generated kernel against the CPU executor;
* data parallelism over several GPUs (:mod:`.parallel`, used by
  ``CompiledProgram.with_data_parallel``).
"""

from .codegen import ChainSpec, KernelSource, chain_kernel, fixed_kernels
from .executor import CUDAExecutor
from .kernels import SHARED_OPS, placement
from .runtime import (
    CuPyRuntime,
    DeviceRuntime,
    HostShimRuntime,
    NoCUDADeviceError,
    ToolNotFoundError,
    compile_ptx,
    cuda_available,
    device_count,
)

__all__ = [
    "CUDAExecutor", "ChainSpec", "CuPyRuntime", "DeviceRuntime", "HostShimRuntime",
    "KernelSource", "NoCUDADeviceError", "SHARED_OPS", "ToolNotFoundError", "chain_kernel",
    "compile_ptx", "cuda_available", "device_count", "fixed_kernels", "placement",
]
