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
from .stages import Resources, stage_cost

__all__ = ["FoldingError", "FoldingBudget", "FoldUnit", "DEFAULT_BUDGET", "divisors", "ii_for_rate",
           "candidates", "balance", "search", "with_lut_products", "Limit", "limit",
           "parse_folding", "check_folding", "format_folding"]

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
    #: of the ``pe * simd`` products, how many are built in LUTs (not DSPs)
    lut_mults: int = 0

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
    _cache: dict[tuple[int, ...], _Option] = field(default_factory=dict, repr=False)
    #: ``make_lut(pe, simd, lut_mults)``: the same with ``lut_mults`` of the products in
    #: LUTs; None where the stage has no LUT multipliers
    make_lut: Callable[[int, int, int], Sequence[StageSpec]] | None = None
    #: the most PEs the searches offer (:attr:`~.kinds.StageKind.max_pe`); None: any
    max_pe: int | None = None
    #: the most lanes (PE x SIMD) they offer (:attr:`~.kinds.StageKind.max_lanes`)
    max_lanes: int | None = None

    @property
    def lut_capable(self) -> bool:
        return self.make_lut is not None

    def stages(self, pe: int, simd: int, lut_mults: int = 0) -> list[StageSpec]:
        if lut_mults:
            if self.make_lut is None:
                raise FoldingError(f"layer {self.name!r} has no LUT multipliers")
            return list(self.make_lut(pe, simd, lut_mults))
        return list(self.make(pe, simd))

    def option(self, pe: int, simd: int, lut_mults: int = 0) -> _Option:
        key = (pe, simd, lut_mults)
        if key not in self._cache:
            stages = self.stages(pe, simd, lut_mults)
            lanes = stage_lanes(stages)
            ii, res = 0, Resources()
            prev = None
            for s, ln in zip(stages, lanes):
                s_ii, s_res = stage_cost(s, ln, prev)
                ii, res, prev = max(ii, s_ii), res + s_res, ln[1]
            self._cache[key] = _Option(ii, pe * simd, res, pe, simd, lut_mults)
        return self._cache[key]

    @cached_property
    def options(self) -> list[_Option]:
        return sorted((self.option(pe, simd) for pe, simd in candidates(self.mw, self.mh)
                       if (self.max_pe is None or pe <= self.max_pe) and
                       (self.max_lanes is None or pe * simd <= self.max_lanes)),
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
    budget).  Every product a DSP (:func:`search` may build some in LUTs)."""
    opts = search(units, budget, fixed=fixed, ii_target=ii_target, lut_products=False)
    return {name: (o.pe, o.simd) for name, o in opts.items()}


def search(units: Sequence[FoldUnit], budget: FoldingBudget | None = DEFAULT_BUDGET, *,
           fixed: Mapping[str, tuple[int, int]] | None = None,
           ii_target: int | None = None, lut_products: bool = True) -> dict[str, _Option]:
    """:func:`balance`'s search, returning each unit's chosen option.  With
    ``lut_products`` and a DSP budget, a target the DSPs cannot hold is still reached
    when the units that can (:attr:`FoldUnit.lut_capable`) build their extra products
    in LUTs within the LUT budget (:func:`with_lut_products`)."""
    fixed = dict(fixed or {})
    check_folding(units, fixed)
    if all(u.name in fixed for u in units):  # every layer given: the caller decided
        given = {u.name: u.option(*(int(v) for v in fixed[u.name])) for u in units}
        b = budget or FoldingBudget()
        if lut_products:
            macs, res = _total(list(given.values()))
            if not b.fits(macs, res):
                traded = with_lut_products(units, list(given.values()), b)
                if traded is not None:
                    return {u.name: o for u, o in zip(units, traded)}
        return given
    budget = budget or FoldingBudget()
    choice = _choices(units, fixed)
    assign = _assigner(units, choice, budget)

    def fitting(opts: list[_Option]) -> list[_Option] | None:
        macs, res = _total(opts)
        if budget.fits(macs, res):
            return opts
        return with_lut_products(units, opts, budget) if lut_products else None

    if ii_target is not None:
        opts = assign(int(ii_target))
        if opts is None:
            fastest = max(min(o.ii for o in choice[u.name]) for u in units)
            raise FoldingError(f"no folding reaches an initiation interval of {ii_target} "
                               f"cycles; the fastest possible is {fastest}")
        ok = fitting(opts)
        if ok is None:
            macs, res = _total(opts)
            raise FoldingError(f"initiation interval {ii_target} needs {macs} multipliers "
                               f"({res}), beyond the budget ({budget.describe()})")
        return {u.name: o for u, o in zip(units, ok)}
    targets = sorted({o.ii for u in units for o in choice[u.name]})
    for t in targets:
        opts = assign(t)
        if opts is None:
            continue
        ok = fitting(opts)
        if ok is not None:
            return {u.name: o for u, o in zip(units, ok)}
    slow = assign(targets[-1]) if targets else []
    macs, res = _total(slow or [])
    named = [u.name for u in units if u.name in fixed]
    why = f" with the given folding of {', '.join(named)}" if named else ""
    raise FoldingError(f"even the slowest folding needs {macs} multipliers ({res}){why}, "
                       f"beyond the budget ({budget.describe()}); raise the budget (--macs) "
                       "or fold the layers by hand (--fold layer=PExSIMD,...)")


def _choices(units: Sequence[FoldUnit], fixed: Mapping[str, tuple[int, int]]
             ) -> dict[str, list[_Option]]:
    return {u.name: [u.option(*(int(v) for v in fixed[u.name]))] if u.name in fixed
            else u.options for u in units}


def _assigner(units: Sequence[FoldUnit], choice: Mapping[str, list[_Option]],
              budget: FoldingBudget) -> Callable[[int], list[_Option] | None]:
    """``assign(t)``: each unit's cheapest option reaching ``t`` cycles (None where one
    cannot).  The binding limit decides what "cheapest" means: multipliers for a MAC
    budget, DSPs (products and requantisers) for a device's."""
    by_dsp = budget.macs is None and budget.dsp is not None

    def assign(t: int) -> list[_Option] | None:
        out = []
        for u in units:
            fit = [o for o in choice[u.name] if o.ii <= t]
            if not fit:
                return None
            out.append(min(fit, key=lambda o: o.dsp_key if by_dsp else o.key))
        return out
    return assign


