"""resize_bilinear / image_resize / image_resize_short (issue 20) against a per-pixel
numpy reference of Paddle 1.5's bilinear_interp."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers

R = np.random.default_rng(13)


def _ref(x, oh, ow, align_corners, align_mode):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))

    def src(k, i, o):
        if align_corners:
            r = (i - 1) / (o - 1) if o > 1 else 0.0
            s = r * k
        else:
            r = i / o
            s = max(r * (k + 0.5) - 0.5, 0.0) if align_mode == 0 else r * k
        a = min(int(np.floor(s)), i - 1)
        return a, min(a + 1, i - 1), s - a

    for yy in range(oh):
        a, b, ly = src(yy, h, oh)
        for xx in range(ow):
            p, q, lx = src(xx, w, ow)
            out[:, :, yy, xx] = ((1 - ly) * ((1 - lx) * x[:, :, a, p] + lx * x[:, :, a, q])
                                 + ly * ((1 - lx) * x[:, :, b, p] + lx * x[:, :, b, q]))
    return out


def _run(fn, x):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fn(layers.data("x", shape=list(x.shape[1:]), dtype="float32"))
    return fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[out])[0]


@pytest.mark.parametrize("align_corners,align_mode", [(True, 1), (False, 1), (False, 0)])
@pytest.mark.parametrize("out_hw", [(7, 5), (2, 3)])
def test_resize_bilinear_matches_reference(align_corners, align_mode, out_hw):
    x = R.normal(size=(2, 3, 4, 6)).astype(np.float32)
    got = _run(lambda v: layers.resize_bilinear(v, out_shape=list(out_hw),
                                                align_corners=align_corners,
                                                align_mode=align_mode), x)
    np.testing.assert_allclose(got, _ref(x.astype(np.float64), *out_hw, align_corners,
                                         align_mode), rtol=1e-5, atol=1e-6)


def test_image_resize_and_short():
    x = R.normal(size=(1, 2, 4, 6)).astype(np.float32)
    near = _run(lambda v: layers.image_resize(v, out_shape=[8, 12], resample="NEAREST"), x)
    np.testing.assert_array_equal(near, _run(lambda v: layers.resize_nearest(v, [8, 12]), x))
    bil = _run(lambda v: layers.image_resize(v, scale=2.0), x)
    np.testing.assert_allclose(bil, _ref(x.astype(np.float64), 8, 12, True, 1), rtol=1e-5,
                               atol=1e-6)
    short = _run(lambda v: layers.image_resize_short(v, 6), x)
    assert short.shape == (1, 2, 6, 9)


def test_bad_resample_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[2, 4, 4], dtype="float32")
        with pytest.raises(ValueError, match="image_resize: resample"):
            layers.image_resize(x, [2, 2], resample="CUBIC")
