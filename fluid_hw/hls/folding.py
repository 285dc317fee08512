"""Folding: how many processing elements (PE, rows in parallel) and SIMD lanes
(columns in parallel) each matrix stage gets.

* :func:`balance` -- the default: the smallest initiation interval ``T`` for which
  every stage can reach ``T`` cycles with the fewest multipliers, within a
  :class:`FoldingBudget` (multipliers, or a board's DSP/LUT/BRAM).  So every stage's
  cycles are close to the slowest one's and no multiplier is spent on a stage that
  would only wait.  ``ii_target=`` asks for a throughput instead.
* A per-layer folding ``{"fc_0": (pe, simd)}`` (``--fold fc_0=4x8``) overrides it;
  :func:`parse_folding` reads the command-line form, :func:`check_folding` explains
  a folding that does not divide the layer.

A :class:`FoldUnit` is one matrix stage plus the stages whose speed follows from its
folding (a max pool behind a convolution takes its lanes from the conv's PE); its
cost for a candidate ``(pe, simd)`` comes from :mod:`.stages`'s estimates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from math import floor

from fluid_hw.rtl import stage_lanes
from fluid_hw.rtl.spec import StageSpec

from ..errors import FoldingError
from .stages import Resources, estimate_stage

__all__ = ["FoldingError", "FoldingBudget", "FoldUnit", "DEFAULT_BUDGET", "divisors", "ii_for_rate",
           "candidates", "balance", "parse_folding", "check_folding", "format_folding"]

Folding = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class FoldingBudget:
    """Limits a folding must respect; ``None`` = no limit.  ``macs``: int8 multipliers
    of the matrix units (sum of PE x SIMD); ``dsp``/``lut``/``ff``/``bram``: the
    estimated resources of the stages (e.g. a board's, minus a margin)."""

    macs: int | None = None
    dsp: int | None = None
    lut: int | None = None
    ff: int | None = None
    bram: int | None = None

    def fits(self, macs: int, res: Resources) -> bool:
        for limit, used in ((self.macs, macs), (self.dsp, res.dsp), (self.lut, res.lut),
                            (self.ff, res.ff), (self.bram, res.bram)):
            if limit is not None and used > limit:
                return False
        return True

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in (("macs", self.macs), ("dsp", self.dsp),
                                          ("lut", self.lut), ("ff", self.ff),
                                          ("bram", self.bram)) if v is not None]
        return ", ".join(parts) or "no limit"


#: The default: 128 int8 multipliers (fits an LFE5U-85F's 156 MULT18X18D with the
#: requantisers of a small network; a digits MLP then runs at II 256).
DEFAULT_BUDGET = FoldingBudget(macs=128)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(mw: int, mh: int) -> list[tuple[int, int]]:
    """Every legal ``(pe, simd)``: PE divides the ``mh`` outputs, SIMD the ``mw`` inputs."""
    return [(pe, simd) for pe in divisors(mh) for simd in divisors(mw)]


@dataclass(frozen=True)
class _Option:
    ii: int
    macs: int
    res: Resources
    pe: int
    simd: int

    @property
    def key(self) -> tuple[int, int, int, int, int]:
        """Cheapest first: multipliers, DSPs, LUTs, then the faster, then wider SIMD."""
        return (self.macs, self.res.dsp, self.res.lut, self.ii, -self.simd)

    @property
    def dsp_key(self) -> tuple[int, int, int, int, int]:
        """Cheapest in hard multipliers first (a device budget: a requantiser lane
        costs two DSPs, so PE lanes cost more than SIMD lanes of equal MACs)."""
        return (self.res.dsp, self.macs, self.res.lut, self.ii, -self.simd)


@dataclass
class FoldUnit:
    """One matrix stage (``name``, an ``mw`` x ``mh`` matrix) and ``make(pe, simd)``:
    trial stages (runtime weights, no arrays) for that folding -- the matrix stage and
    any stage behind it whose speed follows from it."""

    name: str
    mw: int
    mh: int
    make: Callable[[int, int], Sequence[StageSpec]]
    _cache: dict[tuple[int, int], _Option] = field(default_factory=dict, repr=False)

    def option(self, pe: int, simd: int) -> _Option:
        key = (pe, simd)
        if key not in self._cache:
            stages = list(self.make(pe, simd))
            lanes = stage_lanes(stages)
            ii, res = 0, Resources()
            prev = None
            for s, ln in zip(stages, lanes):
                e = estimate_stage(s, ln, prev)
                ii, res, prev = max(ii, e.ii), res + e.resources, ln[1]
            self._cache[key] = _Option(ii, pe * simd, res, pe, simd)
        return self._cache[key]

    @cached_property
    def options(self) -> list[_Option]:
        return sorted((self.option(pe, simd) for pe, simd in candidates(self.mw, self.mh)),
                      key=lambda o: o.key)


