"""layers.resize_nearest: the nearest_interp op it appends (attributes as Fluid 1.5's
layer sets them, align_corners True by default), shapes, a run-time size, and errors."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import ShapeError

layers = fluid.layers


def test_resize_nearest_builds_and_runs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = layers.data("x", shape=[2, 3, 4], dtype="float32")
        size = layers.data("size", shape=[2], dtype="int32", append_batch_size=False)
        up = layers.resize_nearest(x, scale=2, align_corners=False)
        to = layers.resize_nearest(x, out_shape=[5, 2])
        run = layers.resize_nearest(x, out_shape=[9, 9], actual_shape=size)
    assert up.shape == (-1, 2, 6, 8) and to.shape == (-1, 2, 5, 2)
    assert run.shape == (-1, 2, -1, -1)
    ops = [op for op in main.global_block().ops if op.type == "nearest_interp"]
    assert [op.attr("align_corners") for op in ops] == [False, True, True]
    assert ops[0].attr("scale") == 2.0 and (ops[1].attr("out_h"), ops[1].attr("out_w")) == (5, 2)
    assert ops[2].input("OutSize") == ["size"]
    xv = np.arange(2 * 2 * 3 * 4, dtype=np.float32).reshape(2, 2, 3, 4)
    a, b, c = fluid.Executor().run(main, feed={"x": xv, "size": np.array([3, 8], np.int32)},
                                   fetch_list=[up, to, run])
    np.testing.assert_array_equal(a, xv.repeat(2, axis=2).repeat(2, axis=3))
    assert b.shape == (2, 2, 5, 2) and c.shape == (2, 2, 3, 8)
    np.testing.assert_array_equal(b[0, 0], xv[0, 0][[0, 1, 1, 2, 2]][:, [0, 3]])


@pytest.mark.parametrize("kw,msg", [
    ({}, "give out_shape or scale"),
    ({"out_shape": [4]}, r"out_shape must be two ints >= 1 \[out_h, out_w\], got \[4\]"),
    ({"out_shape": [0, 2]}, "out_shape must be two ints >= 1"),
    ({"scale": 0}, "scale must be a number > 0, got 0"),
])
def test_resize_nearest_errors(kw, msg):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[2, 3, 4], dtype="float32")
        with pytest.raises(ShapeError, match=rf"layer resize_nearest 'resize_nearest_\d+': {msg}"):
            layers.resize_nearest(x, **kw)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        v = layers.data("v", shape=[3], dtype="float32")
        with pytest.raises(ShapeError, match="must be 4-D NCHW"):
            layers.resize_nearest(v, scale=2)
