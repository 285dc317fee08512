"""``simulate``'s figures at the bitstream's Fmax: measured cycles x post-route Fmax,
and the share of the device's multiplier bound (the throughput goals' measure)."""

import numpy as np

from fluid_hw.backends.fpga.simulate import _at_fmax
from fluid_hw.hls.stages import MVAUStage


def _specs():
    rng = np.random.default_rng(0)
    return [MVAUStage("fc_0", 64, 32, pe=1, simd=8, weights=rng.integers(-127, 128, (32, 64)),
                      bias=np.zeros(32, int), multiplier=np.ones(32, int),
                      shift=np.zeros(32, int))]


def test_measured_cycles_times_the_post_route_fmax():
    report = {"fmax_mhz": 90.0, "resources_available": {"dsp": 156}}
    r = _at_fmax(report, _specs(), 256.0, 300.0)
    assert r["throughput_per_s"] == 90e6 / 256
    assert r["latency_us"] == 300.0 / 90.0
    assert r["macs_per_inference"] == 64 * 32
    # MACs / (multipliers x II): the bound's share does not depend on Fmax
    assert np.isclose(r["throughput_vs_multiplier_bound"], 64 * 32 / (156 * 256))


def test_nothing_without_a_bitstream_or_a_measured_interval():
    assert _at_fmax({}, _specs(), 256.0, 300.0) is None
    assert _at_fmax({"fmax_mhz": 90.0}, _specs(), float("nan"), 300.0) is None
    r = _at_fmax({"fmax_mhz": 90.0}, _specs(), 256.0, 300.0)  # device size unknown
    assert r["throughput_vs_multiplier_bound"] is None and r["throughput_per_s"] > 0
