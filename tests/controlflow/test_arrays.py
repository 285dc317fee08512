"""Tensor arrays, rank tables and the LoD plumbing of DynamicRNN and IfElse."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors, layers


def _run(main, feed=None, fetch=(), lod=False):
    with fluid.scope_guard(fluid.Scope()):
        return fluid.Executor().run(main, feed=feed or {}, fetch_list=list(fetch),
                                    return_numpy=not lod)


def _idx(k):
    return layers.fill_constant([1], "int64", k)


def test_array_write_read_length():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = layers.fill_constant([2, 3], "float32", 1.0)
        b = layers.fill_constant([4, 3], "float32", 2.0)
        arr = layers.array_write(a, _idx(0))
        layers.array_write(b, _idx(3), arr)  # grows; entries 1, 2 stay unwritten
        n = layers.array_length(arr)
        r = layers.array_read(arr, _idx(3))
    got_n, got_r = _run(main, fetch=[n, r])
    assert got_n.tolist() == [4]
    np.testing.assert_array_equal(got_r, np.full((4, 3), 2.0))
    with fluid.program_guard(main, fluid.Program()):
        bad = layers.array_read(arr, _idx(1))
    with pytest.raises(errors.ExecutionError, match="entry 1 was never written"):
        _run(main, fetch=[bad])


def test_array_layers_check_their_arguments():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.fill_constant([1], "float32", 1.0)
        with pytest.raises(TypeError, match="int64"):
            layers.array_write(x, layers.fill_constant([1], "int32", 0))
        with pytest.raises(TypeError, match="not a tensor array"):
            layers.array_read(x, _idx(0))


LENS = [3, 1, 4, 2]


def _lod_program(level_lens, level=0):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[2], dtype="float32", lod_level=len(level_lens))
        table = layers.lod_rank_table(x, level=level)
        longest = layers.max_sequence_len(table)
        arr = layers.lod_tensor_to_array(x, table)
        n = layers.array_length(arr)
        back = layers.array_to_lod_tensor(arr, table)
    return main, [longest, n, back], arr


def test_lod_tensor_to_array_shrinks_by_rank_and_round_trips():
    main, fetch, arr = _lod_program([LENS])
    xv = np.arange(20, dtype=np.float32).reshape(10, 2)
    steps = []
    with fluid.program_guard(main, fluid.Program()):
        for t in range(4):
            steps.append(layers.array_read(arr, _idx(t)))
    got = _run(main, {"x": fluid.create_lod_tensor(xv, [LENS])}, fetch + steps, lod=True)
    assert np.asarray(got[0]).tolist() == [4] and np.asarray(got[1]).tolist() == [4]
    np.testing.assert_array_equal(np.asarray(got[2]), xv)
    assert got[2].recursive_sequence_lengths() == [LENS]
    # rank order: sequence 2 (4 rows), 0 (3), 3 (2), 1 (1); starts 4, 0, 8, 3
    for t, rows in enumerate([[4, 0, 8, 3], [5, 1, 9], [6, 2], [7]]):
        np.testing.assert_array_equal(np.asarray(got[3 + t]), xv[rows])


def test_two_level_lod_steps_carry_the_lower_level():
    lod = [[2, 1], [1, 3, 2]]  # sequence 0: sub-sequences of 1 and 3 rows; sequence 1: 2
    main, fetch, arr = _lod_program(lod)
    with fluid.program_guard(main, fluid.Program()):
        s0 = layers.array_read(arr, _idx(0))
    xv = np.arange(12, dtype=np.float32).reshape(6, 2)
    got = _run(main, {"x": fluid.create_lod_tensor(xv, lod)}, [*fetch, s0], lod=True)
    np.testing.assert_array_equal(np.asarray(got[2]), xv)
    assert got[2].recursive_sequence_lengths() == lod
    # step 0: the first sub-sequence of each sequence (1 row, then 2 rows)
    np.testing.assert_array_equal(np.asarray(got[3]), xv[[0, 4, 5]])
    assert got[3].recursive_sequence_lengths() == [[1, 2]]


def test_shrink_and_reorder_follow_the_rank_table():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[1], lod_level=1)
        h = layers.data(name="h", shape=[2])
        s = layers.data(name="s", shape=[2], lod_level=1)
        table = layers.lod_rank_table(x)
        re_h = layers.reorder_lod_tensor_by_rank(h, table)
        re_s = layers.reorder_lod_tensor_by_rank(s, table)
        shrunk = layers.shrink_memory(re_h, _idx(2), table)
    hv = np.arange(8, dtype=np.float32).reshape(4, 2)
    sv = np.arange(12, dtype=np.float32).reshape(6, 2)
    got = _run(main, {"x": fluid.create_lod_tensor(np.zeros((10, 1), np.float32), [LENS]),
                      "h": hv, "s": fluid.create_lod_tensor(sv, [[1, 2, 1, 2]])},
               [re_h, re_s, shrunk], lod=True)
    order = [2, 0, 3, 1]
    np.testing.assert_array_equal(np.asarray(got[0]), hv[order])
    np.testing.assert_array_equal(np.asarray(got[1]), sv[[3, 0, 4, 5, 1, 2]])
    assert got[1].recursive_sequence_lengths() == [[1, 1, 2, 2]]
    np.testing.assert_array_equal(np.asarray(got[2]), hv[order][:2])  # 2 longer than 2


def test_split_and_merge_by_mask():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[2], lod_level=1)
        m = layers.data(name="m", shape=[1], dtype="bool")
        t, f = layers.split_lod_tensor(x, m)
        merged = layers.merge_lod_tensor(t, f, x, m)
    xv = np.arange(20, dtype=np.float32).reshape(10, 2)
    mv = np.array([[True], [False], [True], [False]])
    got = _run(main, {"x": fluid.create_lod_tensor(xv, [LENS]), "m": mv}, [t, f, merged],
               lod=True)
    np.testing.assert_array_equal(np.asarray(got[0]), xv[[0, 1, 2, 4, 5, 6, 7]])
    assert got[0].recursive_sequence_lengths() == [[3, 4]]
    np.testing.assert_array_equal(np.asarray(got[1]), xv[[3, 8, 9]])
    np.testing.assert_array_equal(np.asarray(got[2]), xv)
    assert got[2].recursive_sequence_lengths() == [LENS]


def test_rank_table_needs_a_lod_input():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[2])
        layers.lod_rank_table(x)
    with pytest.raises(errors.ExecutionError, match="has no LoD"):
        _run(main, {"x": np.zeros((3, 2), np.float32)})


def test_fill_constant_batch_size_like():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[5])
        out = layers.fill_constant_batch_size_like(x, [-1, 3], "float32", 2.5)
    (got,) = _run(main, {"x": np.zeros((4, 5), np.float32)}, [out])
    np.testing.assert_array_equal(got, np.full((4, 3), 2.5, np.float32))
