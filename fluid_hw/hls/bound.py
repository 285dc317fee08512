"""How far a design is from the device's multiplier bound, and why.

The bound (issue 17): every hard multiplier of the device doing one MAC a cycle,
``multipliers x clock / MACs per inference`` inferences a second -- an initiation
interval of ``MACs / multipliers`` cycles.  :class:`Bound` holds a design's figures
against it at a clock (the assumed one before place and route, Fmax after): the
estimated II against the bound's, their ratio, the efficiency over all multipliers
the design builds (DSP and LUT products: ``MACs / (multipliers used x II)``), and
what keeps the folding from the next faster one (``binding``: ``DSP``, ``LUT``,
``BRAM``, ``a stage that cannot fold further: <stage> ...``, ``the sliding-window
generator ...``).

    b = Bound(macs=17_024, multipliers=156, clock_mhz=100, ii=256, multipliers_used=68)
    b.bound_ii, b.ratio, b.efficiency     # 109.1, 0.43, 0.98
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fluid_hw.rtl.spec import StageSpec

__all__ = ["Bound", "multiplier_bound", "macs_of", "multipliers_used"]


def macs_of(specs: Sequence[StageSpec]) -> int:
    """MACs per inference of the stages."""
    return sum(int(s.macs()) for s in specs)


def multipliers_used(specs: Sequence[StageSpec]) -> tuple[int, int]:
    """``(products, of them in LUTs)`` the stages build: PE x SIMD of every stage with
    MACs, and their ``lut_mults``."""
    used = [s for s in specs if s.macs()]
    return (sum(s.pe * s.simd for s in used),  # type: ignore[attr-defined]
            sum(int(getattr(s, "lut_mults", 0)) for s in used))


def multiplier_bound(macs: int, multipliers: int, clock_mhz: float, ii: float
                     ) -> dict[str, float | None]:
    """``multiplier_bound_per_s`` (``multipliers x clock / macs``) and
    ``throughput_vs_multiplier_bound`` of a design at initiation interval ``ii``: the
    keys the build report's bitstream and simulation figures use."""
    bound = multipliers * clock_mhz * 1e6 / macs if macs and multipliers else None
    tput = clock_mhz * 1e6 / ii if ii else None
    return {"multiplier_bound_per_s": bound,
            "throughput_vs_multiplier_bound": tput / bound if bound and tput else None}


@dataclass(frozen=True)
class Bound:
    """A design against the multiplier bound (see the module docstring)."""

    macs: int
    multipliers: int
    clock_mhz: float
    ii: int
    multipliers_used: int
    lut_products: int = 0
    #: what binds: "DSP", "LUT", "BRAM", or the stage / generator that cannot go faster
    binding: str = ""
    #: the figures behind ``binding``
    why: str = ""

    @property
    def bound_ii(self) -> float:
        return self.macs / self.multipliers if self.multipliers else float("inf")

    @property
    def bound_per_s(self) -> float | None:
        return multiplier_bound(self.macs, self.multipliers, self.clock_mhz, self.ii)[
            "multiplier_bound_per_s"]

    @property
    def ratio(self) -> float:
        """Throughput against the bound (the bound's II over the design's)."""
        return self.bound_ii / self.ii if self.ii else 0.0

    @property
    def efficiency(self) -> float:
        """MACs over (multipliers used x II): how busy the products built are."""
        used = self.multipliers_used * self.ii
        return self.macs / used if used else 0.0

    def as_report(self) -> dict[str, Any]:
        return {"macs_per_inference": self.macs, "multipliers": self.multipliers,
                "clock_mhz": self.clock_mhz, "multiplier_bound_per_s": self.bound_per_s,
                "bound_ii": round(self.bound_ii, 2), "initiation_interval": self.ii,
                "throughput_vs_multiplier_bound": round(self.ratio, 4),
                "multipliers_used": self.multipliers_used, "lut_multipliers": self.lut_products,
                "multiplier_efficiency": round(self.efficiency, 4),
                "binding": self.binding, "why": self.why}

    def describe(self) -> str:
        """One line for the compile listing."""
        lut = f" ({self.lut_products} in LUTs)" if self.lut_products else ""
        bound = self.bound_per_s
        line = (f"II {self.ii} against the bound's {self.bound_ii:.1f} "
                f"({self.multipliers} multipliers x {self.clock_mhz:g} MHz / {self.macs:,} "
                f"MACs = {bound or 0:,.0f}/s): {100 * self.ratio:.0f} % of the bound; "
                f"{self.multipliers_used} multipliers used{lut}, "
                f"{100 * self.efficiency:.0f} % busy; binds: {self.binding}")
        return line + (f" ({self.why})" if self.why else "")
