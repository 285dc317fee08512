"""elementwise_* and activation ops against references written out element by element."""

import math

import numpy as np
import pytest

from fluid_hw.errors import ShapeError
from tests.op_harness import build_op, run_op


def _fluid_broadcast(f, x, y, axis):
    """Fluid's rule spelled out: the lower-rank operand's dims sit in the higher-rank
    one's from ``axis`` (-1: right-aligned); then every size-1 dim repeats."""
    rank = max(x.ndim, y.ndim)

    def pad(a):
        if a.ndim == rank:
            return a
        start = rank - a.ndim if axis == -1 else axis
        return a.reshape((1,) * start + a.shape + (1,) * (rank - start - a.ndim))

    xa, ya = pad(x), pad(y)
    shape = tuple(max(p, q) for p, q in zip(xa.shape, ya.shape))
    out = np.empty(shape, dtype=x.dtype)
    for idx in np.ndindex(*shape):
        xi = tuple(0 if n == 1 else i for i, n in zip(idx, xa.shape))
        yi = tuple(0 if n == 1 else i for i, n in zip(idx, ya.shape))
        out[idx] = f(xa[xi], ya[yi])
    return out


_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: a if a >= b else b,
    "min": lambda a, b: a if a <= b else b,
    "pow": lambda a, b: a ** b,
}

# (X shape, Y shape, axis, expected Out shape)
_SHAPES = [
    ((2, 3), (2, 3), -1, (2, 3)),
    ((2, 3, 4, 5), (3, 4), 1, (2, 3, 4, 5)),
    ((2, 3, 4, 5), (4, 5), -1, (2, 3, 4, 5)),
    ((2, 3, 4, 5), (5,), 3, (2, 3, 4, 5)),
    ((2, 3, 4), (1,), -1, (2, 3, 4)),
    ((3, 1, 5), (3, 4, 1), -1, (3, 4, 5)),  # size-1 dims on both sides
    ((2, 3, 5), (3, 1), 1, (2, 3, 5)),
    ((4, 5), (2, 3, 4, 5), -1, (2, 3, 4, 5)),  # Y of higher rank than X
    ((3,), (2, 3, 4), 1, (2, 3, 4)),
]


@pytest.mark.parametrize("op", list(_BINARY))
@pytest.mark.parametrize(("xs", "ys", "axis", "want"), _SHAPES)
def test_elementwise_matches_reference(op, xs, ys, axis, want):
    rng = np.random.default_rng(len(xs) * 10 + len(ys))
    x = rng.uniform(0.5, 2.0, xs).astype("float32")
    y = rng.uniform(-1.5, 1.5, ys).astype("float32")
    if op == "div":
        y = np.where(np.abs(y) < 0.25, np.float32(0.5), y)
    out = run_op(f"elementwise_{op}", {"X": x, "Y": y}, {"axis": axis})["Out"]
    assert out.shape == want and out.dtype == np.float32
    np.testing.assert_allclose(out, _fluid_broadcast(_BINARY[op], x, y, axis), rtol=1e-5)


def test_integer_division_truncates_toward_zero():
    x = np.array([[-7, 7, -8, 9], [5, -5, 0, 1]], np.int32)
    y = np.array([2, -2, 3, 4], np.int32)
    out = run_op("elementwise_div", {"X": x, "Y": y})["Out"]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(
        out, _fluid_broadcast(lambda a, b: math.trunc(int(a) / int(b)), x, y, -1))


@pytest.mark.parametrize(("xs", "ys", "attrs", "match"), [
    ((2, 3), (4,), {}, "broadcast"),
    ((2, 3, 4), (3,), {"axis": 2}, "out of range|broadcast"),
    ((2, 3, 4), (3, 4), {"axis": 5}, "out of range"),
])
def test_elementwise_shape_errors_name_the_op(xs, ys, attrs, match):
    with pytest.raises(ShapeError, match=match) as ei:
        build_op("elementwise_add", {"X": np.zeros(xs, "f4"), "Y": np.zeros(ys, "f4")}, attrs)
    assert "elementwise_add" in str(ei.value)


def test_elementwise_dtype_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"elementwise_mul.*dtype"):
        build_op("elementwise_mul", {"X": np.zeros(3, "f4"), "Y": np.zeros(3, "f8")})


# -- activations ------------------------------------------------------------------


def _sigmoid_ref(v):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.float64(v)))


_UNARY = {
    "relu": (lambda v, a: v if v > 0 else 0.0, (-3, 3)),
    "leaky_relu": (lambda v, a: v if v > 0 else a["alpha"] * v, (-3, 3)),
    "sigmoid": (lambda v, a: _sigmoid_ref(v), (-8, 8)),
    "tanh": (lambda v, a: math.tanh(v), (-4, 4)),
    "exp": (lambda v, a: math.exp(v), (-3, 3)),
    "log": (lambda v, a: math.log(v), (0.01, 5)),
    "sqrt": (lambda v, a: math.sqrt(v), (0.0, 5)),
    "abs": (lambda v, a: -v if v < 0 else v, (-3, 3)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", list(_UNARY))
def test_activation_matches_reference(op, dtype):
    f, (lo, hi) = _UNARY[op]
    attrs = {"alpha": 0.13} if op == "leaky_relu" else {}
    x = np.random.default_rng(3).uniform(lo, hi, (3, 5, 7)).astype(dtype)
    out = run_op(op, {"X": x}, attrs)["Out"]
    assert out.dtype == x.dtype and out.shape == x.shape
    ref = np.vectorize(lambda v: f(float(v), attrs or {"alpha": 0.02}))(x)
    np.testing.assert_allclose(out, ref, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-7)


def test_leaky_relu_default_alpha_is_002():
    x = np.array([-2.0, 0.5], np.float32)
    np.testing.assert_allclose(run_op("leaky_relu", {"X": x})["Out"], [-0.04, 0.5], rtol=1e-6)


def test_sigmoid_is_finite_and_saturates_for_large_inputs():
    x = np.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        out = run_op("sigmoid", {"X": x})["Out"]
    assert out.dtype == np.float32 and np.all(np.isfinite(out))
    np.testing.assert_allclose(out, _sigmoid_ref(x), rtol=1e-6, atol=1e-30)
    assert out[0] == 0.0 and out[-1] == 1.0 and out[3] == 0.5


def _softmax_ref(x, axis):
    def one(v):
        m = max(v)
        e = [math.exp(t - m) for t in v]
        return np.array(e) / sum(e)

    return np.apply_along_axis(one, axis, x.astype(np.float64))


@pytest.mark.parametrize("axis", [-1, 0, 1, -2, 2])
def test_softmax_matches_reference(axis):
    x = np.random.default_rng(4).standard_normal((3, 4, 5)).astype("float32") * 4
    out = run_op("softmax", {"X": x}, {"axis": axis})["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, _softmax_ref(x, axis), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=axis), 1.0, rtol=1e-5)


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 999.0, -1000.0]], np.float32)
    out = run_op("softmax", {"X": x})["Out"]
    np.testing.assert_allclose(out, _softmax_ref(x, -1), rtol=1e-6)


def test_softmax_axis_out_of_range_names_the_op():
    with pytest.raises(ShapeError, match=r"softmax.*axis 3"):
        build_op("softmax", {"X": np.zeros((2, 3), "f4")}, {"axis": 3})
