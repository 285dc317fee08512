"""Gradients through tensor arrays with exact expected values: each ``array_read``'s
gradient reaches only the entry it read (so only that entry's writer), reads of one
entry add up, an overwritten entry gives its first writer nothing, and the LoD ops
give their input gradient the input's LoD (central differences of the same ops are
in tests/grad/cases_lod_array.py)."""

import numpy as np

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.frontend.backward import gradients


def _data(name, shape, lod_level=0):
    return layers.data(name=name, shape=shape, dtype="float64", lod_level=lod_level,
                       append_batch_size=False, stop_gradient=False)


def _run(main, feed, fetch, lod=False):
    with fluid.scope_guard(fluid.Scope()):
        return fluid.Executor().run(main, feed=feed, fetch_list=list(fetch),
                                    return_numpy=not lod)


def _wsum(x, w):
    return layers.reduce_sum(layers.scale(x, float(w)))


def _add(*terms):
    return layers.sums(list(terms))


X0, X1 = np.arange(1.0, 5.0).reshape(2, 2), np.arange(5.0, 9.0).reshape(2, 2)
ONES = np.ones((2, 2))


def _written_with_a_counter():
    """x0 at entry 0 and x1 at entry 1, the index a counter incremented in place
    (the usual loop-style indexing, here in the global block)."""
    x0, x1 = _data("x0", [2, 2]), _data("x1", [2, 2])
    i = layers.zeros([1], "int64")
    arr = layers.array_write(x0, i)
    layers.increment(i, in_place=True)
    layers.array_write(x1, i, arr)
    return x0, x1, arr, i


def test_each_read_reaches_only_the_writer_of_its_entry():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x0, x1, arr, _ = _written_with_a_counter()
        j = layers.zeros([1], "int64")
        a = layers.array_read(arr, j)
        layers.increment(j, in_place=True)
        b = layers.array_read(arr, j)
        loss = _add(_wsum(a, 1.0), _wsum(b, 3.0))
        grads = gradients(loss, [x0, x1])
    g0, g1 = _run(main, {"x0": X0, "x1": X1}, grads)
    np.testing.assert_array_equal(g0, ONES)
    np.testing.assert_array_equal(g1, 3 * ONES)


def test_reads_of_one_entry_add_up_and_other_entries_get_none_of_them():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x0, x1, arr, _ = _written_with_a_counter()
        j = layers.zeros([1], "int64")
        layers.increment(j, in_place=True)
        a = layers.array_read(arr, j)  # entry 1, twice
        b = layers.array_read(arr, j)
        c = layers.array_read(arr, layers.zeros([1], "int64"))
        loss = _add(_wsum(a, 2.0), _wsum(b, 5.0), _wsum(layers.elementwise_mul(c, c), 1.0))
        grads = gradients(loss, [x0, x1])
    g0, g1 = _run(main, {"x0": X0, "x1": X1}, grads)
    np.testing.assert_array_equal(g0, 2 * X0)
    np.testing.assert_array_equal(g1, 7 * ONES)


def test_an_entry_never_read_passes_no_gradient():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x0, x1, arr, _ = _written_with_a_counter()
        a = layers.array_read(arr, layers.zeros([1], "int64"))
        loss = _add(_wsum(a, 4.0))
        grads = gradients(loss, [x0, x1])
    g0, g1 = _run(main, {"x0": X0, "x1": X1}, grads)
    np.testing.assert_array_equal(g0, 4 * ONES)
    np.testing.assert_array_equal(g1, 0 * ONES)


def test_an_overwritten_entry_gives_its_first_writer_only_the_earlier_reads():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x0, x1 = _data("x0", [2, 2]), _data("x1", [2, 2])
        zero = layers.zeros([1], "int64")
        arr = layers.array_write(x0, zero)
        before = layers.array_read(arr, zero)
        layers.array_write(x1, zero, arr)  # entry 0 now holds x1
        after = layers.array_read(arr, zero)
        loss = _add(_wsum(before, 2.0), _wsum(after, 5.0))
        grads = gradients(loss, [x0, x1])
    g0, g1 = _run(main, {"x0": X0, "x1": X1}, grads)
    np.testing.assert_array_equal(g0, 2 * ONES)
    np.testing.assert_array_equal(g1, 5 * ONES)


