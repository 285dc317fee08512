# amaranth: UnusedElaboratable=no
"""``fluid-hw bitstream`` of a build with two accelerator regions (fc -> softmax on the
host -> fc): one board top holding both regions' accelerators behind one UART bridge
with a region address.

Fast: the board top (a core per region, a two-region bridge sized per region), the
region addresses in registers.md, the budget check over the regions together (refused
before any tool, naming the resource and each region's share), and builds whose
regions cannot share a design.  Slow: a real ECP5 bitstream through the CLI, with
Yosys' multipliers equal to the regions' estimates summed and the report's region
addresses."""

from __future__ import annotations

import json
import shutil

import pytest

from fluid_hw.backends.fpga import read_report
from fluid_hw.backends.fpga.bitstream import accelerator_board_top
from fluid_hw.backends.fpga.bitstream_regions import read_regions, region_estimates
from fluid_hw.backends.fpga.steps import BuildError
from fluid_hw.boards import ResourceBudgetError, get_board
from fluid_hw.cli.main import main
from fluid_hw.drivers.build_dir import BuildDir
from tests.backends.fpga._two_regions import two_region_build


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    out = tmp_path_factory.mktemp("bitstream_regions") / "net"
    two_region_build(out)
    return out


def test_one_board_top_holds_every_region(net):
    builds = read_regions(net)
    assert [b.info["name"] for b in builds] == ["fluid_accel_r0", "fluid_accel_r1"]
    top = accelerator_board_top(builds, get_board("ulx3s-25f"), clock_mhz=100)
    bridge = top.bridge
    # each region's beats as its folding makes them: the first stage's input lanes, the
    # last stage's output lanes (int8 here: requantised in region 0, fc 8 -> 4 in region 1)
    lanes = []
    for b in builds:
        specs = b.specs()
        lanes.append((specs[0].in_lanes, specs[-1].out_lanes * b.info["out_bits"] // 8))
    assert bridge.regions == tuple(lanes) and bridge.divisor == 33
    assert all(i >= 1 and o >= 1 for i, o in lanes)
    assert [c.module for c in top.cores] == ["fluid_accel_r0", "fluid_accel_r1"]
    assert {p.name for p in top.verilog_sources} == {"accelerator.v"}
    assert len(top.verilog_sources) == 2
    assert bridge.describe()["protocol_version"] == 2
    top._MustUse__used = True
    # registers.md: each region's address, Verilog top and own register map
    md = (net / "registers.md").read_text()
    for k, b in enumerate(builds):
        assert f"| {k} | `regions/{k}/` | `{b.info['name']}` | " \
               f"`{b.info['design_hash'][:8]}` | {b.in_bytes} | {b.out_bytes} |" in md
        assert (net / "regions" / str(k) / "registers.md").is_file()


def test_regions_that_do_not_fit_together_are_refused_before_the_tools(net, tmp_path):
    out = tmp_path / "net"
    shutil.copytree(net, out)
    per, total = region_estimates(read_regions(out), get_board("icebreaker"))
    assert total["dsp"] == per[0]["dsp"] + per[1]["dsp"] > 8 >= max(e["dsp"] for e in per)
    before = sorted(p.name for p in out.iterdir())
    from fluid_hw.backends.fpga.bitstream import bitstream

    msg = (rf"2 accelerator regions in one bitstream \(estimate\) need {total['dsp']} "
           rf"SB_MAC16 .* but iCE40UP5K has 8 \({total['dsp'] - 8} over\): "
           rf"region 0 \(regions/0, fluid_accel_r0\) {per[0]['dsp']}, "
           rf"region 1 \(regions/1, fluid_accel_r1\) {per[1]['dsp']}\. Fix: .*--target")
    with pytest.raises(ResourceBudgetError, match=msg):
        bitstream(out, board="icebreaker", progress=None)
    assert main(["bitstream", str(out), "--board", "icebreaker"]) == 2
    assert sorted(p.name for p in out.iterdir()) == before   # no tool ran, nothing written


def test_regions_must_have_distinct_verilog_tops(net, tmp_path):
    """A build from before regions were named (every region 'fluid_accel') is refused
    with the way out, not handed to Yosys to fail on duplicate modules."""
    out = tmp_path / "old"
    shutil.copytree(net, out)
    for k in (0, 1):
        f = out / "regions" / str(k) / "design.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "name": "fluid_accel"}))
    with pytest.raises(BuildError, match=r"regions/0/design.json: is \d+ bytes.*recompile"):
        read_regions(out)  # the edit, caught by the region's manifest
    for k in (0, 1):  # a consistent old build: the names are what is refused
        BuildDir(out / "regions" / str(k)).write_manifest("compile")
    BuildDir(out).write_manifest("compile")
    with pytest.raises(BuildError, match=r"not distinct \(fluid_accel, fluid_accel\).*"
                                         "recompile"):
        read_regions(out)


@pytest.mark.slow
def test_ecp5_bitstream_of_two_regions(net, tmp_path):
    out = tmp_path / "ecp5"
    shutil.copytree(net, out)
    per, total = region_estimates(read_regions(out), get_board("ulx3s-25f"))
    assert main(["bitstream", str(out), "--board", "ulx3s-25f"]) == 0
    r = read_report(out)
    bit = r["bitstream"]
    assert bit["file"] == "accelerator.bit" and (out / "accelerator.bit").stat().st_size > 0
    assert json.loads((out / "bitstream.json").read_text())["bitstream"].endswith(
        "accelerator.bit")
    assert "Fmax" in (out / "report.html").read_text()
    # both regions are in the design: Yosys' multipliers are the regions' estimates summed
    cmp_ = r["resources_estimate_vs_actual"]
    assert cmp_["dsp"]["actual"] == cmp_["dsp"]["estimate"] == per[0]["dsp"] + per[1]["dsp"]
    assert (cmp_["bram"]["actual"] or 0) == cmp_["bram"]["estimate"] == total["bram"]
    for res in ("lut", "ff"):
        assert abs(cmp_[res]["error_pct"]) <= 25, (res, cmp_[res])
    assert bit["estimate"] == total
    # the region addresses, as the serial driver uses them
    regions = bit["regions"]
    assert [g["address"] for g in regions] == [0, 1]
    assert [g["name"] for g in regions] == ["fluid_accel_r0", "fluid_accel_r1"]
    assert [g["beat_tags"] for g in regions] == [[0x90, 0x91], [0x92, 0x93]]
    assert [g["estimate"] for g in regions] == per
    assert bit["uart"]["protocol_version"] == 2 and len(bit["uart"]["regions"]) == 2
    assert bit["registers"] == "registers.md"
    # throughput and latency at Fmax: the regions one after another
    assert r["fmax_mhz"] > 0 and isinstance(r["timing_met"], bool)
    ii = r["estimate"]["initiation_interval"]
    assert r["throughput_per_s"] == pytest.approx(r["fmax_mhz"] * 1e6 / ii, rel=1e-3)
    print(f"\n2 regions on ulx3s-25f: Fmax {r['fmax_mhz']} MHz "
          f"(timing {'met' if r['timing_met'] else 'NOT met'}), {json.dumps(cmp_)}, "
          f"seconds {bit['seconds']}")
