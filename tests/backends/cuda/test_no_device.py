"""Without a GPU: the CUDA back end imports, and using a CUDAPlace says why it cannot."""

import importlib

import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.parallel import CompiledProgram
from fluid_hw.backends.cuda import CUDAExecutor, NoCUDADeviceError, cuda_available
from fluid_hw.frontend import models

pytestmark = pytest.mark.skipif(cuda_available(), reason="a CUDA device is visible here")


def test_the_back_end_imports_without_a_gpu():
    for mod in ("executor", "plan", "kernels", "codegen", "runtime", "parallel"):
        importlib.import_module(f"fluid_hw.backends.cuda.{mod}")


def test_a_cuda_place_raises_a_clear_error():
    with pytest.raises(NoCUDADeviceError, match="no CUDA device visible: ") as e:
        CUDAExecutor(fluid.CUDAPlace(0))
    assert "CPUPlace()" in str(e.value)  # the fix
    assert isinstance(e.value, fluid.errors.FluidError)


def test_data_parallel_on_cuda_places_raises_the_same_error():
    m = models.digits_mlp(hidden=(8,), optimizer=fluid.optimizer.SGD(learning_rate=0.1))
    with pytest.raises(NoCUDADeviceError, match="no CUDA device visible"):
        CompiledProgram(m.main).with_data_parallel(
            loss_name=m.loss.name, places=[fluid.CUDAPlace(0), fluid.CUDAPlace(1)])


def test_executor_with_a_cuda_place_raises_it_too():
    try:
        exe = fluid.Executor(fluid.CUDAPlace(0))
    except NoCUDADeviceError as e:
        assert "no CUDA device visible" in str(e)
        return
    pytest.skip(f"Executor(CUDAPlace) does not dispatch to the CUDA back end yet "
                f"(got {type(exe).__name__})")
