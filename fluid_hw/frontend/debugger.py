"""Graphviz pictures of programs: ``draw_program(program, "prog.dot")``."""

from __future__ import annotations

import os

from ..ir.program import Program
from .io import atomic_write


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def program_to_dot(program: Program) -> str:
    """The program as a Graphviz digraph: one cluster per block, vars as ellipses,
    ops as boxes, sub-block references as dashed edges."""
    lines = ["digraph program {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    for b in program.blocks:
        lines.append(f"  subgraph cluster_block{b.idx} {{")
        lines.append(f'    label="block {b.idx}"; style=rounded;')
        for v in b.vars.values():
            style = "filled" if v.persistable else "solid"
            label = f"{v.name}\\n{v.dtype_name}{list(v.shape)}"
            lines.append(f"    {_q(f'b{b.idx}:{v.name}')} [label={_q(label)}, shape=ellipse, "
                         f"style={style}, fillcolor=lightgrey];")
        for i, op in enumerate(b.ops):
            lines.append(f"    {_q(f'b{b.idx}:op{i}')} [label={_q(op.type)}, shape=box, "
                         "style=filled, fillcolor=lightblue];")
        lines.append("  }")
        for i, op in enumerate(b.ops):
            node = _q(f"b{b.idx}:op{i}")
            for n in op.input_arg_names:
                owner = b._find_var_recursive(n)
                src = owner.block.idx if owner is not None else b.idx
                lines.append(f"  {_q(f'b{src}:{n}')} -> {node};")
            for n in op.output_arg_names:
                owner = b._find_var_recursive(n)
                dst = owner.block.idx if owner is not None else b.idx
                lines.append(f"  {node} -> {_q(f'b{dst}:{n}')};")
            for sb in op.sub_block_indices():
                lines.append(f'  {node} -> "b{sb}:op0" [style=dashed, label="block {sb}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw_program(program: Program, path: str | os.PathLike[str]) -> str:
    """Write the program's Graphviz source to ``path`` (render with ``dot -Tpng``)."""
    text = program_to_dot(program)
    atomic_write(path, text.encode())
    return str(path)


def pprint_program_codes(program: Program) -> str:
    return str(program)
