"""Comparison, logical and increment ops against numpy."""

import numpy as np
import pytest

from fluid_hw.errors import ShapeError
from fluid_hw.ir.grad import NoGrad
from fluid_hw.ir.registry import get_op
from tests.op_harness import run_op

RNG = np.random.default_rng(3)

CASES = {
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}


@pytest.mark.parametrize("op", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_compare_same_shape(op, dtype):
    x = RNG.integers(-2, 3, (3, 4)).astype(dtype)
    y = RNG.integers(-2, 3, (3, 4)).astype(dtype)
    out = run_op(op, {"X": x, "Y": y})["Out"]
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, CASES[op](x, y))


@pytest.mark.parametrize("op", sorted(CASES))
def test_compare_broadcast_with_axis(op):
    x = RNG.integers(-2, 3, (2, 3, 4)).astype("float32")
    y = RNG.integers(-2, 3, (3,)).astype("float32")
    out = run_op(op, {"X": x, "Y": y}, {"axis": 1})["Out"]
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, CASES[op](x, y.reshape(1, 3, 1)))


def test_compare_broadcast_default_axis_and_scalar():
    x = np.arange(6, dtype="int32").reshape(2, 3)
    out = run_op("less_than", {"X": x, "Y": np.array([3], "int32")})["Out"]
    np.testing.assert_array_equal(out, x < 3)
    out = run_op("greater_equal", {"X": x, "Y": np.array([1, 4, 2], "int32")})["Out"]
    np.testing.assert_array_equal(out, x >= np.array([1, 4, 2]))


def test_compare_errors():
    with pytest.raises(ShapeError, match=r"less_than.*do not broadcast"):
        run_op("less_than", {"X": np.ones((2, 3), "f4"), "Y": np.ones((4,), "f4")})
    with pytest.raises(ShapeError, match=r"equal.*same dtype.*float32 and int64"):
        run_op("equal", {"X": np.ones(3, "f4"), "Y": np.ones(3, "i8")})


@pytest.mark.parametrize("op, fn", [("logical_and", np.logical_and),
                                    ("logical_or", np.logical_or),
                                    ("logical_xor", np.logical_xor)])
def test_logical_binary(op, fn):
    x = RNG.integers(0, 2, (3, 4)).astype(bool)
    y = RNG.integers(0, 2, (3, 4)).astype(bool)
    np.testing.assert_array_equal(run_op(op, {"X": x, "Y": y})["Out"], fn(x, y))
    yb = RNG.integers(0, 2, (4,)).astype(bool)
    np.testing.assert_array_equal(run_op(op, {"X": x, "Y": yb})["Out"], fn(x, yb))


def test_logical_not_and_bool_check():
    x = RNG.integers(0, 2, (5,)).astype(bool)
    np.testing.assert_array_equal(run_op("logical_not", {"X": x})["Out"], ~x)
    with pytest.raises(ShapeError, match=r"logical_and.*X .* must be bool, got float32"):
        run_op("logical_and", {"X": np.ones(2, "f4"), "Y": np.ones(2, bool)})


@pytest.mark.parametrize("dtype, step", [("int64", 1.0), ("int32", 3.0), ("float32", 0.5)])
def test_increment(dtype, step):
    x = np.array([7], dtype)
    out = run_op("increment", {"X": x}, {"step": step})["Out"]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, x + np.array(step).astype(dtype))
    np.testing.assert_array_equal(x, [7])  # input untouched


def test_increment_needs_one_element():
    with pytest.raises(ShapeError, match=r"increment.*one element.*\[2\]"):
        run_op("increment", {"X": np.ones(2, "f4")})


def test_no_gradient():
    for t in [*CASES, "logical_and", "logical_or", "logical_xor", "logical_not", "increment"]:
        assert get_op(t).grad == NoGrad("integer")
