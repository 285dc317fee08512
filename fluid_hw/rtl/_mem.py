"""Weight and parameter memories: constant (initialised ROM) or runtime-writable RAM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import Out

__all__ = ["ParamWriteSignature", "param_memory", "BLOCK_ROM_BITS"]

#: Constant memories of at least this many bits are marked ``rom_style = "block"``
#: (Yosys otherwise builds them from LUTs); smaller ones are left to Yosys.
BLOCK_ROM_BITS = 4096


def ParamWriteSignature(n_mems: int, addr_width: int, data_width: int) -> wiring.Signature:
    """Write side of a unit's runtime memories, seen from the loader: ``en`` is one
    bit per memory (one-hot), ``addr`` the entry, ``data`` the whole entry."""
    return wiring.Signature({
        "en": Out(max(1, n_mems)),
        "addr": Out(max(1, addr_width)),
        "data": Out(max(1, data_width)),
    })


def param_memory(m: Module, name: str, *, depth: int, width: int,
                 init: Sequence[int] | None, write: Any = None,
                 write_index: int = 0) -> ReadPort:
    """Add a memory to ``m`` and return a synchronous read port (data one cycle after
    the address, as a block RAM does).

    ``init`` holds the contents of a constant memory; with ``write`` (a
    :func:`ParamWriteSignature` interface) the memory is writable at run time through
    bit ``write_index`` of ``write.en`` and starts as zeros.
    """
    depth = max(1, depth)
    attrs = {}
    if write is None and depth * width >= BLOCK_ROM_BITS:
        attrs["rom_style"] = "block"
    values = [] if init is None else [int(v) & ((1 << width) - 1) for v in init]
    mem = Memory(shape=width, depth=depth, init=values, attrs=attrs)
    m.submodules[name] = mem
    if write is not None:
        wp = mem.write_port()
        m.d.comb += [
            wp.en.eq(write.en[write_index]),
            wp.addr.eq(write.addr),
            wp.data.eq(write.data),
        ]
    return mem.read_port(domain="sync")
