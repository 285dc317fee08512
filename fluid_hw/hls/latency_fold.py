"""Automatic folding for the latency mode (``compile --optimize latency``): the folding
of every matrix layer with the smallest estimated latency (first input beat to last
output beat) that fits the device budget.

In latency mode a layer's first neuron fold follows its input beats as they arrive
(``rtl.mvau``'s ``stream_input``), so a layer adds about its pipeline depth and the
``(NF - 1) * SF`` cycles of its other neuron folds to the latency; splitting ``M``
multipliers over the layers to minimise ``sum MACs_i / m_i`` gives each about
``sqrt(MACs_i)`` of them.  The search (:func:`latency_search`):

1. ranks every combination of the layers' foldings (``PE`` dividing the outputs,
   ``SIMD`` the inputs; a layer fixed by ``--fold`` keeps its own) by a closed-form
   proxy of the latency (:func:`proxy_latency`), dropping those whose products and
   requantiser lanes cannot fit the DSPs, or, with LUT multipliers, the DSPs and the
   LUTs at each layer's LUT cost a product;
2. costs the :data:`EXACT` best-ranked ones exactly (the device estimate and the
   pipeline's timing model, the products beyond the DSPs moved into LUTs by
   :func:`~.folding.with_lut_products`) and keeps those within the budget;
3. returns the smallest latency, counting every :data:`LUTS_PER_CYCLE` LUTs of the
   design as one cycle more (more parallel logic, LUT multipliers or wider PEs, is
   taken only where it saves a cycle for that many LUTs: the fuller the device, the
   lower the clock and the longer place and route; this rate is a choice, not a
   measurement); among foldings within :data:`SLACK` of that, the one with the fewest
   LUTs, then DSPs.  The ranking of step 1 counts the LUTs the same way.

Where the layers have too many combinations (:data:`MAX_COMBINATIONS`) the caller keeps
its greedy descent.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from math import prod

from fluid_hw.rtl.mvau import mvau_latency

from .folding import FoldingBudget, FoldUnit, _Option, with_lut_products

__all__ = ["latency_search", "latency_score", "proxy_latency", "EXACT", "SLACK",
           "MAX_COMBINATIONS", "LUTS_PER_CYCLE"]

#: foldings costed exactly (best-ranked by the proxy first)
EXACT = 300
#: a folding within this share of the smallest latency may win on LUTs
SLACK = 0.01
#: LUTs of the design that count as one cycle of latency
LUTS_PER_CYCLE = 500
#: beyond this many combinations of the layers' foldings the search is not run
MAX_COMBINATIONS = 1_000_000
#: cycles a layer adds besides its MAC and requantiser pipeline: issue, output queue,
#: link FIFO and lane converter (about; the proxy only ranks)
_LINK = 5


def proxy_latency(folds: Sequence[tuple[int, int, int, int]]) -> float:
    """A closed-form estimate of the latency of a chain of latency-mode MVAUs, each
    ``(mw, mh, pe, simd)``: each layer's ``NF * SF`` cycles less the part of its first
    fold that overlaps its input's arrival (the previous layer's output span), plus its
    pipeline depth.  The first layer's input arrives a beat a cycle."""
    total = 0.0
    span = folds[0][0] // folds[0][3] - 1 if folds else 0
    for mw, mh, pe, simd in folds:
        sf, nf = mw // simd, mh // pe
        total += nf * sf - min(sf - 1, span) + mvau_latency(simd, pe=pe, sf=sf,
                                                            stream_input=True) + _LINK
        span = (nf - 1) * sf
    return total


def _lut_per_product(u: FoldUnit, o: _Option) -> float | None:
    """LUTs a product of unit ``u`` at option ``o`` costs in LUTs (None: no LUT
    multipliers in this unit)."""
    if not u.lut_capable:
        return None
    full = u.option(o.pe, o.simd, o.macs)
    return max(0.0, (full.res.lut - o.res.lut) / o.macs)


def latency_score(cycles: float, luts: float) -> float:
    """What the search minimises: the latency, and :data:`LUTS_PER_CYCLE` of the
    design's LUTs as a cycle."""
    return cycles + luts / LUTS_PER_CYCLE


