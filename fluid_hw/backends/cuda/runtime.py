"""Device runtimes: where the CUDA back end's arrays live and its kernels run.

* :class:`CuPyRuntime`: a real GPU through CuPy: device arrays, cuBLAS through
  ``cupy.matmul``, the generated kernels compiled by NVRTC (``cupy.RawModule``).
* :class:`HostShimRuntime`: the same generated CUDA C compiled as host C++ with
  a small shim (:data:`SHIM_HEADER`) that defines ``__global__`` and the
  thread/block indices and loops over the grid; arrays are numpy.  It runs the
  whole CUDA executor without a GPU, so CI compares every generated kernel with
  the CPU executor.

:func:`compile_ptx` compiles generated sources with ``nvcc --ptx`` (no driver
needed), the check CI runs on the CUDA side.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ExecutionError, NoCUDADeviceError, ToolNotFoundError
from ...tools import cache_dir, find_program
from ...tools import find_tool as tool_command
from .codegen import KernelSource

__all__ = [
    "CuPyRuntime", "DeviceRuntime", "HostShimRuntime", "NoCUDADeviceError", "SHIM_HEADER",
    "ToolNotFoundError", "compile_ptx", "cuda_available", "device_count", "require_device",
]


BLOCK = 256
MAX_GRID = 65535


def launch_shape(n: int, block: int = BLOCK, max_grid: int = MAX_GRID) -> tuple[int, int]:
    """(grid, block) covering ``n`` threads with a grid-stride loop."""
    return max(1, min(-(-n // block), max_grid)), block


class DeviceRuntime:
    """What the CUDA executor needs from a device: an array module, copies to and
    from the host, and launching generated kernels."""

    name = "device"
    xp: Any = np

    def to_device(self, a: Any) -> Any:
        raise NotImplementedError

    def to_host(self, a: Any) -> np.ndarray:
        raise NotImplementedError

    def is_device_array(self, a: Any) -> bool:
        raise NotImplementedError

    _pending: list[KernelSource] | None = None

    def _compiled(self, name: str) -> bool:
        raise NotImplementedError

    def _compile(self, kernels: list[KernelSource]) -> None:
        raise NotImplementedError

    def prepare(self, kernels: Iterable[KernelSource]) -> None:
        """Compile kernels ahead of their first launch (all in one compiler run)."""
        todo = list({k.name: k for k in kernels if not self._compiled(k.name)}.values())
        if not todo:
            return
        if self._pending is not None:
            self._pending += todo
            return
        self._compile(todo)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Collect the kernels prepared inside the block and compile them together at
        its end (one compiler run for many programs)."""
        outer = self._pending is not None
        if not outer:
            self._pending = []
        try:
            yield
        finally:
            if not outer:
                todo, self._pending = self._pending or [], None
                self.prepare(todo)

    def _ensure(self, kernel: KernelSource) -> None:
        """Compile ``kernel`` now if it is not (a launch inside ``deferred`` too)."""
        if not self._compiled(kernel.name):
            pending, self._pending = self._pending, None
            try:
                self.prepare([kernel])
            finally:
                self._pending = pending

    def launch(self, kernel: KernelSource, n: int, args: Sequence[Any]) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait for launched work to finish."""

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this runtime's device current while running."""
        yield


# -- CuPy ---------------------------------------------------------------------------------


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        raise NoCUDADeviceError(
            "no CUDA device visible: CuPy is not installed. On a machine with an NVIDIA GPU "
            "install it with pip install 'fluid-hw[cuda]' (cupy-cuda13x); elsewhere use "
            "CPUPlace()") from None
    return cupy


def device_count() -> int:
    """Visible CUDA devices (0 without CuPy or without a driver)."""
    try:
        cupy = _cupy()
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def cuda_available() -> bool:
    return device_count() > 0


def require_device(device_id: int) -> Any:
    """CuPy, once device ``device_id`` is known to exist; else a clear error."""
    cupy = _cupy()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:
        raise NoCUDADeviceError(
            f"no CUDA device visible: the CUDA runtime says {type(e).__name__}: {e} "
            f"(CUDA_VISIBLE_DEVICES={visible}); check the NVIDIA driver with nvidia-smi, or "
            "use CPUPlace()") from None
    if not 0 <= device_id < n:
        raise NoCUDADeviceError(
            f"no CUDA device visible: CUDAPlace({device_id}) asked for device {device_id} but "
            f"{n} device(s) are visible (CUDA_VISIBLE_DEVICES={visible}); use CUDAPlace(0).."
            f"CUDAPlace({n - 1})" if n else
            f"no CUDA device visible: the CUDA runtime found 0 devices "
            f"(CUDA_VISIBLE_DEVICES={visible}); use CPUPlace()")
    return cupy


