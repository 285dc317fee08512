"""Tensor ops (cast, assign, reshape, transpose, concat, split, slice, squeeze,
unsqueeze, flatten), constant and random creation, and feed/fetch through
Executor.run, against references written with index arithmetic."""

import math

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import OpAttrError, ShapeError
from fluid_hw.ir import dtypes
from tests.op_harness import build_op, run_op

VT = dtypes.VarType


def _rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _out_var(prog, outs, slot="Out", i=0):
    return prog.global_block().var(outs[slot][i])


# -- cast / assign ---------------------------------------------------------------------


@pytest.mark.parametrize(("src", "dst"), [("float32", "int32"), ("float32", "float64"),
                                          ("float64", "int64"), ("int32", "float32"),
                                          ("float32", "bool"), ("int64", "int8")])
def test_cast_matches_elementwise_conversion(src, dst):
    x = (np.random.default_rng(1).uniform(-50, 50, (3, 7))).astype(src)
    attrs = {"in_dtype": dtypes.to_enum(src), "out_dtype": dtypes.to_enum(dst)}
    out = run_op("cast", {"X": x}, attrs)["Out"]
    conv = {"bool": bool, "float32": float, "float64": float}.get(dst, math.trunc)
    ref = np.array([conv(v.item()) for v in x.ravel()], dtype=dst).reshape(x.shape)
    assert out.dtype == np.dtype(dst) and out.shape == x.shape
    np.testing.assert_array_equal(out, ref)


def test_cast_attr_errors():
    x = np.zeros(3, "f4")
    with pytest.raises(OpAttrError, match=r"op cast.*out_dtype.*allowed"):
        build_op("cast", {"X": x}, {"in_dtype": VT.FP32, "out_dtype": 99})
    with pytest.raises(OpAttrError, match=r"op cast.*required attribute"):
        build_op("cast", {"X": x}, {"in_dtype": VT.FP32})
    with pytest.raises(ShapeError, match=r"op cast.*in_dtype is int32.*float32"):
        build_op("cast", {"X": x}, {"in_dtype": VT.INT32, "out_dtype": VT.FP64})


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_assign_copies(dtype):
    x = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    out = run_op("assign", {"X": x})["Out"]
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize(("dtype", "key", "values"), [
    (VT.FP32, "fp32_values", [0.5, -1.25, 3.0, 4.0, 5.5, 6.0]),
    (VT.INT32, "int32_values", [1, -2, 3, 4, 5, 6]),
])
def test_assign_value_builds_the_constant(dtype, key, values):
    out = run_op("assign_value", {}, {"shape": [2, 3], "dtype": dtype, key: values})["Out"]
    assert out.dtype == dtypes.to_numpy(dtype) and out.shape == (2, 3)
    assert out.ravel().tolist() == values


def test_assign_value_count_must_match_shape():
    with pytest.raises(ShapeError, match=r"op assign_value.*5 values"):
        build_op("assign_value", {}, {"shape": [2, 3], "dtype": VT.FP32,
                                      "fp32_values": [1.0] * 5})


# -- reshape2 ----------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "want"), [
    ([0, -1, 5], (2, 12, 5)),
    ([-1], (120,)),
    ([4, 0, 10], (4, 3, 10)),  # 0 copies X's dim 1
    ([5, 4, 3, 2], (5, 4, 3, 2)),
    ([0, 0, -1], (2, 3, 20)),
    ([1, -1, 1, 1], (1, 120, 1, 1)),
])
def test_reshape2_keeps_element_order(shape, want):
    x = _rand((2, 3, 4, 5), 2)
    res = run_op("reshape2", {"X": x}, {"shape": shape}, outputs=["Out", "XShape"])
    out = res["Out"]
    assert out.shape == want and out.dtype == x.dtype
    flat = [x[i, j, k, m] for i in range(2) for j in range(3) for k in range(4) for m in range(5)]
    assert out.ravel().tolist() == flat
    assert res["XShape"].shape == (0, 2, 3, 4, 5) and res["XShape"].dtype == x.dtype


