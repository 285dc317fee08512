"""Kind ``table``: ``quantized_table`` (an element-wise activation of one int8 value --
sigmoid, tanh, hard-swish, leaky relu, ... -- tabulated by the quantisation pass) as a
256-entry lookup per lane; lanes follow the producer.  A relu after it folds into the
table."""

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


def _lut(s: Any, lanes: tuple[int, int], cal: Any) -> float:
    return TABLE_LUT_FACTOR * cal.per_soft_rom * TABLE_BITS / 16 * lanes[0]


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
    table = None
    if values is not None:
        table = hardware_table(param_value(values, st.params["table"]),  # type: ignore
                               st.relu)
    return TableSpec(st.name, st.in_shape, table)


KIND = StageKind(
    name="table", spec=TableSpec, report_op="quantized_table",
    matches=lambda program, op: op.type == "quantized_table",
    lower=_lower, make_spec=_make_spec,
    cycles=lambda s, lanes: s.in_len // lanes[0],
    times=lambda s, lanes, t_in: t_in + TABLE_LATENCY,
    resources=lambda s, lanes: Resources(lut=TABLE_GENERIC.lut * lanes[0],
                                         ff=TABLE_GENERIC.ff * lanes[0]),
    memories=lambda s, lanes: [],
    lut=_lut,
    shape=lambda s: {"in": list(s.in_shape), "out": list(s.out_shape)},
    doc="element-wise activation as a 256-entry table per lane",
)
