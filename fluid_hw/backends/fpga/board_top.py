# amaranth: UnusedElaboratable=no
"""A compiled build folder's accelerator on a board: what the bitstream steps
(:mod:`.bitstream`), the Verilated board top (:mod:`.board_sim`) and a multi-region
bitstream (:mod:`.bitstream_regions`) read from the folder, and the board top they
build around ``accelerator.v``.

    build = read_build("build/mlp")                     # design.json, report.json, checked
    board = resolve_board(build, None)                  # the build's target board
    top = accelerator_board_top(build, board, clock_mhz=50)
    estimate_on(build, board)                           # device-aware, with the board top

The board top is :class:`fluid_hw.boards.AcceleratorBoardTop`: PLL -> design clock,
reset synchroniser, a :class:`fluid_hw.rtl.UartBridge` sized for the build's stream
beats on the USB-serial pins (a list of region builds: one region address each).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...boards import AcceleratorBoardTop, Board, VerilogCore, get_board
from ...drivers.build_dir import BuildDir, BuildDirError
from ...errors import UnknownNameError
from ...hls.autofold import device_estimate, specs_from_design
from ...rtl import StageGraph, StageSpec
from ...rtl.uart_bridge import UartBridge
from .steps import BuildError

__all__ = ["DEFAULT_BAUD", "IDLE_TIMEOUT_S", "BuildFolder", "read_build", "resolve_board",
           "builds_of", "make_bridge", "accelerator_board_top", "estimate_on"]

#: the FT231X (ULX3S) and FT2232H (iCEBreaker) both run 3 Mbaud
DEFAULT_BAUD = 3_000_000
#: a half-received command is dropped after this long without a byte
IDLE_TIMEOUT_S = 0.02


@dataclass
class BuildFolder:
    """What the bitstream step reads from a build folder."""

    path: Path
    verilog: Path
    info: dict[str, Any]
    report: dict[str, Any]

    @property
    def in_bytes(self) -> int:
        return int(self.info["in_lanes"])

    @property
    def out_bytes(self) -> int:
        return int(self.info["out_lanes"]) * int(self.info["out_bits"]) // 8

    def specs(self) -> list[StageSpec]:
        return specs_from_design(self.info.get("stages", []))

    def graph(self) -> StageGraph:
        """How the design's stages connect (design.json: each stage's ``inputs``, the
        joins' ``edge_fifo`` depths; a chain where absent)."""
        stages = self.info.get("stages", [])
        try:
            inputs = [tuple(int(p) for p in st.get("inputs", [k - 1]))
                      for k, st in enumerate(stages)]
            fifo = {(int(k), int(p)): int(d) for k, p, d in self.info.get("edge_fifo", [])}
        except (TypeError, ValueError) as e:
            raise BuildError(f"{self.path / 'design.json'}: malformed stage graph ({e}); "
                             "recompile the build") from None
        return StageGraph.of(inputs, fifo)


def read_build(build_dir: str | os.PathLike[str]) -> BuildFolder:
    """A single-region build folder, checked against its manifest."""
    d = Path(build_dir)
    if not d.is_dir():
        raise BuildError(f"build folder {d} does not exist; make one with `fluid-hw compile "
                         "MODEL --out BUILD_DIR`")
    bd = BuildDir(d)
    try:
        info = bd.design()
        bd.verilog()  # present, whole and this build's (synthesis reads the file)
        report = bd.report()
    except BuildDirError as e:
        raise BuildError(str(e)) from None
    return BuildFolder(d, bd.file("verilog"), info, report)


def resolve_board(build: BuildFolder, board: str | Board | None) -> Board:
    """``board``, else the build's target when that is a board."""
    if board is not None:
        return get_board(board)
    target = build.report.get("target")
    try:
        return get_board(str(target))
    except UnknownNameError:
        raise BuildError(f"{build.path}: its target {target!r} is not a board; say which board "
                         "to build for (--board ulx3s-85f, icebreaker, ...)") from None


def builds_of(build: BuildFolder | Sequence[BuildFolder]) -> list[BuildFolder]:
    """One build folder or a list of region build folders, as a list."""
    return [build] if isinstance(build, BuildFolder) else list(build)


def make_bridge(build: BuildFolder | Sequence[BuildFolder], *, clk_hz: float | None = None,
                baud: float | None = None, divisor: int | None = None,
                idle_timeout: int | None = None) -> UartBridge:
    """The UART bridge sized for the build's stream beats (a list of region builds: one
    region address each, in order)."""
    builds = builds_of(build)
    if len(builds) == 1:
        return UartBridge(in_bytes=builds[0].in_bytes, out_bytes=builds[0].out_bytes,
                          divisor=divisor, clk_hz=clk_hz, baud=baud, idle_timeout=idle_timeout)
    return UartBridge(regions=[(b.in_bytes, b.out_bytes) for b in builds], divisor=divisor,
                      clk_hz=clk_hz, baud=baud, idle_timeout=idle_timeout)


def accelerator_board_top(build: BuildFolder | Sequence[BuildFolder], board: Board, *,
                          clock_mhz: float | None, baud: float = DEFAULT_BAUD,
                          pll: bool = True, divisor: int | None = None
                          ) -> AcceleratorBoardTop:
    """``accelerator.v`` (as a :class:`VerilogCore`) behind a UART bridge on ``board``;
    a list of region builds: each region's, behind one bridge with a region address.
    ``pll=False`` with ``divisor``: the simulation variant (oscillator clock, free baud
    divisor, no idle timeout)."""
    cores = [VerilogCore(b.verilog, top=str(b.info["name"])) for b in builds_of(build)]
    core = cores[0] if len(cores) == 1 else cores
    if pll:
        def factory(clk_hz: float) -> UartBridge:
            return make_bridge(build, clk_hz=clk_hz, baud=baud,
                               idle_timeout=int(clk_hz * IDLE_TIMEOUT_S))
        return AcceleratorBoardTop(core, board, clock_mhz=clock_mhz, bridge=factory)
    return AcceleratorBoardTop(core, board, bridge=make_bridge(build, divisor=divisor or 8),
                               pll=False)




def estimate_on(build: BuildFolder, board: Board, *, board_top: bool = True
                ) -> dict[str, int]:
    """The device-aware estimate of the build's accelerator on ``board``'s device (with
    ``board_top``: plus the UART bridge and board logic)."""
    return device_estimate(build.specs(), board.device,
                           fifo_depth=int(build.info.get("fifo_depth", 2)),
                           in_lanes=build.in_bytes, out_lanes=int(build.info["out_lanes"]),
                           dsp_registers=build.info.get("ff_style") == "trellis",
                           graph=build.graph(), board_top=board_top)

