"""Sliding-window generator and max pool: bit-exact against their models, several
images back to back, random stalls on both sides."""

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.pool import MaxPool, MaxReduce, maxpool_model, maxreduce_model
from fluid_hw.rtl.swg import SlidingWindow, WindowGeometry, swg_model

from .streams import simulate_streams

GEOMS = [
    # C, H, W, kernel, stride, pads, dilation, lanes, order
    (2, 5, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "kkc"),
    (4, 6, 5, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, "kkc"),
    (1, 7, 7, (3, 2), (2, 3), (1, 0, 2, 1), (1, 1), 1, "kkc"),
    (2, 6, 6, (2, 2), (1, 1), (0, 0, 0, 0), (2, 2), 2, "kkc"),
    (4, 4, 4, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 2, "ckk"),
    (3, 5, 5, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 3, "ckk"),
    (1, 3, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "kkc"),  # whole image buffered
]


def _beats(images_hwc, lanes):
    flat = np.concatenate([im.reshape(-1) for im in images_hwc])
    return [pack_lanes(flat[i:i + lanes], 8) for i in range(0, len(flat), lanes)]


@pytest.mark.parametrize("c,h,w,k,s,p,d,lanes,order", GEOMS)
def test_sliding_window(c, h, w, k, s, p, d, lanes, order):
    geom = WindowGeometry(c, h, w, k, s, p, d)
    rng = np.random.default_rng(c * h * w)
    images = [rng.integers(-128, 128, (h, w, c)) for _ in range(3)]
    pad = -128 if order == "ckk" else 0
    dut = SlidingWindow("swg", geom, lanes, order=order, pad_value=pad)
    expect = np.concatenate([swg_model(im, geom, lanes, order, pad).reshape(-1)
                             for im in images])
    (out,) = simulate_streams(dut, [(dut.i, _beats(images, lanes))],
                              [(dut.o, len(expect) // lanes)], seed=h + w)
    got = np.array([v for wd in out for v in unpack_lanes(wd, lanes, 8)])
    np.testing.assert_array_equal(got, expect)


def _random_geometry(rng: np.random.Generator) -> tuple[WindowGeometry, int, str]:
    while True:
        k = tuple(int(v) for v in rng.choice([1, 2, 3, 5, 7], 2))
        d = (int(rng.choice([1, 1, 2, 3])), int(rng.choice([1, 1, 2])))
        s = (int(rng.choice([1, 2, 3, 4])), int(rng.choice([1, 2, 3])))
        c = int(rng.choice([1, 2, 3, 5, 6]))
        ek = ((k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1)
        p = tuple(int(rng.integers(0, e)) for e in (*ek, *ek))
        geom = WindowGeometry(c, int(rng.integers(1, 12)), int(rng.integers(1, 12)), k, s,
                              (p[0], p[1], p[2], p[3]), d)
        try:
            geom.check("swg")
        except HardwareConfigError:
            continue
        lanes = int(rng.choice([v for v in (1, 2, 3) if c % v == 0]))
        return geom, lanes, str(rng.choice(["kkc", "ckk"]))


@pytest.mark.parametrize("seed", range(16))
def test_sliding_window_fuzzed(seed):
    """Random kernels (1-7, non-square), strides 1-4, dilations, paddings, images from
    1x1 up, three images back to back: the reader's incremental row and slot
    bookkeeping against the model."""
    rng = np.random.default_rng(1000 + seed)
    geom, lanes, order = _random_geometry(rng)
    images = [rng.integers(-128, 128, (geom.height, geom.width, geom.channels))
              for _ in range(3)]
    pad = -128 if order == "ckk" else 0
    dut = SlidingWindow("swg", geom, lanes, order=order, pad_value=pad)
    expect = np.concatenate([swg_model(im, geom, lanes, order, pad).reshape(-1)
                             for im in images])
    (out,) = simulate_streams(dut, [(dut.i, _beats(images, lanes))],
                              [(dut.o, len(expect) // lanes)], seed=seed)
    got = np.array([v for wd in out for v in unpack_lanes(wd, lanes, 8)])
    np.testing.assert_array_equal(got, expect, err_msg=f"{geom} lanes {lanes} {order}")


def test_maxreduce():
    rng = np.random.default_rng(0)
    beats = rng.integers(-128, 128, (40, 2))
    dut = MaxReduce(2, 4)
    (out,) = simulate_streams(dut, [(dut.i, [pack_lanes(b, 8) for b in beats])], [(dut.o, 10)])
    got = np.array([unpack_lanes(wd, 2, 8) for wd in out])
    np.testing.assert_array_equal(got, maxreduce_model(beats, 4))


@pytest.mark.parametrize("c,h,w,k,s,p,lanes", [(4, 8, 8, (2, 2), (2, 2), (0, 0, 0, 0), 2),
                                               (2, 5, 5, (3, 3), (2, 2), (1, 1, 1, 1), 1),
                                               (3, 5, 7, (2, 2), (2, 2), (0, 0, 1, 1), 3)])
def test_maxpool(c, h, w, k, s, p, lanes):
    geom = WindowGeometry(c, h, w, k, s, p)
    rng = np.random.default_rng(h * w + c)
    images = [rng.integers(-128, 128, (h, w, c)) for _ in range(2)]
    images[0][:] = -128  # all at the minimum: padding (-128) must still not change anything
    dut = MaxPool("pool", geom, lanes)
    expect = np.concatenate([maxpool_model(im, geom).reshape(-1) for im in images])
    (out,) = simulate_streams(dut, [(dut.i, _beats(images, lanes))],
                              [(dut.o, len(expect) // lanes)], seed=c)
    got = np.array([v for wd in out for v in unpack_lanes(wd, lanes, 8)])
    np.testing.assert_array_equal(got, expect)


def test_maxpool_model_padding_never_wins():
    im = np.full((2, 2, 1), -100)
    out = maxpool_model(im, WindowGeometry(1, 2, 2, (2, 2), (1, 1), (1, 1, 1, 1)))
    assert (out == -100).all()


def test_window_geometry_errors():
    with pytest.raises(HardwareConfigError, match="does not fit"):
        WindowGeometry(1, 2, 2, (5, 5)).check("conv1")
    with pytest.raises(HardwareConfigError, match="lanes do not divide"):
        SlidingWindow("conv1", WindowGeometry(3, 4, 4, (3, 3)), 2)
