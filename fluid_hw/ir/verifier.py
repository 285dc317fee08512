"""Structural checks of a program: the contract every pass and back end relies on.

:func:`verify_program` raises :class:`fluid_hw.errors.VerifyError` with a message
naming the block, op and variable concerned.
"""

from __future__ import annotations

import math

from ..errors import FluidError, OpAttrError, UnknownOpError, VerifyError
from . import attrs as _attrs
from . import dtypes
from . import framework_pb2 as pb
from .grad import EMPTY_VAR_NAME
from .program import CURRENT_VERSION, Block, Program, _tensor_desc
from .registry import get_op

VarType = pb.VarType

#: largest tensor the verifier accepts, in bytes (a sanity bound, not a memory check)
MAX_TENSOR_BYTES = 1 << 40

_VALID_KINDS = set(VarType.Type.values())


def verify_version(desc: pb.ProgramDesc) -> None:
    if not desc.HasField("version"):
        raise VerifyError("program has no format version")
    v = desc.version.version
    if v > CURRENT_VERSION:
        raise VerifyError(
            f"program format version {v} is newer than this fluid-hw understands "
            f"({CURRENT_VERSION}); upgrade fluid-hw"
        )
    if v < 1:
        raise VerifyError(f"program format version {v} is not valid "
                          f"(expected 1..{CURRENT_VERSION})")


def verify_block_tree(desc: pb.ProgramDesc) -> None:
    n = len(desc.blocks)
    if n == 0:
        raise VerifyError("program has no blocks")
    for i, b in enumerate(desc.blocks):
        if b.idx != i:
            raise VerifyError(f"block #{i} says its idx is {b.idx}")
        if i == 0 and b.parent_idx != -1:
            raise VerifyError(f"global block 0 must have parent_idx -1, has {b.parent_idx}")
        if i > 0 and not 0 <= b.parent_idx < n:
            raise VerifyError(f"block {i}: parent_idx {b.parent_idx} out of range (0..{n - 1})")
        if not -1 <= b.forward_block_idx < n:
            raise VerifyError(f"block {i}: forward_block_idx {b.forward_block_idx} out of range")
    for i in range(n):
        seen = {i}
        j = desc.blocks[i].parent_idx
        while j != -1:
            if j in seen:
                raise VerifyError(f"block {i}: cycle in parent_idx chain through block {j}")
            seen.add(j)
            j = desc.blocks[j].parent_idx


def verify_var(block_idx: int, vd: pb.VarDesc) -> None:
    where = f"block {block_idx}, variable {vd.name!r}"
    if not vd.name:
        raise VerifyError(f"block {block_idx}: a variable has an empty name")
    if vd.type.type not in _VALID_KINDS:
        raise VerifyError(f"{where}: unknown variable kind {vd.type.type}")
    td = _tensor_desc(vd)
    if td is None:
        return
    dt = td.tensor.data_type
    if dt not in dtypes.TENSOR_DTYPES:
        raise VerifyError(f"{where}: unknown dtype {dt}; known: {dtypes.names()}")
    dims = list(td.tensor.dims)
    for d in dims:
        if d < -1:
            raise VerifyError(f"{where}: dimension {d} in {dims} (only -1 may be negative)")
    known = [d for d in dims if d > 0]
    nbytes = math.prod(known) * dtypes.to_numpy(dt).itemsize if known else 0
    if nbytes > MAX_TENSOR_BYTES:
        raise VerifyError(f"{where}: shape {dims} would take {nbytes} bytes, beyond any memory")
    if td.lod_level < 0:
        raise VerifyError(f"{where}: negative lod_level {td.lod_level}")


def verify_op(block: Block, index: int) -> None:
    op = block.ops[index]
    where = f"block {block.idx}, op #{index} ({op.type})"
    try:
        opdef = get_op(op.type)
    except UnknownOpError as e:
        raise VerifyError(f"{where}: {e}") from None
    n_blocks = len(block.program.blocks)
    for field, slots, getter in (("input", opdef.inputs, op.input),
                                 ("output", opdef.outputs, op.output)):
        declared = {s.name: s for s in slots}
        present = op.input_names if field == "input" else op.output_names
        for slot in present:
            if slot not in declared:
                raise VerifyError(f"{where}: unknown {field} slot {slot!r} "
                                  f"(declared: {', '.join(declared) or 'none'})")
        for s in slots:
            names = getter(s.name)
            if not names and not (s.dispensable or s.intermediate):
                raise VerifyError(f"{where}: required {field} slot {s.name!r} is empty")
            if len(names) > 1 and not s.duplicable:
                raise VerifyError(f"{where}: {field} slot {s.name!r} takes one variable, "
                                  f"has {len(names)}")
            for n in names:
                if n == EMPTY_VAR_NAME and field == "output":
                    continue  # a gradient nobody wants
                if block._find_var_recursive(n) is None:
                    raise VerifyError(f"{where}: {field} {s.name}={n!r} names a variable that "
                                      f"does not exist in block {block.idx} or its parents")
    for a in op.desc.attrs:
        kind = _attrs.KIND_OF_ENUM.get(a.type)
        if kind is None:
            raise VerifyError(f"{where}: attribute {a.name!r} has unknown type {a.type}")
        ad = opdef.attr_def(a.name)
        if ad is not None and ad.kind != kind:
            raise VerifyError(f"{where}: attribute {a.name!r} stored as {kind}, "
                              f"schema says {ad.kind}")
        if ad is not None and ad.allowed is not None and _attrs.read(a) not in ad.allowed:
            raise VerifyError(f"{where}: attribute {a.name!r}={_attrs.read(a)!r} not in "
                              f"{list(ad.allowed)}")
        why = ad.range_error(_attrs.read(a)) if ad is not None else None
        if why is not None:
            raise VerifyError(f"{where}: {why}")
        if kind in ("block", "blocks"):
            idxs = [a.block_idx] if kind == "block" else list(a.blocks_idx)
            for bi in idxs:
                if not 0 < bi < n_blocks or bi == block.idx:
                    raise VerifyError(f"{where}: attribute {a.name!r} refers to block {bi}, "
                                      f"out of range (program has {n_blocks} blocks)")
                parent = block.program.blocks[bi].parent_idx
                if parent != block.idx:
                    raise VerifyError(f"{where}: attribute {a.name!r} refers to block {bi}, "
                                      f"whose parent is block {parent}; an op's sub-block "
                                      f"must be a child of the op's block {block.idx}")
    present_attrs = set(op.attr_names)
    for ad in opdef.attrs:
        if ad.required and ad.name not in present_attrs:
            raise VerifyError(f"{where}: required attribute {ad.name!r} is missing")
    if opdef.verify is not None:
        try:
            opdef.verify(op)
        except VerifyError:
            raise
        except (FluidError, ValueError) as e:
            raise VerifyError(f"{where}: {e}") from None


def verify_program(program: Program) -> None:
    """Check the whole program; raise :class:`VerifyError` on the first problem."""
    desc = program.desc
    verify_version(desc)
    verify_block_tree(desc)
    for b in program.blocks:
        names: set[str] = set()
        for vd in b.desc.vars:
            if vd.name in names:
                raise VerifyError(f"block {b.idx}: variable {vd.name!r} is declared twice")
            names.add(vd.name)
            verify_var(b.idx, vd)
    for b in program.blocks:
        for i in range(len(b.ops)):
            try:
                verify_op(b, i)
            except OpAttrError as e:
                raise VerifyError(f"block {b.idx}, op #{i}: {e}") from None
