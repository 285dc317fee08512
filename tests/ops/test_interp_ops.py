"""nearest_interp on the CPU executor: Fluid's index rule (both align_corners settings)
against a direct float64 computation, output sizes from scale / out_h, out_w / OutSize,
integer dtypes copied exactly, and the errors for sizes below 1 and bad OutSize."""

import numpy as np
import pytest

from fluid_hw.errors import FluidError, OpAttrError, ShapeError
from fluid_hw.ir.ops.interp import integer_factor, nearest_index
from tests.op_harness import run_op


def _reference(x, oh, ow, align_corners):
    """Fluid's interpolate_op.h in float64 (exact for these sizes)."""
    n, c, h, w = x.shape

    def src(k, i, o):
        if align_corners:
            return int((i - 1) / (o - 1) * k + 0.5) if o > 1 else 0
        return int(i / o * k + 1e-9)

    out = np.empty((n, c, oh, ow), x.dtype)
    for r in range(oh):
        for q in range(ow):
            out[:, :, r, q] = x[:, :, src(r, h, oh), src(q, w, ow)]
    return out


@pytest.mark.parametrize("shape,attrs,out_hw", [
    ((2, 3, 4, 5), {"scale": 2.0, "align_corners": False}, (8, 10)),
    ((1, 2, 4, 5), {"scale": 2.0}, (8, 10)),
    ((1, 2, 5, 4), {"scale": 1.5}, (7, 6)),
    ((1, 1, 6, 7), {"out_h": 4, "out_w": 3, "align_corners": False}, (4, 3)),
    ((1, 1, 6, 7), {"out_h": 13, "out_w": 2}, (13, 2)),
    ((2, 2, 1, 3), {"out_h": 1, "out_w": 9, "align_corners": False}, (1, 9)),
])
def test_nearest_interp_follows_fluid(shape, attrs, out_hw):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = run_op("nearest_interp", {"X": x}, attrs)["Out"]
    assert out.shape == (shape[0], shape[1], *out_hw)
    np.testing.assert_array_equal(out, _reference(x, *out_hw, attrs.get("align_corners", True)))


def test_integers_copy_exactly_and_outsize_overrides():
    x = np.random.default_rng(1).integers(-128, 128, (2, 3, 3, 4)).astype(np.int8)
    out = run_op("nearest_interp", {"X": x}, {"scale": 3.0, "align_corners": False})["Out"]
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, x.repeat(3, axis=2).repeat(3, axis=3))
    size = np.array([6, 2], np.int32)
    out = run_op("nearest_interp", {"X": x, "OutSize": size},
                 {"scale": 3.0, "align_corners": False})["Out"]
    np.testing.assert_array_equal(out, x.repeat(2, axis=2)[:, :, :, ::2])


def test_integer_factor():
    assert integer_factor(4, 12, False) == 3 and integer_factor(4, 12, True) is None
    assert integer_factor(5, 10, True) == 2 and integer_factor(1, 7, True) == 7
    assert integer_factor(4, 6, False) is None and integer_factor(4, 4, True) == 1
    assert nearest_index(3, 1, True).tolist() == [0]


def test_errors_name_the_op_and_the_fix():
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ShapeError, match=r"op nearest_interp \(-> out_out_0\): the output "
                                         r"size \(the out_h / out_w attribute\) is 0; it must "
                                         r"be >= 1: give out_shape"):
        run_op("nearest_interp", {"X": x})
    with pytest.raises(ShapeError, match=r"2 \* scale 0.25\) is 0"):
        run_op("nearest_interp", {"X": x}, {"scale": 0.25})
    with pytest.raises(OpAttrError, match="scale"):
        run_op("nearest_interp", {"X": x}, {"scale": -1.0})
    with pytest.raises(ShapeError, match=r"X must be 4-D NCHW"):
        run_op("nearest_interp", {"X": x[0]}, {"scale": 2.0})
    with pytest.raises(ShapeError, match=r"OutSize must be int32 \[2\]"):
        run_op("nearest_interp", {"X": x, "OutSize": np.array([2, 2, 2], np.int32)})
    with pytest.raises(FluidError, match=r"OutSize must hold two sizes >= 1, got \[0, 2\]"):
        run_op("nearest_interp", {"X": x, "OutSize": np.array([0, 2], np.int32)})
