"""Fluid 1.5 behaviour that scripts rely on (issue 20's "different behaviour"):
standard feed conversions, append_op's error."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors


def _program(dtype="float32"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype=dtype)
        y = fluid.layers.scale(x, scale=2.0)
    return main, y


@pytest.mark.parametrize(("var_dtype", "data"), [
    ("float32", np.array([[0.1, 0.2, 0.3]], np.float64)),   # Python floats' default
    ("float64", np.array([[0.1, 0.2, 0.3]], np.float32)),
    ("int64", np.array([[1, 2, 3]], np.int32)),
    ("int32", np.array([[1, 2, -3]], np.int64)),             # values that fit
    ("float32", np.array([[1, 2, 3]], np.int64)),            # exactly representable
])
def test_standard_feed_conversions_are_made(var_dtype, data):
    main, y = _program(var_dtype)
    with fluid.scope_guard(fluid.Scope()):
        (out,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": data}, fetch_list=[y])
    assert out.dtype == np.dtype(var_dtype)
    np.testing.assert_allclose(out, 2 * data.astype(var_dtype))


def test_feed_conversion_of_a_lod_tensor():
    main, y = _program("int64")
    t = fluid.create_lod_tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int32), [[2]])
    with fluid.scope_guard(fluid.Scope()):
        (out,) = fluid.Executor().run(main, feed={"x": t}, fetch_list=[y],
                                      return_numpy=False)
    assert out.lod() == [[0, 2]] and np.asarray(out).dtype == np.int64


@pytest.mark.parametrize(("var_dtype", "data", "words"), [
    ("int64", np.array([[0.5, 1, 2]], np.float32), ["float32", "int64", "astype"]),
    ("int32", np.array([[2**40, 1, 2]], np.int64), ["do not fit", "int32"]),
    ("float32", np.array([[2**25 + 1, 0, 0]], np.int64), ["do not fit", "float32"]),
    ("float32", np.array([[1e300, 0, 0]], np.float64), ["overflow", "float32"]),
    ("float32", np.array([[True, False, True]]), ["bool", "astype"]),
])
def test_lossy_feed_conversions_are_refused(var_dtype, data, words):
    main, y = _program(var_dtype)
    with fluid.scope_guard(fluid.Scope()), pytest.raises(errors.FeedError) as ei:
        fluid.Executor().run(main, feed={"x": data}, fetch_list=[y])
    assert "'x'" in str(ei.value)
    for w in words:
        assert w in str(ei.value)


def test_append_op_without_a_type_is_a_value_error():
    block = fluid.Program().global_block()
    with pytest.raises(ValueError, match="op type"):
        block.append_op()


def test_lod_set_before_the_data():
    t = fluid.LoDTensor()
    t.set_recursive_sequence_lengths([[2, 3]])
    t.set(np.arange(5, dtype=np.int64).reshape(5, 1), fluid.CPUPlace())
    assert t.lod() == [[0, 2, 5]] and t.has_valid_recursive_sequence_lengths()
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1], dtype="int64", lod_level=1)
        s = fluid.layers.sequence_pool(fluid.layers.cast(x, "float32"), "sum")
    with fluid.scope_guard(fluid.Scope()):
        (out,) = fluid.Executor().run(main, feed={"x": t}, fetch_list=[s])
    np.testing.assert_array_equal(out.ravel(), [1, 9])
    # levels that disagree are still refused at once; too few rows at feed time
    with pytest.raises(errors.FeedError):
        fluid.LoDTensor().set_recursive_sequence_lengths([[1, 1], [2, 2, 2]])
    bad = fluid.LoDTensor()
    bad.set_recursive_sequence_lengths([[2, 3]])
    bad.set(np.zeros((4, 1), np.int64))
    assert not bad.has_valid_recursive_sequence_lengths()


def test_layers_take_ifelse_output_list():
    layers = fluid.layers
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[1])
        cond = layers.less_than(x=x, y=layers.fill_constant([1], "float32", 0.0))
        ie = layers.IfElse(cond)
        with ie.true_block():
            ie.output(layers.scale(ie.input(x), scale=-1.0))
        with ie.false_block():
            ie.output(ie.input(x))
        out = ie()
        assert isinstance(out, list) and len(out) == 1
        total = layers.reduce_sum(out)  # as Fluid scripts write it
        twice = layers.elementwise_add(out, out)
        with pytest.raises(TypeError, match="list of 2 variables"):
            layers.mean([x, x])
    xv = np.array([[-2.0], [3.0], [-1.0]], np.float32)
    with fluid.scope_guard(fluid.Scope()):
        s, t = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[total, twice])
    np.testing.assert_allclose(s, [6.0])
    np.testing.assert_allclose(np.sort(t.ravel()), [2.0, 4.0, 6.0])


def test_embedding_and_split_lod_tensor_check_dtypes_when_run():
    layers = fluid.layers
    # both build (programs that are only transpiled declare such dtypes)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = layers.data(name="ids", shape=[1], dtype="int32")
        emb = layers.embedding(ids, size=[10, 4])
    split = fluid.Program()
    with fluid.program_guard(split, fluid.Program()):
        x = layers.data(name="x", shape=[2])
        mask = layers.data(name="mask", shape=[1], dtype="float32")
        t, f = layers.split_lod_tensor(x, mask)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.raises(errors.ExecutionError, match="Ids must be int64, got int32"):
            exe.run(main, feed={"ids": np.array([[1]], np.int32)}, fetch_list=[emb])
        with pytest.raises(errors.ExecutionError, match="Mask must be bool, got float32"):
            exe.run(split, feed={"x": np.zeros((2, 2), np.float32),
                                 "mask": np.array([[1.0], [0.0]], np.float32)},
                    fetch_list=[t, f])


def test_fetched_values_convert_to_numbers_as_with_numpy_1():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3])
        y = fluid.layers.scale(x, scale=2.0)
        avg = fluid.layers.mean(y)
    with fluid.scope_guard(fluid.Scope()):
        cost, rows = fluid.Executor().run(
            main, feed={"x": np.array([[0.25, 0.5, 1.0]], np.float32)}, fetch_list=[avg, y])
    # as Fluid scripts write them: float(avg_cost), "%f" % cost, "%.2f" % results[0][i]
    assert cost.shape == (1,) and float(cost) == pytest.approx(7 / 6)
    assert "%.2f" % rows[0][1:2] == "1.00"  # noqa: UP031
    assert f"{rows[:, 2]:.1f}" == "2.0" and int(rows[:, 2]) == 2
    with pytest.raises(TypeError):
        float(rows)  # several values: refused, as NumPy does
    assert type(np.asarray(rows)) is np.ndarray
    assert repr(rows).startswith("array(")
