"""PLLs as Amaranth components, with their dividers computed in Python.

- ECP5: :func:`ecp5_pll_params` picks ``CLKI_DIV``/``CLKFB_DIV``/``CLKOP_DIV``
  (and ``CLKOP_CPHASE``) exactly as Project Trellis' ``ecppll`` does: the
  smallest frequency error, ties broken by the VCO closest to 600 MHz, in the
  tool's single-precision arithmetic, so the values match ``ecppll`` bit for bit.
  :class:`ECP5PLL` instantiates ``EHXPLLL`` with CLKOP fed back.
- iCE40: :func:`ice40_pll_params` picks ``DIVR``/``DIVF``/``DIVQ``/``FILTER_RANGE``
  exactly as IceStorm's ``icepll`` does (SIMPLE feedback by default);
  :class:`ICE40PLL` instantiates ``SB_PLL40_PAD`` (the clock pin feeds the PLL
  directly, as on the iCEBreaker) or ``SB_PLL40_CORE``.

Both report the frequency they achieve, which may differ from the request
(12 MHz -> 100 MHz on iCE40 gives 100.5 MHz): the board top constrains timing
against the achieved frequency.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

from amaranth.hdl import Instance, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..errors import PLLError

__all__ = [
    "ECP5PLL",
    "ECP5PLLParams",
    "ICE40PLL",
    "ICE40PLLParams",
    "PLLComponent",
    "ecp5_pll_params",
    "ice40_pll_params",
    "make_pll",
    "pll_params",
]

# ---------------------------------------------------------------------------
# ECP5 (limits as in prjtrellis' ecppll)

ECP5_INPUT_MHZ = (8.0, 400.0)
ECP5_OUTPUT_MHZ = (10.0, 400.0)
ECP5_PFD_MHZ = (3.125, 400.0)
ECP5_VCO_MHZ = (400.0, 800.0)
_FLT_MAX = 3.4028234663852886e38


def _f32(x: float) -> float:
    """Round to IEEE single precision (one rounding of an exact double result
    equals the single-precision operation, so chains of these match C floats)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


@dataclass(frozen=True)
class ECP5PLLParams:
    """Dividers of an ECP5 ``EHXPLLL`` with CLKOP as feedback, and what they give."""

    clki_div: int
    clkfb_div: int
    clkop_div: int
    clkop_cphase: int
    clkop_fphase: int
    f_in_mhz: float
    f_requested_mhz: float
    f_out_mhz: float
    f_pfd_mhz: float
    f_vco_mhz: float

    @property
    def error_mhz(self) -> float:
        return self.f_out_mhz - self.f_requested_mhz

    def as_dict(self) -> dict[str, object]:
        return {"primitive": "EHXPLLL", "CLKI_DIV": self.clki_div, "CLKFB_DIV": self.clkfb_div,
                "CLKOP_DIV": self.clkop_div, "CLKOP_CPHASE": self.clkop_cphase,
                "CLKOP_FPHASE": self.clkop_fphase, "f_in_mhz": self.f_in_mhz,
                "f_requested_mhz": self.f_requested_mhz, "f_out_mhz": self.f_out_mhz,
                "f_vco_mhz": self.f_vco_mhz}


def _check_range(what: str, f: float, lo_hi: tuple[float, float], family: str) -> None:
    lo, hi = lo_hi
    if not (lo <= f <= hi):
        raise PLLError(f"{family} PLL: {what} frequency {f:g} MHz is outside "
                       f"{lo:g}..{hi:g} MHz")


