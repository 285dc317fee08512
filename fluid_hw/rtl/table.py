"""Table activation: any int8 -> int8 function as a 256-entry look-up table.

``table`` holds 256 int8 values indexed by the unsigned byte of the int8 input
(``table[x & 0xFF]``: entries 0..127 for x = 0..127, 128..255 for x = -128..-1).  Each
of the ``lanes`` lanes of a beat looks its input up in its own copy of the table (a
ROM of 256 x 8 bits).  ``rom_style``: ``"logic"`` (default) maps it to LUTs (Yosys
``synth_ecp5``: 186 LUT4 + 85 PFUMX + 53 L6MUX21 for a random table, fewer for a
smooth one), ``"block"`` to one ``DP16KD`` per lane; Yosys finds no ``"distributed"``
mapping of such a ROM on ECP5.

``runtime=True``: the table is loaded at run time instead (no ``table`` given): each
lane's copy is a 256 x 8 RAM, and one write on ``wr`` (:func:`~._mem.ParamWriteSignature`
with one memory: ``en`` 1 bit, ``addr`` the entry ``x & 0xFF``, ``data`` its int8 value,
also the load format) goes to every lane's copy.  Yosys maps each copy to a ``DP16KD``
on ECP5 (an ``SB_RAM40_4K`` on iCE40).

Pipeline: the ROM's registered read (stage 1, held while the next stage is full), then
a :class:`~.stream.SkidBuffer`, whose registered ``ready`` is all the input sees of
the output.  One beat per cycle; :attr:`TableActivation.latency` cycles from a beat's
transfer on ``i`` to its result on ``o.valid``.
"""

from __future__ import annotations

import numpy as np
from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ._mem import ParamWriteSignature, param_memory
from ._util import Component, HardwareConfigError, as_int_array
from .stream import SkidBuffer

__all__ = ["TableActivation", "table_model", "TABLE_LATENCY", "TABLE_ROM_STYLE"]

#: cycles from an input transfer to the result on ``o.valid`` (ROM read, skid buffer)
TABLE_LATENCY = 2
#: Yosys ``rom_style`` of the per-lane tables by default: LUT logic (256 x 8 bits)
TABLE_ROM_STYLE = "logic"
_ROM_STYLES = ("logic", "block")


def table_model(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Behavioural model: ``table[x & 0xFF]`` as int8, any shape of ``x``."""
    t = np.asarray(table, np.int64)
    return t[np.asarray(x, np.int64) & 0xFF].astype(np.int8)


class TableActivation(Component):
    """Element-wise int8 look-up table over ``lanes`` lanes; see the module docstring."""

    def __init__(self, name: str, lanes: int, table: np.ndarray | None = None, *,
                 rom_style: str = TABLE_ROM_STYLE, runtime: bool = False) -> None:
        if lanes < 1:
            raise HardwareConfigError(f"table activation {name!r}: lanes must be >= 1, "
                                      f"got {lanes}")
        if rom_style not in _ROM_STYLES:
            raise HardwareConfigError(f"table activation {name!r}: rom_style must be one of "
                                      f"{_ROM_STYLES}, not {rom_style!r}")
        self.name, self.lanes, self.rom_style, self.runtime = name, lanes, rom_style, runtime
        if runtime:
            self.table = None
        elif table is None:
            raise HardwareConfigError(f"table activation {name!r}: give the table, or "
                                      "runtime=True to load it through wr")
        else:
            self.table = as_int_array(f"table activation {name!r}", "table", table, (256,),
                                      -128, 127)
        self.latency = TABLE_LATENCY
        members = {"i": In(stream.Signature(8 * lanes)), "o": Out(stream.Signature(8 * lanes))}
        if runtime:
            members["wr"] = In(ParamWriteSignature(1, 8, 8))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.skid = skid = SkidBuffer(8 * self.lanes)
        full = Signal()  # stage 1 (the table outputs) holds a beat
        advance = ~full | skid.i.ready
        m.d.comb += self.i.ready.eq(advance)
        with m.If(advance):
            m.d.sync += full.eq(self.i.valid)
        outs = []
        for lane in range(self.lanes):
            if self.table is None:  # runtime: every lane's copy takes every write
                rp = param_memory(m, f"table{lane}", depth=256, width=8, init=None,
                                  write=self.wr, write_index=0)
            else:
                rom = Memory(shape=8, depth=256, init=[int(v) & 0xFF for v in self.table],
                             attrs={"rom_style": self.rom_style})
                m.submodules[f"rom{lane}"] = rom
                rp = rom.read_port(domain="sync")
            m.d.comb += [rp.addr.eq(self.i.payload.word_select(lane, 8)), rp.en.eq(advance)]
            outs.append(rp.data)
        m.d.comb += [skid.i.valid.eq(full), skid.i.payload.eq(Cat(*outs))]
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        return m
