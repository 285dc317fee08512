"""``fluid-hw demo``: the end-to-end flow on sklearn's digits."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.out, epochs=args.epochs,
                    board=None if args.board == "none" else args.board,
                    fraction=args.budget_fraction)


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the end-to-end demo on sklearn's digits")
    p.add_argument("--out", default="build/demo", help="output folder (default build/demo)")
    p.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    p.add_argument("--board", default="ulx3s-85f",
                   help="board to build the bitstream for, or 'none' (default ulx3s-85f)")
    p.add_argument("--budget-fraction", type=float, default=0.85, metavar="F",
                   help="share of the board's multipliers, LUTs and block RAMs the demo's "
                   "folding (fixed to II 256 for a place and route of about 2 minutes; "
                   "`fluid-hw compile` folds automatically) is checked against (default 0.85)")
    p.set_defaults(fn=_run)
