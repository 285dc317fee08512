"""The CUDA executor on the host shim: the generated CUDA C compiled as C++ (g++)
and run over numpy arrays, compared with the CPU executor.

A wrong generated kernel, a wrong launch or a wrong fusion fails here, without a
GPU.  The same checks run on a GPU in ``test_gpu.py``.
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu import parallel
from fluid_hw.backends.cpu.parallel import BuildStrategy, CompiledProgram
from fluid_hw.backends.cuda import CUDAExecutor, HostShimRuntime, codegen
from fluid_hw.backends.cuda.codegen import BINARY, UNARY, ChainSpec, Ref, Step, chain_kernel
from fluid_hw.backends.cuda.parallel import CUDAPlaceDevice, DeviceCommunicator
from fluid_hw.ir.registry import has_op
from tests.backends.cuda.suite import assert_same_training, run_op_suite, train_and_predict
from tests.op_harness import build_op

RT = HostShimRuntime()
R = np.random.default_rng(3)

NP_UNARY = {
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "log": lambda x: np.log(np.abs(x) + 0.5),
    "sqrt": lambda x: np.sqrt(np.abs(x)), "abs": np.abs,
    "leaky_relu": lambda x: np.where(x > 0, x, 0.02 * x), "square": np.square,
    "reciprocal": lambda x: 1 / x, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "sign": np.sign, "sin": np.sin, "cos": np.cos, "scale": lambda x: (x - 1.0) * 2.5,
}
NP_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
             "max": np.maximum, "min": np.minimum, "pow": np.power}
CONSTS = {"leaky_relu": (("alpha", 0.02),),
          "scale": (("scale", 2.5), ("bias", -1.0), ("bias_after_scale", 0.0))}


@pytest.mark.parametrize("fn", sorted(UNARY))
def test_unary_chain_kernels_match_numpy(fn):
    x = R.uniform(-3, 3, (7, 37)).astype(np.float32)
    if fn in ("log", "sqrt"):
        x = np.abs(x) + 0.5
        ref = {"log": np.log, "sqrt": np.sqrt}[fn](x)
    else:
        ref = NP_UNARY[fn](x)
    k = chain_kernel(ChainSpec((Step(fn, (Ref("in", 0),), CONSTS.get(fn, ())),), ("full",),
                               (0,)))
    out = np.empty_like(x)
    RT.launch(k, x.size, [x, out, x.size])
    np.testing.assert_allclose(out, ref.astype(np.float32), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("fn", sorted(BINARY))
def test_binary_chain_with_a_broadcast_operand_and_two_outputs(fn):
    """out0 = f(X, b[channel]) over NCHW (mid=C, post=H*W), out1 = relu(out0)."""
    x = R.uniform(0.5, 2, (2, 3, 4, 5)).astype(np.float32)
    b = R.uniform(0.5, 2, 3).astype(np.float32)
    spec = ChainSpec((Step(fn, (Ref("in", 0), Ref("in", 1))), Step("relu", (Ref("tmp", 0),))),
                     ("full", "bcast"), (0, 1))
    o0, o1 = np.empty_like(x), np.empty_like(x)
    RT.launch(chain_kernel(spec), x.size, [x, b, o0, o1, x.size, 3, 20])
    ref = NP_BINARY[fn](x, b.reshape(1, 3, 1, 1))
    np.testing.assert_allclose(o0, ref, rtol=2e-6)
    np.testing.assert_allclose(o1, np.maximum(ref, 0), rtol=2e-6)


def test_shim_rejects_a_wrong_argument():
    k = chain_kernel(ChainSpec((Step("relu", (Ref("in", 0),)),), ("full",), (0,)))
    x = np.ones(4, np.float64)
    with pytest.raises(fluid.errors.ExecutionError, match="contiguous float32"):
        RT.launch(k, 4, [x, np.empty(4, np.float32), 4])


def test_whole_op_suite_matches_the_cpu_executor():
    """Every gradient-check case (forward and backward) on the device executor."""
    failures, host = run_op_suite(lambda: CUDAExecutor(runtime=RT))
    assert not failures, "\n".join(failures)
    # the core ops never leave the device
    core = {"mul", "elementwise_add", "relu", "softmax", "softmax_with_cross_entropy",
            "conv2d", "pool2d", "batch_norm", "mean", "reduce_sum", "sigmoid", "tanh"}
    assert not core & host.keys(), host


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("opt", ["adam", "momentum"])
def test_mlp_training_matches_cpu_and_stays_on_device(fuse, opt):
    exe = CUDAExecutor(runtime=RT, fuse=fuse)
    assert_same_training(exe, "mlp", opt)
    assert not exe.host_op_runs, exe.host_op_runs
    plans = [p.plan.describe() for p in exe._prepared.values()]
    if fuse:
        assert all(d.count("chain(add -> relu)") == 2 for d in plans), plans
    else:
        assert all("chain(relu)" in d and "chain(add -> relu)" not in d for d in plans)


def test_cnn_training_and_inference_match_cpu():
    exe = CUDAExecutor(runtime=RT)
    assert_same_training(exe, "cnn", "momentum", steps=2)
    # the forward pass is on the device; conv2d_grad / pool2d_grad run on the host
    assert set(exe.host_op_runs) <= {"conv2d_grad", "pool2d_grad"}


def test_a_wrong_generated_kernel_fails_the_comparison(monkeypatch):
    monkeypatch.setitem(codegen.UNARY, "relu", lambda x, a: f"({x} > 0.0f ? {x} : 0.1f)")
    exe = CUDAExecutor(runtime=HostShimRuntime())
    got = train_and_predict(exe, "mlp", steps=1)
    want = train_and_predict(fluid.Executor(), "mlp", steps=1)
    assert not np.allclose(got[2], want[2], rtol=1e-3)


def test_persistables_are_uploaded_once_and_updates_written_back():
    m = __import__("fluid_hw.frontend.models", fromlist=["digits_mlp"]).digits_mlp(
        optimizer=fluid.optimizer.SGD(learning_rate=0.1))
    uploads = []

    class Counting(HostShimRuntime):
        def to_device(self, a):
            uploads.append(np.shape(a))
            return super().to_device(a)

    exe = CUDAExecutor(runtime=Counting())
    x = R.standard_normal((5, 64)).astype(np.float32)
    with fluid.scope_guard(fluid.Scope()) as _:
        scope = fluid.global_scope()
        fluid.Executor().run(m.startup)
        feed = {"pixels": x, "label": np.zeros((5, 1), np.int64)}
        exe.run(m.test_program, feed=feed, fetch_list=[m.prediction])
        first = len(uploads)
        exe.run(m.test_program, feed=feed, fetch_list=[m.prediction])
        assert len(uploads) - first == 2  # only the feeds
        w = m.main.all_parameters()[0].name
        before = np.array(scope.find_value(w))
        exe.run(m.main, feed=feed, fetch_list=[m.loss])
        after = scope.find_value(w)
        assert isinstance(after, np.ndarray) and not np.array_equal(after, before)


def fused_op_programs():
    """Programs of the fused ops the passes produce (where they are registered)."""
    out = []
    f = np.float32
    if has_op("fc"):
        for act in ("", "relu", "sigmoid", "tanh"):
            prog, feed, outs = build_op("fc", {
                "Input": R.standard_normal((6, 8)).astype(f),
                "W": R.standard_normal((8, 5)).astype(f), "Bias": R.standard_normal(5).astype(f)},
                {"activation_type": act})
            out.append((f"fc-{act or 'none'}", prog, feed, outs["Out"]))
    if has_op("conv2d_fusion"):
        prog, feed, outs = build_op("conv2d_fusion", {
            "Input": R.standard_normal((2, 3, 6, 6)).astype(f),
            "Filter": R.standard_normal((4, 3, 3, 3)).astype(f),
            "Bias": R.standard_normal(4).astype(f)},
            {"activation": "relu", "paddings": [1, 1]})
        out.append(("conv2d_fusion", prog, feed, outs["Output"]))
    if has_op("fused_elemwise_activation"):
        for fl, yshape in ((["relu", "elementwise_add"], (4, 6)),
                           (["elementwise_mul", "sigmoid"], (4, 6)),
                           (["elementwise_add", "scale"], (6,))):
            prog, feed, outs = build_op("fused_elemwise_activation", {
                "X": R.standard_normal((4, 6)).astype(f),
                "Y": R.standard_normal(yshape).astype(f)},
                {"functor_list": fl, "scale": 0.5, "save_intermediate_out": True},
                outputs=["Out", "IntermediateOut"])
            out.append(("-".join(fl), prog, feed, outs["Out"] + outs["IntermediateOut"]))
    return out


@pytest.mark.skipif(not has_op("fc"), reason="the fusion passes' ops are not registered yet")
def test_fused_ops_of_the_passes_match_cpu():
    for cid, prog, feed, fetch in fused_op_programs():
        with fluid.scope_guard(fluid.Scope()):
            want = fluid.Executor().run(prog, feed=feed, fetch_list=fetch)
        exe = CUDAExecutor(runtime=RT)
        with fluid.scope_guard(fluid.Scope()):
            got = exe.run(prog, feed=feed, fetch_list=fetch)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=cid)
        kinds = next(p.plan.describe() for p in exe._prepared.values())
        if cid.startswith(("fc", "conv2d")):
            assert "gemm + epilogue" in kinds[0], kinds


class ShimPlace:
    """A place run by the CUDA back end on the host shim (test-only place type)."""


@pytest.mark.parametrize("strategy", [BuildStrategy.ReduceStrategy.AllReduce,
                                      BuildStrategy.ReduceStrategy.Reduce],
                         ids=["allreduce", "reduce"])
def test_data_parallel_over_device_places(monkeypatch, strategy):
    def factory(places):
        devs = [CUDAPlaceDevice(p, runtime=RT) for p in places]
        return devs, DeviceCommunicator(devs)

    monkeypatch.setitem(parallel.PLACE_DEVICES, "ShimPlace", factory)
    from tests.backends.test_parallel import _assert_close, _persistables

    def train(places):
        m = __import__("fluid_hw.frontend.models", fromlist=["x"]).digits_mlp(
            hidden=(32,), optimizer=fluid.optimizer.Adam(learning_rate=0.01))
        from fluid_hw.datasets import load_digits_split
        xs, _, ys, _ = load_digits_split()
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
        return _persistables(m, scope)

    _assert_close(train([ShimPlace(), ShimPlace(), ShimPlace()]), train(None), rtol=1e-4)


def _array_program():
    """A while loop writing ``n`` LoD tensors into a tensor array, and its length."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32", lod_level=1)
        n = fluid.layers.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        arr = fluid.layers.create_array("float32")
        i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            fluid.layers.array_write(fluid.layers.scale(x, scale=2.0), i, array=arr)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
        length = fluid.layers.array_length(arr)
    return main, arr, length


