"""Table activation: bit-exact against its model under random stalls, full throughput,
and its latency."""

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.table import TABLE_LATENCY, TableActivation, table_model

from .streams import run_full_rate, simulate_streams


def sigmoid_table(scale_in=1 / 16, scale_out=1 / 128):
    """An int8 sigmoid as the golden op would tabulate it (indexed by x & 0xFF)."""
    x = np.arange(256)
    x = np.where(x >= 128, x - 256, x)
    y = np.round(1 / (1 + np.exp(-x * scale_in)) / scale_out)
    return np.clip(y, -128, 127).astype(np.int64)


def test_table_model_indexes_by_unsigned_byte():
    t = np.arange(256) - 128
    x = np.array([0, 1, 127, -128, -1])
    assert table_model(x, t).tolist() == [-128, -127, -1, 0, 127]
    assert table_model(x, t).dtype == np.int8


@pytest.mark.parametrize("lanes,seed", [(1, 0), (3, 1), (4, 2), (7, 3)])
def test_table_activation(lanes, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-128, 128, 256) if seed else sigmoid_table()
    n = 3 * 64 // lanes * lanes  # several "images" back to back
    x = rng.integers(-128, 128, (n // lanes, lanes))
    x[0] = -128
    x[1] = 127
    dut = TableActivation("act", lanes, table, rom_style="block" if lanes == 4 else "logic")
    (out,) = simulate_streams(dut, [(dut.i, [pack_lanes(b, 8) for b in x])],
                              [(dut.o, len(x))], seed=seed, p_valid=0.6, p_ready=0.6)
    got = np.array([unpack_lanes(wd, lanes, 8) for wd in out])
    np.testing.assert_array_equal(got, table_model(x, table))


def test_table_full_throughput_and_latency():
    rng = np.random.default_rng(5)
    table = rng.integers(-128, 128, 256)
    dut = TableActivation("act", 2, table)
    x = rng.integers(-128, 128, (40, 2))
    ins, outs, out = run_full_rate(dut, [(dut.i, [pack_lanes(b, 8) for b in x])], len(x))
    vals = [unpack_lanes(op, 2, 8) for op in out]
    assert np.diff(ins).tolist() == [1] * (len(x) - 1)  # one beat per cycle
    assert [o - i for i, o in zip(ins, outs)] == [TABLE_LATENCY] * len(x)
    np.testing.assert_array_equal(vals, table_model(x, table))


def test_table_errors():
    with pytest.raises(HardwareConfigError, match=r"table has shape \(255,\)"):
        TableActivation("act1", 1, np.zeros(255, int))
    with pytest.raises(HardwareConfigError, match=r"table values must lie in \[-128, 127\]"):
        TableActivation("act1", 1, np.full(256, 200))
    with pytest.raises(HardwareConfigError, match="rom_style must be one of"):
        TableActivation("act1", 1, np.zeros(256, int), rom_style="distributed")
