"""Reference tests of cross_entropy, softmax_with_cross_entropy, accuracy, top_k, arg_max.

The references loop over rows in plain Python/float64, independent of the kernels.
"""

import math

import numpy as np
import pytest

from fluid_hw.errors import ExecutionError, OpAttrError, ShapeError
from tests.op_harness import build_op, run_op

RNG = np.random.default_rng(99)


def _probs(*shape):
    e = np.exp(RNG.standard_normal(shape))
    return (e / e.sum(axis=-1, keepdims=True)).astype("float32")


def _rows(a):
    """Iterate over the rows (all axes but the last) of ``a``."""
    return np.ndindex(*a.shape[:-1])


# -- cross_entropy -----------------------------------------------------------


@pytest.mark.parametrize("shape", [(6, 4), (2, 3, 5)])
def test_cross_entropy_hard(shape):
    x = _probs(*shape)
    label = RNG.integers(0, shape[-1], (*shape[:-1], 1)).astype("int64")
    label.reshape(-1)[1] = -100  # ignored
    y = run_op("cross_entropy", {"X": x, "Label": label})["Y"]
    assert y.dtype == np.float32 and y.shape == (*shape[:-1], 1)
    for r in _rows(x):
        lab = int(label[r][0])
        want = 0.0 if lab == -100 else -math.log(float(x[r][lab]))
        assert y[r][0] == pytest.approx(want, rel=1e-5)


def test_cross_entropy_custom_ignore_index_and_zero_probability():
    x = np.array([[0.0, 1.0], [0.5, 0.5], [0.2, 0.8]], "float32")
    label = np.array([[0], [1], [3]], "int64")
    y = run_op("cross_entropy", {"X": x, "Label": label}, {"ignore_index": 3})["Y"]
    # log(0) is -1e20 in Fluid (TolerableValue), not -inf
    np.testing.assert_allclose(y[:, 0], [1e20, -math.log(0.5), 0.0], rtol=1e-6)


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)])
def test_cross_entropy_soft(shape):
    x, label = _probs(*shape), _probs(*shape)
    y = run_op("cross_entropy", {"X": x, "Label": label}, {"soft_label": True})["Y"]
    for r in _rows(x):
        want = -sum(float(label[r][c]) * math.log(float(x[r][c])) for c in range(shape[-1]))
        assert y[r][0] == pytest.approx(want, rel=1e-5)


def test_cross_entropy_label_out_of_range():
    with pytest.raises(ExecutionError) as info:
        run_op("cross_entropy", {"X": _probs(3, 4), "Label": np.array([[0], [4], [1]], "int64")})
    assert "cross_entropy" in str(info.value) and "4" in str(info.value)


@pytest.mark.parametrize("label,attrs,words", [
    (np.zeros((3, 2), "int64"), {}, ["Label [3, 2]", "X [3, 4]", "expected 1"]),
    (np.zeros((3, 1), "int32"), {}, ["int64", "int32"]),
    (np.zeros((3, 1), "float32"), {"soft_label": True}, ["Label [3, 1]", "expected 4"]),
    (np.zeros((3,), "int64"), {}, ["same rank"]),
])
def test_cross_entropy_inference_errors(label, attrs, words):
    with pytest.raises(ShapeError) as info:
        build_op("cross_entropy", {"X": _probs(3, 4), "Label": label}, attrs)
    assert "cross_entropy" in str(info.value)
    for w in words:
        assert w in str(info.value)


# -- softmax_with_cross_entropy ----------------------------------------------


def _ref_softmax_rows(z):
    """Softmax and -log softmax of one row, float64, by the definition."""
    m = max(z)
    ex = [math.exp(v - m) for v in z]
    s = sum(ex)
    return [e / s for e in ex], [-(v - m - math.log(s)) for v in z]


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("shape,axis", [((5, 4), -1), ((2, 4, 3), 1), ((2, 3, 4), -1),
                                        ((3, 2, 4), 0)])
def test_softmax_with_cross_entropy(soft, shape, axis):
    logits = (RNG.standard_normal(shape) * 3).astype("float32")
    ax = axis % len(shape)
    lshape = list(shape)
    if soft:
        label = np.moveaxis(_probs(*np.moveaxis(logits, ax, -1).shape), -1, ax)
    else:
        lshape[ax] = 1
        label = RNG.integers(0, shape[ax], lshape).astype("int64")
        label.reshape(-1)[0] = -100
    res = run_op("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
                 {"soft_label": soft, "axis": axis})
    lshape[ax] = 1
    assert res["Loss"].shape == tuple(lshape) and res["Softmax"].shape == shape
    z, lab = np.moveaxis(logits, ax, -1), np.moveaxis(label, ax, -1)
    loss, sm = np.moveaxis(res["Loss"], ax, -1), np.moveaxis(res["Softmax"], ax, -1)
    for r in _rows(z):
        p, nlp = _ref_softmax_rows([float(v) for v in z[r]])
        np.testing.assert_allclose(sm[r], p, rtol=1e-5, atol=1e-7)
        if soft:
            want = sum(float(lab[r][c]) * nlp[c] for c in range(len(p)))
        else:
            want = 0.0 if lab[r][0] == -100 else nlp[int(lab[r][0])]
        assert loss[r][0] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_softmax_with_cross_entropy_large_logits_stay_finite():
    logits = np.array([[1000.0, 0.0], [0.0, 1000.0], [-1000.0, 1000.0]], "float32")
    label = np.array([[1], [1], [0]], "int64")
    res = run_op("softmax_with_cross_entropy", {"Logits": logits, "Label": label})
    np.testing.assert_allclose(res["Loss"][:, 0], [1000.0, 0.0, 2000.0], rtol=1e-6)
    np.testing.assert_allclose(res["Softmax"], [[1, 0], [0, 1], [0, 1]], atol=1e-7)


