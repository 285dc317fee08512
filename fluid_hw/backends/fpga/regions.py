"""Builds with several accelerator regions: CPU fallback anywhere.

Where ops without a hardware lowering sit in the middle of a quantised program (the
quantisation pass leaves them in float between a ``dequantize`` and a ``quantize``),
:func:`fluid_hw.hls.partition.segment` cuts it into accelerator **regions** with host
segments between.  The decision (docs/fpga_backend.md): a build holds **several
regions, each its own accelerator** -- its own stream ports and register block --
so every region is an ordinary single-region build (the same steps, simulation
harness, drivers and report) in ``BUILD/regions/<k>/``, and the build folder itself
holds what joins them::

    BUILD/report.json          target, regions[] (per region: its stages, estimate),
                               segments (which ops run where), whole-model figures
    BUILD/segments.json        feeds, fetches, per region its input / output value and
                               folder, the host programs in order
    BUILD/host/seg<k>.pb       host segment k (computes region k's input, the last one
    BUILD/host/params.npz      the fetches) and the parameters the host programs read
    BUILD/model/               the whole quantised program as compiled
    BUILD/regions/<k>/         region k: accelerator.v, design.json, registers.md, ...
    BUILD/registers.md         the region addresses (the UART bridge's REGION command)
                               and where each region's own register map is

Region ``k``'s Verilog top is ``<name>_r<k>`` (``fluid_accel_r0``...), so that every
region's ``accelerator.v`` can be read into one design: ``fluid-hw bitstream BUILD``
(:mod:`.bitstream_regions`) puts all of them behind one UART bridge, region ``k`` at
region address ``k``.  A program with one region keeps the single-region layout (no
``regions/``).  The driver (:mod:`fluid_hw.drivers.regions`) runs host segment 0,
region 0, host segment 1, ... on the CPU executor and the transport.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.build_dir import NAMES, REPORT_KEYS, STEP_FILES, BuildDir
from ...hls.partition import Segmentation
from ...hls.stage_info import layer_name
from .steps import BuildError

__all__ = ["SEGMENTS", "RegionBuild", "compile_regions", "write_region_host",
           "region_report", "region_name", "write_region_registers"]

#: the file that makes a build folder a multi-region build
SEGMENTS = NAMES["segments"]


@dataclass
class RegionBuild:
    """One region of a multi-region build: its folder and its compile state."""

    index: int
    path: Path
    state: Any  # CompileState


def region_name(name: str, k: int) -> str:
    """The Verilog top of region ``k`` of a build named ``name``."""
    return f"{name}_r{k}"


def _region_names(seg: Segmentation, k: int) -> set[str]:
    ops = seg.program.global_block().ops
    names = set()
    for i in seg.regions[k].ops:
        for v in (*ops[i].input_arg_names, *ops[i].output_arg_names):
            names.add(layer_name(v))
    return names


def compile_regions(st: Any, seg: Segmentation) -> list[RegionBuild]:
    """Compile every region of ``seg`` as a single-region build in
    ``st.out/regions/<k>`` with the options of ``st`` (a CompileState); on a board
    target each region gets a share of the device budget by its multiply-accumulates."""
    from .compile import compile_program

    gb = seg.program.global_block()
    weights = [sum(int(np.prod(gb.var(v).shape)) for i in r.ops
                   for v in gb.ops[i].input_arg_names if gb.var(v).persistable) or 1
               for r in seg.regions]
    fold = dict(st.folding)
    used: set[str] = set()
    out: list[RegionBuild] = []
    for k, r in enumerate(seg.regions):
        names = _region_names(seg, k)
        mine = {n: f for n, f in fold.items() if n in names}
        used |= set(mine)
        path = st.out / "regions" / str(k)
        share = weights[k] / sum(weights)
        # the regions share the multiplier budget (a board's device: its fraction)
        pol = st.options.folding
        base = pol.budget if pol.budget is not None else \
            (st.target.budget if st.target.board is None and pol.mode != "device-fit"
             else None)
        budget = replace(base, macs=max(1, int(base.macs * share))) \
            if base is not None and base.macs is not None else base
        opts = replace(st.options, name=region_name(st.options.name, k),
                       folding=replace(pol, overrides=mine, budget=budget,
                                       fraction=pol.fraction * share))
        sub = compile_program(seg.sub_program(k), st.scope, path, opts, feeds=[r.hw_input],
                              fetches=[r.hw_output])
        out.append(RegionBuild(k, path, sub))
    unused = sorted(set(fold) - used)
    if unused:
        raise BuildError(f"--fold names {unused}, which are no layer of any accelerator "
                         "region (the regions' layers are in regions/<k>/report.json)")
    return out


def write_region_host(st: Any, seg: Segmentation, regions: list[RegionBuild]) -> str:
    """``host/seg<k>.pb``, ``host/params.npz`` and ``segments.json``."""
    host = st.out / "host"
    host.mkdir(parents=True, exist_ok=True)
    for f in host.glob("*.pb"):
        f.unlink()
    from .compile import write_host_programs

    write_host_programs(host, {f"seg{k}": prog for k, prog in enumerate(seg.host)}, st.scope)
    doc: dict[str, Any] = {"feeds": seg.feeds, "fetches": seg.fetches,
                          "regions": [{"index": rb.index, "dir": f"regions/{rb.index}",
                                       "hw_input": r.hw_input, "hw_output": r.hw_output,
                                       "design_hash": rb.state.top.design_hash}
                                      for rb, r in zip(regions, seg.regions)],
                          "host": [f"host/seg{k}.pb" for k in range(len(seg.host))],
                          "segments": seg.describe()["segments"]}
    bd = BuildDir(st.out)
    bd.write_json("segments", doc)
    # a single-region build's files, from an earlier compile into this folder
    bd.remove("host/pre.pb", "host/post.pb", "host_json", "verilog", "design", "registers_h",
              "weights", "lowering")
    write_region_registers(st.out, doc["regions"])
    return f"{len(seg.host)} host segments, {len(regions)} regions"


def write_region_registers(out: Path, regions: list[dict[str, Any]]) -> None:
    """``BUILD/registers.md``: how a host reaches each region behind the one UART bridge
    of the build's bitstream (its region address), and where its register map is."""
    rows = []
    for r in regions:
        d = BuildDir(out / r["dir"]).design()
        rows.append(f"| {r['index']} | `{r['dir']}/` | `{d['name']}` | "
                    f"`{str(d['design_hash'])[:8]}` | {d['in_lanes']} | "
                    f"{int(d['out_lanes']) * int(d['out_bits']) // 8} | "
                    f"[{r['dir']}/registers.md]({r['dir']}/registers.md) |")
    text = "\n".join([
        "# Accelerator regions: region addresses", "",
        f"This build holds {len(regions)} accelerators (regions), with host segments "
        "between them (segments.json). Each region keeps its own AXI4-Lite register map "
        "and streams, unchanged; one bitstream (`fluid-hw bitstream`) puts all of them "
        "behind one UART bridge, where the REGION command (`0x06`, one byte: the region "
        "address) selects the region that register accesses and input streams go to, and "
        "region k's output beats come tagged `0x90 + 2k` (`0x91 + 2k` with tlast) "
        "(docs/uart_protocol.md). The serial driver selects the region for you: "
        "`Accelerator.open(BUILD, transport=\"serial\", port=...)`.", "",
        "| region address | folder | Verilog top | DESIGN_HASH | input beat bytes | "
        "output beat bytes | register map |",
        "| --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    BuildDir(out).write_text("registers_md", text)


def region_report(st: Any, seg: Segmentation, regions: list[RegionBuild]) -> str:
    """The build's report.json: per region its summary, the segments, and the whole
    accelerator's figures (a batch passes every region in turn: the initiation
    intervals add up, as do the latencies; resources add up)."""
    clock = st.clock
    per = []
    ii = lat = 0
    res = {"lut": 0, "ff": 0, "dsp": 0, "bram": 0}
    for rb in regions:
        low = rb.state.lowered
        e = low.estimate()
        ii += e.initiation_interval
        lat += e.latency_cycles
        for k in res:
            res[k] += getattr(e.resources, k)
        per.append({"index": rb.index, "dir": f"regions/{rb.index}",
                    "stages": [s.name for s in low.stages],
                    "folding": {k: {"pe": p, "simd": s} for k, (p, s) in low.folding.items()},
                    "estimate": e.as_report(), "design_hash": rb.state.top.design_hash})
    keys = {
        "target": st.target.name, "clock_mhz": clock, "weights": st.weights,
        "model": str(st.model_dir) if st.model_dir is not None else None,
        "quantized": "here" if st.quantized_here else "given",
        "regions": per, "partition": seg.describe(),
        "estimate": {"initiation_interval": ii, "latency_cycles": lat,
                     "cycles_per_inference": ii, "resources": res,
                     "note": "regions run one after another on a batch; host segments "
                             "between them are not counted"},
        "throughput_per_s": clock * 1e6 / ii, "latency_us": lat / clock,
        "design_hash": "+".join(rb.state.top.design_hash[:16] for rb in regions),
        "compile_seconds": round(time.perf_counter() - st.t0, 2),
        "options": st.options.as_report(),
    }
    drop = ["stages", "folding", "fifo_depths", "lowering_hash", "autofold", "bit_exact",
            "mismatches", "measured", *REPORT_KEYS["bitstream"]]
    bd = BuildDir(st.out)
    bd.remove(*STEP_FILES["simulate"], *STEP_FILES["bitstream"])  # results of older builds
    bd.update_report("compile", keys, drop=drop)
    return (f"{len(regions)} accelerator regions, II {ii} cycles (summed), latency {lat} "
            f"cycles; {keys['throughput_per_s']:.0f} inferences/s at {clock:g} MHz")
