"""Kind ``table``: ``quantized_table`` (an element-wise activation of one int8 value --
sigmoid, tanh, hard-swish, leaky relu, ... -- tabulated by the quantisation pass) as a
256-entry lookup per lane; lanes follow the producer.  A relu after it folds into the
table.  With runtime weights each lane's table is a RAM (block RAM on both families)
that the host writes through the register map, one segment for all lanes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fluid_hw.rtl.table_spec import TableSpec

from ..partition import main_output
from ..stage_info import Cursor, FixedPoint, LoweredStage, Values, layer_name, param_value
from ..stages import Resources
from ._base import StageKind

#: cycles through a table lane (registered read, output register)
TABLE_LATENCY = 2
#: bits of one lane's table (rtl.table: a 256 x 8 ROM in LUT logic, rom_style "logic")
TABLE_BITS = 256 * 8
#: LUTs of a lane's table in units of the calibrated cost of that many ROM bits in soft
#: logic (``cal.per_soft_rom`` per 16 bits); fitted to Yosys (synth_ecp5) on the
#: conv_table_* designs of fluid_hw.backends.fpga.bitstream.calibration_designs()
#: (random tables, 1 and 4 lanes): 143 LUT4 a lane, where the generic soft-ROM figure
#: gives 105
TABLE_LUT_FACTOR = 1.38
#: generic (uncalibrated, ECP5) figures of a lane for :mod:`..stages`
TABLE_GENERIC = Resources(lut=145, ff=24)
#: runtime tables, fitted to Yosys (synth_ecp5) on conv_table_8_l{1,4}_runtime of
#: calibration_designs() against conv_8_pe{1,4} (the table's share: 340 and 567 LUT4,
#: 142 and 243 flip-flops, in designs whose only runtime stage it is, so the parameter
#: loader's share included): LUTs per stage and per lane in units of
#: ``cal.per_runtime_pe`` (each lane's RAM is a block RAM, from ``memories``), and
#: flip-flops per stage (the loader's write port; the lanes add none to a const table)
TABLE_RUNTIME_LUT, TABLE_RUNTIME_LUT_LANE = 1.4, 0.4
TABLE_RUNTIME_FF = 95
#: the same LUTs in ECP5 LUT4 (the generic figures of :mod:`..stages`)
TABLE_GENERIC_RUNTIME_LUT, TABLE_GENERIC_RUNTIME_LUT_LANE = 263, 75


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    if s.runtime:
        return (TABLE_RUNTIME_LUT + TABLE_RUNTIME_LUT_LANE * lanes[0]) * cal.per_runtime_pe
    return TABLE_LUT_FACTOR * cal.per_soft_rom * TABLE_BITS / 16 * lanes[0]


def _resources(s: Any, lanes: tuple[int, int]) -> Resources:
    ln = lanes[0]
    if s.runtime:  # a DP16KD a lane, as Yosys maps the 256 x 8 RAM
        return Resources(lut=TABLE_GENERIC_RUNTIME_LUT + TABLE_GENERIC_RUNTIME_LUT_LANE * ln,
                         ff=TABLE_GENERIC.ff * ln + TABLE_RUNTIME_FF, bram=ln)
    return Resources(lut=TABLE_GENERIC.lut * ln, ff=TABLE_GENERIC.ff * ln)


def _memories(s: Any, lanes: tuple[int, int]) -> list[tuple[int, int, str]]:
    """A runtime lane's table RAM (a constant table is LUT logic: ``_lut``)."""
    return [(256, 8, "ram")] * lanes[0] if s.runtime else []


def _lower(b: Any, chain: Sequence[int], k: int, cur: Cursor) -> tuple[LoweredStage, int]:
    i = chain[k]
    op = b.ops[i]
    out = main_output(op)
    name = b.unique(layer_name(out))
    scale = float(op.attr("out_scale")) or None
    st = LoweredStage(name, "table", op.type, [i], cur.var, out, cur.shape, cur.shape,
                      cur.fmt, FixedPoint(8, -128, 127, scale), np.asarray(cur.perm),
                      {"table": op.input("Table")[0]},
                      {"table": "Table[x + 128] -> entry x & 0xFF"})
    return st, 1


def hardware_table(program_table: np.ndarray, relu: bool) -> np.ndarray:
    """The program's ``Table[x + 128]`` as the hardware's ``table[x & 0xFF]``."""
    t = np.roll(np.asarray(program_table, np.int64).reshape(-1), -128)
    return np.maximum(t, 0) if relu else t


def _make_spec(st: LoweredStage, values: Values | None, pe: int, simd: int, mode: str
               ) -> TableSpec:
    if values is None:  # a trial spec costing a matrix stage's tail: const, as always
        return TableSpec(st.name, st.in_shape)
    table = hardware_table(param_value(values, st.params["table"]), st.relu)  # type: ignore[arg-type]
    return TableSpec(st.name, st.in_shape, table, weights_mode=mode)


KIND = StageKind(
    name="table", spec=TableSpec, report_op="quantized_table",
    matches=lambda program, op: op.type == "quantized_table",
    lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: s.in_len // lanes[0],
    times=lambda s, lanes, t_in: t_in + TABLE_LATENCY,
    resources=_resources,
    memories=_memories,
    lut=_lut,
    shape=lambda s: {"in": list(s.in_shape), "out": list(s.out_shape)},
    doc="element-wise activation as a 256-entry table per lane",
)
