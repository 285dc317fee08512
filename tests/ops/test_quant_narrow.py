"""Narrow precision in the golden model (docs/fixed_point.md): quantize and requantize at
every width 1-8 and 16, signed / unsigned / bipolar, against a numpy model of the
formula; narrow and bipolar weights in quantized_fc / quantized_conv2d (bipolar x
bipolar equals the XNOR / popcount form); multi_threshold against a loop."""

import numpy as np
import pytest

from fluid_hw.errors import ExecutionError, OpAttrError, ShapeError
from fluid_hw.passes.precision import Precision, acc_bits, int_range, weight_range
from tests.op_harness import run_op

RNG = np.random.default_rng(1616)
WIDTHS = [1, 2, 3, 4, 5, 6, 7, 8, 16]
KINDS = [(True, False), (False, False), (True, True)]  # (signed, bipolar)


def _kinds(bits):
    for signed, bipolar in KINDS:
        if (bipolar and bits != 1) or (not signed and bits == 16):
            continue
        yield signed, bipolar


CASES = [(b, s, p) for b in WIDTHS for s, p in _kinds(b)]


def rails(bits, signed):
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)


@pytest.mark.parametrize(("bits", "signed", "bipolar"), CASES)
def test_quantize_at_every_width(bits, signed, bipolar):
    scale = 0.37
    x = np.concatenate([(RNG.standard_normal(300) * 2 ** min(bits, 8) * scale),
                        np.array([0.0, -0.0, scale / 2, -scale / 2, 1e9, -1e9])]
                       ).astype(np.float32)
    out = run_op("quantize", {"X": x}, {"scale": scale, "bits": bits, "signed": signed,
                                        "bipolar": bipolar})["Out"]
    if bipolar:
        want = np.where(x >= 0, 1, -1)
    else:
        lo, hi = rails(bits, signed)
        want = np.clip(np.rint(x.astype(np.float64) / np.float64(np.float32(scale))), lo, hi)
    assert out.dtype == (np.int16 if bits == 16 else np.uint8 if bits == 8 and not signed
                         else np.int8)
    np.testing.assert_array_equal(out.astype(np.int64), want.astype(np.int64))


def _rq_ref(x, m, n, relu, bits, signed, bipolar):
    """requantize's formula in Python ints."""
    r = (x * m + (1 << (n - 1))) >> n if n > 0 else x * m
    if bipolar:
        return 1 if r >= 0 else -1
    lo, hi = rails(bits, signed)
    return min(max(r, max(lo, 0) if relu else lo), hi)


@pytest.mark.parametrize(("bits", "signed", "bipolar"), CASES)
@pytest.mark.parametrize("relu", [False, True])
def test_requantize_at_every_width(bits, signed, bipolar, relu):
    if relu and bipolar:
        return
    c = 3
    x = RNG.integers(-2**20, 2**20, size=(40, c)).astype(np.int32)
    x[:3] = [[0, 1, -1], [2**31 - 1, -2**31, 7], [-7, 6, -6]]
    m = np.array([1, 300, 32767], np.int32)
    n = np.array([0, 9, 20], np.int32)
    out = run_op("requantize", {"X": x, "Multiplier": m, "Shift": n},
                 {"bits": bits, "signed": signed, "bipolar": bipolar, "relu": relu})["Out"]
    want = [[_rq_ref(int(x[i, j]), int(m[j]), int(n[j]), relu, bits, signed, bipolar)
             for j in range(c)] for i in range(len(x))]
    assert out.astype(np.int64).tolist() == want
    lo, hi = int_range(bits, "bipolar" if bipolar else "signed" if signed else "unsigned")
    assert out.min() >= lo and out.max() <= hi


def test_requantize_default_is_the_int8_of_before():
    x = RNG.integers(-2**16, 2**16, size=(64, 2)).astype(np.int32)
    m, n = np.array([123, 77], np.int32), np.array([6, 3], np.int32)
    old = run_op("requantize", {"X": x, "Multiplier": m, "Shift": n}, {})["Out"]
    new = run_op("requantize", {"X": x, "Multiplier": m, "Shift": n},
                 {"bits": 8, "signed": True, "bipolar": False})["Out"]
    assert old.dtype == np.int8
    np.testing.assert_array_equal(old, new)


