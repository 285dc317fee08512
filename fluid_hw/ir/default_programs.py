"""The default main and startup programs, and ``program_guard`` to switch them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .program import Program

_main = Program()
_startup = Program()


def default_main_program() -> Program:
    """The program layers append to (outside any ``program_guard``)."""
    return _main


def default_startup_program() -> Program:
    """The program initializers append to; run it once before training."""
    return _startup


def switch_main_program(program: Program) -> Program:
    global _main
    old, _main = _main, program
    return old


def switch_startup_program(program: Program) -> Program:
    global _startup
    old, _startup = _startup, program
    return old


@contextlib.contextmanager
def program_guard(main_program: Program,
                  startup_program: Program | None = None) -> Iterator[None]:
    """Inside the block, layers build into ``main_program`` (and ``startup_program``)."""
    if not isinstance(main_program, Program):
        raise TypeError(f"program_guard: main_program must be a Program, "
                        f"got {type(main_program).__name__}")
    old_main = switch_main_program(main_program)
    old_startup = switch_startup_program(startup_program) if startup_program is not None else None
    try:
        yield
    finally:
        switch_main_program(old_main)
        if old_startup is not None:
            switch_startup_program(old_startup)
