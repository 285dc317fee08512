"""Build layers in a fresh program pair and run them on the CPU executor: what the
layer tests against numpy share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import fluid_hw as fluid


def run_layers_with_scope(build: Callable[[], Iterable[Any]], feed: dict[str, Any],
                          return_numpy: bool = True) -> tuple[list[Any], Any]:
    """Call ``build()`` inside a new main / startup program, run the startup and then
    the main program in a new scope fetching the variables ``build`` returned; return
    the fetched values and that scope."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        outs = build()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        got = exe.run(main, feed=feed, fetch_list=list(outs), return_numpy=return_numpy)
        return got, fluid.global_scope()


def run_layers(build: Callable[[], Iterable[Any]], feed: dict[str, Any],
               return_numpy: bool = True) -> list[Any]:
    """:func:`run_layers_with_scope`'s fetched values."""
    return run_layers_with_scope(build, feed, return_numpy)[0]
