"""``fluid_hw.debugger``: Fluid's name for the program-drawing helpers."""

from .frontend.debugger import draw_program, pprint_program_codes, program_to_dot

__all__ = ["draw_program", "pprint_program_codes", "program_to_dot"]