def test_softmax_with_cross_entropy_errors():
    with pytest.raises(OpAttrError, match="axis 2 is out of range"):
        build_op("softmax_with_cross_entropy",
                 {"Logits": _probs(3, 4), "Label": np.zeros((3, 1), "int64")}, {"axis": 2})
    with pytest.raises(ShapeError, match="Label \\[3, 4\\] does not fit Logits \\[3, 4\\]"):
        build_op("softmax_with_cross_entropy",
                 {"Logits": _probs(3, 4), "Label": np.zeros((3, 4), "int64")})
    with pytest.raises(ExecutionError, match=r"softmax_with_cross_entropy.*Label"):
        run_op("softmax_with_cross_entropy",
               {"Logits": _probs(2, 4), "Label": np.array([[1], [-3]], "int64")})


# -- accuracy ----------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_accuracy(k):
    n = 7
    indices = np.stack([RNG.permutation(5)[:k] for _ in range(n)]).astype("int64")
    values = RNG.standard_normal((n, k)).astype("float32")
    label = RNG.integers(0, 5, (n, 1)).astype("int64")
    res = run_op("accuracy", {"Out": values, "Indices": indices, "Label": label})
    correct = sum(1 for i in range(n) if int(label[i, 0]) in indices[i].tolist())
    assert res["Correct"].dtype == np.int32 and res["Correct"].tolist() == [correct]
    assert res["Total"].dtype == np.int32 and res["Total"].tolist() == [n]
    assert res["Accuracy"].dtype == np.float32
    assert res["Accuracy"][0] == pytest.approx(correct / n)


def test_accuracy_shape_error():
    with pytest.raises(ShapeError, match=r"accuracy.*different batch sizes"):
        build_op("accuracy", {"Out": np.zeros((4, 1), "float32"),
                              "Indices": np.zeros((4, 1), "int64"),
                              "Label": np.zeros((3, 1), "int64")})


# -- top_k -------------------------------------------------------------------


def _ref_topk(row, k):
    order = sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]
    return [row[j] for j in order], order


@pytest.mark.parametrize("k", [1, 3, 6])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_top_k_with_ties(k, dtype):
    x = RNG.integers(0, 4, (2, 3, 6)).astype(dtype)  # many ties
    res = run_op("top_k", {"X": x}, {"k": k})
    assert res["Out"].dtype == np.dtype(dtype) and res["Indices"].dtype == np.int64
    for r in _rows(x):
        vals, idx = _ref_topk(x[r].tolist(), k)
        assert res["Out"][r].tolist() == vals
        assert res["Indices"][r].tolist() == idx


def test_top_k_explicit_ties():
    x = np.array([[1, 3, 3, 2, 3, 0]], "float32")
    res = run_op("top_k", {"X": x}, {"k": 4})
    assert res["Indices"].tolist() == [[1, 2, 4, 3]]
    assert res["Out"].tolist() == [[3, 3, 3, 2]]


@pytest.mark.parametrize("k,err,word", [(7, ShapeError, "k=7 is larger"),
                                        (0, OpAttrError, "k must be >= 1")])
def test_top_k_errors(k, err, word):
    with pytest.raises(err, match=word) as info:
        build_op("top_k", {"X": np.zeros((2, 6), "float32")}, {"k": k})
    assert "top_k" in str(info.value)


# -- arg_max -----------------------------------------------------------------


def _ref_argmax(x, axis):
    moved = np.moveaxis(x, axis, -1)
    out = np.zeros(moved.shape[:-1], np.int64)
    for r in _rows(moved):
        row = moved[r].tolist()
        out[r] = row.index(max(row))  # the first among equals
    return out


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_max(axis, keepdims):
    x = RNG.integers(0, 3, (3, 4, 5)).astype("float32")  # ties
    out = run_op("arg_max", {"X": x}, {"axis": axis, "keepdims": keepdims})["Out"]
    want = _ref_argmax(x, axis % 3)
    if keepdims:
        want = np.expand_dims(want, axis % 3)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, want)


def test_arg_max_flatten_dtype_and_1d():
    x = np.array([[1, 5, 2], [5, 0, 1]], "float32")
    out = run_op("arg_max", {"X": x}, {"axis": 0, "flatten": True, "dtype": 2})["Out"]
    assert out.dtype == np.int32 and out.tolist() == [1]
    out = run_op("arg_max", {"X": np.array([3, 7, 7], "float32")}, {"axis": 0})["Out"]
    assert out.tolist() == [1]


def test_arg_max_errors():
    with pytest.raises(OpAttrError, match=r"arg_max.*axis 3 is out of range"):
        build_op("arg_max", {"X": np.zeros((2, 3), "float32")}, {"axis": 3})
    with pytest.raises(OpAttrError, match="dtype"):
        build_op("arg_max", {"X": np.zeros((2, 3), "float32")}, {"axis": 0, "dtype": 5})