def ecp5_pll_params(f_in_mhz: float, f_out_mhz: float) -> ECP5PLLParams:
    """The ``EHXPLLL`` dividers ``ecppll -i F_IN -o F_OUT`` would choose.

    f_vco = f_in / CLKI_DIV * CLKFB_DIV * CLKOP_DIV must lie in 400..800 MHz,
    f_pfd = f_in / CLKI_DIV in 3.125..400 MHz; f_out = f_vco / CLKOP_DIV.
    ``CLKOP_CPHASE`` shifts CLKOP by half a period, as ecppll (and Lattice's
    tools) do.
    """
    _check_range("input", f_in_mhz, ECP5_INPUT_MHZ, "ECP5")
    _check_range("output", f_out_mhz, ECP5_OUTPUT_MHZ, "ECP5")
    f_in, f_req = _f32(f_in_mhz), _f32(f_out_mhz)
    vco_lo, vco_hi = ECP5_VCO_MHZ
    error = _FLT_MAX
    best: tuple[int, int, int, float, float] | None = None
    for clki_div in range(1, 129):
        f_pfd = _f32(f_in / clki_div)
        if f_pfd < ECP5_PFD_MHZ[0] or f_pfd > ECP5_PFD_MHZ[1]:
            continue
        for clkfb_div in range(1, 81):
            step = _f32(f_pfd * clkfb_div)
            # only output dividers near vco_lo/step..vco_hi/step can pass the VCO check
            lo = max(1, math.floor(vco_lo / step) - 1)
            hi = min(128, math.ceil(vco_hi / step) + 1)
            for clkop_div in range(lo, hi + 1):
                f_vco = _f32(step * clkop_div)
                if f_vco < vco_lo or f_vco > vco_hi:
                    continue
                f_out = _f32(f_vco / clkop_div)
                err = abs(_f32(f_out - f_req))
                if err < error or (
                    best is not None and err == error
                    and abs(_f32(f_vco - 600.0)) < abs(_f32(best[4] - 600.0))
                ):
                    error = err
                    best = (clki_div, clkfb_div, clkop_div, f_out, f_vco)
    if best is None:  # pragma: no cover - the ranges above always leave a solution
        raise PLLError(f"ECP5 PLL: no divider setting makes {f_out_mhz:g} MHz "
                       f"from {f_in_mhz:g} MHz")
    clki_div, clkfb_div, clkop_div, f_out, f_vco = best
    ns_phase = _f32(1.0 / (f_out * 1e6) * 0.5)
    cphase = int(ns_phase * (f_vco * 1e6))
    return ECP5PLLParams(
        clki_div=clki_div, clkfb_div=clkfb_div, clkop_div=clkop_div, clkop_cphase=cphase,
        clkop_fphase=0, f_in_mhz=f_in_mhz, f_requested_mhz=f_out_mhz,
        f_out_mhz=f_in_mhz / clki_div * clkfb_div, f_pfd_mhz=f_in_mhz / clki_div,
        f_vco_mhz=f_in_mhz / clki_div * clkfb_div * clkop_div,
    )


# ---------------------------------------------------------------------------
# iCE40 (limits as in IceStorm's icepll)

ICE40_INPUT_MHZ = (10.0, 133.0)
ICE40_OUTPUT_MHZ = (16.0, 275.0)
ICE40_PFD_MHZ = (10.0, 133.0)
ICE40_VCO_MHZ = (533.0, 1066.0)


@dataclass(frozen=True)
class ICE40PLLParams:
    """Dividers of an iCE40 ``SB_PLL40_*`` and what they give."""

    divr: int
    divf: int
    divq: int
    filter_range: int
    simple_feedback: bool
    f_in_mhz: float
    f_requested_mhz: float
    f_out_mhz: float
    f_pfd_mhz: float
    f_vco_mhz: float

    @property
    def error_mhz(self) -> float:
        return self.f_out_mhz - self.f_requested_mhz

    def as_dict(self) -> dict[str, object]:
        return {"primitive": "SB_PLL40", "DIVR": self.divr, "DIVF": self.divf,
                "DIVQ": self.divq, "FILTER_RANGE": self.filter_range,
                "FEEDBACK_PATH": "SIMPLE" if self.simple_feedback else "NON_SIMPLE",
                "f_in_mhz": self.f_in_mhz, "f_requested_mhz": self.f_requested_mhz,
                "f_out_mhz": self.f_out_mhz, "f_vco_mhz": self.f_vco_mhz}


def ice40_pll_params(f_in_mhz: float, f_out_mhz: float, *,
                     simple_feedback: bool = True) -> ICE40PLLParams:
    """The ``SB_PLL40`` dividers ``icepll -i F_IN -o F_OUT`` would choose.

    f_pfd = f_in / (DIVR + 1) in 10..133 MHz; with SIMPLE feedback
    f_vco = f_pfd * (DIVF + 1) in 533..1066 MHz and f_out = f_vco / 2**DIVQ.
    """
    _check_range("input", f_in_mhz, ICE40_INPUT_MHZ, "iCE40")
    _check_range("output", f_out_mhz, ICE40_OUTPUT_MHZ, "iCE40")
    divf_max = 127 if simple_feedback else 63
    vco_lo, vco_hi = ICE40_VCO_MHZ
    best: tuple[float, int, int, int] | None = None
    for divr in range(16):
        f_pfd = f_in_mhz / (divr + 1)
        if f_pfd < ICE40_PFD_MHZ[0] or f_pfd > ICE40_PFD_MHZ[1]:
            continue
        for divf in range(divf_max + 1):
            for divq in range(1, 7):
                if simple_feedback:
                    f_vco = f_pfd * (divf + 1)
                    f_out = f_vco * 2.0 ** -divq
                else:
                    f_vco = f_pfd * (divf + 1) * 2.0 ** divq
                    f_out = f_vco * 2.0 ** -divq
                if f_vco < vco_lo or f_vco > vco_hi:
                    continue
                if best is None or abs(f_out - f_out_mhz) < abs(best[0] - f_out_mhz):
                    best = (f_out, divr, divf, divq)
    if best is None:
        raise PLLError(f"iCE40 PLL: no divider setting makes {f_out_mhz:g} MHz "
                       f"from {f_in_mhz:g} MHz")
    f_out, divr, divf, divq = best
    f_pfd = f_in_mhz / (divr + 1)
    f_vco = f_pfd * (divf + 1) * (1 if simple_feedback else 2 ** divq)
    filter_range = (1 if f_pfd < 17 else 2 if f_pfd < 26 else 3 if f_pfd < 44
                    else 4 if f_pfd < 66 else 5 if f_pfd < 101 else 6)
    return ICE40PLLParams(
        divr=divr, divf=divf, divq=divq, filter_range=filter_range,
        simple_feedback=simple_feedback, f_in_mhz=f_in_mhz, f_requested_mhz=f_out_mhz,
        f_out_mhz=f_out, f_pfd_mhz=f_pfd, f_vco_mhz=f_vco,
    )


