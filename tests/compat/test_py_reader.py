"""Fluid 1.5's in-graph readers (fluid.layers.py_reader, create_py_reader_by_data,
read_file, double_buffer, fluid.io.PyReader, fluid.core.EOFException): training
through a reader equals training through feed dicts on the same batches."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.datasets.digits import load_digits_split

BATCH = 64


def _batches(n=4):
    xtr, _, ytr, _ = load_digits_split()
    return [(xtr[i * BATCH:(i + 1) * BATCH], ytr[i * BATCH:(i + 1) * BATCH])
            for i in range(n)]


def _mlp(img, label):
    hidden = fluid.layers.fc(img, size=32, act="relu")
    pred = fluid.layers.fc(hidden, size=10, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
    fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return pred, loss


def _params(main, scope):
    return {p.name: np.array(scope.vars[p.name]) for p in main.global_block().all_parameters()}


def test_py_reader_training_equals_feed_dicts_and_saved_model_has_no_reader(fresh, tmp_path):
    main, startup, scope = fresh
    reader = fluid.layers.py_reader(capacity=8, shapes=[(-1, 64), (-1, 1)],
                                    dtypes=["float32", "int64"], name="digits")
    reader = fluid.layers.double_buffer(reader)
    img, label = fluid.layers.read_file(reader)
    pred, loss = _mlp(img, label)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    init = _params(main, scope)
    batches = _batches()
    reader.decorate_paddle_reader(lambda: ([(x, y) for x, y in zip(xb, yb)]
                                           for xb, yb in batches))
    losses = []
    for _ in range(2):
        reader.start()
        steps = 0
        try:
            while True:
                (lv,) = exe.run(main, fetch_list=[loss])
                losses.append(float(lv))
                steps += 1
        except fluid.core.EOFException:
            reader.reset()
        assert steps == len(batches)
    via_reader = _params(main, scope)

    for name, v in init.items():  # the same training through feed dicts
        scope.vars[name] = v.copy()
    fed_losses = []
    for _ in range(2):
        for xb, yb in batches:
            (lv,) = exe.run(main, feed={img.name: xb, label.name: yb}, fetch_list=[loss])
            fed_losses.append(float(lv))
    assert losses == fed_losses
    for name, v in _params(main, scope).items():
        np.testing.assert_array_equal(via_reader[name], v, err_msg=name)
    assert losses[-1] < losses[0]

    fluid.io.save_inference_model(str(tmp_path), [img.name], [pred], exe, main_program=main)
    prog, feeds, _ = fluid.io.load_inference_model(str(tmp_path), exe)
    assert feeds == [img.name] and not getattr(prog, "_py_readers", [])


def test_pyreader_sample_list_generator_and_batch_generator(fresh):
    main, startup, _ = fresh
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.reduce_sum(x)
    reader = fluid.io.PyReader(feed_list=[x], capacity=4, iterable=False)
    samples = [[(np.full(3, i, "float32"),) for i in range(2 * b, 2 * b + 2)] for b in range(3)]
    reader.decorate_sample_list_generator(lambda: iter(samples))
    exe = fluid.Executor()
    exe.run(startup)
    for _ in range(2):
        got = []
        reader.start()
        try:
            while True:
                got.append(float(exe.run(main, fetch_list=[y])[0]))
        except fluid.core.EOFException:
            reader.reset()
        assert got == [3.0 * (0 + 1), 3.0 * (2 + 3), 3.0 * (4 + 5)]
    # an explicit feed bypasses the reader (e.g. evaluation)
    assert float(exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])[0]) == 3
    # create_py_reader_by_data + decorate_tensor_provider; iterable PyReader
    r2 = fluid.layers.create_py_reader_by_data(capacity=2, feed_list=[x])
    assert fluid.layers.read_file(r2) is x
    r3 = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=True)
    r3.decorate_batch_generator(lambda: iter([(np.ones((2, 3), "float32"),)]))
    assert [float(exe.run(main, feed=d, fetch_list=[y])[0]) for d in r3()] == [6.0]


def test_reader_errors_name_the_reader_and_the_variable(fresh):
    main, startup, _ = fresh
    reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 4)], dtypes=["float32"],
                                    name="rd")
    x = fluid.layers.read_file(reader)
    y = fluid.layers.reduce_sum(x)
    exe = fluid.Executor()
    exe.run(startup)
    with pytest.raises(fluid.errors.FluidError, match="decorate"):
        reader.start()
    reader.decorate_tensor_provider(lambda: iter([(np.ones((2, 5), "float32"),)]))
    with pytest.raises(fluid.errors.FluidError, match=r"'rd'.*before reader.start\(\)"):
        exe.run(main, fetch_list=[y])
    reader.start()
    with pytest.raises(fluid.errors.FluidError, match="already started"):
        reader.start()
    with pytest.raises(fluid.errors.FeedError, match=rf"'rd'.*{x.name}.*shape \[2, 5\]"):
        exe.run(main, fetch_list=[y])
    reader.reset()
    reader.decorate_tensor_provider(lambda: iter([(np.ones((2, 4), "float32"), 1)]))
    reader.start()
    with pytest.raises(fluid.errors.FeedError, match=r"'rd'.*2 value\(s\).*feeds 1"):
        exe.run(main, fetch_list=[y])


def test_a_clone_reads_from_the_same_reader(fresh):
    main, startup, _ = fresh
    reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 2)], dtypes=["float32"])
    y = fluid.layers.reduce_sum(fluid.layers.read_file(reader))
    test = main.clone(for_test=True)
    reader.decorate_batch_generator(lambda: (np.full((1, 2), i, "float32") for i in (1, 2)))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    assert float(exe.run(main, fetch_list=[y])[0]) == 2.0
    assert float(exe.run(test, fetch_list=[y.name])[0]) == 4.0
    with pytest.raises(fluid.core.EOFException):
        exe.run(test, fetch_list=[y.name])


def test_sample_generator_and_compiled_program(fresh):
    main, startup, _ = fresh
    x = fluid.layers.data(name="x", shape=[2])
    y = fluid.layers.reduce_sum(x)
    reader = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=False)
    reader.decorate_sample_generator(lambda: ((np.full(2, i, "float32"),) for i in range(5)),
                                     batch_size=2)  # drop_last: batches [0, 1], [2, 3]
    compiled = fluid.CompiledProgram(main)
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    got = [float(exe.run(compiled, fetch_list=[y])[0]) for _ in range(2)]
    assert got == [2.0, 10.0]
    with pytest.raises(fluid.core.EOFException):
        exe.run(compiled, fetch_list=[y])
