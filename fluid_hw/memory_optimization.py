"""Fluid's ``fluid.memory_optimize`` and ``fluid.release_memory``.

Fluid 1.5's ``memory_optimize`` renamed a program's variables so that temporaries
share buffers, which silently corrupted values a script fetched unless it listed
them in ``skip_opt_set``; Fluid 1.6 made both functions no-ops. Here they are
no-ops too (the program is left as it is, and a warning says so): fluid-hw's
``memory_reuse`` pass (``fluid_hw.passes.get_pass("memory_reuse")``) does the
buffer sharing on a copy, knowing the program's feeds and fetches.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

__all__ = ["memory_optimize", "release_memory"]


def memory_optimize(input_program: Any, skip_opt_set: Iterable[str] | None = None,
                    print_log: bool = False, level: int = 0, skip_grads: bool = True) -> None:
    """A no-op, as in Fluid 1.6 (see the module's documentation)."""
    warnings.warn("fluid.memory_optimize leaves the program as it is; to share buffers "
                  "between temporaries run the memory_reuse pass "
                  "(fluid_hw.passes.get_pass('memory_reuse').apply(program, ctx))",
                  stacklevel=2)


def release_memory(input_program: Any, skip_opt_set: Iterable[str] | None = None) -> None:
    """A no-op, as in Fluid 1.6: the executors free what a run no longer needs."""
    warnings.warn("fluid.release_memory leaves the program as it is (a no-op, as in "
                  "Fluid 1.6)", stacklevel=2)
