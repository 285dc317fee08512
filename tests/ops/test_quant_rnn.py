"""The fixed-point recurrent cells (quantized_lstm, quantized_gru): the golden kernels
against an independent Python-int model of docs/fixed_point.md ("Recurrent cells") on
LoD batches of mixed lengths, bit for bit."""

import ast
import inspect

import numpy as np
import pytest

from fluid_hw.backends.cpu.kernels import quant_rnn as rnn_kernels
from fluid_hw.errors import ExecutionError, ShapeError
from tests.op_harness import run_op
from tests.ops._quant_rnn_model import gru_model, lstm_model, lstm_unit_model, run_cell, srq

D = 6
#: lengths 1..50 with several sequences of length 1, in no order
LENGTHS = [1, 50, 7, 1, 23, 2, 1, 38, 12, 5, 1, 49]


def _params(rng: np.random.Generator, gates: int, terms: int, peep: bool) -> dict:
    cols = gates * D
    p = {"Weight": rng.integers(-127, 128, (D, cols)).astype(np.int8),
         "GateMultiplier": rng.integers(0, 2**15, (terms, cols)).astype(np.int32),
         "GateShift": rng.integers(20, 27, (terms, cols)).astype(np.int32),
         "Tables": rng.integers(-128, 128, (5 if gates == 4 else 3, 256)).astype(np.int8)}
    if terms == 3:
        p["GateShift"][2] += 6  # the peephole term (c is int16)
    if peep:
        p["Peephole"] = rng.integers(-127, 128, (3, D)).astype(np.int8)
    return p


def _input(rng: np.random.Generator, gates: int) -> np.ndarray:
    return rng.integers(-30000, 30001, (sum(LENGTHS), gates * D)).astype(np.int32)