_SCALAR_TYPES = {"int": np.int32, "long long": np.int64, "float": np.float32}


class CuPyRuntime(DeviceRuntime):
    """GPU ``device_id`` through CuPy."""

    name = "cupy"

    def __init__(self, device_id: int = 0) -> None:
        self.cupy = require_device(device_id)
        self.xp = self.cupy
        self.device_id = device_id
        self.device = self.cupy.cuda.Device(device_id)
        self._functions: dict[str, Any] = {}

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        with self.device:
            yield

    def to_device(self, a: Any) -> Any:
        with self.device:
            return self.cupy.array(a, copy=True)

    def to_host(self, a: Any) -> np.ndarray:
        if isinstance(a, self.cupy.ndarray):
            return self.cupy.asnumpy(a)
        return np.array(a, copy=True)

    def is_device_array(self, a: Any) -> bool:
        return isinstance(a, self.cupy.ndarray)

    def _compiled(self, name: str) -> bool:
        return name in self._functions

    def _compile(self, kernels: list[KernelSource]) -> None:
        code = "\n".join(k.source for k in kernels)
        with self.device:
            try:
                mod = self.cupy.RawModule(code=code, options=("--std=c++17",))
                for k in kernels:
                    self._functions[k.name] = mod.get_function(k.name)
            except Exception as e:
                raise ExecutionError(f"NVRTC could not compile the generated kernels "
                                     f"{[k.name for k in kernels]}: {e}") from None

    def launch(self, kernel: KernelSource, n: int, args: Sequence[Any]) -> None:
        if n <= 0:
            return
        self._ensure(kernel)
        fn = self._functions[kernel.name]
        grid, block = launch_shape(n)
        conv = [a if "*" in t else _SCALAR_TYPES[t](a) for t, a in zip(kernel.params, args)]
        with self.device:
            fn((grid,), (block,), tuple(conv))

    def synchronize(self) -> None:
        self.device.synchronize()


# -- the host shim ---------------------------------------------------------------------------

#: makes the generated CUDA C compile as host C++; a launch loops over every
#: block and thread in turn (valid because generated kernels have no
#: inter-thread communication: no __shared__, no __syncthreads, no atomics)
SHIM_HEADER = r"""// fluid-hw host shim: generated CUDA C as host C++
#include <math.h>
struct fhw_dim3 { unsigned x, y, z; };
static fhw_dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
"""

_CTYPES = {"int": ctypes.c_int, "long long": ctypes.c_longlong, "float": ctypes.c_float}
_PTR_DTYPES = {"float": np.float32, "long long": np.int64, "int": np.int32}


def _launcher(k: KernelSource) -> str:
    params = ", ".join(f"{t} a{i}" for i, t in enumerate(k.params))
    args = ", ".join(f"a{i}" for i in range(len(k.params)))
    return (f'extern "C" void fhw_launch_{k.name}(unsigned grid, unsigned block, {params}) {{\n'
            f"  gridDim.x = grid; gridDim.y = gridDim.z = 1;\n"
            f"  blockDim.x = block; blockDim.y = blockDim.z = 1;\n"
            f"  blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;\n"
            f"  for (unsigned b = 0; b < grid; ++b) {{\n"
            f"    blockIdx.x = b;\n"
            f"    for (unsigned t = 0; t < block; ++t) {{ threadIdx.x = t; {k.name}({args}); }}\n"
            f"  }}\n}}\n")


def host_shim_source(kernels: Sequence[KernelSource]) -> str:
    """One C++ translation unit: the shim, the kernels' CUDA sources, a launcher each."""
    parts = [SHIM_HEADER]
    for k in kernels:
        parts += [k.source, _launcher(k)]
    return "\n".join(parts)


#: a program by variable and names (tests use it; the back end's own tools are rows of
#: :data:`fluid_hw.tools.TOOLS`)
find_tool = find_program


