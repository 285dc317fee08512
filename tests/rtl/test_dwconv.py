"""Depthwise convolution: bit-exact against its model, several images back to back,
random stalls on both sides; const and runtime weights; fuzzed geometries."""


import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.conv import conv2d_model
from fluid_hw.rtl.dwconv import (
    DepthwiseConv,
    depthwise_model,
    dw_weight_entries,
    dwconv_latency,
)
from fluid_hw.rtl.requant import requant_entries
from fluid_hw.rtl.stream import CreditQueue
from fluid_hw.rtl.swg import WindowGeometry

from .streams import run_full_rate, simulate_streams, write_params


def image_beats(images_hwc, lanes):
    flat = np.concatenate([np.asarray(im).reshape(-1) for im in images_hwc])
    return [pack_lanes(flat[i:i + lanes], 8) for i in range(0, len(flat), lanes)]


def random_geometry(rng, kernels=(1, 3, 5, 7), max_extra=3, channels=(1, 2, 3, 5, 6),
                    dilation=True):
    """A random valid window geometry (odd channel counts, asymmetric padding)."""
    c = int(rng.choice(channels))
    kern, dil, pads, size, stride = [], [], [0, 0, 0, 0], [], []
    for axis in range(2):
        k = int(rng.choice(kernels))
        d = int(rng.integers(1, 3)) if dilation and k > 1 and k < 5 else 1
        ek = (k - 1) * d + 1
        lo, hi = int(rng.integers(0, ek)), int(rng.integers(0, ek))
        pads[axis], pads[axis + 2] = lo, hi
        size.append(max(1, ek - lo - hi) + int(rng.integers(0, max_extra + 1)))
        kern.append(k)
        dil.append(d)
        # a row stride beyond the kernel: see test_row_stride_beyond_kernel
        stride.append(int(rng.integers(1, 3 if axis or ek > 1 else 2)))
    return WindowGeometry(c, size[0], size[1], tuple(kern), tuple(stride), tuple(pads),
                          tuple(dil))


def pick_pe(rng, c):
    return int(rng.choice([p for p in range(1, c + 1) if c % p == 0]))


def dw_case(rng, geom, requantize=True, with_bias=True):
    c = geom.channels
    k = geom.kernel[0] * geom.kernel[1]
    w = rng.integers(-128, 128, (c, 1, *geom.kernel))
    bias = rng.integers(-3000, 3000, c) if with_bias else None
    if not requantize:
        return w, bias, None, None
    m = rng.integers(2**12, 2**15, c)
    n = rng.integers(21, 23, c) + int(np.log2(k)) // 2
    return w, bias, m, n


def run_dw(dut, images, seed, prologue=None, **kw):
    geom = dut.geom
    oh, ow = geom.out_hw
    n_out = len(images) * oh * ow * geom.channels // dut.pe
    (out,) = simulate_streams(dut, [(dut.i, image_beats(images, dut.pe))], [(dut.o, n_out)],
                              seed=seed, prologue=prologue, **kw)
    got = np.array([v for wd in out for v in unpack_lanes(wd, dut.pe, dut.out_bits)])
    return got.reshape(len(images), oh, ow, geom.channels)


def check_dw(geom, pe, seed, *, requantize=True, relu=False, n_images=2):
    rng = np.random.default_rng(seed)
    w, bias, m, n = dw_case(rng, geom, requantize)
    images = [rng.integers(-128, 128, (geom.height, geom.width, geom.channels))
              for _ in range(n_images)]
    dut = DepthwiseConv("dw", geom, pe, weights=w, bias=bias, multiplier=m, shift=n,
                        relu=relu, requantize=requantize)
    got = run_dw(dut, images, seed)
    want = np.stack([depthwise_model(im, w, geom, bias, m, n, relu) for im in images])
    np.testing.assert_array_equal(got, want)
    return want


def test_model_is_a_grouped_conv2d():
    rng = np.random.default_rng(0)
    geom = WindowGeometry(3, 5, 6, (3, 2), (2, 1), (1, 0, 2, 1), (1, 2))
    w = rng.integers(-128, 128, (3, 1, 3, 2))
    full = np.zeros((3, 3, 3, 2), np.int64)
    for c in range(3):
        full[c, c] = w[c, 0]
    im = rng.integers(-128, 128, (5, 6, 3))
    bias = rng.integers(-100, 100, 3)
    np.testing.assert_array_equal(depthwise_model(im, w, geom, bias),
                                  conv2d_model(im, full, geom, bias))
    m, n = np.array([3000, 200, 9]), np.array([12, 4, 0])
    np.testing.assert_array_equal(depthwise_model(im, w, geom, bias, m, n, True),
                                  conv2d_model(im, full, geom, bias, m, n, True))


def test_weight_entries_layout():
    w = np.arange(4 * 2 * 3).reshape(4, 1, 2, 3) - 12  # C=4, kh=2, kw=3
    words = dw_weight_entries(w, 2)
    assert len(words) == 2 and len(words[0]) == 2 * 6
    # lane p, group g, kernel position (ky * kw + kx): filters[g * pe + p, 0, ky, kx]
    for p in range(2):
        for g in range(2):
            for ky in range(2):
                for kx in range(3):
                    assert words[p][g * 6 + ky * 3 + kx] == w[g * 2 + p, 0, ky, kx] & 0xFF


@pytest.mark.parametrize("c,h,w,k,s,p,d,pe,relu", [
    (4, 6, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, True),
    (3, 5, 6, (3, 3), (2, 2), (1, 0, 1, 1), (1, 1), 1, False),
    (6, 4, 5, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3, False),   # pointwise scale
    (2, 7, 6, (3, 2), (1, 2), (2, 0, 0, 1), (2, 1), 2, True),    # dilation, asymmetric pads
    (1, 5, 5, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1, False),
])
def test_dwconv_const(c, h, w, k, s, p, d, pe, relu):
    want = check_dw(WindowGeometry(c, h, w, k, s, p, d), pe, seed=c * h + w, relu=relu)
    inside = ((want > -128) & (want < 127)).mean()
    assert inside > 0.3, "the test's scales saturate too much to be meaningful"


