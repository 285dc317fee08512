"""What a build is made with, as one value apart from the build's state (FINN's
``DataflowBuildConfig``): :class:`CompileOptions` and its :class:`FoldingPolicy`.

    opts = CompileOptions(target="ulx3s-85f", weights="runtime",
                          folding=FoldingPolicy("device-fit", fraction=0.5,
                                                overrides={"fc_0": (2, 16)}))
    compile_model("mlp", "build/mlp", opts, calibration="x.npy")

``report.json`` records ``options`` (:meth:`CompileOptions.as_report`), so a build says
how it was made.  The keyword arguments of ``compile_model`` / ``compile_program``
(``target=``, ``fold=``...) still work: they make a CompileOptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ...errors import unknown_name
from ...hls.autofold import DEFAULT_FRACTION
from ...hls.folding import FoldingBudget
from ...passes import QuantConfig
from .steps import BuildError

__all__ = ["FoldingPolicy", "CompileOptions", "FOLDING_MODES", "OPTIMIZE_MODES"]

#: what the build is made for (``--optimize``)
OPTIMIZE_MODES = {
    "throughput": "the smallest initiation interval (the MVAUs double-buffer whole input "
                  "vectors, requantisers shared where results come seldom)",
    "latency": "the shortest time from the first input beat to the last output beat: "
               "the MVAUs start on partial input, requantisers unshared, automatic folding "
               "prefers wide SIMD (hls.autofold)",
}

#: how the folding is chosen
FOLDING_MODES = {
    "auto": "device-fit on a board target (unless a budget or an II is given), "
            "else balanced",
    "balanced": "the smallest initiation interval whose cheapest per-layer foldings fit "
                "the multiplier budget (or reach ii_target)",
    "device-fit": "a fraction of the board device's DSPs, LUTs and block RAMs (or the "
                  "cheapest folding reaching target_fps)",
}


@dataclass(frozen=True)
class FoldingPolicy:
    """How PE x SIMD is chosen for every folding stage: ``mode`` (:data:`FOLDING_MODES`),
    ``overrides`` fixing layers (``{"fc_0": (pe, simd)}``), the ``balanced`` mode's
    ``budget`` / ``ii_target``, the ``device-fit`` mode's ``fraction`` / ``target_fps``."""

    mode: str = "auto"
    overrides: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    budget: FoldingBudget | None = None
    ii_target: int | None = None
    target_fps: float | None = None
    fraction: float = DEFAULT_FRACTION
    #: device-fit: products beyond the DSPs may be LUT multipliers (within the LUT budget)
    lut_multipliers: bool = False

    def __post_init__(self) -> None:
        if self.mode not in FOLDING_MODES:
            raise unknown_name("folding mode", self.mode, FOLDING_MODES)
        if not 0 < self.fraction <= 1:
            raise BuildError(f"folding fraction {self.fraction} must be in (0, 1]")
        if self.mode == "device-fit" and (self.budget is not None or
                                          self.ii_target is not None):
            raise BuildError("automatic folding chooses the folding from the device's "
                             "budget: give --target-fps instead of --ii (target_fps, not "
                             "ii_target), and no multiplier budget (--macs)")
        object.__setattr__(self, "overrides",
                           {str(k): (int(p), int(s)) for k, (p, s) in
                            dict(self.overrides).items()})

    @property
    def auto_fold(self) -> bool | None:
        """The older three-way switch: None (auto), True (device-fit), False."""
        return {"auto": None, "device-fit": True, "balanced": False}[self.mode]

    @classmethod
    def from_auto_fold(cls, auto_fold: bool | None, **kw: Any) -> FoldingPolicy:
        mode = "auto" if auto_fold is None else "device-fit" if auto_fold else "balanced"
        return cls(mode, **kw)

    def as_report(self) -> dict[str, Any]:
        return {"mode": self.mode,
                "overrides": {k: {"pe": p, "simd": s} for k, (p, s) in self.overrides.items()},
                "budget": None if self.budget is None else asdict(self.budget),
                "ii_target": self.ii_target, "target_fps": self.target_fps,
                "fraction": self.fraction, "lut_multipliers": self.lut_multipliers}


@dataclass(frozen=True)
class CompileOptions:
    """Everything a build is made with: the ``target`` (``sim`` or a board), the
    ``weights`` mode (``const`` built in, ``runtime`` loaded through the registers), the
    design ``clock_mhz`` (default: the target's), the :class:`FoldingPolicy`, the
    quantisation config used when the model is float (default: int8 with float islands
    around ops without a fixed-point rule), and the accelerator's Verilog ``name``."""

    target: str = "sim"
    weights: str = "const"
    clock_mhz: float | None = None
    folding: FoldingPolicy = field(default_factory=FoldingPolicy)
    quant: QuantConfig | None = None
    name: str = "fluid_accel"
    #: :data:`OPTIMIZE_MODES`
    optimize: str = "throughput"

    def __post_init__(self) -> None:
        if self.optimize not in OPTIMIZE_MODES:
            raise unknown_name("optimize mode", self.optimize, OPTIMIZE_MODES)
        if self.weights not in ("const", "runtime"):
            raise BuildError(f"weights must be 'const' or 'runtime', not {self.weights!r}")
        if self.clock_mhz is not None and not self.clock_mhz > 0:
            raise BuildError(f"clock_mhz must be positive, got {self.clock_mhz}")
        if not self.name.isidentifier():
            raise BuildError(f"accelerator name {self.name!r} is not a Verilog identifier")

    @classmethod
    def from_kwargs(cls, *, target: str = "sim", weights: str = "const",
                    folding: Mapping[str, tuple[int, int]] | None = None,
                    budget: FoldingBudget | None = None, ii_target: int | None = None,
                    clock_mhz: float | None = None, quant_config: QuantConfig | None = None,
                    auto_fold: bool | None = None, target_fps: float | None = None,
                    fraction: float = DEFAULT_FRACTION, name: str = "fluid_accel",
                    lut_multipliers: bool = False, optimize: str = "throughput"
                    ) -> CompileOptions:
        """The options of the older keyword arguments of ``compile_model``."""
        policy = FoldingPolicy.from_auto_fold(auto_fold, overrides=dict(folding or {}),
                                              budget=budget, ii_target=ii_target,
                                              target_fps=target_fps, fraction=fraction,
                                              lut_multipliers=lut_multipliers)
        return cls(target, weights, clock_mhz, policy, quant_config, name, optimize)

    def as_report(self) -> dict[str, Any]:
        """``report.json``'s ``options``."""
        out = {"target": self.target, "weights": self.weights, "clock_mhz": self.clock_mhz,
               "folding": self.folding.as_report(), "name": self.name,
               "quant": None if self.quant is None else asdict(self.quant)}
        if self.optimize != "throughput":  # latency mode (throughput builds: no key)
            out["optimize"] = self.optimize
        return out
