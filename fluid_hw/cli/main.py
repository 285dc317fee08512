"""``fluid-hw``: the command line.

Each subcommand lives in its own module ``fluid_hw/cli/cmd_<name>.py`` exposing
``register(subparsers)``, which adds a parser whose ``fn(args) -> int`` runs it.
Modules are found by name, so adding a command never edits this file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import FluidError


def command_modules() -> list[str]:
    pkg = importlib.import_module(__package__ or "fluid_hw.cli")
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("cmd_"))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="fluid-hw",
        description="fluid-hw: compile one model description to CPU, GPU, cluster and FPGA.")
    ap.add_argument("--version", action="version", version=f"fluid-hw {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name in command_modules():
        importlib.import_module(f"{__package__}.{name}").register(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except FluidError as e:
        print(f"fluid-hw: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed
        return 0
    except KeyboardInterrupt:
        print("fluid-hw: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
