"""Fluid's ``framework`` names, for users who import them from here."""

from ..ir.default_programs import (
    default_main_program,
    default_startup_program,
    program_guard,
    switch_main_program,
    switch_startup_program,
)
from ..ir.program import Block, Operator, Parameter, Program, Variable

__all__ = ["Block", "Operator", "Parameter", "Program", "Variable", "default_main_program",
           "default_startup_program", "program_guard", "switch_main_program",
           "switch_startup_program"]
