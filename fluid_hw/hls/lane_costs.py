"""What a matrix stage's lanes cost in multipliers, from the RTL's own rules, for the
cost model (:mod:`.stages`) and the folding search (:mod:`.autofold`):

* :func:`requant_lanes` -- the physical requantiser lanes (two ``MULT18X18D`` each)
  behind ``pe`` PE results that arrive together once every ``period`` cycles:
  :func:`fluid_hw.rtl.requant.requant_units` where the RTL shares the requantiser
  across PE lanes, else one a PE lane;
* :func:`product_multipliers` -- ``(DSPs, LUT products)`` of the ``pe x simd``
  products, ``lut_mults`` of them built in LUTs (:func:`fluid_hw.rtl.multipliers.
  mvau_multipliers`: two narrow products may share one DSP), or one DSP a product
  where the RTL has no other kind;
* :func:`lut_product_cells` -- one LUT product's LUTs (LUT4 + 2 per ``CCU2C``, as the
  calibrated LUT model counts) and flip-flops, as measured on Yosys
  (:func:`fluid_hw.rtl._lutmul.lut_product_cost`); None where the RTL has none.

Each falls back to the plain rule when the RTL in this tree does not have the feature,
so an estimate never promises what the generated design does not do.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from types import ModuleType

from fluid_hw.errors import FluidError

__all__ = ["REQUANT_USERS", "requant_lanes", "requant_param_depth", "requant_shared",
           "product_multipliers",
           "lut_product_cells",
           "lut_multipliers_available"]


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


#: the RTL module that builds each family of units' requantiser pipes
REQUANT_USERS = {"matrix": "fluid_hw.rtl.mvau", "dwconv": "fluid_hw.rtl.dwconv"}


@functools.cache
def requant_shared(units: str = "matrix") -> bool:
    """Whether the RTL shares the requantiser across PE lanes for ``units``
    (``"matrix"``: the MVAU and convolutions; ``"dwconv"``: depthwise convolutions): its
    ``RequantPipe`` takes a number of physical lanes and the module building those units
    asks :func:`~fluid_hw.rtl.requant.requant_units`."""
    mod = _module("fluid_hw.rtl.requant")
    pipe = getattr(mod, "RequantPipe", None)
    if pipe is None or not hasattr(mod, "requant_units"):
        return False
    if "units" not in inspect.signature(pipe.__init__).parameters:
        return False
    user = _module(REQUANT_USERS[units])
    try:
        return user is not None and "requant_units" in inspect.getsource(user)
    except OSError:  # no source (a frozen build): the plain rule, never an over-promise
        return False


def requant_lanes(pe: int, period: int, units: str = "matrix", multipliers: bool = True
                  ) -> int:
    """Physical requantiser lanes behind ``pe`` PE lanes whose results arrive together
    once every ``period`` cycles (see the module docstring); ``multipliers=False`` (a
    threshold or bias-only pipe: nothing shared) gives ``pe``."""
    if not multipliers or not requant_shared(units):
        return pe
    mod = _module("fluid_hw.rtl.requant")
    return int(mod.requant_units(pe, period))  # type: ignore[union-attr]


def requant_param_depth(pe: int, lanes: int, groups: int) -> int:
    """Entries of each physical requantiser lane's parameter memory (``lanes`` of them
    behind ``pe`` PE lanes, ``groups`` channel groups): ``groups`` unshared, else as
    :func:`fluid_hw.rtl.requant.requant_param_depth` lays them out."""
    if lanes >= pe:
        return groups
    mod = _module("fluid_hw.rtl.requant")
    return int(mod.requant_param_depth(pe, lanes, groups))  # type: ignore[union-attr]


def product_multipliers(pe: int, simd: int, lut_mults: int = 0, weight_bits: int = 8,
                        act_bits: int = 8) -> tuple[int, int]:
    """``(dsp, lut)``: hard multipliers and LUT products of a unit's ``pe x simd``
    products of ``weight_bits`` weights and ``act_bits`` activation operands,
    ``lut_mults`` of them in LUTs (the requantiser's not counted)."""
    mod = _module("fluid_hw.rtl.multipliers")
    count = getattr(mod, "mvau_multipliers", None)
    if count is not None:
        dsp, lut = count(pe, simd, lut_mults, weight_bits, act_bits)
        return int(dsp), int(lut)
    return pe * simd - lut_mults, lut_mults


@functools.cache
def lut_product_cells(weight_bits: int = 8, act_bits: int = 8) -> tuple[int, int] | None:
    """``(lut, ff)`` of one LUT product of a ``weight_bits`` weight (1: bipolar) and an
    ``act_bits`` activation (see the module docstring); None where the RTL has no
    measured LUT multiplier for them."""
    mod = _module("fluid_hw.rtl._lutmul")
    cost = getattr(mod, "lut_product_cost", None)
    if cost is None:
        return None
    try:
        c = cost(1, act_bits, bipolar=True) if weight_bits == 1 else \
            cost(weight_bits, act_bits)
    except (FluidError, NotImplementedError, KeyError, ValueError, TypeError):
        return None
    lut4 = getattr(c, "lut4", None)
    lut = lut4 + 2 * c.ccu2c if lut4 is not None else c.lut
    return int(lut), int(c.ff)


def lut_multipliers_available(weight_bits: int = 8, act_bits: int = 8) -> bool:
    """Whether a matrix stage can build products in LUTs here (a measured cost and the
    spec's ``lut_mults`` field)."""
    if lut_product_cells(weight_bits, act_bits) is None:
        return False
    from fluid_hw.rtl.spec import MVAUSpec

    return "lut_mults" in getattr(MVAUSpec, "__dataclass_fields__", {})