# ---------------------------------------------------------------------------
# components


class PLLComponent(wiring.Component):
    """Common ports: ``clk_in`` (the oscillator), ``clk_out``, ``locked``."""

    params: ECP5PLLParams | ICE40PLLParams

    def __init__(self) -> None:
        super().__init__(wiring.Signature({"clk_in": In(1), "clk_out": Out(1),
                                           "locked": Out(1)}))

    @property
    def f_out_mhz(self) -> float:
        return self.params.f_out_mhz


class ECP5PLL(PLLComponent):
    """``EHXPLLL`` making ``f_out_mhz`` (as near as the dividers allow) from ``f_in_mhz``."""

    params: ECP5PLLParams

    def __init__(self, f_in_mhz: float, f_out_mhz: float, *,
                 params: ECP5PLLParams | None = None) -> None:
        self.params = params or ecp5_pll_params(f_in_mhz, f_out_mhz)
        super().__init__()

    def elaborate(self, platform: object) -> Module:
        p = self.params
        m = Module()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{p.f_in_mhz:g}",
            a_FREQUENCY_PIN_CLKOP=f"{p.f_out_mhz:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8",
            a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED",
            p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p.clki_div, p_CLKFB_DIV=p.clkfb_div,
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p.clkop_div,
            p_CLKOP_CPHASE=p.clkop_cphase, p_CLKOP_FPHASE=p.clkop_fphase,
            p_FEEDBK_PATH="CLKOP",
            i_RST=0, i_STDBY=0, i_CLKI=self.clk_in, i_CLKFB=self.clk_out,
            o_CLKOP=self.clk_out, o_LOCK=self.locked,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0,
        )
        return m


class ICE40PLL(PLLComponent):
    """``SB_PLL40_PAD`` (``pad=True``: ``clk_in`` must be the top-level port of
    the PLL's clock pin) or ``SB_PLL40_CORE`` (any clock net), SIMPLE feedback,
    output on the global network."""

    params: ICE40PLLParams

    def __init__(self, f_in_mhz: float, f_out_mhz: float, *, pad: bool = True,
                 params: ICE40PLLParams | None = None) -> None:
        self.params = params or ice40_pll_params(f_in_mhz, f_out_mhz)
        self.pad = pad
        super().__init__()

    def elaborate(self, platform: object) -> Module:
        p = self.params
        m = Module()
        clock_in = {"i_PACKAGEPIN": self.clk_in} if self.pad else {"i_REFERENCECLK": self.clk_in}
        m.submodules.pll = Instance(
            "SB_PLL40_PAD" if self.pad else "SB_PLL40_CORE",
            p_FEEDBACK_PATH="SIMPLE",
            p_DIVR=p.divr, p_DIVF=p.divf, p_DIVQ=p.divq, p_FILTER_RANGE=p.filter_range,
            i_RESETB=1, i_BYPASS=0,
            o_PLLOUTGLOBAL=self.clk_out, o_LOCK=self.locked,
            **clock_in,
        )
        return m


_PARAMS: dict[str, Callable[[float, float], ECP5PLLParams | ICE40PLLParams]] = {
    "ecp5": ecp5_pll_params, "ice40": ice40_pll_params}


def pll_params(family: str, f_in_mhz: float, f_out_mhz: float) -> ECP5PLLParams | ICE40PLLParams:
    """The PLL dividers of ``family`` (``ecp5`` or ``ice40``) for ``f_in`` -> ``f_out``."""
    try:
        fn = _PARAMS[family]
    except KeyError:
        raise PLLError(f"no PLL generator for FPGA family {family!r}; "
                       f"known: {', '.join(_PARAMS)}") from None
    return fn(f_in_mhz, f_out_mhz)


def make_pll(family: str, f_in_mhz: float, f_out_mhz: float, *,
             params: ECP5PLLParams | ICE40PLLParams | None = None) -> PLLComponent:
    """The PLL component of ``family`` (``ecp5`` or ``ice40``)."""
    params = params or pll_params(family, f_in_mhz, f_out_mhz)
    if isinstance(params, ECP5PLLParams):
        return ECP5PLL(f_in_mhz, f_out_mhz, params=params)
    return ICE40PLL(f_in_mhz, f_out_mhz, params=params)
