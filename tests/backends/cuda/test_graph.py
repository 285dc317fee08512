"""CUDA graphs (``fluid_hw.backends.cuda.graph.GraphRun``): a prepared program's
steady-state run captured once and replayed, with pinned host buffers.

Without a GPU: the refusals (the host shim cannot capture; a program with host ops
cannot be captured, naming them).  On a GPU (marker ``gpu``, ``make gpu-check``): the
graph equals the CPU executor and the plain CUDA executor, its fixed buffers are
reused from one inference to the next, feeds of another shape are refused, the host
buffers are pinned, and the device time comes from CUDA events.
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cuda import CUDAExecutor, HostShimRuntime, cuda_available
from fluid_hw.backends.cuda.graph import GraphRun, host_steps
from fluid_hw.errors import FeedError, NoCUDADeviceError
from fluid_hw.frontend import models
from fluid_hw.ir.prune import prune


def _mlp():
    m = models.digits_mlp()
    infer = prune(m.test_program, [m.image.name], [m.prediction.name])
    scope = fluid.Scope()
    fluid.Executor().run(m.startup, scope=scope)
    return m, infer, scope


def test_the_host_shim_cannot_capture_a_graph():
    m, infer, scope = _mlp()
    exe = CUDAExecutor(runtime=HostShimRuntime())
    x = np.zeros((1, 64), np.float32)
    with pytest.raises(NoCUDADeviceError, match=r"needs a GPU \(CuPyRuntime\).*'host-shim'"):
        GraphRun(exe, infer, {m.image.name: x}, [m.prediction.name], scope)


def test_host_ops_are_named():
    m, infer, _ = _mlp()
    exe = CUDAExecutor(runtime=HostShimRuntime())
    assert host_steps(exe.prepare_device(infer, [m.image.name], [m.prediction.name]).plan) \
        == []
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        y = fluid.layers.argmax(fluid.layers.relu(x), axis=1)
    plan = exe.prepare_device(main, ["x"], [y.name]).plan
    assert host_steps(plan) == ["arg_max [host]"]


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a visible CUDA device")
@pytest.mark.parametrize("batch", [1, 64])
def test_graph_equals_the_cpu_executor_and_reuses_its_buffers(batch):
    import cupy

    m, infer, scope = _mlp()
    rng = np.random.default_rng(batch)
    xs = [rng.uniform(0, 16, (batch, 64)).astype(np.float32) for _ in range(3)]
    exe = CUDAExecutor(fluid.CUDAPlace(0))
    g = GraphRun(exe, infer, {m.image.name: xs[0]}, [m.prediction.name], scope)
    for x in xs:  # the same graph, new inputs each time
        (got,) = g.run({m.image.name: x})
        (want,) = fluid.Executor().run(infer, feed={m.image.name: x},
                                       fetch_list=[m.prediction.name], scope=scope)
        (plain,) = exe.run(infer, feed={m.image.name: x}, fetch_list=[m.prediction.name],
                           scope=scope)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-7)
    with pytest.raises(FeedError, match="captured shape"):
        g.run({m.image.name: np.zeros((batch + 1, 64), np.float32)})
    for buf in (g.host_in[m.image.name], g.host_out[0]):
        attrs = cupy.cuda.runtime.pointerGetAttributes(buf.ctypes.data)
        assert attrs.type == cupy.cuda.runtime.memoryTypeHost  # pinned, not pageable
    times = g.device_time_s(20)
    assert len(times) == 20 and all(0 < t < 0.1 for t in times)