def test_quantize_and_requantize_reject_contradictions():
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(OpAttrError, match="bipolar values are 1-bit"):
        run_op("quantize", {"X": x}, {"scale": 1.0, "bits": 2, "bipolar": True})
    with pytest.raises(OpAttrError, match="unsigned 16-bit"):
        run_op("quantize", {"X": x}, {"scale": 1.0, "bits": 16, "signed": False})
    with pytest.raises(OpAttrError, match="bits"):
        run_op("quantize", {"X": x}, {"scale": 1.0, "bits": 9})
    acc = np.zeros((2, 2), np.int32)
    one = np.ones(1, np.int32)
    with pytest.raises(OpAttrError, match="relu and bipolar"):
        run_op("requantize", {"X": acc, "Multiplier": one, "Shift": one},
               {"bits": 1, "bipolar": True, "relu": True})


# -- narrow weights --------------------------------------------------------------------

def test_bipolar_fc_is_xnor_popcount():
    n, k, c = 16, 75, 9
    x = RNG.choice([-1, 1], size=(n, k)).astype(np.int8)
    w = RNG.choice([-1, 1], size=(k, c)).astype(np.int8)
    out = run_op("quantized_fc", {"X": x, "W": w},
                 {"weight_bits": 1, "weight_type": "bipolar", "acc_bits": 8})["Out"]
    xb = (x > 0).astype(np.uint8)  # -1 -> bit 0, +1 -> bit 1
    wb = (w > 0).astype(np.uint8)
    xp = np.packbits(xb, axis=1)
    wp = np.packbits(wb.T, axis=1)
    # xnor of the packed words, popcount of the first k bits only (the pad bits are 0 in
    # both: xnor makes them 1, so they are subtracted)
    pad = xp.shape[1] * 8 - k
    xnor = ~(xp[:, None, :] ^ wp[None, :, :])
    pop = np.unpackbits(xnor, axis=2).sum(axis=2).astype(np.int64) - pad
    np.testing.assert_array_equal(out.astype(np.int64), 2 * pop - k)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 7])
def test_narrow_weights_conv_and_fc_are_the_exact_sums(bits):
    q = 2 ** (bits - 1) - 1
    x = RNG.integers(-8, 8, size=(2, 3, 5, 5)).astype(np.int8)
    f = RNG.integers(-q, q + 1, size=(4, 3, 3, 3)).astype(np.int8)
    out = run_op("quantized_conv2d", {"Input": x, "Filter": f},
                 {"weight_bits": bits, "strides": [1, 1], "paddings": [1, 1],
                  "dilations": [1, 1], "groups": 1})["Output"]
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 5, 5), np.int64)
    for i in range(5):
        for j in range(5):
            want[:, :, i, j] = np.einsum("ncab,mcab->nm", xp[:, :, i:i + 3, j:j + 3], f)
    np.testing.assert_array_equal(out, want)
    w = RNG.integers(-q, q + 1, size=(10, 6)).astype(np.int8)
    xf = RNG.integers(-100, 100, size=(4, 10)).astype(np.int8)
    got = run_op("quantized_fc", {"X": xf, "W": w}, {"weight_bits": bits})["Out"]
    np.testing.assert_array_equal(got, xf.astype(np.int64) @ w.astype(np.int64))


def test_narrow_weights_out_of_range_are_refused():
    x = np.ones((1, 2), np.int8)
    with pytest.raises(ExecutionError, match=r"outside the 4-bit signed weights' values \[-7, 7\]"):
        run_op("quantized_fc", {"X": x, "W": np.array([[8], [0]], np.int8)}, {"weight_bits": 4})
    with pytest.raises(ExecutionError, match=r"\{-1, \+1\}"):
        run_op("quantized_fc", {"X": x, "W": np.array([[1], [0]], np.int8)},
               {"weight_bits": 1, "weight_type": "bipolar"})
    with pytest.raises(OpAttrError, match="weight_type='bipolar'"):
        run_op("quantized_fc", {"X": x, "W": np.array([[1], [1]], np.int8)}, {"weight_bits": 1})
    with pytest.raises(OpAttrError, match="bipolar weights are 1-bit"):
        run_op("quantized_fc", {"X": x, "W": np.array([[1], [1]], np.int8)},
               {"weight_bits": 4, "weight_type": "bipolar"})


# -- multi_threshold ---------------------------------------------------------------------

