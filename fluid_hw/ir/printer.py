"""Readable text listings of programs, blocks and ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .program import Block, Operator, Program, Variable


def format_var(v: Variable) -> str:
    flags = [f for f in ("persistable", "is_parameter", "stop_gradient") if getattr(v, f)]
    lod = f" lod_level={v.lod_level}" if v.lod_level else ""
    kind = "" if v.type_name == "LOD_TENSOR" else f" {v.type_name}"
    shape = list(v.shape) if v.type_name in ("LOD_TENSOR", "LOD_TENSOR_ARRAY") else ""
    tail = f"  [{', '.join(flags)}]" if flags else ""
    return f"var {v.name} :{kind} {v.dtype_name}{shape}{lod}{tail}"


def _fmt_attr(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list) and len(value) > 8:
        return "[" + ", ".join(map(str, value[:8])) + f", ... ({len(value)})]"
    return repr(value)


def format_op(op: Operator) -> str:
    outs = ", ".join(f"{k}={v}" for k, v in op.outputs.items())
    ins = ", ".join(f"{k}={v}" for k, v in op.inputs.items())
    attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(op.all_attrs().items()))
    tail = f", {attrs}" if attrs else ""
    return f"{{{outs}}} = {op.type}(inputs={{{ins}}}{tail})"


def format_block(b: Block, indent: str = "") -> str:
    lines = [f"{indent}block {b.idx} (parent {b.parent_idx}) {{"]
    lines += [f"{indent}  {format_var(v)}" for v in b.vars.values()]
    if b.vars and b.ops:
        lines.append("")
    lines += [f"{indent}  {format_op(op)}" for op in b.ops]
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def format_program(p: Program) -> str:
    head = f"program (version {p.desc.version.version}, {len(p.blocks)} block(s))"
    return "\n".join([head, *(format_block(b) for b in p.blocks)])
