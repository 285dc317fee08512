"""conv_elementwise_add_act_fuse: Before / Expected."""

import pytest

from fluid_hw.passes import PassContext, get_pass
from tests.passes._util import Net, assert_structure


@pytest.mark.parametrize("act", ["relu", "sigmoid", None])
def test_conv_bias_act_become_conv2d_fusion(act):
    n = Net()
    n.data("x", [-1, 2, 6, 6])
    n.param("w", [4, 2, 3, 3])
    n.param("b", [4])
    n.op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "c"},
         {"strides": [2, 2], "paddings": [1, 1]})
    n.op("elementwise_add", {"X": "c", "Y": "b"}, {"Out": "t"}, {"axis": 1})
    out_name = "t"
    if act:
        n.op(act, {"X": "t"}, {"Out": "y"})
        out_name = "y"
    out, changed = get_pass("conv_elementwise_add_act_fuse").apply(
        n.program, PassContext(fetch_names=[out_name]))
    e = Net()
    e.data("x", [-1, 2, 6, 6])
    e.param("w", [4, 2, 3, 3])
    e.param("b", [4])
    e.op("conv2d_fusion", {"Input": "x", "Filter": "w", "Bias": "b"}, {"Output": out_name},
         {"strides": [2, 2], "paddings": [1, 1], "activation": act or "identity"})
    assert changed
    assert_structure(out, e.program)


def test_a_bias_on_another_axis_is_not_fused():
    n = Net()
    n.data("x", [-1, 2, 4, 4])
    n.param("w", [4, 2, 1, 1])
    n.param("b", [4])
    n.op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "c"})
    n.op("elementwise_add", {"X": "c", "Y": "b"}, {"Out": "y"}, {"axis": 3})
    _, changed = get_pass("conv_elementwise_add_act_fuse").apply(
        n.program, PassContext(fetch_names=["y"]))
    assert not changed


@pytest.mark.parametrize("bad", ["filter_rank", "input_rank"])
def test_declared_shapes_that_cannot_fuse_are_left_alone(bad):
    # regression (issue 14): verified programs the pass crashed on (IndexError on a
    # filter declared with no dims; ShapeError from building conv2d_fusion)
    n = Net()
    n.data("x", [-1, 2, 5, 5])
    n.param("w", [3, 2, 3, 3])
    n.param("b", [3])
    n.op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "c"})
    n.op("elementwise_add", {"X": "c", "Y": "b"}, {"Out": "t"}, {"axis": 1})
    n.op("relu", {"X": "t"}, {"Out": "y"})
    if bad == "filter_rank":
        n.block.var("w").desc_shape = []
    else:
        n.block.var("x").desc_shape = [2]
    out, changed = get_pass("conv_elementwise_add_act_fuse").apply(
        n.program, PassContext(fetch_names=["y"]))
    assert not changed
    assert_structure(out, n.program)
