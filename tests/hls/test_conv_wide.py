"""The conv kind's models on the wide window generator (thin inputs, SIMD > C): cycles,
per-element times and latency against amaranth.sim, and autofold choosing a wide SIMD
for LeNet-5's 1-channel first convolution, where the narrow generator capped it at
19,656 cycles an image for any folding."""

from __future__ import annotations

import numpy as np
import pytest

from fluid_hw.boards import get_device
from fluid_hw.hls.autofold import autofold
from fluid_hw.hls.kinds import kind_of
from fluid_hw.hls.stages import ConvStage, MaxPoolStage, MVAUStage, estimate_pipeline
from fluid_hw.rtl import hwc_order

from .test_stages import measure

RNG = np.random.default_rng(5)


def conv(name, shape, m, k, pad, pe, simd, stride=1):
    c = shape[0]
    kk = (k, k) if isinstance(k, int) else k
    return ConvStage(name, shape, m, kernel=kk, padding=pad, stride=stride, pe=pe,
                     simd=simd, relu=True, weights=RNG.integers(-127, 128, (m, c, *kk)),
                     bias=RNG.integers(-500, 500, m), multiplier=RNG.integers(1, 2**15, m),
                     shift=RNG.integers(14, 17, m))


def fc(name, mw, mh, relu=True):
    return MVAUStage(name, mw, mh, relu=relu, weights=RNG.integers(-127, 128, (mh, mw)),
                     bias=RNG.integers(-500, 500, mh), multiplier=RNG.integers(1, 2**15, mh),
                     shift=RNG.integers(14, 17, mh))


@pytest.mark.parametrize("make", [
    lambda: [conv("c1", (1, 9, 9), 4, 5, 2, 4, 25), MaxPoolStage("p1", (4, 9, 9), 2)],
    lambda: [conv("c1", (1, 9, 9), 4, 5, 2, 2, 5)],
    lambda: [conv("c1", (1, 13, 6), 4, (10, 4), (4, 1, 5, 1), 2, 40, stride=2)],
    lambda: [conv("c1", (2, 6, 6), 4, 3, 1, 1, 6), conv("c2", (4, 6, 6), 4, 3, 1, 2, 4)],
], ids=["lenet-like-pool", "row-beats", "ds-cnn-like", "two-channel-then-narrow"])
def test_wide_estimates_match_simulation(make):
    stages = make()
    assert stages[0].wide_window
    est = estimate_pipeline(stages)
    latency, iis = measure(stages)
    assert abs(latency - est.latency_cycles) <= 0.05 * latency
    assert abs(iis[-1] - est.initiation_interval) <= 0.03 * iis[-1]


def test_wide_cycles_follow_the_folding():
    """LeNet conv1 (1x28x28, 6@5x5 pad 2): the narrow generator's 28 x (28 x 25 + 2)
    cycles at SIMD 1; the wide one's pixels x neuron folds x synapse folds plus each
    row's first window (eff_kw - pad_left shifts)."""
    def cycles(pe, simd):
        s = conv("c1", (1, 28, 28), 6, 5, 2, pe, simd)
        return kind_of(s).cycles(s, (s.in_lanes, s.out_lanes))
    assert cycles(6, 1) == 28 * (28 * 25 + 2)
    assert cycles(6, 25) == 28 * (3 + 27)
    assert cycles(2, 25) == 28 * 28 * 3
    assert cycles(6, 5) == 28 * 28 * 5
    s = conv("c1", (1, 28, 28), 6, 5, 2, 6, 25)
    mems = kind_of(s).memories(s, (1, 6))
    assert (28, 8 * 6, "ram") in mems   # a column of the 6 row slots per image column


def test_autofold_gives_lenet_conv1_a_wide_simd():
    specs = [conv("conv1", (1, 28, 28), 6, 5, 2, 1, 1), MaxPoolStage("pool1", (6, 28, 28), 2),
             conv("conv2", (6, 14, 14), 16, 5, 0, 1, 1), MaxPoolStage("pool2", (16, 10, 10), 2),
             fc("fc1", 400, 120), fc("fc2", 120, 84), fc("fc3", 84, 10, relu=False)]
    specs[4] = MVAUStage("fc1", 400, 120, relu=True,
                         weights=RNG.integers(-127, 128, (120, 400))[:, hwc_order(16, 5, 5)],
                         bias=RNG.integers(-500, 500, 120),
                         multiplier=RNG.integers(1, 2**15, 120), shift=RNG.integers(14, 17, 120))
    a = autofold(specs, get_device("LFE5U-85F"))
    pe, simd = a.folding["conv1"]
    conv1 = conv("conv1", (1, 28, 28), 6, 5, 2, pe, simd)
    assert simd > 1 and conv1.wide_window
    assert a.initiation_interval < 19_656 / 3
    assert a.resources["dsp"] <= a.limits["dsp"] and a.resources["lut"] <= a.limits["lut"]