def test_counters_keep_their_forward_value_after_the_backward_pass():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x0, x1, arr, i = _written_with_a_counter()
        a = layers.array_read(arr, i)
        loss = _add(_wsum(a, 1.0))
        grads = gradients(loss, [x0, x1])
    before = fluid.Program()
    with fluid.program_guard(before, fluid.Program()):
        _, _, _, i_fwd = _written_with_a_counter()
    (want,) = _run(before, {"x0": X0, "x1": X1}, [i_fwd])
    got_i, g0, g1 = _run(main, {"x0": X0, "x1": X1}, [i, *grads])
    assert got_i.tolist() == want.tolist() == [1]
    np.testing.assert_array_equal(g0, 0 * ONES)
    np.testing.assert_array_equal(g1, ONES)


def test_a_loop_reads_entries_written_before_it():
    """The loop reads entry k at step k (and entry 0 at every step); its counter and
    the one that indexed the writes are both replayed backwards."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x0, x1, arr, _ = _written_with_a_counter()
        k = layers.zeros([1], "int64")
        n = layers.fill_constant([1], "int64", 2)
        zero = layers.zeros([1], "int64")
        cond = layers.less_than(k, n)
        out = layers.create_array("float64")
        loop = layers.While(cond)
        with loop.block():
            step = layers.elementwise_add(layers.array_read(arr, k),
                                          layers.array_read(arr, zero))
            layers.array_write(step, k, out)
            layers.increment(k, in_place=True)
            layers.less_than(k, n, cond=cond)
        s0 = layers.array_read(out, zero)
        s1 = layers.array_read(out, layers.fill_constant([1], "int64", 1))
        loss = _add(_wsum(s0, 1.0), _wsum(s1, 10.0))
        grads = gradients(loss, [x0, x1])
    g0, g1 = _run(main, {"x0": X0, "x1": X1}, grads)
    # s0 = 2 x0, s1 = x1 + x0
    np.testing.assert_array_equal(g0, 12 * ONES)
    np.testing.assert_array_equal(g1, 10 * ONES)


def _reorder_grad(lod_level):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[1], dtype="float64", lod_level=1)
        s = _data("s", [-1, 2], lod_level=lod_level)
        table = layers.lod_rank_table(x)
        out = layers.reorder_lod_tensor_by_rank(s, table)
        w = layers.data(name="w", shape=[6, 2], dtype="float64", append_batch_size=False)
        loss = layers.reduce_sum(layers.elementwise_mul(out, w))
        (gs,) = gradients(loss, [s])
    feed = {"x": fluid.create_lod_tensor(np.zeros((7, 1)), [[2, 1, 3, 1]]),
            "s": fluid.create_lod_tensor(np.zeros((6, 2)), [[1, 2, 1, 2]]),
            "w": np.arange(12.0).reshape(6, 2)}
    (got,) = _run(main, feed, [gs], lod=True)
    return got


def test_reorder_gradient_keeps_the_input_lod():
    # rank order 2, 0, 1, 3: out = s's rows 3, 0, 1, 2, 4, 5
    want = np.arange(12.0).reshape(6, 2)[[1, 2, 3, 0, 4, 5]]
    for lod_level in (1, 0):  # declared, or only fed, with LoD
        got = _reorder_grad(lod_level)
        np.testing.assert_array_equal(np.asarray(got), want)
        assert got.recursive_sequence_lengths() == [[1, 2, 1, 2]], lod_level


def test_every_lod_array_op_with_a_gradient_has_a_central_difference_case():
    from fluid_hw.ir import all_ops
    from fluid_hw.ir.grad import GradMaker
    from fluid_hw.ir.ops import lod_array
    from tests.grad.cases_lod_array import CASES

    with_grad = {name for name, d in all_ops().items()
                 if getattr(d.infer, "__module__", None) == lod_array.__name__
                 and isinstance(d.grad, GradMaker)}
    assert with_grad == {
        "write_to_array", "read_from_array", "lod_tensor_to_array", "array_to_lod_tensor",
        "shrink_rnn_memory", "reorder_lod_tensor_by_rank", "split_lod_tensor",
        "merge_lod_tensor", "tensor_to_array", "tensor_array_to_tensor"}
    assert with_grad <= {c.op for c in CASES}
