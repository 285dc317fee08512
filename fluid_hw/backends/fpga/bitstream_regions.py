"""``fluid-hw bitstream BUILD`` of a build with several accelerator regions: one
bitstream holding every region's accelerator behind one UART bridge.

    keys = bitstream("build/net", board="ulx3s-25f")   # BUILD/segments.json: this module
    keys["bitstream"]["regions"]                       # each region's address, beats, estimate

Region ``k`` (``BUILD/regions/<k>/``, a complete single-region build whose Verilog top
is ``<name>_r<k>``) sits at **region address** ``k`` of the bridge
(``UartBridge(regions=...)``: the REGION command selects it; its output beats come
tagged ``0x90 + 2k``); its register map and streams are its own, unchanged.  The steps
are the single-region ones (:data:`.bitstream.BITSTREAM_STEPS`) over all regions at
once, with this module's parts:

1. ``read_build`` (:func:`read_regions`): every region's folder; their Verilog tops
   must differ (builds compiled before regions were named all say ``fluid_accel``:
   recompile);
2. ``budget_check`` (:func:`region_estimates`, :func:`check_regions_fit`): each region
   on the device without the board top, plus one bridge; stop before any tool when the
   multipliers or block RAMs of all regions together exceed the device, naming the
   resource and each region's share;
3. ``board_top`` to ``pack``: one board top (:class:`fluid_hw.boards.AcceleratorBoardTop`
   with a core per region) through Yosys (whose own budget check counts every region's
   cells), nextpnr and the packer in ``BUILD``;
4. ``write_report``: ``BUILD/accelerator.bit`` / ``.bin``, ``BUILD/bitstream.json``;
   ``BUILD/report.json`` gains the single-region keys, with the estimate summed over the
   regions and throughput and latency at Fmax from the summed initiation intervals and
   latencies (a batch passes the regions one after another), plus
   ``bitstream.regions`` (:func:`region_rows`: per region address, folder, Verilog top,
   design hash, beat sizes, estimate).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...boards import Board, ResourceBudgetError
from ...boards.toolchain import print_progress
from ...drivers.build_dir import BuildDir, BuildDirError
from ...hls.autofold import bridge_estimate
from ...rtl.uart_bridge import MAX_REGIONS, beat_tag
from ...tools import Progress
from .board_top import DEFAULT_BAUD, BuildFolder, estimate_on, read_build
from .steps import BuildError

__all__ = ["read_regions", "region_estimates", "check_regions_fit", "region_rows",
           "bitstream_regions"]

RESOURCES = ("lut", "ff", "dsp", "bram")


def read_regions(build_dir: str | os.PathLike[str]) -> list[BuildFolder]:
    """The region build folders of a multi-region build, region ``k`` at index ``k``."""
    d = Path(build_dir)
    try:
        dirs = [d / r["dir"] for r in BuildDir(d).segments()["regions"]]
    except BuildDirError as e:
        raise BuildError(str(e)) from None
    if not 1 <= len(dirs) <= MAX_REGIONS:
        raise BuildError(f"{d} has {len(dirs)} accelerator regions; one bitstream holds 1 to "
                         f"{MAX_REGIONS} (the UART bridge's region addresses). Lower more of "
                         "the ops between regions, or build a region alone (fluid-hw "
                         f"bitstream {d}/regions/<k>)")
    builds = [read_build(p) for p in dirs]
    names = [str(b.info["name"]) for b in builds]
    if len(set(names)) < len(names):
        raise BuildError(f"{d}: the regions' Verilog tops are not distinct ({', '.join(names)})"
                         ", so they cannot share one design; the build predates region names "
                         "(<name>_r<k>): recompile it with `fluid-hw compile`")
    return builds


def region_estimates(builds: Sequence[BuildFolder], board: Board
                     ) -> tuple[list[dict[str, int]], dict[str, int]]:
    """Each region's device-aware estimate (without the board top), and the whole
    design's: their sum plus one UART bridge sized for the largest beats."""
    per = [estimate_on(b, board, board_top=False) for b in builds]
    total = {r: sum(e.get(r, 0) for e in per) for r in RESOURCES}
    br = bridge_estimate(board.family.name, max(b.in_bytes for b in builds),
                         max(b.out_bytes for b in builds))
    total["lut"] += br.lut
    total["ff"] += br.ff
    return per, total


def check_regions_fit(builds: Sequence[BuildFolder], board: Board,
                      per: Sequence[Mapping[str, int]], total: Mapping[str, int]) -> None:
    """Multipliers and block RAMs of all regions together against the device: stop
    before synthesis, naming the resource and each region's share."""
    dev = board.device
    over = [r for r in ("dsp", "bram") if total[r] > dev.resources.get(r, 0)]
    if not over:
        return
    parts = []
    for r in over:
        shares = ", ".join(f"region {k} (regions/{b.path.name}, {b.info['name']}) {e[r]}"
                           for k, (b, e) in enumerate(zip(builds, per)))
        parts.append(f"{total[r]} {dev.describe(r)} but {dev.name} has {dev.resources[r]} "
                     f"({total[r] - dev.resources[r]} over): {shares}")
    raise ResourceBudgetError(
        f"{len(builds)} accelerator regions in one bitstream (estimate) need "
        + "; and ".join(parts) + ". Fix: compile the model for this board (`fluid-hw "
        "compile MODEL --target BOARD` shares the device's budget among the regions), fold "
        "the largest region less, or build a region alone (fluid-hw bitstream "
        f"{builds[0].path.parent}/<k>)")


def region_rows(builds: Sequence[BuildFolder], per: Sequence[Mapping[str, int]]
                ) -> list[dict[str, Any]]:
    """``report.json``'s ``bitstream.regions``: per region its address, folder, Verilog
    top, design hash, beat sizes and tags, and estimate."""
    return [{"address": k, "dir": f"regions/{bd.path.name}", "name": bd.info["name"],
             "design_hash": bd.info.get("design_hash"), "in_bytes": bd.in_bytes,
             "out_bytes": bd.out_bytes, "beat_tags": [beat_tag(k, False), beat_tag(k, True)],
             "estimate": dict(e)} for k, (bd, e) in enumerate(zip(builds, per))]


def bitstream_regions(build_dir: str | os.PathLike[str], *, board: str | Board | None = None,
                      clock_mhz: float | None = None, baud: float = DEFAULT_BAUD,
                      seed: int = 1, placer: str | None = None, router: str | None = None,
                      nextpnr_args: Sequence[str] = (), check_resources: bool = True,
                      progress: Progress = print_progress, timeout_s: float | None = None
                      ) -> dict[str, Any]:
    """The bitstream of a multi-region build (see the module docstring): the steps of
    :data:`.bitstream.BITSTREAM_STEPS` on it (:func:`.bitstream.bitstream` takes the
    folder's lock and calls them); returns the keys merged into ``BUILD/report.json``."""
    from .bitstream import BitstreamOptions, run_bitstream

    return run_bitstream(build_dir, BitstreamOptions(
        board=board, clock_mhz=clock_mhz, baud=baud, seed=seed, placer=placer,
        router=router, nextpnr_args=tuple(nextpnr_args), check_resources=check_resources,
        progress=progress, timeout_s=timeout_s), regioned=True)
