"""Test-wide set-up: kernels' outputs are checked against their declared dtype and shape."""

import os

os.environ.setdefault("FLUID_HW_CHECK_KERNELS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest

import fluid_hw as fluid


@pytest.fixture
def fresh():
    """A new main/startup program pair, guarded, with a fresh scope and names."""
    main, startup = fluid.Program(), fluid.Program()
    scope = fluid.Scope()
    with fluid.program_guard(main, startup), fluid.scope_guard(scope), \
            fluid.unique_name.guard():
        yield main, startup, scope
