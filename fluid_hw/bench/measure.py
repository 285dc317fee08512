"""Timing: warm repeated calls, their median and 99th percentile.

Every figure of ``fluid-hw bench`` that is a time measured on this machine comes
from :func:`time_calls`: two warm-up calls, then calls until both a minimum count
and a time budget are reached (or a maximum count), each timed with
``time.perf_counter`` around the whole call (feed to fetched result).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Timing", "time_calls"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call over ``runs`` warm calls."""

    median_s: float
    p99_s: float
    runs: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median_us": self.median_s * 1e6, "p99_us": self.p99_s * 1e6,
                "runs": self.runs}


def time_calls(fn: Callable[[], object], budget_s: float, min_runs: int = 5,
               max_runs: int = 2000, warmup: int = 2) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then at least ``min_runs`` and at most
    ``max_runs`` timed ones, stopping once ``budget_s`` seconds of timed calls passed."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < max_runs and (len(times) < min_runs or spent < budget_s):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    a = np.asarray(times)
    return Timing(float(np.median(a)), float(np.percentile(a, 99)), len(times))
