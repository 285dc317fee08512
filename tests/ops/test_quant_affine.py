"""The golden ``quantized_affine``: against Python ints (any rank, channel axis 1, int8
and int16 inputs, at the rails, wrapping as a 32-bit sum), its checks, and no float
arithmetic in its kernel."""

import numpy as np
import pytest

from fluid_hw.errors import ExecutionError, ShapeError
from tests.op_harness import run_op
from tests.ops import test_quant_ops as golden_tests

RNG = np.random.default_rng(13)


def ref(x, w, b):
    """Python ints: wrap32(x[n, c, ...] * w[c] + b[c])."""
    out = np.empty(x.shape, np.int64)
    for idx in np.ndindex(*x.shape):
        c = idx[1]
        v = int(x[idx]) * int(w[c]) + (0 if b is None else int(b[c]))
        out[idx] = golden_tests.wrap32(v)
    return out


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 3, 2), (1, 3, 7)])
def test_quantized_affine_matches_python_ints(shape):
    c = shape[1]
    x = RNG.integers(-128, 128, shape).astype(np.int8)
    w = RNG.integers(-127, 128, c).astype(np.int8)
    b = RNG.integers(-2**30, 2**30, c).astype(np.int32)
    out = run_op("quantized_affine", {"X": x, "Weight": w, "Bias": b})["Out"]
    assert out.dtype == np.int32 and out.shape == x.shape
    assert out.tolist() == ref(x, w, b).tolist()
    assert run_op("quantized_affine", {"X": x, "Weight": w})["Out"].tolist() == \
        ref(x, w, None).tolist()


def test_quantized_affine_at_the_rails_and_wrapping():
    x = np.array([[-128, 127, -128]], np.int8)
    w = np.array([-128, -127, 127], np.int8)
    b = np.array([2**31 - 1, -2**31, 0], np.int32)
    out = run_op("quantized_affine", {"X": x, "Weight": w, "Bias": b})["Out"]
    # the first two wrap as a 32-bit accumulator does (the pass never lets them)
    assert out.tolist() == [[golden_tests.wrap32(16384 + 2**31 - 1),
                             golden_tests.wrap32(-16129 - 2**31), -16256]]
    x16 = np.array([[-32768, 32767]], np.int16)
    w16 = np.array([-32768, 32767], np.int16)
    out = run_op("quantized_affine", {"X": x16, "Weight": w16}, {"weight_bits": 16})["Out"]
    assert out.tolist() == [[2**30, 32767 * 32767]]


def test_quantized_affine_checks_its_inputs():
    x, w = golden_tests.i8(2, 3, 4), golden_tests.i8(3)
    with pytest.raises(ShapeError, match=r"Weight must have shape \[3\] \(X's channels\), "
                                         r"got \[4\]"):
        run_op("quantized_affine", {"X": x, "Weight": golden_tests.i8(4)})
    with pytest.raises(ShapeError, match="X must have rank >= 2"):
        run_op("quantized_affine", {"X": golden_tests.i8(3), "Weight": w})
    with pytest.raises(ShapeError, match="X must be int8, uint8 or int16"):
        run_op("quantized_affine", {"X": x.astype(np.float32), "Weight": w})
    with pytest.raises(ShapeError, match="Weight holds 8-bit weights, so it must be int8"):
        run_op("quantized_affine", {"X": x, "Weight": w.astype(np.int16)})
    with pytest.raises(ShapeError, match="Bias must be int32"):
        run_op("quantized_affine", {"X": x, "Weight": w, "Bias": w})
    with pytest.raises(ShapeError, match=r"Bias must have shape \[3\]"):
        run_op("quantized_affine", {"X": x, "Weight": w,
                                    "Bias": np.zeros(2, np.int32)})
    # a batch whose channels differ from the declared ones
    with pytest.raises(ExecutionError, match="Weight has 3 values; X has 5 channels"):
        run_op("quantized_affine", {"X": golden_tests.i8(2, 5), "Weight": w}, batch_dims=True)


def test_quantized_affine_uses_no_float_arithmetic():
    golden_tests.test_region_kernels_use_no_float_arithmetic("quantized_affine")