class HostShimRuntime(DeviceRuntime):
    """Generated kernels compiled as host C++ (g++) and run over numpy arrays.

    A launch uses a small grid (``block`` threads x up to ``max_grid`` blocks) so
    that every kernel's index arithmetic and grid-stride loop run over several
    blocks and threads, as on a GPU.
    """

    name = "host-shim"
    xp = np

    def __init__(self, block: int = 32, max_grid: int = 8) -> None:
        self.cxx = tool_command("c++")[0]
        self.block = block
        self.max_grid = max_grid
        self._functions: dict[str, tuple[KernelSource, Any]] = {}
        self._libs: list[ctypes.CDLL] = []
        self.launches = 0
        self.compiles = 0

    def to_device(self, a: Any) -> Any:
        return np.array(a, copy=True)

    def to_host(self, a: Any) -> np.ndarray:
        return np.array(a, copy=True)

    def is_device_array(self, a: Any) -> bool:
        return isinstance(a, np.ndarray)

    def _compiled(self, name: str) -> bool:
        return name in self._functions

    def _compile(self, todo: list[KernelSource]) -> None:
        src = host_shim_source(todo)
        cmd = [self.cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w"]
        key = hashlib.sha1((src + " ".join(cmd[1:])).encode()).hexdigest()[:20]
        lib = cache_dir("host_shim") / f"shim_{key}.so"
        if not lib.exists():
            with tempfile.TemporaryDirectory() as tmp:
                cpp = Path(tmp) / "kernels.cpp"
                cpp.write_text(src)
                out = Path(tmp) / "k.so"
                r = subprocess.run([*cmd, "-o", str(out), str(cpp)], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    raise ExecutionError(f"the host shim could not compile the generated "
                                         f"kernels {[k.name for k in todo]}:\n{r.stderr[-3000:]}")
                self.compiles += 1
                tmp_lib = lib.with_suffix(f".{os.getpid()}.tmp")
                shutil.copyfile(out, tmp_lib)
                os.replace(tmp_lib, lib)
        dll = ctypes.CDLL(str(lib))
        self._libs.append(dll)
        for k in todo:
            fn = getattr(dll, f"fhw_launch_{k.name}")
            fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
                ctypes.c_void_p if "*" in t else _CTYPES[t] for t in k.params]
            fn.restype = None
            self._functions[k.name] = (k, fn)

    def launch(self, kernel: KernelSource, n: int, args: Sequence[Any]) -> None:
        if n <= 0:
            return
        self._ensure(kernel)
        k, fn = self._functions[kernel.name]
        conv: list[Any] = []
        for i, (t, a) in enumerate(zip(k.params, args)):
            if "*" in t:
                want = _PTR_DTYPES[t.replace("const ", "").rstrip("*").strip()]
                if not (isinstance(a, np.ndarray) and a.dtype == want
                        and a.flags.c_contiguous):
                    raise ExecutionError(f"kernel {k.name}: argument {i} must be a contiguous "
                                         f"{np.dtype(want)} array, got "
                                         f"{getattr(a, 'dtype', type(a).__name__)}")
                if "const" not in t and not a.flags.writeable:
                    raise ExecutionError(f"kernel {k.name}: output argument {i} is read-only")
                conv.append(a.ctypes.data)
            else:
                conv.append(a)
        grid, block = launch_shape(n, self.block, self.max_grid)
        fn(grid, block, *conv)
        self.launches += 1


# -- nvcc ------------------------------------------------------------------------------------


def compile_ptx(kernels: Sequence[KernelSource], arch: str = "sm_90",
                workdir: str | None = None) -> str:
    """Compile the kernels' CUDA sources with ``nvcc --ptx -arch=<arch>``; the PTX text.

    Needs nvcc only (no driver, no GPU).  Raises :class:`ToolNotFoundError` without
    nvcc and :class:`ExecutionError` with nvcc's messages when a source does not compile.
    """
    nvcc = tool_command("nvcc")
    src = "\n".join(k.source for k in {k.name: k for k in kernels}.values())
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        cu = Path(tmp) / "kernels.cu"
        cu.write_text(src)
        ptx = Path(tmp) / "kernels.ptx"
        r = subprocess.run([*nvcc, "--ptx", f"-arch={arch}", "-std=c++17", "-o", str(ptx),
                            str(cu)], capture_output=True, text=True)
        if r.returncode != 0:
            raise ExecutionError(f"nvcc could not compile {[k.name for k in kernels]}:\n"
                                 f"{r.stderr[-3000:]}")
        return ptx.read_text()
