"""``fluid-hw``: the command line.

Subcommands:
  demo            the end-to-end flow on sklearn's digits (see fluid_hw/cli/demo.py)
  show MODEL_DIR  print a saved inference model's program
  draw MODEL_DIR OUT.dot   write the program as Graphviz
  ops             list the registered ops and whether the CPU back end implements them
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import FluidError


def _cmd_show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..frontend.io import MODEL_FILENAME, load_program

    p = Path(args.model)
    print(load_program(p / MODEL_FILENAME if p.is_dir() else p))
    return 0


def _cmd_draw(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..frontend.debugger import draw_program
    from ..frontend.io import MODEL_FILENAME, load_program

    p = Path(args.model)
    prog = load_program(p / MODEL_FILENAME if p.is_dir() else p)
    print(f"wrote {draw_program(prog, args.out)}")
    return 0


def _cmd_ops(args: argparse.Namespace) -> int:
    from ..backends.cpu.kernels import all_kernels
    from ..ir import all_ops

    kernels = all_kernels()
    for name, d in sorted(all_ops().items()):
        ins = ",".join(s.name for s in d.inputs)
        outs = ",".join(s.name for s in d.outputs)
        cpu = "cpu" if name in kernels else "   "
        print(f"{name:32s} {cpu}  ({ins}) -> ({outs})")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.out)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fluid-hw", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run the end-to-end demo on sklearn's digits")
    d.add_argument("--out", default="build/demo", help="output folder (default build/demo)")
    d.set_defaults(fn=_cmd_demo)
    s = sub.add_parser("show", help="print a saved model's program")
    s.add_argument("model", help="model folder or program file")
    s.set_defaults(fn=_cmd_show)
    g = sub.add_parser("draw", help="write a saved model's program as Graphviz")
    g.add_argument("model")
    g.add_argument("out")
    g.set_defaults(fn=_cmd_draw)
    o = sub.add_parser("ops", help="list registered ops")
    o.set_defaults(fn=_cmd_ops)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except FluidError as e:
        print(f"fluid-hw: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