def _total(opts: Sequence[_Option]) -> tuple[int, Resources]:
    res = Resources()
    for o in opts:
        res = res + o.res
    return sum(o.macs for o in opts), res


def with_lut_products(units: Sequence[FoldUnit], opts: Sequence[_Option],
                      budget: FoldingBudget) -> list[_Option] | None:
    """``opts`` (one per unit) with as many products moved from DSPs into LUTs as the
    DSP budget needs -- cheapest LUT products first, in each unit the fewest that free
    what is missing -- or None where that cannot fit (no DSP excess to remove, too few
    units with LUT multipliers, or the LUTs or another budget overflow)."""
    if budget.dsp is None:
        return None
    macs, res = _total(opts)
    excess = res.dsp - budget.dsp
    if excess <= 0:
        return None
    out = list(opts)

    def per_product(i: int) -> tuple[float, int]:
        u, o = units[i], opts[i]
        return (u.option(o.pe, o.simd, o.lut_mults + 1).res.lut - o.res.lut, -o.macs)

    able = [i for i, u in enumerate(units) if u.lut_capable and
            opts[i].lut_mults < opts[i].macs]
    for i in sorted(able, key=per_product):
        u, o = units[i], out[i]
        full = u.option(o.pe, o.simd, o.macs)
        if o.res.dsp - full.res.dsp <= excess:
            new = full
        else:  # the fewest LUT products that free ``excess`` DSPs
            lo, hi = o.lut_mults + 1, o.macs
            while lo < hi:
                mid = (lo + hi) // 2
                if o.res.dsp - u.option(o.pe, o.simd, mid).res.dsp >= excess:
                    hi = mid
                else:
                    lo = mid + 1
            new = u.option(o.pe, o.simd, lo)
        excess -= o.res.dsp - new.res.dsp
        out[i] = new
        if excess <= 0:
            break
    if excess > 0:
        return None
    macs, res = _total(out)
    return out if budget.fits(macs, res) else None


@dataclass(frozen=True)
class Limit:
    """Why a search's folding is not faster: ``kind`` ``"resource"`` (``resources``:
    those the next faster balanced folding, ``next_ii`` cycles, would overflow: ``dsp``,
    ``lut``, ``bram``, ``macs``, ``ff``) or ``"unit"`` (``unit``: a layer already at its
    fastest folding, ``ii`` cycles)."""

    kind: str
    resources: tuple[str, ...] = ()
    unit: str | None = None
    next_ii: int | None = None
    ii: int | None = None
    #: what the next faster folding needs of each overflowing resource
    needs: dict[str, int] = field(default_factory=dict)


def limit(units: Sequence[FoldUnit], budget: FoldingBudget | None, ii: int, *,
          fixed: Mapping[str, tuple[int, int]] | None = None,
          lut_products: bool = True) -> Limit:
    """What keeps :func:`search`'s result (the units at ``ii`` cycles) from the next
    faster balanced folding (see :class:`Limit`)."""
    fixed = dict(fixed or {})
    budget = budget or FoldingBudget()
    choice = _choices(units, fixed)
    faster = [o.ii for u in units for o in choice[u.name] if o.ii < ii]
    floors = {u.name: min(o.ii for o in choice[u.name]) for u in units}
    slowest = max(floors, key=lambda k: floors[k]) if floors else None
    if not faster or slowest is None:
        return Limit("unit", unit=slowest, ii=floors.get(slowest or "", ii))
    nxt = max(faster)
    if floors[slowest] > nxt:
        return Limit("unit", unit=slowest, ii=floors[slowest], next_ii=nxt)
    opts = _assigner(units, choice, budget)(nxt)
    assert opts is not None  # every unit reaches nxt (its floor is no slower)
    macs, res = _total(opts)
    if lut_products and budget.dsp is not None and res.dsp > budget.dsp:
        # the DSPs' excess in LUTs, as far as the LUT multipliers go: what still overflows
        moved = _all_to_luts(units, opts, res.dsp - budget.dsp)
        if moved is not None:
            macs, res = _total(moved)
    over = {r: used for r, lim, used in (("dsp", budget.dsp, res.dsp),
                                          ("lut", budget.lut, res.lut),
                                          ("bram", budget.bram, res.bram),
                                          ("macs", budget.macs, macs),
                                          ("ff", budget.ff, res.ff))
            if lim is not None and used > lim}
    return Limit("resource", resources=tuple(over), next_ii=max(o.ii for o in opts),
                 needs=over)


def _all_to_luts(units: Sequence[FoldUnit], opts: Sequence[_Option], excess: int
                 ) -> list[_Option] | None:
    """``opts`` with the DSP ``excess`` moved into LUT products where units can take
    it, ignoring the LUT budget (None where no unit can)."""
    unlimited = FoldingBudget(dsp=_total(opts)[1].dsp - excess)
    able = [u for u in units if u.lut_capable]
    if not able:
        return None
    out = with_lut_products(units, opts, unlimited)
    if out is not None:
        return out
    # not enough LUT-capable products: all of theirs
    return [u.option(o.pe, o.simd, o.macs) if u.lut_capable else o
            for u, o in zip(units, opts)]


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
