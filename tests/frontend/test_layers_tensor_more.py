"""The tensor layers of Paddle 1.5 added for issue 20, against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.errors import ShapeError
from tests.frontend._layer_util import run_layers as _run

R = np.random.default_rng(3)
PLACE = fluid.CPUPlace()


def _x(shape=(3, 4), dtype="float32"):
    return layers.data("x", shape=list(shape), dtype=dtype, append_batch_size=False)


X = R.normal(size=(3, 4)).astype(np.float32)


def test_shape_rank_argmin_argsort_reverse():
    def build():
        x = _x()
        s, ids = layers.argsort(x, axis=1)
        return [layers.shape(x), layers.rank(x), layers.argmin(x, axis=1), s, ids,
                layers.reverse(x, [0, 1]), layers.reverse(x, 1)]

    sh, rk, amin, s, ids, rev, rev1 = _run(build, {"x": X})
    assert sh.tolist() == [3, 4] and rk.tolist() == [2]
    np.testing.assert_array_equal(amin, X.argmin(1))
    np.testing.assert_array_equal(s, np.sort(X, 1))
    np.testing.assert_array_equal(ids, np.argsort(X, 1))
    np.testing.assert_array_equal(rev, X[::-1, ::-1])
    np.testing.assert_array_equal(rev1, X[:, ::-1])


@pytest.mark.parametrize("value,finite,inf,nan", [(1.0, True, False, False),
                                                  (np.inf, False, True, False),
                                                  (np.nan, False, False, True)])
def test_isfinite_has_inf_has_nan(value, finite, inf, nan):
    x = X.copy()
    x[1, 2] = value
    got = _run(lambda: [layers.isfinite(_x()), layers.has_inf(_x()), layers.has_nan(_x())],
               {"x": x})
    assert [bool(g[0]) for g in got] == [finite, inf, nan]


def test_reduce_all_any():
    b = R.random((3, 4)) < 0.5
    b[0] = True

    def build():
        x = _x(dtype="bool")
        return [layers.reduce_all(x), layers.reduce_any(x, dim=1),
                layers.reduce_all(x, dim=[1], keep_dim=True)]

    a, y, k = _run(build, {"x": b})
    assert a.tolist() == [b.all()]
    np.testing.assert_array_equal(y, b.any(1))
    np.testing.assert_array_equal(k, b.all(1, keepdims=True))


def test_one_hot_gather_scatter_diag_multiplex():
    ids = np.array([[2], [0], [3]], np.int64)
    idx = np.array([2, 0], np.int64)
    upd = R.normal(size=(2, 4)).astype(np.float32)
    d = R.normal(size=(4,)).astype(np.float32)
    y = R.normal(size=(3, 4)).astype(np.float32)
    pick = np.array([[1], [0], [1]], np.int32)

    def build():
        x = _x()
        i = layers.data("ids", shape=[3, 1], dtype="int64", append_batch_size=False)
        j = layers.data("idx", shape=[2], dtype="int64", append_batch_size=False)
        u = layers.data("u", shape=[2, 4], dtype="float32", append_batch_size=False)
        dv = layers.data("d", shape=[4], dtype="float32", append_batch_size=False)
        yv = layers.data("y", shape=[3, 4], dtype="float32", append_batch_size=False)
        p = layers.data("p", shape=[3, 1], dtype="int32", append_batch_size=False)
        return [layers.one_hot(i, 5), layers.gather(x, j), layers.scatter(x, j, u),
                layers.diag(dv), layers.multiplex([x, yv], p)]

    oh, g, sc, dg, mx = _run(build, {"x": X, "ids": ids, "idx": idx, "u": upd, "d": d,
                                     "y": y, "p": pick})
    np.testing.assert_array_equal(oh, np.eye(5, dtype=np.float32)[ids[:, 0]])
    np.testing.assert_array_equal(g, X[idx])
    want = X.copy()
    want[idx] = upd
    np.testing.assert_array_equal(sc, want)
    np.testing.assert_array_equal(dg, np.diag(d))
    np.testing.assert_array_equal(mx, np.where(pick == 1, y, X))


def test_sum_zeros_like_range_linspace_stack_unstack():
    y = R.normal(size=(3, 4)).astype(np.float32)

    def build():
        x = _x()
        yv = layers.data("y", shape=[3, 4], dtype="float32", append_batch_size=False)
        return [layers.sum([x, yv]), layers.zeros_like(x), layers.range(1, 10, 3, "int64"),
                layers.linspace(0, 1, 5, "float32"), layers.stack([x, yv], axis=1),
                *layers.unstack(x, axis=1)]

    s, z, r, ls, st, *un = _run(build, {"x": X, "y": y})
    np.testing.assert_allclose(s, X + y, rtol=1e-6)
    assert not z.any() and z.shape == X.shape
    assert r.dtype == np.int64 and r.tolist() == [1, 4, 7]
    np.testing.assert_allclose(ls, np.linspace(0, 1, 5), rtol=1e-6)
    np.testing.assert_array_equal(st, np.stack([X, y], 1))
    assert len(un) == 4
    for k in range(4):
        np.testing.assert_array_equal(un[k], X[:, k])


def test_create_parameter_and_global_var():
    def build():
        p = layers.create_parameter([2, 3], "float32", name="pw",
                                    default_initializer=fluid.initializer.Constant(0.5))
        g = layers.create_global_var([2], 7.0, "int64", persistable=True, name="gv")
        return [p, g]

    p, g = _run(build, {})
    np.testing.assert_array_equal(p, np.full((2, 3), 0.5, np.float32))
    assert g.dtype == np.int64 and g.tolist() == [7, 7]


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = _x()
        with pytest.raises(ShapeError, match="stack: the inputs must share one shape"):
            layers.stack([x, layers.data("z", shape=[4, 3], dtype="float32",
                                         append_batch_size=False)])
        with pytest.raises(TypeError, match="range: start must be a Python number"):
            layers.range(x, 3, 1, "int32")
        with pytest.raises(ShapeError, match="Index must be"):
            layers.gather(x, layers.data("i", shape=[2, 2], dtype="int64",
                                         append_batch_size=False))
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = layers.gather(_x(), layers.data("i", shape=[2], dtype="int64",
                                              append_batch_size=False))
    with pytest.raises(Exception, match="gather: Index 'i' must index the 3 rows"):
        fluid.Executor(PLACE).run(main, feed={"x": X, "i": np.array([0, 5])}, fetch_list=[out])
