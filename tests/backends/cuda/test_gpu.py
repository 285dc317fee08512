"""On a GPU (marker ``gpu``; skipped where CuPy or a device is missing): the whole op
suite on CUDAPlace against the CPU executor, the digits MLP trained on the GPU,
fused against unfused kernels, and data parallelism over GPU places.

Run with ``pytest -m gpu tests/backends/cuda`` (``benchmarks/gpu_check.sh``).
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.parallel import BuildStrategy, CompiledProgram
from fluid_hw.backends.cpu.trainer import evaluate, train
from fluid_hw.backends.cuda import CUDAExecutor, cuda_available, device_count
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from tests.backends.cuda.suite import assert_same_training, run_op_suite, train_and_predict

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a visible CUDA device"),
]


def test_executor_with_cuda_place_is_the_cuda_executor():
    exe = fluid.Executor(fluid.CUDAPlace(0))
    assert isinstance(exe, CUDAExecutor), (
        "Executor(CUDAPlace) must dispatch to fluid_hw.backends.cuda.CUDAExecutor")


def test_whole_op_suite_on_cuda_place_matches_cpu():
    failures, host = run_op_suite(lambda: CUDAExecutor(fluid.CUDAPlace(0)))
    assert not failures, "\n".join(failures)
    print("ops run on the host:", host)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_mlp_training_steps_match_cpu(fuse):
    exe = CUDAExecutor(fluid.CUDAPlace(0), fuse=fuse)
    assert_same_training(exe, "mlp", "adam")
    assert not exe.host_op_runs, f"host round trips in MLP training: {exe.host_op_runs}"


def test_cnn_training_steps_match_cpu():
    assert_same_training(CUDAExecutor(fluid.CUDAPlace(0)), "cnn", "momentum", steps=2)


def test_fused_and_unfused_kernels_agree():
    a = train_and_predict(CUDAExecutor(fluid.CUDAPlace(0), fuse=True), "mlp", steps=3)
    b = train_and_predict(CUDAExecutor(fluid.CUDAPlace(0), fuse=False), "mlp", steps=3)
    np.testing.assert_allclose(a[2], b[2], rtol=1e-5, atol=1e-6)


def test_digits_mlp_trains_on_the_gpu():
    xtr, xte, ytr, yte = load_digits_split()
    m = models.digits_mlp(optimizer=fluid.optimizer.Adam(learning_rate=0.002))
    exe = CUDAExecutor(fluid.CUDAPlace(0))
    with fluid.scope_guard(fluid.Scope()):
        fluid.Executor().run(m.startup)
        hist = train(exe, m.main, m.feed_names, m.loss, (xtr, ytr), epochs=15, batch_size=32,
                     log=None)
        acc = evaluate(exe, m.test_program, m.feed_names, m.accuracy, (xte, yte))
    assert hist.losses[-1] < hist.losses[0] / 5
    assert acc >= 0.95, f"MLP test accuracy on the GPU {acc:.4f}"
    assert not exe.host_op_runs


@pytest.mark.parametrize("strategy", [BuildStrategy.ReduceStrategy.AllReduce,
                                      BuildStrategy.ReduceStrategy.Reduce],
                         ids=["allreduce", "reduce"])
def test_data_parallel_on_gpu_places_matches_single_device(strategy):
    ids = [0, 1] if device_count() >= 2 else [0, 0]
    xs, _, ys, _ = load_digits_split()

    def run(places):
        m = models.digits_mlp(hidden=(32,), optimizer=fluid.optimizer.Adam(learning_rate=0.01))
        scope, exe = fluid.Scope(), fluid.Executor()
        with fluid.scope_guard(scope):
            exe.run(m.startup)
            prog = m.main
            if places:
                bs = BuildStrategy()
                bs.reduce_strategy = strategy
                prog = CompiledProgram(m.main).with_data_parallel(
                    loss_name=m.loss.name, build_strategy=bs, places=places)
            for i in range(3):
                exe.run(prog, feed={"pixels": xs[i * 30:(i + 1) * 30],
                                    "label": ys[i * 30:(i + 1) * 30]}, fetch_list=[m.loss])
        return {p.name: np.array(scope.find_value(p.name)) for p in m.main.all_parameters()}

    want = run(None)
    got = run([fluid.CUDAPlace(i) for i in ids])
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-4, atol=1e-6, err_msg=n)
