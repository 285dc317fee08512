"""Builds as flat lists of named steps (FINN's ``build_dataflow_steps``): each step is a
function of the build state, writes what it makes into the build folder, and a build
can stop after any step (``stop_after=``) so its output can be inspected."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import BuildError, unknown_name
from ...tools import say

__all__ = ["Step", "run_steps", "log", "BuildError"]


def log(tool: str, msg: str) -> None:
    """Progress of ``tool``'s steps: :func:`fluid_hw.tools.say` (stderr;
    ``FLUID_HW_QUIET=1`` silences it)."""
    say(msg, tool)


@dataclass(frozen=True)
class Step:
    """A named step: ``fn(state) -> str`` (a one-line summary for the progress log,
    or "" to stay quiet)."""

    name: str
    fn: Callable[[Any], str]
    doc: str = ""


def run_steps(tool: str, steps: Sequence[Step], state: Any, stop_after: str | None = None
              ) -> list[str]:
    """Run ``steps`` in order on ``state`` (stopping after the step ``stop_after``);
    returns the names of the steps run."""
    names = [s.name for s in steps]
    if stop_after is not None and stop_after not in names:
        raise unknown_name(f"{tool} step", stop_after, names)
    done = []
    for k, s in enumerate(steps):
        t0 = time.perf_counter()
        summary = s.fn(state)
        dt = time.perf_counter() - t0
        log(tool, f"{k + 1}/{len(steps)} {s.name}" + (f": {summary}" if summary else "")
            + f" ({dt:.1f} s)")
        done.append(s.name)
        if s.name == stop_after:
            break
    return done
