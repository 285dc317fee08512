"""``fluid-hw bitstream``: a compiled build folder -> a real bitstream of the accelerator
board top (PLL, reset synchroniser, UART bridge, accelerator.v), with Yosys' multiplier
and block-RAM counts equal to the device-aware estimate, and the report merged.

Fast: the board is resolved or refused, and a design that cannot fit is refused before
any tool runs, naming the resource and the way out.  Slow: one ECP5 and one iCE40 UP5K
bitstream of a small two-layer MLP through the CLI."""

from __future__ import annotations

import json
import shutil

import pytest

import fluid_hw as fluid
from fluid_hw.backends.fpga import compile_program, read_report
from fluid_hw.backends.fpga.bitstream import (
    BITSTREAM_KEYS,
    BITSTREAM_STEPS,
    accelerator_board_top,
    bitstream,
    read_build,
    resolve_board,
)
from fluid_hw.backends.fpga.steps import BuildError
from fluid_hw.boards import ResourceBudgetError, get_board
from fluid_hw.cli.main import main
from fluid_hw.drivers.build_dir import BuildDir
from fluid_hw.errors import FluidError, UnknownNameError
from tests.backends.fpga._programs import Arch, build, random_values

TINY = Arch((32,), [{"kind": "fc", "name": "fc0", "n": 16, "relu": True},
                    {"kind": "fc", "name": "fc1", "n": 10, "relu": False}],
            {"fc0": (1, 2), "fc1": (1, 1)})
BIG = Arch((64,), [{"kind": "fc", "name": "fc0", "n": 128, "relu": True},
                   {"kind": "fc", "name": "fc1", "n": 64, "relu": True},
                   {"kind": "fc", "name": "fc2", "n": 10, "relu": False}],
           {"fc0": (1, 1), "fc1": (1, 1), "fc2": (1, 1)})


def _compile(arch: Arch, out):
    built = build(arch)
    scope = fluid.Scope()
    scope.vars.update(random_values(built, 2))
    compile_program(built.program, scope, out, feeds=[built.feed], fetches=built.fetches,
                    folding=arch.folding)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _compile(TINY, tmp_path_factory.mktemp("bitstream") / "tiny")


def test_board_comes_from_the_option_or_the_target(tiny, tmp_path):
    b = read_build(tiny)
    assert resolve_board(b, "up5k").name == "icebreaker"
    with pytest.raises(BuildError, match=r"target 'sim' is not a board.*--board"):
        resolve_board(b, None)
    with pytest.raises(BuildError, match="does not exist"):
        read_build(tmp_path / "none")
    top = accelerator_board_top(b, get_board("ulx3s-25f"), clock_mhz=50)
    assert top.clock_mhz == pytest.approx(50) and top.bridge.in_bytes == 2
    assert top.bridge.out_bytes == 1 and top.bridge.divisor == round(50e6 / 3e6)
    top._MustUse__used = True


def test_stop_after_a_step_leaves_its_files_and_the_build_as_it_was(tiny, tmp_path, capsys):
    """Like compile and simulate, the bitstream is a flat list of named steps: stopped
    after one (before any tool), the folder holds what the steps so far made, no
    bitstream, and its manifest is untouched (still a valid build)."""
    assert [s.name for s in BITSTREAM_STEPS] == [
        "read_build", "budget_check", "board_top", "synthesis", "place_and_route", "pack",
        "write_report"]
    d = tmp_path / "t"
    shutil.copytree(tiny, d)
    manifest = (d / "manifest.json").read_bytes()
    report = (d / "report.json").read_bytes()
    assert bitstream(d, board="ulx3s-25f", progress=None, stop_after="board_top") == {}
    assert (d / "board_top.il").is_file() and (d / "board_top.lpf").is_file()
    assert not (d / "yosys.log").exists() and not list(d.glob("accelerator.b*"))
    assert (d / "manifest.json").read_bytes() == manifest
    assert (d / "report.json").read_bytes() == report
    BuildDir(d).verify()
    with pytest.raises(UnknownNameError, match=r"unknown bitstream step 'synth'.*synthesis"):
        bitstream(d, board="ulx3s-25f", progress=None, stop_after="synth")
    # a router nextpnr does not have is refused before any step, naming those it has
    with pytest.raises(FluidError, match=r"unknown nextpnr router 'router3'.*router1, router2"):
        bitstream(d, board="ulx3s-25f", progress=None, router="router3")
    assert (d / "manifest.json").read_bytes() == manifest
    capsys.readouterr()
    assert main(["bitstream", str(d), "--board", "icebreaker", "--stop-after",
                 "budget_check"]) == 0
    assert "through step budget_check" in capsys.readouterr().out
    assert not (d / "report.html").exists()