def test_dwconv_int32_outputs_with_bias():
    check_dw(WindowGeometry(4, 5, 4, (3, 3), (1, 1), (1, 1, 1, 1)), 2, seed=5,
             requantize=False)


def test_dwconv_runtime_weights():
    rng = np.random.default_rng(11)
    geom = WindowGeometry(6, 5, 5, (3, 3), (2, 1), (1, 1, 1, 0))
    pe = 3
    dut = DepthwiseConv("dw", geom, pe, runtime=True, relu=True)
    assert len(dut.wr.en) == 2 * pe
    images = [rng.integers(-128, 128, (5, 5, 6)) for _ in range(2)]
    for _ in range(2):  # two weight sets through one design
        w, bias, m, n = dw_case(rng, geom)
        words = dw_weight_entries(w, pe)
        params = requant_entries("dw", 6, bias, m, n)

        load = write_params(dut.wr, [m for p in range(pe)
                                     for m in ((p, words[p]), (pe + p, params[p::pe]))])
        got = run_dw(dut, images, seed=3, prologue=load)
        want = np.stack([depthwise_model(im, w, geom, bias, m, n, True) for im in images])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("requantize", [True, False])
def test_dwconv_latency(requantize):
    """No stalls: the output follows the last beat of its window group by
    dwconv_latency() + the output queue's latency."""

    rng = np.random.default_rng(4)
    geom = WindowGeometry(2, 3, 3, (3, 3), (1, 1), (1, 1, 1, 1))
    w, bias, m, n = dw_case(rng, geom, requantize)
    dut = DepthwiseConv("dw", geom, 1, weights=w, bias=bias, multiplier=m, shift=n,
                        requantize=requantize)
    beats = image_beats([rng.integers(-128, 128, (3, 3, 2))], 1)
    taken, outs, _ = run_full_rate(dut, [(dut.i, beats)], 9 * 2, watch=dut.swg.o)
    last_beats = taken[8::9]  # each window group's last beat
    lat = dwconv_latency(requantize) + CreditQueue.latency
    assert [o - t for o, t in zip(outs, last_beats)] == [lat] * 18


def test_dwconv_trellis_cells():
    from amaranth.back import rtlil

    geom = WindowGeometry(4, 4, 4, (3, 3), (1, 1), (1, 1, 1, 1))
    dut = DepthwiseConv("dw", geom, 2, weights=np.zeros((4, 1, 3, 3), np.int8),
                        multiplier=np.ones(4, int), shift=np.ones(4, int), ff_style="trellis")
    text = rtlil.convert(dut, name="dw")
    # one MULT18X18D per lane, two per requantiser lane, all with their registers; a
    # channel group every 9 window beats: the two lanes share one requantiser lane
    assert dut.requant.units == 1
    assert text.count("cell \\MULT18X18D") == 2 + 2 * 1
    assert text.count('parameter \\REG_OUTPUT_CLK "CLK0"') == 2 + 2 * 1


def test_dwconv_errors():
    geom = WindowGeometry(4, 4, 4, (3, 3))
    with pytest.raises(HardwareConfigError, match="PE=3 must divide the 4 channels"):
        DepthwiseConv("dw1", geom, 3, weights=np.zeros((4, 1, 3, 3), np.int8),
                      multiplier=np.ones(4, int), shift=np.ones(4, int))
    with pytest.raises(HardwareConfigError, match=r"filters has shape \(4, 4, 3, 3\)"):
        DepthwiseConv("dw1", geom, 2, weights=np.zeros((4, 4, 3, 3), np.int8),
                      multiplier=np.ones(4, int), shift=np.ones(4, int))
    with pytest.raises(HardwareConfigError, match="const weights need the filters"):
        DepthwiseConv("dw1", geom, 2, multiplier=np.ones(4, int), shift=np.ones(4, int))
    with pytest.raises(HardwareConfigError, match="ff_style must be one of"):
        DepthwiseConv("dw1", geom, 2, weights=np.zeros((4, 1, 3, 3), np.int8),
                      multiplier=np.ones(4, int), shift=np.ones(4, int), ff_style="keep")


@pytest.mark.parametrize("geom", [WindowGeometry(1, 6, 3, (1, 1), (3, 1)),
                                  WindowGeometry(2, 7, 5, (1, 1), (2, 2)),
                                  WindowGeometry(3, 9, 4, (2, 1), (4, 1), (1, 0, 0, 0))])
def test_row_stride_beyond_kernel(geom):
    """A strided 1x1 depthwise conv (ResNet-style downsampling): a row stride beyond the
    kernel skips input rows, which the window generator releases only once they came."""
    check_dw(geom, 1, seed=6, n_images=3)


@pytest.mark.parametrize("seed", range(4))
def test_dwconv_fuzz_small(seed):
    rng = np.random.default_rng(100 + seed)
    geom = random_geometry(rng, kernels=(1, 3), max_extra=2, channels=(1, 2, 3))
    check_dw(geom, pick_pe(rng, geom.channels), seed, relu=bool(seed % 2),
             requantize=seed != 3)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_dwconv_fuzz(seed):
    rng = np.random.default_rng(200 + seed)
    geom = random_geometry(rng, max_extra=4, channels=(1, 2, 3, 4, 5, 6, 8))
    check_dw(geom, pick_pe(rng, geom.channels), seed, relu=bool(seed % 2),
             requantize=seed % 4 != 3)
