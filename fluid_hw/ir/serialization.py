"""Program bytes <-> :class:`Program`, with every malformed input a FormatError."""

from __future__ import annotations

from google.protobuf.message import DecodeError, EncodeError

from ..errors import FluidError, FormatError
from . import framework_pb2 as pb
from .program import CURRENT_VERSION, Program
from .verifier import verify_block_tree, verify_program, verify_version

__all__ = ["CURRENT_VERSION", "program_from_bytes", "program_to_bytes"]


def program_to_bytes(program: Program) -> bytes:
    """Deterministic serialization: the same program always gives the same bytes."""
    return program.desc.SerializeToString(deterministic=True)


def program_from_bytes(data: bytes, source: str = "<bytes>") -> Program:
    """Parse and verify; raise :class:`FormatError` naming ``source`` on any problem."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FormatError(f"{source}: expected bytes, got {type(data).__name__}")
    if len(data) == 0:
        raise FormatError(f"{source}: empty file (no program)")
    desc = pb.ProgramDesc()
    try:
        desc.ParseFromString(bytes(data))
        if not desc.IsInitialized():
            missing = ", ".join(desc.FindInitializationErrors()[:5])
            raise FormatError(f"{source}: not a complete fluid-hw program "
                              f"(missing required fields: {missing}); truncated or corrupted?")
    except (DecodeError, EncodeError, RuntimeError, ValueError) as e:
        raise FormatError(f"{source}: cannot parse program ({e}); the file is truncated, "
                          "corrupted or not a fluid-hw program") from None
    try:
        verify_version(desc)
        verify_block_tree(desc)
        program = Program(desc)
        verify_program(program)
    except FormatError:
        raise
    except FluidError as e:
        raise FormatError(f"{source}: {e}") from None
    return program