def latency_search(units: Sequence[FoldUnit], fixed: Mapping[str, tuple[int, int]],
                   budget: FoldingBudget, latency: Callable[[dict[str, tuple[int, int]],
                                                              dict[str, int]],
                                                             tuple[int, int, int] | None],
                   lut_multipliers: bool = False, max_ii: int | None = None
                   ) -> tuple[dict[str, tuple[int, int]], dict[str, int]] | None:
    """The folding (and LUT products per layer) of :mod:`this module's <.latency_fold>`
    search, or None where the layers have too many combinations.  ``budget``: the
    stages' share of the device (DSP, LUT); ``latency(folding, lut_mults)``: the exact
    ``(latency cycles, LUTs, DSPs)`` of a folding, None where it is over the budget;
    ``max_ii``: a requested rate's initiation interval, which no layer may exceed."""
    per_unit: list[list[_Option]] = []
    for u in units:
        if u.name in fixed:
            per_unit.append([u.option(*(int(v) for v in fixed[u.name]))])
        else:
            per_unit.append([o for o in u.options if max_ii is None or o.ii <= max_ii])
    if not all(per_unit):
        return None
    if prod(len(c) for c in per_unit) > MAX_COMBINATIONS:
        return None
    lut_cost = [{(o.pe, o.simd): _lut_per_product(u, o) if lut_multipliers else None
                 for o in opts} for u, opts in zip(units, per_unit)]
    dsp_room = budget.dsp if budget.dsp is not None else float("inf")
    lut_room = budget.lut if budget.lut is not None else float("inf")
    # per option: (DSPs, LUTs, LUTs a product in LUTs or None, products, NF * SF plus
    # the pipeline depth, SF, the output's span (NF - 1) * SF): proxy_latency's terms
    table = []
    for u, opts, lc in zip(units, per_unit, lut_cost):
        rows = []
        for o in opts:
            sf, nf = u.mw // o.simd, u.mh // o.pe
            depth = mvau_latency(o.simd, pe=o.pe, sf=sf, stream_input=True) + _LINK
            rows.append((o.res.dsp, o.res.lut, lc[(o.pe, o.simd)], o.macs, nf * sf + depth,
                         sf, (nf - 1) * sf))
        table.append(rows)
    # the least DSPs (LUTs) the layers after each one need: partial sums above the room
    # (with no LUT multipliers to take the excess) end a branch early
    rest_dsp = [sum(min(r[0] for r in t) for t in table[k:]) for k in range(len(table) + 1)]
    rest_lut = [sum(min(r[1] for r in t) for t in table[k:]) for k in range(len(table) + 1)]
    cands: list[tuple[float, int, tuple[int, ...]]] = []
    picked: list[int] = []
    chosen: list[tuple] = []

    def visit(k: int, dsp: int, lut: float, proxy: float, span: int) -> None:
        if k == len(table):
            add(dsp, lut, proxy)
            return
        for i, r in enumerate(table[k]):
            d, lu = dsp + r[0], lut + r[1]
            if (not lut_multipliers and d + rest_dsp[k + 1] > dsp_room) or \
                    lu + rest_lut[k + 1] > lut_room:
                continue
            # the first fold overlaps the input's arrival (the first layer's: its beats)
            overlap = min(r[5] - 1, span if k else r[5] - 1)
            picked.append(i)
            chosen.append(r)
            visit(k + 1, d, lu, proxy + r[4] - overlap, r[6])
            picked.pop()
            chosen.pop()

    def add(dsp: int, lut: float, proxy: float) -> None:
        over = dsp - dsp_room
        if over > 0:  # the cheapest LUT products that free the excess DSPs
            costs = sorted((r[2], r[3]) for r in chosen if r[2] is not None)
            if sum(n for _, n in costs) < over:
                return
            for c, n in costs:
                take = min(n, over)
                lut += c * take
                over -= take
                if not over:
                    break
            if lut > lut_room:
                return
        cands.append((latency_score(proxy, lut), sum(r[3] for r in chosen), tuple(picked)))

    visit(0, 0, 0.0, 0.0, 0)
    scored: list[tuple[float, int, int, dict[str, tuple[int, int]], dict[str, int]]] = []
    for _, _, idx in heapq.nsmallest(EXACT, cands):
        opts = [o[i] for o, i in zip(per_unit, idx)]
        if budget.dsp is not None and sum(o.res.dsp for o in opts) > budget.dsp:
            traded = with_lut_products(units, opts, budget)
            if traded is None:
                continue
            opts = traded
        folding = {u.name: (o.pe, o.simd) for u, o in zip(units, opts)}
        lut = {u.name: o.lut_mults for u, o in zip(units, opts) if o.lut_mults}
        got = latency(folding, lut)
        if got is not None:
            scored.append((latency_score(got[0], got[1]), got[1], got[2], folding, lut))
    if not scored:
        return None
    best = min(s[0] for s in scored)
    near = [s for s in scored if s[0] <= best * (1 + SLACK)]
    _, _, _, folding, lut = min(near, key=lambda s: (s[1], s[2], s[0]))
    return folding, lut
