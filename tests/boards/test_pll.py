"""PLL divider math against the values Project Trellis' ecppll and IceStorm's
icepll print (recorded from yowasp-ecppll / yowasp-icepll; the slow test
test_pll_matches_the_tools re-runs the tools), and the PLL instances."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import rtlil

from fluid_hw.boards import (
    ECP5PLL,
    ICE40PLL,
    PLLError,
    ecp5_pll_params,
    ice40_pll_params,
    make_pll,
    pll_params,
)

# f_out requested: (CLKI_DIV, CLKFB_DIV, CLKOP_DIV, CLKOP_CPHASE, achieved MHz), 25 MHz in
ECPPLL_25MHZ = {
    100: (1, 4, 6, 2, 100.0),
    50: (1, 2, 12, 5, 50.0),
    65: (5, 13, 9, 4, 65.0),
    75: (1, 3, 8, 4, 75.0),
    125: (1, 5, 5, 2, 125.0),
    133.33: (3, 16, 5, 2, 25 / 3 * 16),
    40: (5, 8, 15, 7, 40.0),
    48: (8, 15, 13, 6, 46.875),
    12: (2, 1, 48, 23, 12.5),
    200: (1, 8, 3, 1, 200.0),
    33.3333: (3, 4, 18, 9, 25 / 3 * 4),
    90: (5, 18, 7, 3, 90.0),
    110: (5, 22, 5, 2, 110.0),
    37.5: (2, 3, 16, 8, 37.5),
    62.5: (2, 5, 10, 4, 62.5),
    80: (5, 16, 7, 3, 80.0),
    150: (1, 6, 4, 2, 150.0),
    27: (8, 9, 21, 10, 28.125),
    111.1: (7, 31, 6, 2, 25 / 7 * 31),
    10: (5, 2, 60, 30, 10.0),
}

# f_out requested: (DIVR, DIVF, DIVQ, FILTER_RANGE, achieved MHz), 12 MHz in, SIMPLE feedback
ICEPLL_12MHZ = {
    30: (0, 79, 5, 1, 30.0),
    48: (0, 63, 4, 1, 48.0),
    24: (0, 63, 5, 1, 24.0),
    60: (0, 79, 4, 1, 60.0),
    25: (0, 66, 5, 1, 25.125),
    100: (0, 66, 3, 1, 100.5),
    36: (0, 47, 4, 1, 36.0),
    40: (0, 52, 4, 1, 39.75),
    16.5: (0, 87, 6, 1, 16.5),
}


@pytest.mark.parametrize("f_out", list(ECPPLL_25MHZ))
def test_ecp5_dividers_match_ecppll(f_out):
    clki, clkfb, clkop, cphase, achieved = ECPPLL_25MHZ[f_out]
    p = ecp5_pll_params(25, f_out)
    assert (p.clki_div, p.clkfb_div, p.clkop_div, p.clkop_cphase) == (clki, clkfb, clkop, cphase)
    assert p.f_out_mhz == pytest.approx(achieved)
    assert 400 <= p.f_vco_mhz <= 800
    assert p.f_vco_mhz == pytest.approx(p.f_out_mhz * p.clkop_div)


def test_ecp5_100mhz_from_25():
    p = ecp5_pll_params(25.0, 100.0)
    assert (p.clki_div, p.clkfb_div, p.clkop_div) == (1, 4, 6)
    assert p.f_out_mhz == 100.0 and p.f_vco_mhz == 600.0 and p.error_mhz == 0.0


@pytest.mark.parametrize("f_out", list(ICEPLL_12MHZ))
def test_ice40_dividers_match_icepll(f_out):
    divr, divf, divq, filt, achieved = ICEPLL_12MHZ[f_out]
    p = ice40_pll_params(12, f_out)
    assert (p.divr, p.divf, p.divq, p.filter_range) == (divr, divf, divq, filt)
    assert p.f_out_mhz == pytest.approx(achieved)
    assert 533 <= p.f_vco_mhz <= 1066


def test_ice40_reports_achieved_frequency():
    p = ice40_pll_params(12, 100)
    assert p.f_out_mhz == 100.5 and p.error_mhz == pytest.approx(0.5)
    assert pll_params("ice40", 12, 100) == p
    pll = make_pll("ice40", 12, 100)
    assert isinstance(pll, ICE40PLL) and pll.f_out_mhz == 100.5
    assert "parameter \\DIVF 66" in rtlil.convert(pll, name="pll")


@pytest.mark.parametrize(("fn", "f_in", "f_out", "words"), [
    (ecp5_pll_params, 25, 500, "outside 10..400"),
    (ecp5_pll_params, 4, 100, "input frequency 4"),
    (ice40_pll_params, 12, 300, "outside 16..275"),
    (ice40_pll_params, 12, 8, "output frequency 8"),
])
def test_out_of_range_is_a_clear_error(fn, f_in, f_out, words):
    with pytest.raises(PLLError, match=words):
        fn(f_in, f_out)


def test_unknown_family():
    with pytest.raises(PLLError, match="ecp5, ice40"):
        make_pll("gowin", 27, 100)
    with pytest.raises(PLLError, match="ecp5, ice40"):
        pll_params("gowin", 27, 100)


def test_ecp5_instance_parameters():
    text = rtlil.convert(ECP5PLL(25, 100), name="pll")
    for line in ("cell \\EHXPLLL", "parameter \\CLKI_DIV 1", "parameter \\CLKFB_DIV 4",
                 "parameter \\CLKOP_DIV 6", "parameter \\CLKOP_CPHASE 2",
                 'parameter \\FEEDBK_PATH "CLKOP"', "connect \\CLKFB \\clk_out",
                 'attribute \\FREQUENCY_PIN_CLKI "25"'):
        assert line in text


@pytest.mark.parametrize(("pad", "cell", "port"), [
    (True, "SB_PLL40_PAD", "PACKAGEPIN"), (False, "SB_PLL40_CORE", "REFERENCECLK")])
def test_ice40_instance_parameters(pad, cell, port):
    text = rtlil.convert(ICE40PLL(12, 48, pad=pad), name="pll")
    for line in (f"cell \\{cell}", "parameter \\DIVR 0", "parameter \\DIVF 63",
                 "parameter \\DIVQ 4", "parameter \\FILTER_RANGE 1",
                 f"connect \\{port} \\clk_in", "connect \\PLLOUTGLOBAL \\clk_out"):
        assert line in text


def _tool(name: str) -> str | None:
    return shutil.which(name, path=str(Path(sys.executable).parent))


@pytest.mark.slow
def test_pll_matches_the_tools(tmp_path):
    """Re-run yowasp-ecppll and yowasp-icepll on a few frequencies."""
    ecppll, icepll = _tool("yowasp-ecppll"), _tool("yowasp-icepll")
    if ecppll is None or icepll is None:
        pytest.skip("yowasp-ecppll / yowasp-icepll not installed (yowasp-nextpnr-* packages)")
    for f_out in (100, 48, 133.33, 27):
        subprocess.run([ecppll, "-i", "25", "-o", str(f_out), "-f", "pll.v"], cwd=tmp_path,
                       check=True, capture_output=True)
        v = (tmp_path / "pll.v").read_text()
        p = ecp5_pll_params(25, f_out)
        for name, value in (("CLKI_DIV", p.clki_div), ("CLKFB_DIV", p.clkfb_div),
                            ("CLKOP_DIV", p.clkop_div), ("CLKOP_CPHASE", p.clkop_cphase)):
            assert f".{name}({value})" in v, (f_out, name)
    for f_out in (30, 48, 100, 40):
        out = subprocess.run([icepll, "-i", "12", "-o", str(f_out)], cwd=tmp_path, check=True,
                             capture_output=True, text=True).stdout
        p = ice40_pll_params(12, f_out)
        got = {k: int(v) for k, v in re.findall(r"^(DIVR|DIVF|DIVQ|FILTER_RANGE):\s+(\d+)",
                                                 out, flags=re.M)}
        assert got == {"DIVR": p.divr, "DIVF": p.divf, "DIVQ": p.divq,
                       "FILTER_RANGE": p.filter_range}, f_out
        assert f"{p.f_out_mhz:.3f} MHz (achieved)" in out
