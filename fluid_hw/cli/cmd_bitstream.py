"""``fluid-hw bitstream BUILD_DIR``: the bitstream of a compiled accelerator for its board.

The build folder's ``accelerator.v`` goes into the board top (PLL, reset
synchroniser, the UART-to-AXI bridge on the USB-serial pins, see
docs/uart_protocol.md), then Yosys, nextpnr and ecppack / icepack run in the build
folder (their logs stay there).  The result is ``accelerator.bit`` (ECP5) or
``accelerator.bin`` (iCE40); ``report.json`` gains Fmax, timing, the critical path,
resources used and available, estimate vs actual per resource, and throughput and
latency at Fmax; ``report.html`` is rewritten.  The steps (read_build, budget_check,
board_top, synthesis, place_and_route, pack, write_report) can stop after any with
``--stop-after STEP``, leaving the build folder's manifest as it was.  Timing that is
not met is reported (and, with ``--require-timing``, an error).  Then ``fluid-hw
program BUILD_DIR`` loads it, and ``Accelerator.open(BUILD_DIR, transport="serial",
port=...)`` talks to it.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import FluidError


def _run(args: argparse.Namespace) -> int:
    from ..backends.fpga.bitstream import DEFAULT_BAUD, bitstream
    from ..backends.fpga.report_html import write_report_html

    keys = bitstream(args.build_dir, board=args.board, clock_mhz=args.clock_mhz,
                     baud=args.baud or DEFAULT_BAUD, seed=args.seed, placer=args.placer,
                     router=args.router,
                     check_resources=not args.no_budget_check, timeout_s=args.timeout,
                     stop_after=args.stop_after)
    if "bitstream" not in keys:
        print(f"bitstream of {args.build_dir} (through step {args.stop_after})")
        return 0
    print_bitstream(args.build_dir, keys)
    if not args.no_html:
        print(f"  report: {write_report_html(args.build_dir)}")
    met = keys.get("timing_met")
    if args.require_timing and not met:
        raise FluidError(f"timing not met: Fmax {keys.get('fmax_mhz')} MHz < "
                         f"{keys['bitstream']['clock_mhz']:.2f} MHz; lower --clock-mhz, or "
                         "register the critical path above (nextpnr.log in the build folder)")
    return 0


def print_bitstream(build_dir: str, keys: dict[str, Any]) -> None:
    """What the bitstream step measured, as a few lines."""
    info = keys["bitstream"]
    fmax, met = keys.get("fmax_mhz"), keys.get("timing_met")
    print(f"bitstream: {build_dir}/{info['file']} for {info['board']} ({info['device']})")
    print(f"  clock {info['clock_mhz']:.3f} MHz, Fmax {fmax} MHz: timing "
          f"{'met' if met else 'NOT MET'}")
    cp = keys.get("critical_path") or {}
    if cp:
        print(f"  critical path {cp.get('delay_ns')} ns: {cp.get('start')} -> {cp.get('end')}")
    for res, row in keys["resources_estimate_vs_actual"].items():
        avail = keys["resources_available"].get(res, "?")
        err = row.get("error_pct")
        print(f"  {res:5s} {row.get('placed') or row.get('actual')}/{avail} (estimate "
              f"{row.get('estimate')}, Yosys {row.get('actual')}"
              + (f", {err:+.1f} %" if err is not None else "") + ")")
    if keys.get("throughput_per_s"):
        print(f"  at Fmax: {keys['throughput_per_s']:.0f} inferences/s, latency "
              f"{keys['latency_us']:.2f} us")
    uart = info.get("uart") or {}
    print(f"  UART bridge: {uart.get('baud', 0):.0f} baud; tools: " + ", ".join(
        f"{k} {v:.1f} s" for k, v in (info.get("seconds") or {}).items()))


def register(sub: Any) -> None:
    p = sub.add_parser("bitstream", help="build the FPGA bitstream of a compiled accelerator",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir", metavar="BUILD_DIR", help="a build folder of `fluid-hw compile`")
    p.add_argument("--board", help="board to build for (ulx3s-25f/45f/85f, icebreaker, or a "
                   "device name); default: the build's target")
    p.add_argument("--clock-mhz", type=float, help="design clock made by the PLL (default: "
                   "the build's, else 100 MHz on ECP5 and 30 MHz on iCE40)")
    p.add_argument("--baud", type=int, help="UART bridge baud rate (default 3000000)")
    p.add_argument("--seed", type=int, default=1, help="nextpnr seed (default 1)")
    p.add_argument("--placer", help="nextpnr placer (default: static)")
    p.add_argument("--router", choices=("router1", "router2"), help="nextpnr router "
                   "(default: nextpnr's, router1; router2 for large, congested designs)")
    p.add_argument("--timeout", type=float, help="seconds each tool may run")
    p.add_argument("--no-budget-check", action="store_true",
                   help="skip the resource checks before place and route")
    p.add_argument("--no-html", action="store_true", help="do not rewrite report.html")
    p.add_argument("--require-timing", action="store_true",
                   help="exit with an error when timing is not met")
    p.add_argument("--stop-after", metavar="STEP", help="stop after this step to inspect the "
                   "build folder (read_build, budget_check, board_top, synthesis, "
                   "place_and_route, pack, write_report)")
    p.set_defaults(fn=_run)
