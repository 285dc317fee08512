"""The fused float ops give the same bits as the op chains they replace."""

import numpy as np
import pytest

from fluid_hw.errors import ShapeError
from tests.op_harness import run_op

RNG = np.random.default_rng(99)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def chain(x, ops):
    """Run ops one by one: each (type, {other inputs}, attrs, in_slot, out_slot)."""
    for t, extra, attrs, ins, outs in ops:
        x = run_op(t, {ins: x, **extra}, attrs)[outs]
    return x


@pytest.mark.parametrize("act", ["", "relu", "sigmoid", "tanh"])
@pytest.mark.parametrize(("xshape", "k"), [((4, 6), 1), ((2, 3, 4), 1), ((2, 3, 4), 2)])
def test_fc_equals_mul_add_act(act, xshape, k):
    x = f32(*xshape)
    kdim = int(np.prod(xshape[k:]))
    w, b = f32(kdim, 5), f32(5)
    got = run_op("fc", {"Input": x, "W": w, "Bias": b},
                 {"in_num_col_dims": k, "activation_type": act})["Out"]
    ops = [("mul", {"Y": w}, {"x_num_col_dims": k}, "X", "Out"),
           ("elementwise_add", {"Y": b}, {"axis": k}, "X", "Out")]
    if act:
        ops.append((act, {}, {}, "X", "Out"))
    np.testing.assert_array_equal(got, chain(x, ops))
    assert got.shape == (*xshape[:k], 5)


def test_fc_without_bias():
    x, w = f32(3, 4), f32(4, 2)
    np.testing.assert_array_equal(run_op("fc", {"Input": x, "W": w})["Out"], x @ w)


@pytest.mark.parametrize("act", ["identity", "relu", "tanh"])
@pytest.mark.parametrize("attrs", [{"paddings": [1, 1]},
                                   {"groups": 2, "strides": [2, 1], "dilations": [1, 2]}])
def test_conv2d_fusion_equals_conv_add_act(act, attrs):
    x, w, b = f32(2, 4, 6, 6), f32(4, 4 // attrs.get("groups", 1), 3, 3), f32(4)
    got = run_op("conv2d_fusion", {"Input": x, "Filter": w, "Bias": b},
                 {**attrs, "activation": act})["Output"]
    ops = [("conv2d", {"Filter": w}, attrs, "Input", "Output"),
           ("elementwise_add", {"Y": b}, {"axis": 1}, "X", "Out")]
    if act != "identity":
        ops.append((act, {}, {}, "X", "Out"))
    np.testing.assert_array_equal(got, chain(x, ops))


@pytest.mark.parametrize(("functors", "yshape", "axis"), [
    (["relu", "elementwise_add"], (2, 3, 4), -1),
    (["sigmoid", "elementwise_mul"], (3,), 1),
    (["scale", "elementwise_sub"], (3, 4), 1),
    (["elementwise_add", "relu"], (2, 3, 4), -1),
    (["elementwise_max", "tanh"], (4,), 2),
    (["elementwise_min", "scale"], (2, 3, 4), -1),
])
def test_fused_elemwise_activation_equals_the_pair(functors, yshape, axis):
    x, y = f32(2, 3, 4), f32(*yshape)
    attrs = {"functor_list": functors, "axis": axis, "scale": 0.75,
             "save_intermediate_out": True}
    res = run_op("fused_elemwise_activation", {"X": x, "Y": y}, attrs,
                 outputs=["Out", "IntermediateOut"])
    f0, f1 = functors

    def unary(name, v):
        if name == "scale":
            return run_op("scale", {"X": v}, {"scale": 0.75})["Out"]
        return run_op(name, {"X": v})["Out"]

    if f0.startswith("elementwise"):
        inter = unary(f1, y)
        want = run_op(f0, {"X": x, "Y": inter}, {"axis": axis})["Out"]
    else:
        inter = run_op(f1, {"X": x, "Y": y}, {"axis": axis})["Out"]
        want = unary(f0, inter)
    np.testing.assert_array_equal(res["Out"], want)
    np.testing.assert_array_equal(res["IntermediateOut"], inter)


def test_fused_ops_check_their_inputs():
    with pytest.raises(ShapeError, match="one binary functor"):
        run_op("fused_elemwise_activation", {"X": f32(2), "Y": f32(2)},
               {"functor_list": ["relu", "tanh"]})
    with pytest.raises(ShapeError, match="W must be 2-D"):
        run_op("fc", {"Input": f32(2, 3), "W": f32(3, 2, 1)})
    with pytest.raises(ShapeError, match=r"Bias must have shape \[2\]"):
        run_op("fc", {"Input": f32(2, 3), "W": f32(3, 2), "Bias": f32(3)})
    with pytest.raises(ShapeError, match=r"Bias must have shape \[4\]"):
        run_op("conv2d_fusion", {"Input": f32(1, 2, 4, 4), "Filter": f32(4, 2, 1, 1),
                                 "Bias": f32(2)})
