"""mul, matmul, scale, sum, mean and reduce_* against independent numpy references."""

import functools
import math

import numpy as np
import pytest

from fluid_hw.errors import OpAttrError, ShapeError
from tests.op_harness import build_op, run_op


def _rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- mul ---------------------------------------------------------------------------


@pytest.mark.parametrize(("xs", "ys", "xk", "yk", "spec", "want"), [
    ((3, 4), (4, 5), 1, 1, "ab,bc->ac", (3, 5)),
    ((2, 3, 4, 5), (4, 5, 6), 2, 2, "abcd,cde->abe", (2, 3, 6)),
    ((2, 4, 5), (4, 5, 2, 3), 1, 2, "abc,bcde->ade", (2, 2, 3)),
    ((2, 3, 7), (7, 2, 3), 2, 1, "abc,cde->abde", (2, 3, 2, 3)),
])
def test_mul_matches_einsum(xs, ys, xk, yk, spec, want):
    x, y = _rand(xs, 1), _rand(ys, 2)
    out = run_op("mul", {"X": x, "Y": y}, {"x_num_col_dims": xk, "y_num_col_dims": yk})["Out"]
    assert out.shape == want and out.dtype == np.float32
    np.testing.assert_allclose(out, np.einsum(spec, x.astype("f8"), y.astype("f8")),
                               rtol=1e-5, atol=1e-5)


