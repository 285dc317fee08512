"""Real bitstreams with the YoWASP (or FLUID_HW_*-overridden) Yosys and nextpnr.

Slow: the first Yosys run of a machine compiles its WebAssembly (about a
minute, cached in ~/.cache/YoWASP); after that each build takes seconds.
"""

from pathlib import Path

import pytest
from amaranth.back import rtlil

from fluid_hw.boards import (
    BitstreamResult,
    BoardTop,
    ResourceBudgetError,
    ToolFailedError,
    VerilogCore,
    build_bitstream,
    find_tool,
    get_board,
    parse_nextpnr_log,
    run_flow,
)
from fluid_hw.boards.toolchain import run_tool
from tests.boards.designs import DotMac

pytestmark = pytest.mark.slow

# nextpnr BEL type -> the device-data resource it must agree with
ECP5_BELS = {"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "MULT18X18D": "dsp", "DP16KD": "bram",
             "EHXPLLL": "pll", "TRELLIS_IO": "io"}
ICE40_BELS = {"ICESTORM_LC": "lut", "ICESTORM_DSP": "dsp", "ICESTORM_RAM": "bram",
              "ICESTORM_SPRAM": "spram", "ICESTORM_PLL": "pll", "SB_IO": "io"}


def _check_common(r: BitstreamResult, build: Path, bels: dict[str, str]) -> None:
    assert r.bitstream.is_file() and r.bitstream.stat().st_size > 50_000
    assert r.fmax_mhz is not None and r.fmax_mhz > 0
    assert r.critical_path["steps"] and r.critical_path["delay_ns"] > 0
    for bel, res in bels.items():  # the device data matches nextpnr's chip database
        assert r.utilisation[bel]["available"] == r.resources_available[res], bel
    for log in r.logs.values():
        assert log.is_file() and log.parent == build
    assert BitstreamResult.load(build / "bitstream.json") == r
    report = r.report()
    assert report["fmax_mhz"] == round(r.fmax_mhz, 2)
    assert report["timing_met"] == (r.fmax_mhz >= r.clock_mhz)


def test_ecp5_bitstream(tmp_path):
    lines: list[str] = []
    top = BoardTop(DotMac(8), "ulx3s-25f", clock_mhz=100)
    r = build_bitstream(top, tmp_path, progress=lines.append)
    _check_common(r, tmp_path, ECP5_BELS)
    assert r.bitstream.name == "board_top.bit"
    assert r.cells_by_type["MULT18X18D"] == 8 and r.resources_used["dsp"] == 8
    assert r.resources_used["pll"] == 1 and r.resources_used["ff"] > 8 * 32
    assert r.pll is not None and r.pll["CLKOP_DIV"] == 6 and r.clock_mhz == 100.0
    assert r.clocks["clk"]["target_mhz"] == pytest.approx(100.0)  # derived through the PLL
    # the log parser (for nextpnr builds without --report) agrees with the report
    logged = parse_nextpnr_log((tmp_path / "nextpnr.log").read_text())
    assert logged.fmax_mhz == pytest.approx(r.fmax_mhz, abs=0.01)
    assert logged.utilisation["MULT18X18D"]["used"] == 8
    assert any("synthesis" in x for x in lines) and any("done in" in x for x in lines)
    assert (tmp_path / "board_top.lpf").read_text().count("LOCATE COMP") == 5


def _verilog_of(core, name: str, build: Path) -> Path:
    """Amaranth -> Verilog through Yosys' write_verilog, as the simulation flow emits it."""
    (build / f"{name}.il").write_text(rtlil.convert(core, name=name))
    run_tool("yosys", ["-q", "-p", f"read_rtlil {name}.il; proc; opt_clean; "
                       f"write_verilog -norename {name}.v"], cwd=build, log="to_verilog.log",
             progress=None)
    return build / f"{name}.v"


def test_ice40_bitstream_of_a_verilog_core(tmp_path):
    src = _verilog_of(DotMac(8), "dot_mac", tmp_path)
    core = VerilogCore(src, "dot_mac")
    assert set(core.signature.members) == {"a", "b", "valid", "clear", "acc"}
    build = tmp_path / "build"
    r = build_bitstream(BoardTop(core, "icebreaker", clock_mhz=30), build, progress=None)
    _check_common(r, build, ICE40_BELS)
    assert (build / "src" / "dot_mac.v").is_file()  # sources are copied into the build
    assert r.bitstream.name == "board_top.bin"
    assert r.cells_by_type["SB_MAC16"] == 8 and r.resources_used["dsp"] == 8
    assert r.resources_used["pll"] == 1 and r.pll["DIVF"] == 79


@pytest.mark.parametrize(("board", "lanes", "words"), [
    ("ulx3s-25f", 32, ["32 MULT18X18D multipliers", "LFE5U-25F has 28", "4 over", "114%",
                       "ulx3s-45f"]),
    ("icebreaker", 10, ["10 SB_MAC16 DSPs", "iCE40UP5K has 8", "2 over", "125%"]),
])
def test_over_budget_fails_before_place_and_route(tmp_path, board, lanes, words):
    top = BoardTop(DotMac(lanes), board, clock_mhz=None)
    with pytest.raises(ResourceBudgetError) as ei:
        build_bitstream(top, tmp_path, progress=None)
    msg = str(ei.value)
    for w in words:
        assert w in msg
    assert "folding" in msg
    assert (tmp_path / "yosys.log").is_file() and not (tmp_path / "nextpnr.log").exists()


def test_nextpnr_failure_shows_its_log(tmp_path):
    """Without the budget check nextpnr itself fails; the error points at its log.
    (The heap placer gives up at once; the static placer iterates for minutes first,
    one more reason for the budget check.)"""
    top = BoardTop(DotMac(10), "icebreaker")
    with pytest.raises(ToolFailedError) as ei:
        build_bitstream(top, tmp_path, progress=None, check_resources=False, placer="heap")
    msg = str(ei.value)
    assert "nextpnr-ice40 failed" in msg and str(tmp_path / "nextpnr.log") in msg
    assert "ERROR" in msg


def test_yosys_failure_with_native_override(tmp_path, monkeypatch):
    """FLUID_HW_YOSYS given as a full path; a syntax error names the log and the line."""
    monkeypatch.setenv("FLUID_HW_YOSYS", find_tool("yosys")[0])
    bad = tmp_path / "bad.v"
    bad.write_text("module top(input clk25, output led);\n  assign led = ;\nendmodule\n")
    board = get_board("icebreaker")
    with pytest.raises(ToolFailedError) as ei:
        run_flow(board, tmp_path / "build", [bad], "top",
                 pins={"clk25": board.pin("clk"), "led": board.pin("led")},
                 clocks={"clk25": 12.0}, freq_mhz=12.0, progress=None)
    msg = str(ei.value)
    assert "yosys failed" in msg and "yosys.log" in msg and "bad.v:2" in msg


@pytest.mark.parametrize("board", ["ulx3s-45f", "ulx3s-85f"])
def test_larger_ecp5_device_data_matches_nextpnr(tmp_path, board):
    """A tiny design on the bigger ECP5s: nextpnr's resource counts equal the data
    (except I/O: nextpnr counts the die's pads, the data the package's user pins)."""
    r = build_bitstream(BoardTop(DotMac(1), board), tmp_path, progress=None)
    for bel, res in ECP5_BELS.items():
        if res == "io":
            assert r.utilisation[bel]["available"] >= r.resources_available[res]
            continue
        assert r.utilisation[bel]["available"] == r.resources_available[res], (board, bel)
    assert r.bitstream.stat().st_size > 50_000
