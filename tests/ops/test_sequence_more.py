"""sequence_reverse, sequence_slice, sequence_expand_as, sequence_enumerate and
sequence_scatter (issue 20) through their layers, against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.errors import ShapeError

PLACE = fluid.CPUPlace()
LENS = [3, 1, 2]


def _lt(a, lens):
    return fluid.create_lod_tensor(np.asarray(a), [lens], PLACE)


def _run(build, feed):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        outs = build()
    return fluid.Executor(PLACE).run(main, feed=feed, fetch_list=list(outs), return_numpy=False)


def test_reverse_slice_expand_as():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    small = np.array([[1, 2], [3, 4], [5, 6]], np.float32)

    def build():
        xv = layers.data("x", shape=[2], dtype="float32", lod_level=1)
        sv = layers.data("s", shape=[2], dtype="float32")
        off = layers.data("off", shape=[1], dtype="int64")
        ln = layers.data("ln", shape=[1], dtype="int64")
        return [layers.sequence_reverse(xv), layers.sequence_slice(xv, off, ln),
                layers.sequence_expand_as(sv, xv)]

    rev, sl, ex = _run(build, {"x": _lt(x, LENS), "s": small,
                               "off": np.array([[1], [0], [1]], np.int64),
                               "ln": np.array([[2], [1], [1]], np.int64)})
    np.testing.assert_array_equal(np.asarray(rev), x[[2, 1, 0, 3, 5, 4]])
    assert rev.recursive_sequence_lengths() == [LENS]
    np.testing.assert_array_equal(np.asarray(sl), x[[1, 2, 3, 5]])
    assert sl.recursive_sequence_lengths() == [[2, 1, 1]]
    np.testing.assert_array_equal(np.asarray(ex), small[[0, 0, 0, 1, 2, 2]])
    assert ex.recursive_sequence_lengths() == [LENS]


def test_enumerate_and_scatter():
    ids = np.array([[1], [2], [3], [4], [5], [6]], np.int64)
    base = np.zeros((2, 4), np.float32)

    def build():
        iv = layers.data("i", shape=[1], dtype="int64", lod_level=1)
        bv = layers.data("b", shape=[2, 4], dtype="float32", append_batch_size=False)
        cols = layers.data("c", shape=[1], dtype="int64", lod_level=1)
        upd = layers.data("u", shape=[1], dtype="float32", lod_level=1)
        return [layers.sequence_enumerate(iv, win_size=2, pad_value=0),
                layers.sequence_scatter(bv, cols, upd)]

    en, sc = _run(build, {"i": _lt(ids, LENS), "b": base,
                          "c": _lt(np.array([[0], [3], [3]], np.int64), [2, 1]),
                          "u": _lt(np.array([[1.5], [2.0], [-1.0]], np.float32), [2, 1])})
    np.testing.assert_array_equal(np.asarray(en), [[1, 2], [2, 3], [3, 0], [4, 0], [5, 6],
                                                   [6, 0]])
    np.testing.assert_array_equal(np.asarray(sc), [[1.5, 0, 0, 2.0], [0, 0, 0, -1.0]])


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[2], dtype="float32")
        with pytest.raises(ShapeError, match="X 'x' has lod_level 0"):
            layers.sequence_reverse(x)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = layers.data("x", shape=[2], dtype="float32", lod_level=1)
        off = layers.data("off", shape=[1], dtype="int64")
        out = layers.sequence_slice(xv, off, off)
    with pytest.raises(Exception, match="sequence 0 has 3 rows"):
        fluid.Executor(PLACE).run(main, feed={"x": _lt(np.zeros((6, 2), np.float32), LENS),
                                              "off": np.array([[2], [0], [0]], np.int64)},
                                  fetch_list=[out])
