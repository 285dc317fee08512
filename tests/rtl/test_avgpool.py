"""Sum reducer and average pool: bit-exact against their models, several images back
to back, random stalls on both sides; fuzzed geometries; global average pooling."""

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.pool import (
    AVGPOOL_LATENCY,
    AvgPool,
    SumReduce,
    avgpool_model,
    sumreduce_model,
)
from fluid_hw.rtl.swg import WindowGeometry

from .streams import run_full_rate, simulate_streams
from .test_dwconv import image_beats, random_geometry


def scale_for(k):
    """A multiplier/shift near 1 / k (what the golden op's average uses)."""
    shift = 14 + (k - 1).bit_length()
    return round(2**shift / k), shift


def check_avgpool(geom, lanes, seed, *, relu=False, n_images=3, multiplier=None, shift=None):
    rng = np.random.default_rng(seed)
    k = geom.kernel[0] * geom.kernel[1]
    if multiplier is None:
        multiplier, shift = scale_for(k)
    images = [rng.integers(-128, 128, (geom.height, geom.width, geom.channels))
              for _ in range(n_images)]
    dut = AvgPool("pool", geom, lanes, multiplier=multiplier, shift=shift, relu=relu)
    oh, ow = geom.out_hw
    n_out = n_images * oh * ow * geom.channels // lanes
    (out,) = simulate_streams(dut, [(dut.i, image_beats(images, lanes))], [(dut.o, n_out)],
                              seed=seed)
    got = np.array([v for wd in out for v in unpack_lanes(wd, lanes, 8)])
    want = np.stack([avgpool_model(im, geom, multiplier, shift, relu) for im in images])
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_avgpool_model_is_the_rounded_mean():
    rng = np.random.default_rng(0)
    im = rng.integers(-128, 128, (4, 6, 3))
    geom = WindowGeometry(3, 4, 6, (2, 3), (2, 3))
    m, n = scale_for(6)
    got = avgpool_model(im, geom, m, n)
    mean = im.reshape(2, 2, 2, 3, 3).mean(axis=(1, 3))
    assert np.abs(got - mean).max() <= 0.5 + 1e-3
    gap = avgpool_model(im, WindowGeometry(3, 4, 6, (4, 6)), *scale_for(24))
    assert gap.shape == (1, 1, 3) and np.abs(gap[0, 0] - im.mean(axis=(0, 1))).max() <= 0.51


def test_sumreduce():
    rng = np.random.default_rng(0)
    beats = rng.integers(-128, 128, (45, 3))
    beats[:9] = -128  # the extreme sum
    dut = SumReduce(3, 9)
    (out,) = simulate_streams(dut, [(dut.i, [pack_lanes(b, 8) for b in beats])], [(dut.o, 5)])
    got = np.array([unpack_lanes(wd, 3, 32) for wd in out])
    np.testing.assert_array_equal(got, sumreduce_model(beats, 9))


@pytest.mark.parametrize("c,h,w,k,s,p,lanes,relu", [
    (4, 8, 8, (2, 2), (2, 2), (0, 0, 0, 0), 2, False),
    (3, 5, 5, (3, 3), (1, 1), (1, 1, 1, 1), 1, True),
    (6, 5, 7, (3, 2), (2, 2), (1, 0, 1, 1), 3, False),   # asymmetric padding
    (5, 4, 4, (4, 4), (1, 1), (0, 0, 0, 0), 5, False),   # global average pooling
    (2, 3, 5, (3, 5), (1, 1), (0, 0, 0, 0), 1, True),    # global, non-square
    (3, 4, 4, (1, 1), (1, 1), (0, 0, 0, 0), 3, False),   # 1x1: a rescale
])
def test_avgpool(c, h, w, k, s, p, lanes, relu):
    check_avgpool(WindowGeometry(c, h, w, k, s, p), lanes, seed=c * h + w, relu=relu)


def test_avgpool_extreme_scales():
    geom = WindowGeometry(2, 4, 4, (2, 2), (2, 2))
    check_avgpool(geom, 2, seed=1, multiplier=2**15 - 1, shift=0)   # saturates
    check_avgpool(geom, 1, seed=2, multiplier=1, shift=47)          # all zero


def test_avgpool_latency():
    """No stalls: a pooled beat follows its window's last beat by AVGPOOL_LATENCY."""

    rng = np.random.default_rng(4)
    geom = WindowGeometry(2, 4, 4, (2, 2), (2, 2))
    dut = AvgPool("pool", geom, 1, multiplier=16384, shift=16)
    beats = image_beats([rng.integers(-128, 128, (4, 4, 2))], 1)
    taken, outs, _ = run_full_rate(dut, [(dut.i, beats)], 8, watch=dut.reduce.i)
    last_beats = taken[3::4]  # each window's last beat into the reduction
    assert [o - t for o, t in zip(outs, last_beats)] == [AVGPOOL_LATENCY] * 8


def test_avgpool_errors():
    geom = WindowGeometry(4, 4, 4, (2, 2), (2, 2))
    with pytest.raises(HardwareConfigError, match="lanes=3 must divide the 4 channels"):
        AvgPool("pool1", geom, 3, multiplier=1, shift=2)
    with pytest.raises(HardwareConfigError, match="multiplier values must lie"):
        AvgPool("pool1", geom, 2, multiplier=2**15, shift=2)
    with pytest.raises(HardwareConfigError, match="does not fit"):
        AvgPool("pool1", WindowGeometry(4, 2, 2, (3, 3)), 2, multiplier=1, shift=2)


@pytest.mark.parametrize("seed", range(4))
def test_avgpool_fuzz_small(seed):
    rng = np.random.default_rng(300 + seed)
    geom = random_geometry(rng, kernels=(1, 2, 3), max_extra=2, dilation=False)
    c = geom.channels
    lanes = int(rng.choice([p for p in range(1, c + 1) if c % p == 0]))
    check_avgpool(geom, lanes, seed, relu=bool(seed % 2))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30))
def test_avgpool_fuzz(seed):
    rng = np.random.default_rng(400 + seed)
    geom = random_geometry(rng, kernels=(1, 2, 3, 5, 7), max_extra=4,
                           channels=(1, 2, 3, 4, 5, 6, 8), dilation=bool(seed % 3 == 0))
    c = geom.channels
    lanes = int(rng.choice([p for p in range(1, c + 1) if c % p == 0]))
    check_avgpool(geom, lanes, seed, relu=bool(seed % 2))
