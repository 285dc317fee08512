"""Fluid's ``framework`` names, for users who import them from here."""

from typing import Any

from ..ir import dtypes
from ..ir.default_programs import (
    default_main_program,
    default_startup_program,
    program_guard,
    switch_main_program,
    switch_startup_program,
)
from ..ir.name_scope import name_scope
from ..ir.program import Block, Operator, Parameter, Program, Variable

__all__ = ["Block", "Operator", "Parameter", "Program", "Variable",
           "convert_np_dtype_to_dtype_", "default_main_program", "default_startup_program",
           "in_dygraph_mode", "name_scope", "program_guard", "switch_main_program",
           "switch_startup_program"]


def in_dygraph_mode() -> bool:
    """False: fluid-hw builds programs (Fluid's static graph); there is no dygraph."""
    return False


def convert_np_dtype_to_dtype_(np_dtype: Any) -> int:
    """The variable dtype (``VarType`` enum) of a numpy dtype or its name."""
    return dtypes.to_enum(np_dtype)
