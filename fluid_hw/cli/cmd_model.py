"""``fluid-hw show`` / ``draw`` / ``ops``: look at saved models and the op registry."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _load(model: str) -> Any:
    from ..frontend.io import MODEL_FILENAME, load_program

    p = Path(model)
    return load_program(p / MODEL_FILENAME if p.is_dir() else p)


def _show(args: argparse.Namespace) -> int:
    print(_load(args.model))
    return 0


def _draw(args: argparse.Namespace) -> int:
    from ..frontend.debugger import draw_program

    print(f"wrote {draw_program(_load(args.model), args.out)}")
    return 0


def _ops(args: argparse.Namespace) -> int:
    from ..backends.cpu.kernels import all_kernels
    from ..ir import all_ops
    from ..ir.grad import GradMaker

    kernels = all_kernels()
    for name, d in sorted(all_ops().items()):
        ins = ",".join(s.name for s in d.inputs)
        outs = ",".join(s.name for s in d.outputs)
        cpu = "cpu" if name in kernels else "   "
        grad = "grad" if isinstance(d.grad, GradMaker) else "    "
        print(f"{name:32s} {cpu} {grad}  ({ins}) -> ({outs})")
    return 0


def register(sub: Any) -> None:
    s = sub.add_parser("show", help="print a saved model's program")
    s.add_argument("model", help="model folder or program file")
    s.set_defaults(fn=_show)
    g = sub.add_parser("draw", help="write a saved model's program as Graphviz")
    g.add_argument("model")
    g.add_argument("out")
    g.set_defaults(fn=_draw)
    o = sub.add_parser("ops", help="list registered ops (cpu kernel, gradient, slots)")
    o.set_defaults(fn=_ops)