def check_folding(units: Sequence[FoldUnit], folding: Mapping[str, tuple[int, int]]) -> None:
    """Every named layer exists and its ``(pe, simd)`` divides it; the error lists the
    layers or the valid values."""
    by_name = {u.name: u for u in units}
    for name, ps in folding.items():
        if name not in by_name:
            raise FoldingError(f"--fold names layer {name!r}, which is not a matrix stage of "
                               f"this model; its layers: {', '.join(by_name) or 'none'}")
        u = by_name[name]
        try:
            pe, simd = (int(v) for v in ps)
        except (TypeError, ValueError):
            raise FoldingError(f"layer {name!r}: folding must be (pe, simd), got {ps!r}") \
                from None
        if pe < 1 or u.mh % pe:
            raise FoldingError(f"layer {name!r}: PE={pe} must divide its {u.mh} outputs; "
                               f"valid PE: {', '.join(map(str, divisors(u.mh)))}")
        if simd < 1 or u.mw % simd:
            raise FoldingError(f"layer {name!r}: SIMD={simd} must divide its {u.mw} inputs "
                               f"per output; valid SIMD: {', '.join(map(str, divisors(u.mw)))}")


def balance(units: Sequence[FoldUnit], budget: FoldingBudget | None = DEFAULT_BUDGET, *,
            fixed: Mapping[str, tuple[int, int]] | None = None,
            ii_target: int | None = None) -> Folding:
    """A balanced folding of ``units`` (see the module docstring).  ``fixed``: layers
    whose folding is given (the others are balanced around them within the budget;
    when every layer is given, that folding is used as it is); ``budget=None``: no
    limit (the fastest folding whose stages are all equally fast); ``ii_target``: the
    cheapest folding reaching that initiation interval (it must still fit the
    budget)."""
    fixed = dict(fixed or {})
    check_folding(units, fixed)
    if all(u.name in fixed for u in units):  # every layer given: the caller decided
        return {u.name: tuple(int(v) for v in fixed[u.name]) for u in units}  # type: ignore[misc]
    budget = budget or FoldingBudget()
    choice: dict[str, list[_Option]] = {}
    for u in units:
        if u.name in fixed:
            choice[u.name] = [u.option(*(int(v) for v in fixed[u.name]))]
        else:
            choice[u.name] = u.options

    # the binding limit decides what "cheapest" means: multipliers for a MAC budget,
    # DSPs (products and requantisers) for a device's
    by_dsp = budget.macs is None and budget.dsp is not None

    def assign(t: int) -> list[_Option] | None:
        out = []
        for u in units:
            fit = [o for o in choice[u.name] if o.ii <= t]
            if not fit:
                return None
            out.append(min(fit, key=lambda o: o.dsp_key if by_dsp else o.key))
        return out

    def total(opts: list[_Option]) -> tuple[int, Resources]:
        res = Resources()
        for o in opts:
            res = res + o.res
        return sum(o.macs for o in opts), res

    if ii_target is not None:
        opts = assign(int(ii_target))
        if opts is None:
            fastest = max(min(o.ii for o in choice[u.name]) for u in units)
            raise FoldingError(f"no folding reaches an initiation interval of {ii_target} "
                               f"cycles; the fastest possible is {fastest}")
        macs, res = total(opts)
        if not budget.fits(macs, res):
            raise FoldingError(f"initiation interval {ii_target} needs {macs} multipliers "
                               f"({res}), beyond the budget ({budget.describe()})")
        return {u.name: (o.pe, o.simd) for u, o in zip(units, opts)}
    targets = sorted({o.ii for u in units for o in choice[u.name]})
    for t in targets:
        opts = assign(t)
        if opts is None:
            continue
        macs, res = total(opts)
        if budget.fits(macs, res):
            return {u.name: (o.pe, o.simd) for u, o in zip(units, opts)}
    slow = assign(targets[-1]) if targets else []
    macs, res = total(slow or [])
    given = [u.name for u in units if u.name in fixed]
    why = f" with the given folding of {', '.join(given)}" if given else ""
    raise FoldingError(f"even the slowest folding needs {macs} multipliers ({res}){why}, "
                       f"beyond the budget ({budget.describe()}); raise the budget (--macs) "
                       "or fold the layers by hand (--fold layer=PExSIMD,...)")


def ii_for_rate(target_fps: float, clock_mhz: float,
                error: type[FoldingError] = FoldingError) -> int:
    """The initiation interval (cycles) that reaches ``target_fps`` inferences per second
    at ``clock_mhz``; ``error`` is raised for a rate that is not positive."""
    if target_fps <= 0:
        raise error(f"target_fps must be positive, got {target_fps}")
    return max(1, floor(clock_mhz * 1e6 / target_fps))


def parse_folding(text: str | None) -> Folding:
    """``"fc_0=4x8,fc_1=2x2"`` -> ``{"fc_0": (4, 8), "fc_1": (2, 2)}``."""
    out: Folding = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, val = part.partition("=")
        pe_s, x, simd_s = val.lower().partition("x")
        if not (eq and x and pe_s.strip().isdigit() and simd_s.strip().isdigit()):
            raise FoldingError(f"--fold: {part!r} is not layer=PExSIMD (e.g. fc_0=4x8)")
        out[name.strip()] = (int(pe_s), int(simd_s))
    return out


def format_folding(folding: Mapping[str, tuple[int, int]]) -> str:
    return ",".join(f"{k}={pe}x{simd}" for k, (pe, simd) in folding.items())
