"""The CPU executor: Fluid's example, error wrapping, caching, determinism."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors
from fluid_hw.backends.cpu import executor as executor_mod
from fluid_hw.backends.cpu import kernels


def _fluid_example():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[64], dtype="float32")
        h = fluid.layers.fc(x, size=32, act="relu")
        y = fluid.layers.softmax(fluid.layers.fc(h, size=10))
    return main, startup, y


def test_fluid_example_equals_handwritten_numpy(fresh):
    main, startup, y = _fluid_example()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = np.random.default_rng(0).random((5, 64), dtype=np.float32)
    (out,) = exe.run(main, feed={"x": xv}, fetch_list=[y])
    params = main.global_block().all_parameters()
    w0, b0, w1, b1 = (np.array(fluid.global_scope().find_var(p.name).get_tensor())
                      for p in params)
    assert w0.shape == (64, 32) and b0.shape == (32,) and w1.shape == (32, 10)
    h = np.maximum(xv @ w0 + b0, 0)
    z = h @ w1 + b1
    e = np.exp(z - z.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)


def test_random_seed_makes_initialisation_deterministic():
    def init(seed):
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = seed
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.layers.data(name="x", shape=[6])
            fluid.layers.fc(x, size=4)
            fluid.layers.fc(x, size=4)
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            fluid.Executor().run(startup)
        return [np.array(scope.find_var(p.name).get_tensor())
                for p in main.global_block().all_parameters()]

    a, b, c = init(7), init(7), init(8)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])
    assert not np.array_equal(a[0], a[2])  # two layers, two different streams


def test_kernel_failure_names_op_index_and_outputs(fresh):
    main, _, _ = fresh
    b = main.global_block()
    b.create_var(name="a", shape=[-1, 3])
    b.create_var(name="c", shape=[-1, 3])
    out = b.create_var(name="sum_out")
    b.append_op("elementwise_add", {"X": "a", "Y": "c"}, {"Out": out})
    with pytest.raises(errors.ExecutionError) as ei:
        fluid.Executor().run(main, feed={"a": np.ones((2, 3), np.float32),
                                         "c": np.ones((4, 3), np.float32)},
                             fetch_list=[out])
    msg = str(ei.value)
    assert "elementwise_add" in msg and "#" in msg and "sum_out" in msg


def test_memory_error_is_wrapped(fresh, monkeypatch):
    main, _, _ = fresh
    b = main.global_block()
    b.create_var(name="a", shape=[2])
    b.append_op("relu", {"X": "a"}, {"Out": b.create_var(name="r")})

    def boom(ctx):
        raise MemoryError("cannot allocate")

    monkeypatch.setitem(kernels._KERNELS, "relu", boom)
    with pytest.raises(errors.ExecutionError, match=r"relu #\d+.*MemoryError"):
        fluid.Executor().run(main, feed={"a": np.ones(2, np.float32)}, fetch_list=["r"])


def test_uninitialised_parameter_says_run_startup(fresh):
    main, _, y = _fluid_example()
    with pytest.raises(errors.ExecutionError, match="startup"):
        fluid.Executor().run(main, feed={"x": np.zeros((1, 64), np.float32)}, fetch_list=[y])


def test_program_is_verified_once_per_version(fresh, monkeypatch):
    main, startup, y = _fluid_example()
    calls = []
    real = executor_mod.verify_program
    monkeypatch.setattr(executor_mod, "verify_program", lambda p: calls.append(p) or real(p))
    exe = fluid.Executor()
    exe.run(startup)
    x = np.zeros((2, 64), np.float32)
    for _ in range(5):
        exe.run(main, feed={"x": x}, fetch_list=[y])
    assert len(calls) == 2  # startup once, main once
    main.global_block().create_var(name="extra", shape=[1])  # a change re-verifies
    exe.run(main, feed={"x": x}, fetch_list=[y])
    assert len(calls) == 3


def test_invalid_program_fails_before_running(fresh):
    main, _, _ = fresh
    b = main.global_block()
    b.create_var(name="a", shape=[2])
    op = b.append_op("relu", {"X": "a"}, {"Out": b.create_var(name="r")})
    op.desc.inputs[0].arguments[0] = "vanished"
    with pytest.raises(errors.ExecutionError, match="vanished"):
        fluid.Executor().run(main, feed={"a": np.ones(2, np.float32)}, fetch_list=["r"])


def test_fetching_a_parameter_returns_a_copy(fresh):
    main, startup, _ = _fluid_example()
    exe = fluid.Executor()
    exe.run(startup)
    name = main.global_block().all_parameters()[0].name
    (w,) = exe.run(main, feed={"x": np.zeros((1, 64), np.float32)}, fetch_list=[name])
    w[:] = 123.0
    assert not np.any(np.array(fluid.global_scope().find_var(name).get_tensor()) == 123.0)


def test_scope_tensor_set_and_read(fresh):
    _, _, scope = fresh
    t = scope.var("v").get_tensor()
    t.set(np.arange(3, dtype=np.float32), fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("v").get_tensor()),
                                  [0, 1, 2])
    child = scope.new_scope()
    assert child.find_var("v") is not None and child.find_var("w") is None


def _strip_default_valued_attrs(program):
    """Drop every attribute stored at its schema default, as a file written by another
    tool may; returns how many were dropped."""
    from fluid_hw.ir import attrs as ir_attrs
    from fluid_hw.ir.registry import get_op

    dropped = 0
    for op in program.global_block().ops:
        opdef = get_op(op.type)
        keep = []
        for a in op.desc.attrs:
            d = opdef.attr_def(a.name)
            if d is not None and not d.required and ir_attrs.read(a) == d.default:
                dropped += 1
            else:
                keep.append(a)
        del op.desc.attrs[:]
        for a in keep:
            op.desc.attrs.add().CopyFrom(a)
    return dropped


def test_loaded_program_without_defaulted_attributes_runs(fresh):
    # regression (issue 14): kernels saw only stored attributes -> KeyError at run time
    from fluid_hw.ir.serialization import program_from_bytes, program_to_bytes

    main, startup, _ = fresh
    x = fluid.layers.data(name="x", shape=[2, 6, 6], dtype="float32")
    c = fluid.layers.conv2d(x, num_filters=3, filter_size=3, padding=1, act="relu")
    p = fluid.layers.pool2d(c, pool_size=2, pool_stride=2)
    out = fluid.layers.softmax(fluid.layers.scale(fluid.layers.fc(p, size=4), scale=0.5))
    exe = fluid.Executor()
    exe.run(startup)
    xv = np.random.default_rng(0).random((2, 2, 6, 6), dtype=np.float32)
    (want,) = exe.run(main, feed={"x": xv}, fetch_list=[out])
    bare = main.clone()
    assert _strip_default_valued_attrs(bare) > 10
    assert not bare.global_block().ops[0].has_attr("dilations")
    loaded = program_from_bytes(program_to_bytes(bare))
    (got,) = fluid.Executor().run(loaded, feed={"x": xv}, fetch_list=[out.name])
    np.testing.assert_array_equal(got, want)


def _array_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[2], dtype="float32")
        i = fluid.layers.fill_constant([1], "int64", 0)
        arr = fluid.layers.array_write(x, i)
        fluid.layers.array_write(y, fluid.layers.increment(i, in_place=False), array=arr)
    return main, arr


def test_fetching_a_tensor_array_gives_a_list_of_its_elements():
    # regression (issue 14): elements of different shapes raised numpy's ValueError
    main, arr = _array_program()
    xv, yv = np.ones((2, 3), np.float32), np.full((2, 2), 2.0, np.float32)
    feed = {"x": xv, "y": yv}
    (got,) = fluid.Executor().run(main, feed=feed, fetch_list=[arr], scope=fluid.Scope())
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_array_equal(got[0], xv)
    np.testing.assert_array_equal(got[1], yv)
    (lod,) = fluid.Executor().run(main, feed=feed, fetch_list=[arr], scope=fluid.Scope(),
                                  return_numpy=False)
    assert [type(t) for t in lod] == [fluid.LoDTensor] * 2
    np.testing.assert_array_equal(np.array(lod[1]), yv)


def test_max_while_steps_stops_a_loop_whose_condition_stays_true():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 3)
        cond = fluid.layers.less_than(i, n)
        with fluid.layers.While(cond).block():
            fluid.layers.increment(i, value=0.0, in_place=True)  # never advances
    exe = fluid.Executor()
    exe.max_while_steps = 50
    with pytest.raises(errors.ExecutionError, match="still true after 50 steps"):
        exe.run(main, scope=fluid.Scope())