def _mt_loop(x, th, out_bias, bipolar):
    out = np.zeros(x.shape, np.int64)
    for idx in np.ndindex(*x.shape):
        row = th[idx[1] if th.shape[0] > 1 else 0]
        cnt = sum(1 for t in row if int(x[idx]) >= int(t))
        out[idx] = (1 if cnt else -1) if bipolar else out_bias + cnt
    return out


@pytest.mark.parametrize(("bits", "signed", "shared"), [(2, True, False), (3, False, False),
                                                        (4, True, True), (1, False, False)])
def test_multi_threshold_matches_a_loop(bits, signed, shared):
    c, t = 5, 2**bits - 1
    x = RNG.integers(-300, 300, size=(3, c, 4, 2)).astype(np.int32)
    th = np.sort(RNG.integers(-250, 250, size=(1 if shared else c, t)), axis=1).astype(np.int32)
    th[0, 0] = th[0, -1]  # equal thresholds: both crossed at once
    th[0] = np.sort(th[0])
    x[0, 0, 0, 0] = th[0, 0]  # x equal to a threshold crosses it
    lo = rails(bits, signed)[0]
    out = run_op("multi_threshold", {"X": x, "Thresholds": th},
                 {"bits": bits, "signed": signed, "out_bias": lo})["Out"]
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, _mt_loop(x, th, lo, False))


def test_multi_threshold_bipolar_and_fewer_thresholds():
    x = RNG.integers(-50, 50, size=(6, 3)).astype(np.int32)
    th = np.array([[0], [-10], [7]], np.int32)
    out = run_op("multi_threshold", {"X": x, "Thresholds": th},
                 {"bits": 1, "bipolar": True})["Out"]
    np.testing.assert_array_equal(out, _mt_loop(x, th, 0, True))
    th3 = np.sort(RNG.integers(-40, 40, size=(3, 3)), axis=1).astype(np.int32)
    out = run_op("multi_threshold", {"X": x, "Thresholds": th3},  # relu'd signed 3-bit: 0..3
                 {"bits": 3, "out_bias": 0})["Out"]
    np.testing.assert_array_equal(out, _mt_loop(x, th3, 0, False))


def test_multi_threshold_errors_say_what_is_wrong():
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(ExecutionError, match="row 1 decreases at column 2"):
        run_op("multi_threshold", {"X": x, "Thresholds": np.array(
            [[0, 1, 2], [0, 5, 4], [1, 1, 1]], np.int32)}, {"bits": 2, "out_bias": -2})
    with pytest.raises(ShapeError, match=r"Thresholds must have shape \[3, T\]"):
        run_op("multi_threshold", {"X": x, "Thresholds": np.zeros((2, 3), np.int32)},
               {"bits": 2, "out_bias": -2})
    with pytest.raises(ShapeError, match="takes 1 to 3 thresholds"):
        run_op("multi_threshold", {"X": x, "Thresholds": np.zeros((3, 4), np.int32)},
               {"bits": 2, "out_bias": -2})
    with pytest.raises(OpAttrError, match=r"use out_bias in \[-2, -2\]"):
        run_op("multi_threshold", {"X": x, "Thresholds": np.zeros((3, 3), np.int32)},
               {"bits": 2, "out_bias": 0})


# -- Precision -----------------------------------------------------------------------------

def test_precision_ranges_and_defaults():
    assert Precision() == Precision(8, 8, "signed", "signed", True)
    p = Precision(w=1, a=1)
    assert (p.w_type, p.a_type) == ("bipolar", "bipolar")
    assert p.weight_range == (-1, 1) and p.act_range == (-1, 1)
    assert weight_range(2) == (-1, 1) and weight_range(4) == (-7, 7)
    assert int_range(2, "signed") == (-2, 1) and int_range(2, "unsigned") == (0, 3)
    assert int_range(16) == (-32768, 32767)
    # 64 inputs of 8 bits times 8-bit weights: 64 * 128 * 127 = 1,040,384 < 2^20
    assert acc_bits((-128, 127), (-127, 127), 64) == 21
    assert acc_bits((-1, 1), (-1, 1), 64) == 8  # 64 < 2^7
    from fluid_hw.errors import QuantizationError
    with pytest.raises(QuantizationError, match="bipolar weights are 1-bit"):
        Precision(w=2, w_type="bipolar")
    with pytest.raises(QuantizationError, match="1 to 8 or 16"):
        Precision(a=12)
