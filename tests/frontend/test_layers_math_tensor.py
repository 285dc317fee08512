"""Math and tensor layer functions: each builds its op under a program_guard, infers
the output shape at build time and computes the right values on the executor."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import OpAttrError, ShapeError

L = fluid.layers


def _run(feed, fetch, startup=None):
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    if startup is not None:
        exe.run(startup)
    return exe.run(fluid.default_main_program(), feed=feed, fetch_list=fetch)


def _rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ops(main):
    return [op.type for op in main.global_block().ops]


# -- element-wise and activations ----------------------------------------------------------

_ELEMENTWISE = {
    "elementwise_add": np.add, "elementwise_sub": np.subtract, "elementwise_mul": np.multiply,
    "elementwise_div": np.divide, "elementwise_max": np.maximum, "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
}


@pytest.mark.parametrize("name", list(_ELEMENTWISE))
def test_elementwise_layers(fresh, name):
    main, _, _ = fresh
    x = L.data("x", [3, 4])
    y = L.data("y", [3], append_batch_size=False)
    out = getattr(L, name)(x, y, axis=1, act="relu")
    assert out.shape == (-1, 3, 4) and _ops(main) == [name, "relu"]
    xv = np.abs(_rand((2, 3, 4), 1)) + 0.5
    yv = np.abs(_rand((3,), 2)) + 0.5
    (got,) = _run({"x": xv, "y": yv}, [out])
    ref = np.maximum(_ELEMENTWISE[name](xv, yv[None, :, None]), 0)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


_ACTS = {
    "relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs,
}


@pytest.mark.parametrize("name", list(_ACTS))
def test_activation_layers(fresh, name):
    x = L.data("x", [5])
    out = getattr(L, name)(x)
    assert out.shape == (-1, 5) and out.dtype == x.dtype
    xv = np.abs(_rand((3, 5), 3)) + 0.1
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_allclose(got, _ACTS[name](xv.astype("f8")), rtol=1e-5)


def test_leaky_relu_and_softmax_layers(fresh):
    main, _, _ = fresh
    x = L.data("x", [4, 5])
    lr = L.leaky_relu(x, alpha=0.1)
    sm = L.softmax(x, axis=1)
    assert lr.shape == sm.shape == (-1, 4, 5)
    assert main.global_block().ops[1].attr("axis") == 1
    xv = _rand((2, 4, 5), 4)
    got_lr, got_sm = _run({"x": xv}, [lr, sm])
    np.testing.assert_allclose(got_lr, np.where(xv > 0, xv, 0.1 * xv), rtol=1e-6)
    e = np.exp(xv - xv.max(1, keepdims=True))
    np.testing.assert_allclose(got_sm, e / e.sum(1, keepdims=True), rtol=1e-5)


# -- products, scale, reductions --------------------------------------------------------------


def test_mul_layer(fresh):
    x = L.data("x", [3, 4])
    w = L.data("w", [4, 2, 5], append_batch_size=False)
    out = L.mul(x, w, x_num_col_dims=2, y_num_col_dims=1)
    assert out.shape == (-1, 3, 2, 5)
    xv, wv = _rand((2, 3, 4), 5), _rand((4, 2, 5), 6)
    (got,) = _run({"x": xv, "w": wv}, [out])
    np.testing.assert_allclose(got, np.einsum("abc,cde->abde", xv, wv), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("xs", "ys", "tx", "ty", "want"), [
    ([3, 4], [4, 5], False, False, (-1, 3, 5)),
    ([4, 3], [5, 4], True, True, (-1, 3, 5)),
])
def test_matmul_layer(fresh, xs, ys, tx, ty, want):
    x = L.data("x", xs)
    y = L.data("y", ys, append_batch_size=False)
    out = L.matmul(x, y, transpose_x=tx, transpose_y=ty, alpha=2.0)
    assert out.shape == want
    xv, yv = _rand((2, *xs), 7), _rand(ys, 8)
    (got,) = _run({"x": xv, "y": yv}, [out])
    a = np.swapaxes(xv, -1, -2) if tx else xv
    b = yv.T if ty else yv
    np.testing.assert_allclose(got, 2.0 * np.einsum("bij,jk->bik", a, b), rtol=1e-5, atol=1e-6)


def test_matmul_layer_shape_error_names_the_layer(fresh):
    x = L.data("x", [3, 4])
    with pytest.raises(ShapeError, match=r"layer matmul.*op matmul"):
        L.matmul(x, L.data("y", [5, 6], append_batch_size=False))


def test_scale_layer(fresh):
    x = L.data("x", [3])
    out = L.scale(x, scale=3.0, bias=-1.0, bias_after_scale=False, act="abs")
    assert out.shape == (-1, 3)
    xv = _rand((4, 3), 9)
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_allclose(got, np.abs(3.0 * (xv - 1.0)), rtol=1e-6)


def test_mean_and_sums_layers(fresh):
    x = L.data("x", [3])
    y = L.data("y", [3])
    s = L.sums([x, y, x])
    m = L.mean(s)
    assert s.shape == (-1, 3) and m.shape == (1,)
    xv, yv = _rand((2, 3), 10), _rand((2, 3), 11)
    got_s, got_m = _run({"x": xv, "y": yv}, [s, m])
    np.testing.assert_allclose(got_s, 2 * xv + yv, rtol=1e-6)
    np.testing.assert_allclose(got_m, [(2 * xv + yv).mean()], rtol=1e-5)


def test_sums_into_a_given_output(fresh):
    x = L.data("x", [3])
    out = L.create_tensor("float32")
    assert L.sums([x, x], out=out) is out
    xv = _rand((2, 3), 12)
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_allclose(got, 2 * xv, rtol=1e-6)


@pytest.mark.parametrize(("name", "fn"), [("reduce_sum", np.sum), ("reduce_mean", np.mean),
                                          ("reduce_max", np.max)])
@pytest.mark.parametrize(("dim", "keep", "want"), [
    (None, False, (1,)), (1, False, (-1, 4)), ([-1], True, (-1, 3, 1)),
    ([1, 2], False, (-1,)), ([0, 1, 2], True, (1, 1, 1)),
])
def test_reduce_layers(fresh, name, fn, dim, keep, want):
    main, _, _ = fresh
    x = L.data("x", [3, 4])
    out = getattr(L, name)(x, dim=dim, keep_dim=keep)
    assert out.shape == want
    op = main.global_block().ops[-1]
    assert op.attr("reduce_all") == (dim is None)
    xv = _rand((2, 3, 4), 13)
    (got,) = _run({"x": xv}, [out])
    axis = None if dim is None else tuple(dim) if isinstance(dim, list) else dim
    ref = fn(xv.astype("f8"), axis=axis, keepdims=keep)
    np.testing.assert_allclose(got, np.reshape(ref, got.shape), rtol=1e-5, atol=1e-6)


# -- creation -------------------------------------------------------------------------------------


def test_fill_constant_zeros_ones(fresh):
    a = L.fill_constant([2, 3], "int64", 7)
    z = L.zeros([4], "float32")
    o = L.ones([1, 2], np.float64)
    assert a.shape == (2, 3) and z.shape == (4,) and o.shape == (1, 2)
    assert a.stop_gradient and a.dtype_name == "int64" and o.dtype_name == "float64"
    got_a, got_z, got_o = _run({}, [a, z, o])
    assert got_a.dtype == np.int64 and (got_a == 7).all()
    assert got_z.dtype == np.float32 and (got_z == 0).all() and (got_o == 1).all()


def test_fill_constant_into_a_given_output(fresh):
    out = L.create_tensor("float32", name="filled")
    assert out.name == "filled"
    assert L.fill_constant([3], "float32", 2.5, out=out) is out
    (got,) = _run({}, [out])
    np.testing.assert_array_equal(got, [2.5, 2.5, 2.5])


def test_random_layers(fresh):
    u = L.uniform_random([300, 10], min=1.0, max=2.0, seed=4)
    g = L.gaussian_random([3000], mean=-1.0, std=0.25, seed=4, dtype="float64")
    assert u.shape == (300, 10) and u.dtype_name == "float32" and g.dtype_name == "float64"
    got_u, got_g = _run({}, [u, g])
    assert got_u.min() >= 1.0 and got_u.max() < 2.0
    assert abs(got_g.mean() + 1.0) < 0.03 and abs(got_g.std() - 0.25) < 0.03


def test_random_layers_take_the_program_seed(fresh):
    main, _, _ = fresh
    main.random_seed = 123
    u = L.uniform_random([5])
    g = L.gaussian_random([5], seed=9)
    ops = main.global_block().ops
    assert ops[0].attr("seed") == 123 and ops[1].attr("seed") == 9
    first = _run({}, [u, g])
    again = _run({}, [u, g])  # a fresh executor: the same seed gives the same values
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_create_tensor(fresh):
    main, _, _ = fresh
    t = L.create_tensor("int32", name="t", persistable=True)
    assert t.name == "t" and t.persistable and t.dtype_name == "int32"
    assert main.global_block().var("t") is t


# -- casting and copying --------------------------------------------------------------------------


def test_cast_layer(fresh):
    main, _, _ = fresh
    x = L.data("x", [4])
    out = L.cast(x, "int32")
    assert out.shape == (-1, 4) and out.dtype_name == "int32"
    op = main.global_block().ops[0]
    assert (op.attr("in_dtype"), op.attr("out_dtype")) == (x.dtype, out.dtype)
    xv = np.array([[-1.7, -0.2, 0.9, 2.5]], np.float32)
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_array_equal(got, [[-1, 0, 0, 2]])


def test_assign_layer_from_variable(fresh):
    x = L.data("x", [3])
    out = L.assign(x)
    target = L.create_tensor("float32")
    assert L.assign(x, output=target) is target
    assert out.shape == target.shape == (-1, 3)
    xv = _rand((2, 3), 14)
    got, got_t = _run({"x": xv}, [out, target])
    np.testing.assert_array_equal(got, xv)
    np.testing.assert_array_equal(got_t, xv)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_assign_layer_from_numpy(fresh, dtype):
    main, _, _ = fresh
    arr = (np.arange(6).reshape(2, 3) - 2).astype(dtype)
    out = L.assign(arr)
    assert out.shape == (2, 3) and out.dtype_name == dtype
    assert _ops(main) == ["assign_value"]
    (got,) = _run({}, [out])
    assert got.dtype == arr.dtype
    np.testing.assert_array_equal(got, arr)


def test_assign_layer_rejects_unsupported_input(fresh):
    with pytest.raises(OpAttrError, match="float32 or int32"):
        L.assign(np.zeros(3, np.float64))
    with pytest.raises(OpAttrError, match="Variable or a numpy array"):
        L.assign([1.0, 2.0])


# -- reshaping -----------------------------------------------------------------------------------


def test_reshape_layer(fresh):
    main, _, _ = fresh
    x = L.data("x", [3, 4])
    out = L.reshape(x, [0, -1], act="relu")
    assert out.shape == (-1, 12) and _ops(main) == ["reshape2", "relu"]
    xshape = main.global_block().ops[0].output("XShape")[0]
    assert main.global_block().var(xshape).shape == (0, -1, 3, 4)
    xv = _rand((2, 3, 4), 15)
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_array_equal(got, np.maximum(xv.reshape(2, 12), 0))
    with pytest.raises(ShapeError, match="actual_shape"):
        L.reshape(x, [0, 12], actual_shape=x)


def test_transpose_layer(fresh):
    x = L.data("x", [3, 4])
    out = L.transpose(x, perm=[2, 0, 1])
    assert out.shape == (4, -1, 3)
    xv = _rand((2, 3, 4), 16)
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_array_equal(got, xv.transpose(2, 0, 1))


def test_concat_layer(fresh):
    a = L.data("a", [2])
    b = L.data("b", [3])
    out = L.concat([a, b], axis=-1)
    assert out.shape == (-1, 5)
    av, bv = _rand((4, 2), 17), _rand((4, 3), 18)
    (got,) = _run({"a": av, "b": bv}, [out])
    np.testing.assert_array_equal(got, np.hstack([av, bv]))


@pytest.mark.parametrize(("arg", "want"), [(3, [2, 2, 2]), ([1, -1, 2], [1, 3, 2]),
                                           ((4, 2), [4, 2])])
def test_split_layer(fresh, arg, want):
    x = L.data("x", [6])
    outs = L.split(x, arg, dim=-1)
    assert [o.shape for o in outs] == [(-1, n) for n in want]
    xv = _rand((2, 6), 19)
    got = _run({"x": xv}, outs)
    for g, r in zip(got, np.split(xv, np.cumsum(want)[:-1], axis=1)):
        np.testing.assert_array_equal(g, r)


def test_slice_layer(fresh):
    x = L.data("x", [4, 5])
    out = L.slice(x, axes=[1, 2], starts=[-3, 1], ends=[100, -1])
    assert out.shape == (-1, 3, 3)
    xv = _rand((2, 4, 5), 20)
    (got,) = _run({"x": xv}, [out])
    np.testing.assert_array_equal(got, xv[:, 1:4, 1:4])


def test_squeeze_unsqueeze_flatten_layers(fresh):
    x = L.data("x", [1, 3, 1])
    sq = L.squeeze(x, axes=[1, -1])
    un = L.unsqueeze(sq, axes=[0, -1])
    fl = L.flatten(x, axis=2)
    assert sq.shape == (-1, 3) and un.shape == (1, -1, 3, 1) and fl.shape == (-1, 3)
    xv = _rand((2, 1, 3, 1), 21)
    got_sq, got_un, got_fl = _run({"x": xv}, [sq, un, fl])
    np.testing.assert_array_equal(got_sq, xv.reshape(2, 3))
    np.testing.assert_array_equal(got_un, xv.reshape(1, 2, 3, 1))
    np.testing.assert_array_equal(got_fl, xv.reshape(2, 3))