@pytest.mark.parametrize(("xshape", "shape", "want"), [
    ((-1, 3, 4), [0, -1], (-1, 12)),  # the unknown dim is copied: -1 still inferable
    ((-1, 3, 4), [-1, 6], (-1, 6)),
    ((-1, 3, 4), [0, 12], (-1, 12)),
    ((-1, 3, 4), [3, -1], (3, -1)),
])
def test_reshape2_infers_with_unknown_batch(xshape, shape, want):
    x = np.zeros([2 if d == -1 else d for d in xshape], "f4")
    prog, _, outs = build_op("reshape2", {"X": x}, {"shape": shape}, batch_dims=True,
                             outputs=["Out", "XShape"])
    assert _out_var(prog, outs).shape == want
    assert _out_var(prog, outs, "XShape").shape == (0, *xshape)


@pytest.mark.parametrize(("shape", "match"), [
    ([-1, -1], "more than one -1"),
    ([7, -1], "cannot infer"),
    ([0, 0, 0, 0, 0], "rank 4"),
    ([2, 3, 4], "elements"),
    ([2, -2, 3], "-2"),
])
def test_reshape2_shape_errors_name_the_op(shape, match):
    # a dim below -1 is out of the attribute's declared range (OpAttrError)
    with pytest.raises((ShapeError, OpAttrError), match=match) as ei:
        build_op("reshape2", {"X": np.zeros((2, 3, 4, 5), "f4")}, {"shape": shape})
    assert "op reshape2" in str(ei.value)


# -- transpose2 --------------------------------------------------------------------------


@pytest.mark.parametrize("perm", [[1, 0], [2, 0, 1], [0, 2, 1], [3, 1, 0, 2]])
def test_transpose2_moves_every_element(perm):
    shape = (2, 3, 4, 5)[: len(perm)]
    x = _rand(shape, 3)
    res = run_op("transpose2", {"X": x}, {"axis": perm}, outputs=["Out", "XShape"])
    out = res["Out"]
    assert out.shape == tuple(shape[p] for p in perm)
    for idx in np.ndindex(*out.shape):
        src = [0] * len(perm)
        for i, p in enumerate(perm):
            src[p] = idx[i]
        assert out[idx] == x[tuple(src)]
    assert res["XShape"].shape == (0, *shape)


@pytest.mark.parametrize("perm", [[0, 1], [0, 0, 1], [0, 1, 3], [-1, 0, 1]])
def test_transpose2_rejects_non_permutations(perm):
    with pytest.raises(ShapeError, match=r"op transpose2.*permutation"):
        build_op("transpose2", {"X": np.zeros((2, 3, 4), "f4")}, {"axis": perm})


# -- concat / split -----------------------------------------------------------------------


@pytest.mark.parametrize(("axis", "sizes"), [(0, [1, 3, 2]), (1, [2, 1, 4]), (-1, [3, 1]),
                                             (-3, [2, 2])])
def test_concat_matches_slice_by_slice_copy(axis, sizes):
    base = [2, 3, 5]
    ax = axis % 3
    xs = []
    for i, n in enumerate(sizes):
        s = list(base)
        s[ax] = n
        xs.append(_rand(s, 10 + i))
    out = run_op("concat", {"X": xs}, {"axis": axis})["Out"]
    want = list(base)
    want[ax] = sum(sizes)
    ref = np.zeros(want, np.float32)
    start = 0
    for x, n in zip(xs, sizes):
        index = [slice(None)] * 3
        index[ax] = slice(start, start + n)
        ref[tuple(index)] = x
        start += n
    assert out.shape == tuple(want)
    np.testing.assert_array_equal(out, ref)


def test_concat_with_unknown_dims():
    prog, _, outs = build_op("concat", {"X": [np.zeros((2, 3), "f4"), np.zeros((2, 4), "f4")]},
                             {"axis": 1}, batch_dims=True)
    assert _out_var(prog, outs).shape == (-1, 7)
    prog, _, outs = build_op("concat", {"X": [np.zeros((2, 3), "f4"), np.zeros((5, 3), "f4")]},
                             {"axis": 0}, batch_dims=True)
    assert _out_var(prog, outs).shape == (-1, 3)


