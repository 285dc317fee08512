"""Nearest-neighbour upsampling: bit-exact against its model (odd channels, factors 1 to
3, non-square factors, one-pixel rows, lanes) under random stalls on both sides, images
back to back; one output beat a cycle at full rate, with the output times the timing
model of the ``upsample`` kind predicts; what it refuses."""

import numpy as np
import pytest

from fluid_hw.hls.kinds.upsample import upsample_times
from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.upsample import Upsample, upsample_model

from .streams import run_full_rate, simulate_streams


def test_model_repeats_rows_then_pixels():
    x = np.arange(2 * 3 * 2).reshape(2, 3, 2)  # H, W, C
    y = upsample_model(x, (2, 3))
    assert y.shape == (4, 9, 2)
    assert y[:, :, 1].tolist()[0] == [1, 1, 1, 3, 3, 3, 5, 5, 5]
    assert (y[0] == y[1]).all() and (y[2] == y[3]).all() and (y[1] != y[2]).any()


def _beats(images: list[np.ndarray], lanes: int) -> list[int]:
    flat = np.concatenate([im.reshape(-1) for im in images])
    return [pack_lanes(flat[i:i + lanes], 8) for i in range(0, len(flat), lanes)]


def _elements(words: list[int], lanes: int) -> np.ndarray:
    return np.array([v for w in words for v in unpack_lanes(w, lanes, 8)])


@pytest.mark.parametrize("c,h,w,factor,lanes,seed", [
    (3, 4, 5, (2, 2), 1, 0),     # odd channels
    (6, 3, 3, (3, 1), 3, 1),     # rows only, lanes
    (4, 2, 4, (1, 3), 2, 2),     # pixels only
    (5, 3, 2, (1, 1), 5, 3),     # identity, a whole pixel a beat
    (2, 3, 1, (3, 2), 1, 4),     # one-pixel rows
    (1, 2, 3, (2, 3), 1, 5),     # one channel, non-square
])
def test_upsample_is_bit_exact_under_random_stalls(c, h, w, factor, lanes, seed):
    rng = np.random.default_rng(seed)
    images = [rng.integers(-128, 128, (h, w, c)) for _ in range(2)]
    images[0][0, 0, 0], images[1][-1, -1, -1] = -128, 127
    dut = Upsample("up", c, w, factor, lanes)
    want = np.concatenate([upsample_model(im, factor).reshape(-1) for im in images])
    (out,) = simulate_streams(dut, [(dut.i, _beats(images, lanes))],
                              [(dut.o, len(want) // lanes)], seed=seed, p_valid=0.6,
                              p_ready=0.6)
    np.testing.assert_array_equal(_elements(out, lanes), want)


@pytest.mark.parametrize("c,h,w,factor,lanes", [(3, 3, 4, (2, 2), 1), (4, 2, 3, (1, 3), 2),
                                                (2, 3, 2, (3, 1), 1)])
def test_full_rate_and_the_timing_model(c, h, w, factor, lanes):
    """Input offered every cycle, output always ready: one output beat a cycle once the
    first beat is out, and every beat when the kind's timing model says."""

    rng = np.random.default_rng(7)
    im = rng.integers(-128, 128, (h, w, c))
    beats = _beats([im], lanes)
    n_out = h * w * c * factor[0] * factor[1] // lanes
    dut = Upsample("up", c, w, factor, lanes)
    _, outs, vals = run_full_rate(dut, [(dut.i, beats)], n_out)
    np.testing.assert_array_equal(_elements(vals, lanes), upsample_model(im, factor).reshape(-1))
    assert np.diff(outs).tolist() == [1] * (n_out - 1)
    from fluid_hw.rtl.upsample_spec import UpsampleSpec

    spec = UpsampleSpec("up", (c, h, w), factor)
    offered = np.repeat(np.arange(len(beats), dtype=float), lanes)  # a beat a cycle
    model = upsample_times(spec, (lanes, lanes), offered)[::lanes]
    np.testing.assert_array_equal(model, outs)


def test_upsample_errors():
    with pytest.raises(HardwareConfigError, match=r"upsample 'u': lanes=2 must divide the 3"):
        Upsample("u", 3, 4, (2, 2), 2)
    with pytest.raises(HardwareConfigError, match=r"upsample 'u': vertical factor must be an "
                                                  r"integer >= 1, got 0"):
        Upsample("u", 3, 4, (0, 2), 1)
    with pytest.raises(HardwareConfigError, match=r"factor must be \(fy, fx\)"):
        Upsample("u", 3, 4, (2,), 1)
