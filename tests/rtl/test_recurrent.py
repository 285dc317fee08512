"""Recurrent stage (rtl.recurrent): a quantised LSTM (with and without peepholes), GRU and
plain recurrence (tanh / relu / sigmoid) with their input projection, programs quantised
by the pass (random weights), in amaranth.sim under random valid / ready stalls over
sequences of mixed lengths 1..50 (lengths 1 included), bit-exact against the CPU
executor's golden kernels; the cycles of a step at full rate against the cycle model;
the spec's model against the executor."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fluid_hw.rtl._util import HardwareConfigError, pack_lanes, unpack_lanes
from fluid_hw.rtl.recurrent_spec import RecurrentSpec

from ._recurrent_programs import golden, quantised_cell, sequences, stage_arrays
from .streams import run_full_rate, simulate_streams


def _beats(xq: np.ndarray, lengths: list[int], in_dim: int) -> list[int]:
    """One beat a step: the int8 inputs and the last-step bit."""
    ends = set(np.cumsum(lengths) - 1)
    return [pack_lanes(row, 8) | (int(t in ends) << (8 * in_dim)) for t, row in
            enumerate(xq)]


def _spec(cell: str, in_dim: int, hidden: int, pe: int, simd: int, mode: str,
          seed: int = 0) -> tuple[RecurrentSpec, object]:
    qprog, scope, exe, _ = quantised_cell(cell, in_dim, hidden, seed)
    kind, params = stage_arrays(qprog, scope)
    spec = RecurrentSpec("rnn", kind, in_dim, hidden, pe, simd, mode,
                         params.peephole is not None, params)
    return spec, (qprog, scope, exe)


CASES = [  # cell, in_dim, hidden, pe, simd, mode
    ("lstm", 8, 16, 8, 4, "sequence"),
    ("lstm_np", 6, 8, 2, 2, "last"),
    ("gru", 8, 16, 8, 8, "sequence"),
    ("gru", 4, 8, 1, 4, "last"),
    ("tanh", 6, 8, 2, 2, "last"),
    ("relu", 8, 16, 4, 4, "sequence"),
]
#: 16 sequences of mixed lengths 1..50 (155 steps; four of length 1)
LENGTHS = [1, 50, 1, 2, 3, 5, 8, 13, 1, 21, 4, 2, 7, 1, 30, 6]


@pytest.mark.parametrize("cell,in_dim,hidden,pe,simd,mode", CASES)
def test_recurrent_spec_model_equals_the_golden_kernels(cell, in_dim, hidden, pe, simd, mode):
    """The stage's own behavioural model (rtl.recurrent_spec, written apart from the
    golden kernels) against the CPU executor running the quantised program."""
    spec, (qprog, scope, exe) = _spec(cell, in_dim, hidden, pe, simd, mode)
    seqs = sequences(np.random.default_rng(11), len(LENGTHS), in_dim, LENGTHS)
    xq, hid = golden(qprog, scope, exe, seqs)
    want = hid if mode == "sequence" else hid[np.cumsum(LENGTHS) - 1]
    np.testing.assert_array_equal(spec.model(xq, LENGTHS), want)


@pytest.mark.slow
@pytest.mark.parametrize("cell,in_dim,hidden,pe,simd,mode", CASES)
def test_recurrent_stage_bit_exact_under_stalls(cell, in_dim, hidden, pe, simd, mode):
    spec, (qprog, scope, exe) = _spec(cell, in_dim, hidden, pe, simd, mode)
    rng = np.random.default_rng(7)
    lengths = LENGTHS
    seqs = sequences(rng, len(lengths), in_dim, lengths)
    xq, hid = golden(qprog, scope, exe, seqs)
    ends = np.cumsum(lengths) - 1
    want = hid if mode == "sequence" else hid[ends]
    np.testing.assert_array_equal(spec.model(xq, lengths), want)   # the spec's model
    dut = spec.component((in_dim, hidden), "plain")
    start = time.perf_counter()
    (out,) = simulate_streams(dut, [(dut.i, _beats(xq, lengths, in_dim))],
                              [(dut.o, len(want))], seed=3, p_valid=0.6, p_ready=0.5,
                              max_cycles=40 * spec.step_cycles() * len(xq))
    print(f"{cell} {in_dim}->{hidden} PE {pe} SIMD {simd} {mode}: {len(xq)} steps, "
          f"{len(lengths)} sequences, {time.perf_counter() - start:.1f} s")
    mask = (1 << (8 * hidden)) - 1
    got = np.array([unpack_lanes(w & mask, hidden, 8) for w in out])
    np.testing.assert_array_equal(got, want)
    if mode == "sequence":  # the last-step bit on the last step of each sequence
        lasts = [w >> (8 * hidden) for w in out]
        assert [i for i, v in enumerate(lasts) if v] == list(ends)


@pytest.mark.parametrize("cell,in_dim,hidden,pe,simd", [
    ("lstm", 8, 16, 4, 4), ("lstm_np", 8, 16, 16, 8), ("gru", 8, 16, 2, 2),
    ("sigmoid", 8, 16, 4, 2),
    pytest.param("lstm", 32, 128, 16, 8, marks=pytest.mark.slow),   # ~50 s
    pytest.param("gru", 32, 128, 16, 8, marks=pytest.mark.slow)])
def test_recurrent_step_cycles_match_the_model(cell, in_dim, hidden, pe, simd):
    """At full rate (inputs back to back, output always ready) a step takes exactly the
    model's cycles: the input transfers are that far apart."""
    spec, (qprog, scope, exe) = _spec(cell, in_dim, hidden, pe, simd, "sequence")
    rng = np.random.default_rng(1)
    lengths = [3, 1, 4]
    xq, hid = golden(qprog, scope, exe, sequences(rng, 3, in_dim, lengths))
    dut = spec.component((in_dim, hidden), "plain")
    ins, _, out = run_full_rate(dut, [(dut.i, _beats(xq, lengths, in_dim))], len(xq))
    mask = (1 << (8 * hidden)) - 1
    np.testing.assert_array_equal([unpack_lanes(w & mask, hidden, 8) for w in out], hid)
    steps = np.diff(ins)
    print(f"{cell} PE {pe} SIMD {simd}: measured {sorted(set(steps.tolist()))} cycles a "
          f"step, model {spec.step_cycles()}")
    assert steps.tolist() == [spec.step_cycles()] * (len(xq) - 1)


def test_recurrent_spec_errors_and_structure():
    spec = RecurrentSpec("r", "gru", 8, 16, 4, 2)
    again = RecurrentSpec.from_structure(spec.structure())
    assert again.structure() == spec.structure()
    assert again.step_cycles() == spec.step_cycles()
    with pytest.raises(HardwareConfigError, match="PE 3 must divide the hidden size 16"):
        RecurrentSpec("r", "gru", 8, 16, 3, 2)
    with pytest.raises(HardwareConfigError, match=r"cell must be one of \['gru', 'lstm', "
                       r"'rnn'\]"):
        RecurrentSpec("r", "elman", 8, 16, 1, 1)