@pytest.mark.parametrize(("shapes", "attrs", "match"), [
    ([(2, 3), (3, 3)], {"axis": 1}, "dim 0"),
    ([(2, 3), (2, 3, 1)], {"axis": 0}, "rank"),
    ([(2, 3), (2, 3)], {"axis": 2}, "out of range"),
])
def test_concat_shape_errors_name_the_op(shapes, attrs, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("concat", {"X": [np.zeros(s, "f4") for s in shapes]}, attrs)
    assert "op concat" in str(ei.value)


@pytest.mark.parametrize(("attrs", "sizes"), [
    ({"num": 3, "axis": 1}, [2, 2, 2]),
    ({"sections": [1, -1, 2], "axis": -2}, [1, 3, 2]),
    ({"sections": [4, 1], "axis": 0}, [4, 1]),
    ({"num": 1, "axis": -1}, [7]),
])
def test_split_pieces_match_offsets(attrs, sizes):
    shape = {1: (5, 6, 7), -2: (5, 6, 7), 0: (5, 6, 7), -1: (5, 6, 7)}[attrs["axis"]]
    x = _rand(shape, 4)
    outs = run_op("split", {"X": x}, attrs, output_counts={"Out": len(sizes)})["Out"]
    outs = outs if isinstance(outs, list) else [outs]
    ax = attrs["axis"] % 3
    start = 0
    for piece, n in zip(outs, sizes):
        want = list(shape)
        want[ax] = n
        assert piece.shape == tuple(want)
        for idx in np.ndindex(*piece.shape):
            src = list(idx)
            src[ax] += start
            assert piece[idx] == x[tuple(src)]
        start += n


@pytest.mark.parametrize(("attrs", "n_out", "match"), [
    ({"num": 4, "axis": 1}, 4, "equal pieces"),
    ({"num": 2, "axis": 1}, 3, "3 variables"),
    ({"sections": [2, 2], "axis": 1}, 2, "add up to 4"),
    ({"sections": [-1, -1, 2], "axis": 1}, 3, "at most one -1"),
    ({"sections": [7, -1], "axis": 1}, 2, "add up to 7"),
    ({"num": 2, "sections": [3, 3], "axis": 1}, 2, "exactly one"),
    ({"axis": 1}, 1, "exactly one"),
])
def test_split_shape_errors_name_the_op(attrs, n_out, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("split", {"X": np.zeros((2, 6), "f4")}, attrs, output_counts={"Out": n_out})
    assert "op split" in str(ei.value)


# -- slice -----------------------------------------------------------------------------------


def _slice_ref(x, axes, starts, ends, decrease):
    """Index arithmetic: each bound counts from the end when negative, then is clamped
    into [0, dim]; an empty range gives an empty dim."""
    out = x
    for a, s, e in zip(axes, starts, ends):
        a %= x.ndim
        n = x.shape[a]
        lo = s + n if s < 0 else s
        hi = e + n if e < 0 else e
        lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
        out = np.take(out, list(range(lo, hi)), axis=a)
    if decrease:
        drop = {d % x.ndim for d in decrease}
        out = out.reshape([n for i, n in enumerate(out.shape) if i not in drop] or [1])
    return out


# (axes, starts, ends, decrease_axis, expected shape) for Input of shape (3, 4, 5)
_SLICES = [
    ([0], [1], [3], [], (2, 4, 5)),
    ([1, 2], [-3, 1], [-1, 100], [], (3, 2, 4)),  # negative and clamped bounds
    ([2], [-100], [2], [], (3, 4, 2)),
    ([0, 2], [2, 4], [3, 5], [0, 2], (4,)),  # both sliced dims removed
    ([0, 1, 2], [0, 1, 2], [1, 2, 3], [0, 1, 2], (1,)),  # all removed: shape [1]
    ([1], [3], [1], [], (3, 0, 5)),  # start past end: empty
    ([-1], [1], [4], [], (3, 4, 3)),
]


@pytest.mark.parametrize(("axes", "starts", "ends", "decrease", "want"), _SLICES)
def test_slice_matches_index_arithmetic(axes, starts, ends, decrease, want):
    x = _rand((3, 4, 5), 5)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}
    out = run_op("slice", {"Input": x}, attrs)["Out"]
    assert out.shape == want
    np.testing.assert_array_equal(out, _slice_ref(x, axes, starts, ends, decrease))


def test_slice_keeps_unknown_dims_unknown():
    prog, _, outs = build_op("slice", {"Input": np.zeros((2, 6), "f4")},
                             {"axes": [1], "starts": [1], "ends": [-1]}, batch_dims=True)
    assert _out_var(prog, outs).shape == (-1, 4)


@pytest.mark.parametrize(("attrs", "match"), [
    ({"axes": [0, 1], "starts": [0], "ends": [1, 1]}, "same length"),
    ({"axes": [3], "starts": [0], "ends": [1]}, "out of range"),
    ({"axes": [1, 1], "starts": [0, 0], "ends": [1, 1]}, "twice"),
    ({"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [1]}, "must be 1"),
])
def test_slice_shape_errors_name_the_op(attrs, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("slice", {"Input": np.zeros((3, 4, 5), "f4")}, attrs)
    assert "op slice" in str(ei.value)


# -- squeeze2 / unsqueeze2 / flatten2 ---------------------------------------------------------


@pytest.mark.parametrize(("axes", "want"), [([], (3, 5)), ([0], (3, 1, 5)), ([-2], (1, 3, 5)),
                                            ([0, 2], (3, 5)), ([2, -4], (3, 5))])
def test_squeeze2(axes, want):
    x = _rand((1, 3, 1, 5), 6)
    res = run_op("squeeze2", {"X": x}, {"axes": axes}, outputs=["Out", "XShape"])
    assert res["Out"].shape == want and res["XShape"].shape == (0, 1, 3, 1, 5)
    np.testing.assert_array_equal(res["Out"].ravel(), x.ravel())


def test_squeeze2_of_all_ones_is_rank_0():
    out = run_op("squeeze2", {"X": np.full((1, 1), 4.0, np.float32)}, {"axes": []})["Out"]
    assert out.shape == () and out == 4.0


@pytest.mark.parametrize(("axes", "match"), [([1], "size 3"), ([4], "out of range")])
def test_squeeze2_shape_errors_name_the_op(axes, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("squeeze2", {"X": np.zeros((1, 3, 1, 5), "f4")}, {"axes": axes})
    assert "op squeeze2" in str(ei.value)


@pytest.mark.parametrize(("axes", "want"), [
    ([0], (1, 3, 4)), ([-1], (3, 4, 1)), ([1], (3, 1, 4)),
    ([0, -1, 2], (1, 3, 1, 4, 1)),  # each axis indexes the shape built so far
    ([1, 1], (3, 1, 1, 4)), ([-3], (1, 3, 4)),
])
def test_unsqueeze2(axes, want):
    x = _rand((3, 4), 7)
    res = run_op("unsqueeze2", {"X": x}, {"axes": axes}, outputs=["Out", "XShape"])
    assert res["Out"].shape == want and res["XShape"].shape == (0, 3, 4)
    np.testing.assert_array_equal(res["Out"].ravel(), x.ravel())


@pytest.mark.parametrize("axes", [[3], [-4]])
def test_unsqueeze2_axis_out_of_range_names_the_op(axes):
    with pytest.raises(ShapeError, match=r"op unsqueeze2.*out of range"):
        build_op("unsqueeze2", {"X": np.zeros((3, 4), "f4")}, {"axes": axes})


@pytest.mark.parametrize(("axis", "want"), [(0, (1, 120)), (1, (2, 60)), (2, (6, 20)),
                                            (4, (120, 1))])
def test_flatten2(axis, want):
    x = _rand((2, 3, 4, 5), 8)
    res = run_op("flatten2", {"X": x}, {"axis": axis}, outputs=["Out", "XShape"])
    assert res["Out"].shape == want and res["XShape"].shape == (0, 2, 3, 4, 5)
    rows = math.prod(x.shape[:axis])
    for r in range(rows):
        np.testing.assert_array_equal(res["Out"][r], x.ravel()[r * want[1]:(r + 1) * want[1]])


def test_flatten2_with_unknown_batch_and_bad_axis():
    prog, _, outs = build_op("flatten2", {"X": np.zeros((2, 3, 4), "f4")}, {"axis": 1},
                             batch_dims=True)
    assert _out_var(prog, outs).shape == (-1, 12)
    with pytest.raises(ShapeError, match=r"op flatten2.*axis 4"):
        build_op("flatten2", {"X": np.zeros((2, 3, 4), "f4")}, {"axis": 4})


# -- fill_constant / uniform_random / gaussian_random ------------------------------------------


@pytest.mark.parametrize(("dtype", "value"), [(VT.FP32, 0.5), (VT.INT64, 3.0), (VT.FP64, -2.25),
                                              (VT.BOOL, 1.0)])
def test_fill_constant(dtype, value):
    out = run_op("fill_constant", {}, {"shape": [2, 3, 1], "dtype": dtype, "value": value})["Out"]
    assert out.shape == (2, 3, 1) and out.dtype == dtypes.to_numpy(dtype)
    assert all(v == dtypes.to_numpy(dtype).type(value) for v in out.ravel())


@pytest.mark.parametrize("op", ["fill_constant", "uniform_random", "gaussian_random"])
def test_creation_ops_reject_negative_shape(op):
    with pytest.raises(OpAttrError, match=rf"op {op}.*'shape' = \[2, -1\].*shape must be >= 0"):
        build_op(op, {}, {"shape": [2, -1], "dtype": VT.FP32})


def _draw(op, attrs):
    return run_op(op, {}, attrs)["Out"]


def test_uniform_random_range_and_moments():
    out = _draw("uniform_random", {"shape": [200, 100], "min": -2.0, "max": 3.0, "seed": 11})
    assert out.shape == (200, 100) and out.dtype == np.float32
    assert out.min() >= -2.0 and out.max() < 3.0
    assert abs(out.mean() - 0.5) < 0.05 and abs(out.var() - 25 / 12) < 0.1


def test_gaussian_random_moments():
    attrs = {"shape": [20000], "mean": 1.5, "std": 0.5, "seed": 3, "dtype": VT.FP64}
    out = _draw("gaussian_random", attrs)
    assert out.dtype == np.float64
    assert abs(out.mean() - 1.5) < 0.02 and abs(out.std() - 0.5) < 0.02


@pytest.mark.parametrize("op", ["uniform_random", "gaussian_random"])
def test_random_seed_determinism(op):
    a = _draw(op, {"shape": [50], "seed": 5})
    b = _draw(op, {"shape": [50], "seed": 5})
    c = _draw(op, {"shape": [50], "seed": 6})
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("op", ["uniform_random", "gaussian_random"])
def test_random_ops_with_one_seed_draw_different_streams(op):
    prog = fluid.Program()
    b = prog.global_block()
    names = []
    for i in range(2):
        v = b.create_var(name=f"r{i}")
        b.append_op(op, {}, {"Out": v}, {"shape": [40], "seed": 9})
        names.append(v.name)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        r0, r1 = exe.run(prog, fetch_list=names)
        r0_again, _ = exe.run(prog, fetch_list=names)
    assert not np.array_equal(r0, r1)
    assert not np.array_equal(r0, r0_again)  # each run draws afresh


# -- feed / fetch through Executor.run -----------------------------------------------------------


def test_feed_and_fetch_through_executor_run():
    prog = fluid.Program()
    b = prog.global_block()
    b.create_var(name="x", shape=[-1, 3])
    y = b.create_var(name="y")
    b.append_op("scale", {"X": "x"}, {"Out": y}, {"scale": 2.0, "bias": 1.0})
    z = b.create_var(name="z")
    b.append_op("reduce_sum", {"X": y}, {"Out": z}, {"dim": [1]})
    exe = fluid.Executor(fluid.CPUPlace())
    x = _rand((4, 3), 9)
    with fluid.scope_guard(fluid.Scope()):
        yv, zv, xv = exe.run(prog, feed={"x": x}, fetch_list=[y, "z", "x"])
        t = fluid.create_lod_tensor(x, [[1, 3]], fluid.CPUPlace())
        (lod_y,) = exe.run(prog, feed={"x": t}, fetch_list=[y], return_numpy=False)
    np.testing.assert_array_equal(xv, x)
    np.testing.assert_allclose(yv, 2 * x.astype("f8") + 1, rtol=1e-6)
    np.testing.assert_allclose(zv, [sum(2 * float(v) + 1 for v in row) for row in x], rtol=1e-5)
    assert lod_y.lod() == [[0, 1, 4]]  # scale keeps the LoD
