"""autofold's latency mode: on the ULX3S-85F the jet-tagging MLP's folding has a smaller
estimated latency than the balanced (smallest-II) folding built the same way, and fits
the budget with one requantiser lane (two DSPs) a PE."""

import sys
from dataclasses import replace
from itertools import pairwise

from fluid_hw.boards import get_board
from fluid_hw.hls import latency_fold
from fluid_hw.hls.autofold import autofold
from fluid_hw.hls.stages import MVAUStage, estimate_pipeline
from fluid_hw.rtl.mvau import mvau_latency


def test_latency_mode_lowers_the_latency_within_the_budget():
    dev = get_board("ulx3s-85f").device
    dims = [16, 64, 32, 32, 5]
    specs = [MVAUStage(f"fc_{i}", a, b, weights_mode="runtime", stream_input=True)
             for i, (a, b) in enumerate(pairwise(dims))]
    fast = autofold([replace(s, stream_input=False) for s in specs], dev)
    balanced = estimate_pipeline([replace(s, pe=fast.folding[s.name][0],
                                          simd=fast.folding[s.name][1]) for s in specs])
    low = autofold(specs, dev, optimize="latency")
    assert low.latency_cycles < balanced.latency_cycles
    assert all(low.resources[r] <= low.limits[r] for r in low.limits)
    chosen = [replace(s, pe=low.folding[s.name][0], simd=low.folding[s.name][1])
              for s in specs]
    assert estimate_pipeline(chosen).latency_cycles == low.latency_cycles
    # one requantiser lane a PE: two DSPs each, on top of the products
    assert low.resources["dsp"] >= sum(s.pe * s.simd + 2 * s.pe for s in chosen)


def _jet_specs():
    return [MVAUStage(f"fc_{i}", a, b, weights_mode="runtime", stream_input=True)
            for i, (a, b) in enumerate(pairwise([16, 64, 32, 32, 5]))]


def test_latency_search_beats_the_greedy_descent_and_keeps_the_estimate_exact(monkeypatch):
    """The search over the layers' folding combinations (hls.latency_fold) finds a
    smaller latency for the jet MLP than the greedy descent alone, within the budget,
    every product a DSP, and the estimate is the timing model's."""
    dev = get_board("ulx3s-85f").device
    specs = _jet_specs()
    low = autofold(specs, dev, optimize="latency")
    assert not low.lut_mults
    assert all(low.resources[r] <= low.limits[r] for r in low.limits)
    chosen = [replace(s, pe=low.folding[s.name][0], simd=low.folding[s.name][1])
              for s in specs]
    assert estimate_pipeline(chosen).latency_cycles == low.latency_cycles
    monkeypatch.setattr(sys.modules["fluid_hw.hls.autofold"], "latency_search",
                        lambda *a, **k: None)
    greedy = autofold(specs, dev, optimize="latency")
    assert low.latency_cycles < greedy.latency_cycles


def test_latency_search_with_lut_multipliers_counts_their_luts():
    """With LUT multipliers the latency falls further, and the LUTs the design takes
    are paid for at LUTS_PER_CYCLE: no more than the budget's worth of cycles."""
    dev = get_board("ulx3s-85f").device
    specs = _jet_specs()
    dsp_only = autofold(specs, dev, optimize="latency")
    lut = autofold(specs, dev, optimize="latency", lut_multipliers=True)
    assert lut.lut_mults and lut.latency_cycles < dsp_only.latency_cycles
    assert all(lut.resources[r] <= lut.limits[r] for r in lut.limits)
    gained = dsp_only.latency_cycles - lut.latency_cycles
    spent = lut.resources["lut"] - dsp_only.resources["lut"]
    assert gained >= spent / latency_fold.LUTS_PER_CYCLE * (1 - latency_fold.SLACK)


def test_proxy_latency_counts_the_first_folds_overlap():
    # one layer, input in 4 beats a cycle apart: NF * SF - (SF - 1) + depth + link
    depth = mvau_latency(4, pe=2, sf=4, stream_input=True)
    assert latency_fold.proxy_latency([(16, 8, 2, 4)]) == \
        16 - 3 + depth + latency_fold._LINK


def test_latency_search_keeps_a_requested_rate():
    """With --target-fps the latency search takes no layer slower than the rate's II
    (the jet MLP's smallest-score folding with LUT products has II 32)."""
    dev = get_board("ulx3s-85f").device
    low = autofold(_jet_specs(), dev, optimize="latency", lut_multipliers=True,
                   target_fps=100e6 / 16, clock_mhz=100)
    assert low.initiation_interval <= 16
    assert all(low.resources[r] <= low.limits[r] for r in low.limits)
