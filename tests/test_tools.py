"""fluid_hw.tools: the rows, their overrides and aliases, the lookups the other units
share, the progress channel, and docs/tools.md against the rows."""

import logging
import re
import sys
from pathlib import Path

import pytest

from fluid_hw import tools
from fluid_hw.errors import ToolNotFoundError

DOC = Path(__file__).resolve().parents[1] / "docs" / "tools.md"


def _table(text: str) -> list[list[str]]:
    """The rows of the tools table in ``text``, version column left out."""
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")]
            for ln in text.splitlines() if ln.startswith("| ")]
    start = next(i for i, r in enumerate(rows) if r[0] == "tool")
    out = []
    for r in rows[start:]:
        if r[0] in ("variable",):  # the next table
            break
        out.append(r[:3] + r[4:])
    return out


def test_doc_table_matches_the_rows():
    want = _table(tools.tools_markdown({k: "x" for k in tools.TOOLS}))
    assert _table(DOC.read_text()) == want
    assert len(want) == len(tools.TOOLS) + 2  # header and rule


def test_every_row_has_a_fluid_hw_variable_and_a_way_to_install():
    for t in tools.TOOLS.values():
        assert re.fullmatch(r"FLUID_HW_[A-Z0-9_]+", t.env), t.key
        assert t.package or t.install_hint, t.key
        assert t.purpose, t.key
    assert tools.TOOLS["yosys-amaranth"].aliases == ("YOSYS",)
    assert tools.TOOLS["yosys"].aliases == ()  # two tools, two variables


def test_the_units_share_one_table_and_one_lookup():
    from fluid_hw.boards import toolchain
    from fluid_hw.sim import _tools as sim_tools

    assert all(toolchain.TOOLS[k] is tools.TOOLS[k] for k in toolchain.TOOLS)
    assert toolchain.find_tool is tools.find_tool and toolchain.run_tool is tools.run_tool
    assert sim_tools.cache_dir is tools.cache_dir and sim_tools.verilator is tools.verilator


def test_old_variable_is_an_alias_and_the_new_one_wins(monkeypatch, tmp_path):
    monkeypatch.delenv("FLUID_HW_NVCC", raising=False)
    monkeypatch.setenv("NVCC", str(tmp_path / "old-nvcc"))
    with pytest.raises(ToolNotFoundError, match="NVCC="):
        tools.find_tool("nvcc")
    monkeypatch.setenv("FLUID_HW_NVCC", f"{sys.executable} -q")
    assert tools.find_tool("nvcc") == [sys.executable, "-q"]


def test_cache_dir_and_its_old_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("FLUID_HW_CACHE", str(tmp_path / "a"))
    assert tools.cache_dir("x") == tmp_path / "a" / "x" and (tmp_path / "a" / "x").is_dir()
    monkeypatch.delenv("FLUID_HW_CACHE")
    monkeypatch.setenv("FLUID_HW_CACHE_DIR", str(tmp_path / "b"))
    assert tools.cache_dir() == tmp_path / "b"


def test_one_progress_channel(monkeypatch, capsys, caplog):
    monkeypatch.delenv("FLUID_HW_QUIET", raising=False)
    with caplog.at_level(logging.DEBUG, logger="fluid_hw"):
        tools.say("verilated x", "sim")
        tools.print_progress("synthesis: done")
    assert capsys.readouterr().err == "[fluid-hw sim] verilated x\nfluid-hw: synthesis: done\n"
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("fluid_hw.sim", "verilated x"), ("fluid_hw.progress", "synthesis: done")]
    monkeypatch.setenv("FLUID_HW_QUIET", "1")
    tools.say("quiet", "compile")
    assert capsys.readouterr().err == ""
