"""The designs the Verilator tests share (each is built once and cached)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from fluid_hw.hls import ConvStage, MaxPoolStage, MVAUStage
from fluid_hw.rtl import AcceleratorTop


def mlp_params(seed: int, dims=(64, 32, 16, 10)) -> list[dict]:
    """Random int8 weights W [K, C], int32 biases, per-channel multipliers/shifts that
    keep most outputs inside int8."""
    rng = np.random.default_rng(seed)
    out = []
    for k, c in pairwise(dims):
        out.append({"w": rng.integers(-127, 128, (k, c)), "b": rng.integers(-3000, 3000, c),
                    "m": rng.integers(2**13, 2**15, c),
                    "n": rng.integers(20, 23, c) + int(np.log2(k) // 2)})
    return out


def mlp_stages(params: list[dict], mode: str = "const",
               folding=((4, 8), (2, 8), (2, 4))) -> list[MVAUStage]:
    n = len(params)
    return [MVAUStage.from_fc(f"fc{i + 1}", p["w"], bias=p["b"], multiplier=p["m"],
                              shift=p["n"], relu=i < n - 1, pe=pe, simd=simd,
                              weights_mode=mode)
            for i, (p, (pe, simd)) in enumerate(zip(params, folding))]


def mlp_top(seed: int = 0, mode: str = "const") -> tuple[AcceleratorTop, list[dict]]:
    params = mlp_params(seed)
    return AcceleratorTop(mlp_stages(params, mode), name="mlp_accel"), params


def conv_params(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"w": rng.integers(-127, 128, (4, 1, 3, 3)), "b": rng.integers(-500, 500, 4),
            "m": rng.integers(2**13, 2**15, 4), "n": rng.integers(15, 17, 4)}


def conv_top(seed: int = 0) -> tuple[AcceleratorTop, dict]:
    """1x8x8 input, 3x3 conv with padding 1 and 4 filters, relu, then a 2x2 max pool;
    built with ECP5 TRELLIS_FF input copies (simulated through their model)."""
    p = conv_params(seed)
    stages = [ConvStage("conv1", (1, 8, 8), 4, kernel=3, padding=1, pe=2, simd=3,
                        weights=p["w"], bias=p["b"], multiplier=p["m"], shift=p["n"],
                        relu=True),
              MaxPoolStage("pool1", (4, 8, 8), 2)]
    return AcceleratorTop(stages, name="conv_accel", ff_style="trellis"), p