def test_mul_with_flattened_y_rows():
    # X's trailing 4*5 columns meet Y's 20 rows
    x, y = _rand((3, 4, 5), 3), _rand((20, 2, 3), 4)
    out = run_op("mul", {"X": x, "Y": y}, {"x_num_col_dims": 1, "y_num_col_dims": 1})["Out"]
    ref = np.einsum("abc,bcde->ade", x.astype("f8"), y.reshape(4, 5, 2, 3).astype("f8"))
    assert out.shape == (3, 2, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("xs", "ys", "attrs", "match"), [
    ((3, 4), (5, 6), {}, "does not match"),
    ((3, 4), (4, 6), {"x_num_col_dims": 2}, "x_num_col_dims"),
    ((3, 4), (4, 6), {"y_num_col_dims": 2}, "y_num_col_dims"),
])
def test_mul_shape_errors_name_the_op(xs, ys, attrs, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("mul", {"X": np.zeros(xs, "f4"), "Y": np.zeros(ys, "f4")}, attrs)
    assert "op mul" in str(ei.value)


# -- matmul ------------------------------------------------------------------------


def _matmul_ref(x, y, tx, ty, alpha, want):
    """Fluid's matmul by hand: vectors become [1, K] / [K, 1] matrices, batch dims are
    walked one matrix at a time (flattened, so equal batch *sizes* pair up), and the
    result is laid out in the expected shape."""
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    xm = x.reshape(1, -1) if x.ndim == 1 else x
    ym = y.reshape(-1, 1) if y.ndim == 1 else y
    xs = xm.reshape(-1, *xm.shape[-2:])
    ys = ym.reshape(-1, *ym.shape[-2:])
    n = max(len(xs), len(ys))
    mats = []
    for b in range(n):
        a = xs[b if len(xs) > 1 else 0]
        c = ys[b if len(ys) > 1 else 0]
        a = a.T if tx else a
        c = c.T if ty else c
        m = np.zeros((a.shape[0], c.shape[1]))
        for i in range(a.shape[0]):
            for j in range(c.shape[1]):
                m[i, j] = alpha * sum(a[i, k] * c[k, j] for k in range(a.shape[1]))
        mats.append(m)
    return np.stack(mats).reshape(want)


# (X shape, Y shape, transpose_X, transpose_Y, expected Out shape)
_MATMUL = [
    ((3, 4), (4, 5), False, False, (3, 5)),
    ((4, 3), (4, 5), True, False, (3, 5)),
    ((3, 4), (5, 4), False, True, (3, 5)),
    ((4, 3), (5, 4), True, True, (3, 5)),
    ((2, 3, 4), (2, 4, 5), False, False, (2, 3, 5)),
    ((2, 3, 4), (4, 5), False, False, (2, 3, 5)),  # Y used for every batch
    ((3, 4), (2, 5, 4), False, True, (2, 3, 5)),  # X used for every batch
    ((2, 3, 4, 3), (2, 3, 4, 5), True, False, (2, 3, 3, 5)),
    ((2, 3, 3, 4), (6, 4, 5), False, False, (2, 3, 3, 5)),  # Fluid pairs flattened batches
    ((4,), (4, 5), False, False, (5,)),
    ((2, 3, 4), (4,), False, False, (2, 3)),
    ((4,), (2, 4, 5), False, False, (2, 5)),
    ((4,), (4,), False, False, (1,)),
    ((3,), (1, 5), True, False, (3, 5)),  # a transposed 1-D X is a column
]


@pytest.mark.parametrize(("xs", "ys", "tx", "ty", "want"), _MATMUL)
def test_matmul_matches_reference(xs, ys, tx, ty, want):
    x, y = _rand(xs, 5), _rand(ys, 6)
    attrs = {"transpose_X": tx, "transpose_Y": ty}
    out = run_op("matmul", {"X": x, "Y": y}, attrs)["Out"]
    assert out.shape == want and out.dtype == np.float32
    np.testing.assert_allclose(out, _matmul_ref(x, y, tx, ty, 1.0, want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_alpha_keeps_dtype(dtype):
    x, y = _rand((2, 3, 4), 7, dtype), _rand((2, 4, 3), 8, dtype)
    out = run_op("matmul", {"X": x, "Y": y}, {"alpha": 0.37})["Out"]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out, _matmul_ref(x, y, False, False, 0.37, (2, 3, 3)),
                               rtol=1e-5, atol=1e-6)


def test_matmul_infers_batch_dims_from_x():
    prog, _, outs = build_op("matmul", {"X": np.zeros((2, 3, 4), "f4"),
                                        "Y": np.zeros((4, 5), "f4")}, batch_dims=True)
    assert prog.global_block().var(outs["Out"][0]).shape == (-1, 3, 5)


@pytest.mark.parametrize(("xs", "ys", "attrs", "match"), [
    ((3, 4), (5, 6), {}, "4 columns.*5 rows"),
    ((3, 4), (3, 5), {"transpose_X": False}, "columns"),
    ((2, 3, 4), (3, 4, 5), {}, "batch dims"),
    ((4,), (3,), {}, "columns"),
])
def test_matmul_shape_errors_name_the_op(xs, ys, attrs, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("matmul", {"X": np.zeros(xs, "f4"), "Y": np.zeros(ys, "f4")}, attrs)
    assert "op matmul" in str(ei.value)


def test_matmul_attr_type_is_checked():
    with pytest.raises(OpAttrError, match=r"matmul.*transpose_X"):
        build_op("matmul", {"X": np.zeros((2, 2), "f4"), "Y": np.zeros((2, 2), "f4")},
                 {"transpose_X": "yes"})


# -- scale -------------------------------------------------------------------------


@pytest.mark.parametrize(("s", "b", "after"), [(2.5, 0.75, True), (2.5, 0.75, False),
                                                (-1.0, 0.0, True), (1.0, -3.0, False)])
def test_scale_matches_formula(s, b, after):
    x = _rand((3, 5, 2), 9)
    out = run_op("scale", {"X": x}, {"scale": s, "bias": b, "bias_after_scale": after})["Out"]
    x64 = x.astype("f8")
    ref = s * x64 + b if after else s * (x64 + b)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_scale_casts_scale_and_bias_to_integer_dtype():
    x = np.arange(-4, 5, dtype=np.int32).reshape(3, 3)
    out = run_op("scale", {"X": x}, {"scale": 2.7, "bias": 1.9})["Out"]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, x * 2 + 1)  # Fluid: static_cast<int>(2.7) == 2


def test_scale_attr_types_are_checked():
    with pytest.raises(OpAttrError, match=r"op scale.*bias_after_scale.*bool"):
        build_op("scale", {"X": np.zeros(3, "f4")}, {"bias_after_scale": "no"})
    with pytest.raises(OpAttrError, match=r"op scale.*unknown attribute 'sacle'"):
        build_op("scale", {"X": np.zeros(3, "f4")}, {"sacle": 2.0})


# -- sum / mean ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5])
def test_sum_adds_every_input(n):
    xs = [_rand((3, 4, 5), i) for i in range(n)]
    out = run_op("sum", {"X": xs})["Out"]
    ref = functools.reduce(lambda a, b: a + b, [x.astype("f8") for x in xs])
    assert out.dtype == np.float32 and out.shape == (3, 4, 5)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_sum_does_not_write_into_its_first_input():
    x = _rand((4,), 1)
    keep = x.copy()
    run_op("sum", {"X": [x, x]})
    np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize(("shapes", "dtypes", "match"), [
    ([(3, 4), (4, 3)], ["f4", "f4"], "same shape"),
    ([(3, 4), (3, 4, 1)], ["f4", "f4"], "same shape"),
    ([(3, 4), (3, 4)], ["f4", "f8"], "dtype"),
])
def test_sum_shape_errors_name_the_op(shapes, dtypes, match):
    xs = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("sum", {"X": xs})
    assert "op sum" in str(ei.value)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_mean_is_shape_1(shape):
    x = _rand(shape, 11)
    out = run_op("mean", {"X": x})["Out"]
    total = 0.0
    for v in x.ravel():
        total += float(v)
    assert out.shape == (1,) and out.dtype == np.float32
    np.testing.assert_allclose(out, [total / x.size], rtol=1e-5)


def test_mean_of_integers_is_rejected():
    with pytest.raises(ShapeError, match=r"op mean.*float"):
        build_op("mean", {"X": np.zeros(3, np.int32)})


# -- reductions ----------------------------------------------------------------------


def _reduce_ref(fn, x, axes, keep):
    """Move the reduced axes last, flatten them, and reduce each row with ``fn``."""
    rank = x.ndim
    axes = sorted({a % rank for a in axes})
    kept = [a for a in range(rank) if a not in axes]
    moved = np.transpose(x.astype(np.float64), kept + axes)
    rows = moved.reshape(math.prod(x.shape[a] for a in kept), -1)
    vals = np.array([fn(list(r)) for r in rows])
    if keep:
        shape = [1 if a in axes else x.shape[a] for a in range(rank)]
    else:
        shape = [x.shape[a] for a in kept] or [1]
    return vals.reshape(shape)


_REDUCERS = {"reduce_sum": sum, "reduce_mean": lambda r: sum(r) / len(r), "reduce_max": max}

# (dim, keep_dim, reduce_all, expected shape) for X of shape (2, 3, 4, 5)
_REDUCE_CASES = [
    ([0], False, False, (3, 4, 5)),
    ([1], False, False, (2, 4, 5)),
    ([-1], True, False, (2, 3, 4, 1)),
    ([-1, 0], True, False, (1, 3, 4, 1)),
    ([1, 3], False, False, (2, 4)),
    ([2, 2], False, False, (2, 3, 5)),  # a repeated axis counts once
    ([0, 1, 2, 3], False, False, (1,)),  # every axis named: shape [1]
    ([0], False, True, (1,)),  # reduce_all ignores dim
    ([0], True, True, (1, 1, 1, 1)),
]


@pytest.mark.parametrize("op", list(_REDUCERS))
@pytest.mark.parametrize(("dim", "keep", "all_", "want"), _REDUCE_CASES)
def test_reduce_matches_reference(op, dim, keep, all_, want):
    x = _rand((2, 3, 4, 5), 12)
    out = run_op(op, {"X": x}, {"dim": dim, "keep_dim": keep, "reduce_all": all_})["Out"]
    assert out.shape == want and out.dtype == np.float32
    axes = list(range(4)) if all_ else dim
    np.testing.assert_allclose(out, _reduce_ref(_REDUCERS[op], x, axes, keep),
                               rtol=1e-5, atol=1e-5)


def test_reduce_default_dim_is_0():
    x = _rand((3, 2), 13)
    out = run_op("reduce_sum", {"X": x})["Out"]
    np.testing.assert_allclose(out, _reduce_ref(sum, x, [0], False), rtol=1e-6)


def test_integer_reductions_keep_dtype_and_truncate_the_mean():
    x = np.array([[-7, 2, 1], [4, 4, 3]], np.int32)
    got = {op: run_op(op, {"X": x}, {"dim": [1]})["Out"] for op in _REDUCERS}
    assert all(v.dtype == np.int32 for v in got.values())
    np.testing.assert_array_equal(got["reduce_sum"], [-4, 11])
    np.testing.assert_array_equal(got["reduce_mean"], [-1, 3])  # -4/3 -> -1, 11/3 -> 3
    np.testing.assert_array_equal(got["reduce_max"], [2, 4])


@pytest.mark.parametrize("op", list(_REDUCERS))
def test_reduce_dim_out_of_range_names_the_op(op):
    with pytest.raises(ShapeError, match=f"op {op}.*dim") as ei:
        build_op(op, {"X": np.zeros((2, 3), "f4")}, {"dim": [2]})
    assert "out of range" in str(ei.value)