def test_a_design_that_cannot_fit_is_refused_before_the_tools(tmp_path):
    out = _compile(BIG, tmp_path / "big")
    before = set(p.name for p in out.iterdir())
    with pytest.raises(ResourceBudgetError,
                       match=r"SB_RAM40_4K.*over.*SPRAM.*--fold auto --target"):
        main_args = ["bitstream", str(out), "--board", "icebreaker"]
        bitstream(out, board="icebreaker", progress=None)
    assert main(main_args) == 2  # the CLI turns it into one error line
    assert set(p.name for p in out.iterdir()) == before  # no tool ran


def _check_build(out, family):
    r = read_report(out)
    for k in BITSTREAM_KEYS:
        assert k in r, k
    bit = r["bitstream"]
    assert (out / bit["file"]).is_file() and bit["file"].startswith("accelerator.")
    for log in bit["logs"].values():
        assert (out / log).is_file()
    cmp_ = r["resources_estimate_vs_actual"]
    # multipliers and block RAMs exactly as estimated; LUTs and FFs within 25 %
    assert cmp_["dsp"]["estimate"] == cmp_["dsp"]["actual"] > 0
    assert cmp_["bram"]["estimate"] == cmp_["bram"]["actual"] > 0
    for res in ("lut", "ff"):
        assert abs(cmp_[res]["error_pct"]) <= 25, (res, cmp_[res])
    assert r["fmax_mhz"] > 0 and isinstance(r["timing_met"], bool)
    assert r["critical_path"]["steps"]
    ii = r["estimate"]["initiation_interval"]
    assert r["throughput_per_s"] == pytest.approx(r["fmax_mhz"] * 1e6 / ii, rel=1e-3)
    assert r["latency_us"] == pytest.approx(r["estimate"]["latency_cycles"] / r["fmax_mhz"],
                                            rel=1e-3)
    assert bit["uart"]["baud"] == pytest.approx(3e6, rel=0.02)
    html = (out / "report.html").read_text()
    assert "Fmax" in html and "data:image/png;base64," in html
    assert json.loads((out / "bitstream.json").read_text())["bitstream"].endswith(bit["file"])
    print(f"\n{family}: Fmax {r['fmax_mhz']} MHz (timing {'met' if r['timing_met'] else 'NOT met'}"
          f"), {json.dumps(cmp_)}, seconds {bit['seconds']}")
    return r


@pytest.mark.slow
def test_ecp5_bitstream_of_a_tiny_mlp(tiny, tmp_path):
    out = tmp_path / "ecp5"
    shutil.copytree(tiny, out)
    assert main(["bitstream", str(out), "--board", "ulx3s-25f", "--clock-mhz", "100",
                 "--router", "router2"]) == 0
    # the router option reaches nextpnr (its log starts with the command line)
    assert "--router router2" in (out / "nextpnr.log").read_text().splitlines()[0]
    r = _check_build(out, "ecp5")
    assert r["bitstream"]["pnr_options"] == {"placer": "static", "router": "router2",
                                             "seed": 1, "nextpnr_args": []}
    assert r["bitstream"]["pll"]["primitive"] == "EHXPLLL"
    assert r["resources_used"]["pll"] == 1


@pytest.mark.slow
def test_ice40_up5k_bitstream_of_a_tiny_mlp(tiny, tmp_path):
    out = tmp_path / "ice40"
    shutil.copytree(tiny, out)
    assert main(["bitstream", str(out), "--board", "icebreaker"]) == 0   # 30 MHz default
    r = _check_build(out, "ice40")
    assert r["bitstream"]["clock_mhz"] == pytest.approx(30.0)
    # no router asked for: nextpnr's default, recorded as such
    assert "--router" not in (out / "nextpnr.log").read_text().splitlines()[0]
    assert r["bitstream"]["pnr_options"]["router"] == "router1"
    assert r["timing_met"] is True
    # the manifest, written last, lists the bitstream step's files
    doc = BuildDir(out).verify()
    assert doc["last_step"] == "bitstream" and "accelerator.bin" in doc["files"]
    assert "bitstream.json" in doc["files"]