@pytest.mark.parametrize("peep", [True, False], ids=["peepholes", "no_peepholes"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("initial", [False, True], ids=["zero_state", "h0_c0"])
def test_quantized_lstm_matches_the_python_int_model(peep, reverse, initial):
    rng = np.random.default_rng([peep, reverse, initial])
    p = _params(rng, 4, 3, peep)
    x = _input(rng, 4)
    attrs = {"use_peepholes": peep, "is_reverse": reverse,
             "cell_multipliers": [int(v) for v in rng.integers(2**14, 2**15, 2)],
             "cell_shifts": [20, 12], "cell_tanh_multiplier": int(rng.integers(0, 2**15)),
             "cell_tanh_shift": 20, "hidden_multiplier": int(rng.integers(2**14, 2**15)),
             "hidden_shift": 19}
    init = {}
    if initial:
        init = {"H0": rng.integers(-128, 128, (len(LENGTHS), D)).astype(np.int8),
                "C0": rng.integers(-32768, 32768, (len(LENGTHS), D)).astype(np.int16)}
    got = run_cell("quantized_lstm", x, LENGTHS, p, attrs, init)
    want_h, want_c = lstm_model(x, LENGTHS, p, attrs, init.get("H0"), init.get("C0"))
    assert got["Hidden"].dtype == np.int8 and got["Cell"].dtype == np.int16
    np.testing.assert_array_equal(got["Hidden"], want_h)
    np.testing.assert_array_equal(got["Cell"], want_c)
    # the values reach both rails of every format (the clamps are exercised)
    assert want_c.min() == -32768 and want_c.max() == 32767
    assert {-128, 127} <= set(np.unique(want_h).tolist())


@pytest.mark.parametrize("origin", [False, True], ids=["default", "origin_mode"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("initial", [False, True], ids=["zero_state", "h0"])
def test_quantized_gru_matches_the_python_int_model(origin, reverse, initial):
    rng = np.random.default_rng([origin, reverse, initial, 7])
    p = _params(rng, 3, 2, False)
    x = _input(rng, 3)
    attrs = {"is_reverse": reverse, "origin_mode": origin,
             "reset_multiplier": int(rng.integers(0, 2**15)), "reset_shift": 15,
             "hidden_multipliers": [int(rng.integers(0, 2**15)), int(rng.integers(0, 2**15))],
             "hidden_shifts": [20, 22]}
    init = {"H0": rng.integers(-128, 128, (len(LENGTHS), D)).astype(np.int8)} if initial \
        else {}
    got = run_cell("quantized_gru", x, LENGTHS, p, attrs, init)
    assert got["Hidden"].dtype == np.int8
    np.testing.assert_array_equal(got["Hidden"], gru_model(x, LENGTHS, p, attrs,
                                                           init.get("H0")))


@pytest.mark.parametrize("shifts", [(0, 30), (20, 26), (0, 47), (47, 47)])
def test_sum_requantiser_is_exact_at_any_width(shifts):
    """Terms aligned by left shifts: the kernel's int64 path (the aligned sum below 2^62)
    and its Python-int path (beyond) both give the model's integers, ties included."""
    rng = np.random.default_rng(list(shifts))
    n = 400
    p1 = rng.integers(-2**31, 2**31, n)
    p1[:20] = [-2**31, 2**31 - 1, 0, 1, -1, *rng.integers(-4, 5, 15)]
    p2 = rng.integers(-2**22, 2**22, n)
    m1, m2 = rng.integers(0, 2**15, n), rng.integers(0, 2**15, n)
    m1[:3] = m2[:3] = 2**15 - 1
    got = rnn_kernels.srq([(p1, m1, shifts[0]), (p2, m2, shifts[1])], -32768, 32767)
    want = [srq([(a, b, shifts[0]), (c, d, shifts[1])], -32768, 32767)
            for a, b, c, d in zip(p1.tolist(), m1.tolist(), p2.tolist(), m2.tolist())]
    assert got.tolist() == want
    # ties round half up: (x * 1 + 2^(n-1)) >> n with x = +-2^(n-1)
    assert rnn_kernels.srq([(np.array([4, -4, 12, -12]), 1, 3)], -128, 127).tolist() == \
        [1, 0, 2, -1]


@pytest.mark.parametrize("origin", [False, True], ids=["default", "origin_mode"])
def test_quantized_gru_unit_is_one_step_of_the_gru(origin):
    """gru_unit on N rows = the GRU over N sequences of length 1 starting from
    HiddenPrev, and the Python-int model's."""
    rng = np.random.default_rng([origin, 11])
    p = _params(rng, 3, 2, False)
    n = 9
    x = rng.integers(-30000, 30001, (n, 3 * D)).astype(np.int32)
    hp = rng.integers(-128, 128, (n, D)).astype(np.int8)
    attrs = {"origin_mode": origin, "reset_multiplier": 16513, "reset_shift": 21,
             "hidden_multipliers": [int(v) for v in rng.integers(2**14, 2**15, 2)],
             "hidden_shifts": [22, 21]}
    got = run_op("quantized_gru_unit", {"Input": x, "HiddenPrev": hp, **p}, attrs)["Hidden"]
    seq_attrs = {**attrs, "is_reverse": False}
    want = gru_model(x, [1] * n, p, seq_attrs, hp)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, run_cell("quantized_gru", x, [1] * n, p, seq_attrs,
                                                {"H0": hp})["Hidden"])


def test_quantized_lstm_unit_matches_the_python_int_model():
    rng = np.random.default_rng(12)
    n = 9
    x = rng.integers(-30000, 30001, (n, 4 * D)).astype(np.int32)
    c_prev = rng.integers(-32768, 32768, (n, D)).astype(np.int16)
    p = {"GateMultiplier": rng.integers(0, 2**15, (1, 4 * D)).astype(np.int32),
         "GateShift": rng.integers(14, 20, (1, 4 * D)).astype(np.int32),
         "Tables": rng.integers(-128, 128, (5, 256)).astype(np.int8)}
    attrs = {"cell_multipliers": [16513, 30000], "cell_shifts": [21, 13],
             "cell_tanh_multiplier": 20000, "cell_tanh_shift": 20,
             "hidden_multiplier": 30000, "hidden_shift": 19}
    got = run_op("quantized_lstm_unit", {"X": x, "C_prev": c_prev, **p}, attrs)
    want_c, want_h = lstm_unit_model(x, c_prev, p, attrs)
    assert got["C"].dtype == np.int16 and got["H"].dtype == np.int8
    np.testing.assert_array_equal(got["C"], want_c)
    np.testing.assert_array_equal(got["H"], want_h)
    with pytest.raises(ShapeError, match=r"the gates must be \[N, 4 \* D\] with D = 6"):
        run_op("quantized_lstm_unit", {"X": x[:, :20], "C_prev": c_prev, **p}, attrs)


def test_each_sequence_starts_from_its_own_state():
    """A sequence's outputs depend on it alone: run as one batch or one at a time, the
    integers are the same (the state resets at each sequence start)."""
    rng = np.random.default_rng(3)
    p = _params(rng, 3, 2, False)
    x = _input(rng, 3)
    attrs = {"is_reverse": False, "origin_mode": False, "reset_multiplier": 258,
             "reset_shift": 15, "hidden_multipliers": [9000, 16513], "hidden_shifts": [15, 21]}
    whole = run_cell("quantized_gru", x, LENGTHS, p, attrs)["Hidden"]
    start = 0
    for n in LENGTHS[:4]:
        one = run_cell("quantized_gru", x[start:start + n], [n], p, attrs)["Hidden"]
        np.testing.assert_array_equal(one, whole[start:start + n])
        start += n


def test_recurrent_kernels_use_no_float_arithmetic():
    """The golden model's promise, checked on the source (as tests/ops/test_quant_ops does
    for the other fixed-point kernels)."""
    banned = {"float", "float32", "float64", "rint", "round", "floor", "ceil", "true_divide",
              "divide"}
    for fn in ("srq", "_table", "_cell", "_hidden", "_gru_step", "quantized_lstm",
               "quantized_gru", "quantized_lstm_unit", "quantized_gru_unit"):
        for node in ast.walk(ast.parse(inspect.getsource(getattr(rnn_kernels, fn)))):
            assert not isinstance(node, ast.Div), f"{fn}: true division"
            name = node.attr if isinstance(node, ast.Attribute) else \
                node.id if isinstance(node, ast.Name) else None
            assert name not in banned, f"{fn}: uses {name}"


def test_the_ops_check_their_inputs():
    rng = np.random.default_rng(5)
    p = _params(rng, 4, 3, True)
    x = _input(rng, 4)
    attrs = {"use_peepholes": True, "cell_multipliers": [1, 1], "cell_shifts": [0, 0],
             "cell_tanh_multiplier": 1, "cell_tanh_shift": 0, "hidden_multiplier": 1,
             "hidden_shift": 0}
    no_peep = {k: v for k, v in p.items() if k != "Peephole"}
    with pytest.raises(ShapeError, match=r"use_peepholes needs the Peephole input"):
        run_cell("quantized_lstm", x, LENGTHS, no_peep, attrs)
    with pytest.raises(ShapeError, match=r"Tables must have shape \[5, 256\]"):
        run_cell("quantized_lstm", x, LENGTHS, {**p, "Tables": p["Tables"][:3]}, attrs)
    with pytest.raises(ShapeError, match=r"Input .* must be int32"):
        run_cell("quantized_lstm", x.astype(np.int8), LENGTHS, p, attrs)
    with pytest.raises(ShapeError, match=r"cell_multipliers needs 2 value\(s\)"):
        run_cell("quantized_lstm", x, LENGTHS, p, {**attrs, "cell_multipliers": [1]})
    with pytest.raises(ExecutionError, match=r"H0 has shape \[2, 6\]; the batch has 12 "
                       "sequences"):
        run_cell("quantized_lstm", x, LENGTHS, p, attrs, {"H0": np.zeros((2, D), np.int8)})
    bad = {**p, "GateShift": np.full((3, 4 * D), 48, np.int32)}
    with pytest.raises(ExecutionError, match=r"GateShift holds 48 .. 48; each value must lie "
                       r"in \[0, 47\]"):
        run_cell("quantized_lstm", x, LENGTHS, bad, attrs)
