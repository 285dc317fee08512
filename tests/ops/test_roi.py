"""roi_pool, roi_align and psroi_pool (issue 20) on hand-worked boxes."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers

PLACE = fluid.CPUPlace()


def _run(fn, x, boxes, lens):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = layers.data("x", shape=list(x.shape[1:]), dtype="float32")
        rv = layers.data("r", shape=[4], dtype="float32", lod_level=1)
        out = fn(xv, rv)
    rois = fluid.create_lod_tensor(np.asarray(boxes, np.float32), [lens], PLACE)
    return fluid.Executor(PLACE).run(main, feed={"x": x, "r": rois}, fetch_list=[out])[0]


RAMP = np.stack([np.arange(16, dtype=np.float32).reshape(4, 4),
                 100 + np.arange(16, dtype=np.float32).reshape(4, 4)])[None]


def test_roi_pool_bins():
    x = np.concatenate([RAMP, -RAMP])
    out = _run(lambda a, r: layers.roi_pool(a, r, 2, 2), x,
               [[0, 0, 3, 3], [1, 1, 2, 3]], [1, 1])
    np.testing.assert_array_equal(out[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(out[0, 1], [[105, 107], [113, 115]])
    # box 2 on image 2 (-ramp): rows 1..3 x cols 1..2, bins of 1.5 rows / 1 col
    np.testing.assert_array_equal(out[1, 0], [[-5, -6], [-9, -10]])


def test_roi_align_is_exact_on_a_linear_image():
    out = _run(lambda a, r: layers.roi_align(a, r, 1, 2, sampling_ratio=2), RAMP,
               [[0.5, 0.5, 2.5, 2.5]], [1])
    # bins: x in [0.5, 1.5] and [1.5, 2.5], y in [0.5, 2.5]: centres (1, 1.5) and (2, 1.5)
    np.testing.assert_allclose(out[0, 0], [[1.5 * 4 + 1, 1.5 * 4 + 2]], rtol=1e-6)


def test_psroi_pool_reads_one_channel_per_bin():
    x = np.broadcast_to(np.arange(1, 5, dtype=np.float32)[None, :, None, None],
                        (1, 4, 4, 4)).copy()
    out = _run(lambda a, r: layers.psroi_pool(a, r, 1, 1.0, 2, 2), x, [[0, 0, 3, 3]], [1])
    np.testing.assert_array_equal(out[0, 0], [[1, 2], [3, 4]])


def test_rois_need_one_sequence_per_image():
    with pytest.raises(Exception, match="one sequence of boxes per image"):
        _run(lambda a, r: layers.roi_pool(a, r, 2, 2), np.concatenate([RAMP, RAMP]),
             [[0, 0, 3, 3]], [1])
