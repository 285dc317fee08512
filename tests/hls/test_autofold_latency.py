"""autofold's latency mode: on the ULX3S-85F the jet-tagging MLP's folding has a smaller
estimated latency than the balanced (smallest-II) folding built the same way, and fits
the budget with one requantiser lane (two DSPs) a PE."""

from dataclasses import replace
from itertools import pairwise

from fluid_hw.boards import get_board
from fluid_hw.hls.autofold import autofold
from fluid_hw.hls.stages import MVAUStage, estimate_pipeline


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