@pytest.mark.parametrize("return_numpy", [True, False])
def test_a_fetched_tensor_array_is_what_the_cpu_executor_returns(return_numpy):
    """Both executors share run's prologue and epilogue: a fetched tensor array is a
    list (of arrays, or of LoDTensors), and tensor arrays start empty in every run."""
    main, arr, length = _array_program()
    x = fluid.create_lod_tensor(R.standard_normal((5, 3)).astype(np.float32), [[2, 3]])
    results = []
    for exe in (fluid.Executor(fluid.CPUPlace()), CUDAExecutor(runtime=RT)):
        with fluid.scope_guard(fluid.Scope()):
            results.append([exe.run(main, feed={"x": x, "n": np.array([k], np.int64)},
                                    fetch_list=[arr, length], return_numpy=return_numpy)
                            for k in (3, 1)])
    for (want_arr, want_len), (got_arr, got_len) in zip(*results):
        assert isinstance(got_arr, list) and len(got_arr) == len(want_arr)
        assert [type(v) for v in got_arr] == [type(v) for v in want_arr]
        for w, g in zip(want_arr, got_arr):
            if not return_numpy:
                assert g.lod() == w.lod() == [[0, 2, 5]]
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(got_len), np.asarray(want_len))
    assert int(np.asarray(results[1][1][1])[0]) == 1  # the second run wrote one element
