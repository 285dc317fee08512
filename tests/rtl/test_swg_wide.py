"""Wide sliding-window generator (thin inputs, SIMD lanes a beat): bit-exact against
swg_model, several images back to back, random stalls on both sides; its cycles at
full rate against wide_window_cycles."""

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.conv import ConvUnit, conv2d_model
from fluid_hw.rtl.swg import WindowGeometry, swg_model
from fluid_hw.rtl.swg_wide import WideWindow, use_wide_window, wide_window_cycles

from .streams import run_full_rate, simulate_streams

GEOMS = [
    # C, H, W, kernel, stride, pads, dilation, lanes, simd
    (1, 8, 8, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1, 25),   # LeNet conv1, whole window
    (1, 8, 8, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1, 5),    # a kernel row a beat
    (1, 11, 6, (10, 4), (2, 2), (4, 1, 5, 1), (1, 1), 1, 8),  # DS-CNN conv1 (smaller)
    (1, 11, 6, (10, 4), (2, 2), (4, 1, 5, 1), (1, 1), 1, 20),
    (2, 6, 7, (3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 1, 9),    # 2 channels, 1 lane in
    (2, 6, 5, (3, 3), (2, 1), (0, 1, 1, 0), (1, 1), 2, 6),
    (3, 5, 5, (3, 2), (1, 1), (1, 0, 1, 1), (2, 2), 3, 18),   # dilation
    (1, 3, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 3),    # whole image buffered
    (1, 7, 9, (2, 2), (3, 3), (0, 0, 0, 0), (1, 1), 1, 4),    # stride beyond the kernel
]


def _beats(images_hwc, lanes):
    flat = np.concatenate([im.reshape(-1) for im in images_hwc])
    return [pack_lanes(flat[i:i + lanes], 8) for i in range(0, len(flat), lanes)]


def _run(geom, lanes, simd, seed, n_images=3):
    rng = np.random.default_rng(seed)
    images = [rng.integers(-128, 128, (geom.height, geom.width, geom.channels))
              for _ in range(n_images)]
    dut = WideWindow("swg", geom, lanes, simd)
    expect = np.concatenate([swg_model(im, geom, 1, "kkc", 0).reshape(-1) for im in images])
    (out,) = simulate_streams(dut, [(dut.i, _beats(images, lanes))],
                              [(dut.o, len(expect) // simd)], seed=seed)
    got = np.array([v for wd in out for v in unpack_lanes(wd, simd, 8)])
    np.testing.assert_array_equal(got, expect, err_msg=f"{geom} lanes {lanes} simd {simd}")


@pytest.mark.parametrize("c,h,w,k,s,p,d,lanes,simd", GEOMS)
def test_wide_window(c, h, w, k, s, p, d, lanes, simd):
    _run(WindowGeometry(c, h, w, k, s, p, d), lanes, simd, c * h * w + simd)


def _random_geometry(rng):
    while True:
        k = tuple(int(v) for v in rng.choice([1, 2, 3, 4, 5], 2))
        d = (int(rng.choice([1, 1, 2])), int(rng.choice([1, 1, 2])))
        s = (int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 3])))
        c = int(rng.choice([1, 1, 2, 3]))
        ek = ((k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1)
        p = tuple(int(rng.integers(0, e)) for e in (*ek, *ek))
        geom = WindowGeometry(c, int(rng.integers(1, 10)), int(rng.integers(1, 10)), k, s,
                              (p[0], p[1], p[2], p[3]), d)
        try:
            geom.check("swg")
        except HardwareConfigError:
            continue
        n = geom.window_size
        simds = [v for v in range(c + 1, n + 1) if n % v == 0]
        if not simds:
            continue
        lanes = int(rng.choice([v for v in (1, 2, 3) if c % v == 0]))
        return geom, lanes, int(rng.choice(simds))


@pytest.mark.parametrize("seed", range(12))
def test_wide_window_fuzzed(seed):
    """Random kernels, strides, dilations, paddings, images from 1x1 up, SIMD any
    divisor of the window above C: the loader's row bookkeeping and the assembler's
    padding columns against the model."""
    rng = np.random.default_rng(2000 + seed)
    geom, lanes, simd = _random_geometry(rng)
    _run(geom, lanes, simd, seed)


@pytest.mark.parametrize("geom,simd", [
    (WindowGeometry(1, 28, 28, (5, 5), (1, 1), (2, 2, 2, 2)), 25),
    (WindowGeometry(1, 28, 28, (5, 5), (1, 1), (2, 2, 2, 2)), 5),
    (WindowGeometry(1, 49, 10, (10, 4), (2, 2), (4, 1, 5, 1)), 40),
])
def test_wide_window_cycles(geom, simd):
    """Images streamed at full rate with the output always ready: the cycles between
    the first window beat of two consecutive images against wide_window_cycles, or
    the input's one element a cycle where that is slower (DS-CNN's 49x10)."""
    rng = np.random.default_rng(0)
    images = [rng.integers(-128, 128, (geom.height, geom.width, 1)) for _ in range(3)]
    dut = WideWindow("swg", geom, 1, simd)
    per_image = geom.out_hw[0] * geom.out_hw[1] * geom.window_size // simd
    _taken, times, _vals = run_full_rate(dut, [(dut.i, _beats(images, 1))], 3 * per_image)
    measured = times[2 * per_image] - times[per_image]
    expect = max(wide_window_cycles(geom, simd), geom.height * geom.width)
    assert measured == pytest.approx(expect, rel=0.02)


@pytest.mark.parametrize("geom,m,pe,simd", [
    (WindowGeometry(1, 7, 7, (5, 5), (1, 1), (2, 2, 2, 2)), 6, 3, 25),
    (WindowGeometry(1, 7, 7, (5, 5), (1, 1), (2, 2, 2, 2)), 6, 6, 5),
    (WindowGeometry(1, 11, 6, (10, 4), (2, 2), (4, 1, 5, 1)), 4, 2, 40),
    (WindowGeometry(2, 5, 6, (3, 3), (1, 1), (1, 1, 1, 1)), 4, 1, 6),
])
def test_conv_unit_wide(geom, m, pe, simd):
    """The convolution unit on the wide path (requantised, relu) against conv2d_model,
    two images, random stalls on both sides."""
    rng = np.random.default_rng(m * simd)
    c = geom.channels
    filt = rng.integers(-127, 128, (m, c, *geom.kernel))
    rq = dict(bias=rng.integers(-800, 800, m), multiplier=rng.integers(1, 2**15, m),
              shift=rng.integers(15, 18, m), relu=True)
    mat = filt.transpose(0, 2, 3, 1).reshape(m, -1)
    dut = ConvUnit("conv1", geom, m, pe, simd, weights=mat, **rq)
    assert dut.wide and dut.lanes == np.gcd(c, simd)
    images = [rng.integers(-128, 128, (geom.height, geom.width, c)) for _ in range(2)]
    expect = np.concatenate([conv2d_model(im, filt, geom, **rq).reshape(-1) for im in images])
    (out,) = simulate_streams(dut, [(dut.i, _beats(images, dut.lanes))],
                              [(dut.o, len(expect) // pe)], seed=simd)
    got = np.array([v for wd in out for v in unpack_lanes(wd, pe, 8)])
    np.testing.assert_array_equal(got, expect)


def test_wide_window_choice_and_errors():
    lenet = WindowGeometry(1, 28, 28, (5, 5), (1, 1), (2, 2, 2, 2))
    assert use_wide_window(lenet, 25) and use_wide_window(lenet, 5)
    assert not use_wide_window(lenet, 1)
    assert not use_wide_window(WindowGeometry(8, 8, 8, (3, 3)), 8)   # C >= SIMD
    with pytest.raises(HardwareConfigError, match="must be larger than the 1 input"):
        WideWindow("conv1", lenet, 1, 1)
    with pytest.raises(HardwareConfigError, match="divide 25, not 10"):
        WideWindow("conv1", lenet, 1, 10)


@pytest.mark.parametrize("shape,m,k,pad,pe,simd,stride,registered", [
    ((1, 9, 9), 6, 5, 2, 6, 5, 1, False),             # LeNet conv1's folding, smaller
    ((1, 13, 6), 4, (10, 4), (4, 1, 5, 1), 2, 40, 2, False),  # DS-CNN conv1's kernel
    # the copy on registered state (the consumer's period hides its cycle)
    ((1, 9, 9), 6, 5, 2, 2, 25, 1, True),             # padded, nf 3, sf 1
    ((6, 7, 7), 16, 5, 0, 2, 30, 1, True),            # LeNet conv2's folding: nf 8, sf 5
    ((2, 8, 7), 4, 3, 1, 1, 6, 2, True),              # padded, strided, nf 4, sf 3
])
def test_wide_conv_cycle_model_is_exact(shape, m, k, pad, pe, simd, stride, registered):
    """The conv kind's cycle model of the wide path (the input skid buffer's cycle in
    WIDE_ROW_READY_DELAY included; the copy on registered state where the consumer's
    period allows) equals amaranth.sim to the cycle: the latency of the first inference
    and the initiation interval, input always valid, output always ready."""
    from fluid_hw.hls.stages import estimate_pipeline
    from fluid_hw.rtl.swg_wide import wide_window_registered
    from tests.hls.test_conv_wide import conv
    from tests.hls.test_stages import measure

    stages = [conv("c1", shape, m, k, pad, pe, simd, stride=stride)]
    assert stages[0].wide_window
    s = stages[0]
    assert wide_window_registered(s.geometry, simd, s.nf * s.sf) == registered
    est = estimate_pipeline(stages)
    latency, iis = measure(stages)
    assert (latency, iis[-1]) == (est.latency_cycles, est.initiation_interval)
