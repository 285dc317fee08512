"""The golden model: every fixed-point kernel against an independent reference written
with Python ints (docs/fixed_point.md), including saturation at both rails and
rounding ties."""

import ast
import inspect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluid_hw.backends.cpu.kernels import quant as quant_kernels
from fluid_hw.errors import ExecutionError, OpAttrError, ShapeError
from tests.op_harness import run_op

RNG = np.random.default_rng(2024)


def clamp(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


def wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def i8(*shape, lo=-128, hi=127):
    return RNG.integers(lo, hi + 1, size=shape).astype(np.int8)


# -- quantize / dequantize --------------------------------------------------------------


def ref_round_half_even(x: float) -> int:
    f = math.floor(x)
    d = x - f
    if d > 0.5 or (d == 0.5 and f % 2 == 1):
        return f + 1
    return f


@pytest.mark.parametrize(("bits", "signed", "dtype", "lo", "hi"), [
    (8, True, np.int8, -128, 127), (16, True, np.int16, -32768, 32767),
    (8, False, np.uint8, 0, 255)])
def test_quantize_rounds_half_to_even_and_saturates(bits, signed, dtype, lo, hi):
    scale = 0.5
    x = np.array([0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 0.3, -0.3, 1e9, -1e9, 0.0,
                  (hi + 0.5) * scale, (lo - 0.5) * scale], np.float32)
    out = run_op("quantize", {"X": x}, {"scale": scale, "bits": bits, "signed": signed})["Out"]
    assert out.dtype == dtype
    want = [clamp(ref_round_half_even(float(v) / scale), lo, hi) for v in x]
    assert out.tolist() == want
    if bits == 8 and signed:  # the ties, spelled out
        assert out[:6].tolist() == [0, 2, 2, 0, -2, -2]


def test_quantize_random_values_match_the_reference():
    x = (RNG.standard_normal(200) * 3).astype(np.float32)
    scale = 0.0123
    out = run_op("quantize", {"X": x}, {"scale": scale})["Out"]
    s = float(np.float32(scale))
    assert out.tolist() == [clamp(ref_round_half_even(float(v) / s), -128, 127) for v in x]


def test_quantize_rejects_non_finite_input_and_bad_attributes():
    with pytest.raises(ExecutionError, match="non-finite"):
        run_op("quantize", {"X": np.array([1.0, np.nan], np.float32)}, {"scale": 1.0})
    with pytest.raises(OpAttrError, match="scale must be > 0"):
        run_op("quantize", {"X": np.zeros(2, np.float32)}, {"scale": 0.0})
    with pytest.raises(OpAttrError, match="unsigned 16-bit"):
        run_op("quantize", {"X": np.zeros(2, np.float32)},
               {"scale": 1.0, "bits": 16, "signed": False})


def test_dequantize_is_the_float32_of_an_exact_product():
    x = np.array([-128, -1, 0, 1, 127], np.int8)
    out = run_op("dequantize", {"X": x}, {"scale": 0.1})["Out"]
    s = float(np.float32(0.1))
    assert out.dtype == np.float32
    assert out.tolist() == [float(np.float32(int(v) * s)) for v in x]
    acc = np.array([[2**31 - 1, -(2**31)], [5, -7]], np.int32)
    scale = np.array([0.5, 0.25], np.float32)
    out = run_op("dequantize", {"X": acc, "Scale": scale}, {"axis": 1})["Out"]
    assert out.tolist() == [[float(np.float32(int(acc[i, j]) * float(scale[j])))
                             for j in range(2)] for i in range(2)]


# -- quantized_fc ------------------------------------------------------------------------


def ref_fc(x, w, b):
    n, k = x.shape
    c = w.shape[1]
    return [[wrap32(sum(int(x[i, t]) * int(w[t, j]) for t in range(k))
                    + (int(b[j]) if b is not None else 0)) for j in range(c)]
            for i in range(n)]


def test_quantized_fc_matches_python_ints():
    x, w = i8(5, 17), i8(17, 6, lo=-127)
    b = RNG.integers(-(2**20), 2**20, 6).astype(np.int32)
    out = run_op("quantized_fc", {"X": x, "W": w, "Bias": b})["Out"]
    assert out.dtype == np.int32 and out.tolist() == ref_fc(x, w, b)
    out = run_op("quantized_fc", {"X": x, "W": w})["Out"]
    assert out.tolist() == ref_fc(x, w, None)


def test_quantized_fc_at_the_rails_and_wrapping():
    x = np.array([[-128] * 4, [127] * 4], np.int8)
    w = np.array([[-127, 127]] * 4, np.int8)
    out = run_op("quantized_fc", {"X": x, "W": w})["Out"]
    assert out.tolist() == [[4 * 128 * 127, -4 * 128 * 127], [-4 * 127 * 127, 4 * 127 * 127]]
    # a sum beyond int32 wraps as a 32-bit accumulator does (the pass never lets it happen)
    x16 = np.full((1, 3), -32768, np.int16)
    w16 = np.full((3, 1), -32767, np.int16)
    out = run_op("quantized_fc", {"X": x16, "W": w16, "Bias": np.array([2**31 - 1], np.int32)},
                 {"weight_bits": 16})["Out"]
    assert out.tolist() == [[wrap32(3 * 32768 * 32767 + 2**31 - 1)]]


def test_quantized_fc_checks_its_inputs():
    with pytest.raises(ShapeError, match="X must be int8, uint8 or int16"):
        run_op("quantized_fc", {"X": np.zeros((2, 3), np.float32), "W": i8(3, 2)})
    with pytest.raises(ShapeError, match="16-bit weights, so it must be int16"):
        run_op("quantized_fc", {"X": i8(2, 3), "W": i8(3, 2)}, {"weight_bits": 16})
    with pytest.raises(ShapeError, match="Bias must be int32"):
        run_op("quantized_fc", {"X": i8(2, 3), "W": i8(3, 2), "Bias": np.zeros(2, np.int8)})
    with pytest.raises(ShapeError, match="flatten2 it first"):
        run_op("quantized_fc", {"X": i8(2, 3, 1), "W": i8(3, 2)})


# -- quantized_conv2d ---------------------------------------------------------------------------


def ref_conv(x, w, b, strides, pads, dil, groups):
    n, _c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    t, bot, l, r = pads
    (sh, sw), (dh, dw) = strides, dil
    oh = (h + t + bot - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + l + r - (dw * (kw - 1) + 1)) // sw + 1
    per = m // groups

    def px(ni, ci, y, xx):
        return int(x[ni, ci, y, xx]) if 0 <= y < h and 0 <= xx < wd else 0

    out = np.zeros((n, m, oh, ow), np.int64)
    for ni in range(n):
        for mi in range(m):
            g = mi // per
            for i in range(oh):
                for j in range(ow):
                    s = int(b[mi]) if b is not None else 0
                    for cc in range(cg):
                        for a in range(kh):
                            for e in range(kw):
                                s += px(ni, g * cg + cc, i * sh - t + a * dh,
                                        j * sw - l + e * dw) * int(w[mi, cc, a, e])
                    out[ni, mi, i, j] = wrap32(s)
    return out


@pytest.mark.parametrize(("shape_x", "shape_w", "attrs"), [
    ((2, 3, 5, 5), (4, 3, 3, 3), {"paddings": [1, 1]}),
    ((1, 4, 6, 5), (4, 2, 2, 3), {"groups": 2, "strides": [2, 1], "paddings": [1, 0, 0, 2]}),
    ((1, 2, 7, 7), (2, 2, 3, 3), {"dilations": [2, 2], "paddings": [2, 2]}),
])
def test_quantized_conv2d_matches_python_ints(shape_x, shape_w, attrs):
    x, w = i8(*shape_x), i8(*shape_w, lo=-127)
    b = RNG.integers(-5000, 5000, shape_w[0]).astype(np.int32)
    out = run_op("quantized_conv2d", {"Input": x, "Filter": w, "Bias": b}, attrs)["Output"]
    p = attrs.get("paddings", [0, 0])
    pads = [p[0], p[0], p[1], p[1]] if len(p) == 2 else p
    want = ref_conv(x, w, b, attrs.get("strides", [1, 1]), pads, attrs.get("dilations", [1, 1]),
                    attrs.get("groups", 1))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)


def test_quantized_conv2d_at_the_rails():
    x = np.full((1, 2, 3, 3), -128, np.int8)
    w = np.full((1, 2, 3, 3), -127, np.int8)
    out = run_op("quantized_conv2d", {"Input": x, "Filter": w}, {"paddings": [1, 1]})["Output"]
    assert out[0, 0, 1, 1] == 18 * 128 * 127 and out[0, 0, 0, 0] == 8 * 128 * 127


# -- requantize --------------------------------------------------------------------------


def ref_requantize(x: int, m: int, n: int, relu: bool, bits: int) -> int:
    p = x * m
    r = (p + (1 << (n - 1))) >> n if n > 0 else p  # Python's >> floors: arithmetic shift
    return clamp(r, 0 if relu else -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _requant(x, m, n, relu=False, bits=8):
    ins = {"X": np.asarray(x, np.int32), "Multiplier": np.asarray(m, np.int32),
           "Shift": np.asarray(n, np.int32)}
    return run_op("requantize", ins,
                  {"relu": relu, "bits": bits})["Out"]


def test_requantize_ties_round_half_up():
    # x * m / 2^n = k + 0.5 exactly: +inf wins for both signs
    x = np.array([[5, -5, 3, -3, 7, -7, 1, -1]], np.int32).T.reshape(8, 1)
    out = _requant(x, [1], [1])
    assert out.reshape(-1).tolist() == [3, -2, 2, -1, 4, -3, 1, 0]
    x = np.array([[3 * 2**19], [-(3 * 2**19)], [2**19 - 1], [-(2**19) - 1]], np.int32)
    out = _requant(x, [1], [20])  # 1.5, -1.5, just under 0.5, just under -0.5
    assert out.reshape(-1).tolist() == [2, -1, 0, -1]


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("relu", [False, True])
def test_requantize_saturates_at_both_rails(bits, relu):
    hi, lo = 2 ** (bits - 1) - 1, -(2 ** (bits - 1))
    x = np.array([[2**31 - 1], [-(2**31)], [hi], [lo], [-2]], np.int32)
    out = _requant(x, [32767], [0], relu, bits)
    assert out.dtype == (np.int8 if bits == 8 else np.int16)
    floor = 0 if relu else lo
    assert out.reshape(-1).tolist() == [hi, floor, hi, floor, floor]


@settings(max_examples=200, deadline=None)
@given(x=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=6),
       m=st.integers(0, 2**15 - 1), n=st.integers(0, 47), relu=st.booleans(),
       bits=st.sampled_from([8, 16]))
def test_requantize_matches_python_ints(x, m, n, relu, bits):
    out = _requant(np.array(x).reshape(-1, 1), [m], [n], relu, bits)
    assert out.reshape(-1).tolist() == [ref_requantize(v, m, n, relu, bits) for v in x]


def test_requantize_per_channel():
    x = RNG.integers(-(2**24), 2**24, (2, 3, 2, 2)).astype(np.int32)
    m = np.array([100, 20000, 32767], np.int32)
    n = np.array([0, 21, 47], np.int32)
    out = _requant(x, m, n, relu=True)
    want = [[[[ref_requantize(int(x[a, c, i, j]), int(m[c]), int(n[c]), True, 8)
               for j in range(2)] for i in range(2)] for c in range(3)] for a in range(2)]
    assert out.tolist() == want


def test_requantize_rejects_out_of_contract_parameters():
    with pytest.raises(ExecutionError, match=r"Multiplier\[0\] is 32768, outside \[0, 32767\]"):
        _requant([[1]], [32768], [0])
    with pytest.raises(ExecutionError, match=r"Shift\[1\] is 48"):
        _requant([[1, 1]], [1, 1], [0, 48])
    with pytest.raises(ShapeError, match="Multiplier must have shape"):
        _requant([[1, 1]], [1, 1, 1], [0])


# -- quantized_pool2d --------------------------------------------------------------------


def ref_pool(x, k, s, pads, kind, exclusive):
    n, c, h, w = x.shape
    t, b, l, r = pads
    oh, ow = (h + t + b - k[0]) // s[0] + 1, (w + l + r - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow), np.int64)
    for a in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    cells = [int(x[a, ch, y, z])
                             for y in range(i * s[0] - t, i * s[0] - t + k[0])
                             for z in range(j * s[1] - l, j * s[1] - l + k[1])
                             if 0 <= y < h and 0 <= z < w]
                    if kind == "max":
                        out[a, ch, i, j] = max(cells)
                    elif kind == "sum":
                        out[a, ch, i, j] = sum(cells)
                    else:
                        d = len(cells) if exclusive else k[0] * k[1]
                        out[a, ch, i, j] = (2 * sum(cells) + d) // (2 * d)
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("exclusive", [True, False])
def test_quantized_pool2d_matches_python_ints(kind, exclusive):
    x = i8(2, 3, 5, 5)
    attrs = {"pooling_type": kind, "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
             "exclusive": exclusive}
    out = run_op("quantized_pool2d", {"X": x}, attrs)["Out"]
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, ref_pool(x, [3, 3], [2, 2], [1, 1, 1, 1], kind,
                                                exclusive))


def test_quantized_pool2d_ties_and_padding():
    x = np.array([[[[1, 2], [-1, -2]], [[-3, -2], [-128, -128]]]], np.int8)  # [1, 2, 2, 2]
    avg = run_op("quantized_pool2d", {"X": x}, {"pooling_type": "avg", "ksize": [1, 2],
                                                "strides": [1, 2]})["Out"]
    assert avg.reshape(-1).tolist() == [2, -1, -2, -128]  # 1.5, -1.5, -2.5: half up
    # padding never wins a max, even over the lowest value
    mx = run_op("quantized_pool2d", {"X": x}, {"ksize": [3, 3], "paddings": [1, 1]})["Out"]
    assert mx[0, 1].tolist() == [[-2, -2], [-2, -2]] and mx[0, 0].max() == 2
    g = run_op("quantized_pool2d", {"X": x}, {"pooling_type": "avg", "ksize": [1, 1],
                                              "global_pooling": True})["Out"]
    assert g.reshape(-1).tolist() == [0, (2 * -261 + 4) // 8]


@pytest.mark.parametrize(("shape", "attrs", "pads"), [
    ((2, 3, 5, 5), {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, [1, 1, 1, 1]),
    ((1, 2, 6, 4), {"ksize": [2, 2], "strides": [2, 2]}, [0, 0, 0, 0]),
    ((1, 2, 5, 7), {"ksize": [2, 3], "strides": [1, 2], "paddings": [1, 0, 0, 2]},
     [1, 0, 0, 2]),
])
def test_quantized_pool2d_sum_matches_python_ints(shape, attrs, pads):
    x = i8(*shape)
    want = ref_pool(x, attrs["ksize"], attrs["strides"], pads, "sum", False)
    for exclusive in (True, False):  # padding cells are 0 either way: no divide
        out = run_op("quantized_pool2d", {"X": x}, {"pooling_type": "sum", **attrs,
                                                    "exclusive": exclusive})["Out"]
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out, want)


def test_quantized_pool2d_sum_at_the_rails_and_global():
    x = np.full((1, 2, 7, 9), -128, np.int8)
    x[0, 1] = 127
    g = run_op("quantized_pool2d", {"X": x}, {"pooling_type": "sum", "ksize": [1, 1],
                                              "global_pooling": True})["Out"]
    assert g.dtype == np.int32 and g.shape == (1, 2, 1, 1)
    assert g.reshape(-1).tolist() == [-128 * 63, 127 * 63]
    w = run_op("quantized_pool2d", {"X": x}, {"pooling_type": "sum", "ksize": [3, 3],
                                              "paddings": [1, 1]})["Out"]
    assert w[0, 0, 0, 0] == -128 * 4 and w[0, 0, 3, 4] == -128 * 9 and w[0, 1, 6, 8] == 127 * 4
    # int16 values: the int32 sum holds 256 of the largest
    x16 = np.full((1, 1, 16, 16), 32767, np.int16)
    g16 = run_op("quantized_pool2d", {"X": x16}, {"pooling_type": "sum", "ksize": [1, 1],
                                                  "global_pooling": True})["Out"]
    assert g16.dtype == np.int32 and int(g16.reshape(-1)[0]) == 256 * 32767
    r = RNG.integers(-128, 128, (3, 4, 5, 6)).astype(np.int8)
    g = run_op("quantized_pool2d", {"X": r}, {"pooling_type": "sum", "ksize": [1, 1],
                                              "global_pooling": True})["Out"]
    assert g.reshape(3, 4).tolist() == [[sum(int(v) for v in r[a, c].reshape(-1))
                                         for c in range(4)] for a in range(3)]


# -- quantized_table ---------------------------------------------------------------------


def test_quantized_table_looks_up_every_int8_value():
    table = i8(256)
    x = np.arange(-128, 128).astype(np.int8).reshape(4, 2, 32)
    out = run_op("quantized_table", {"X": x, "Table": table})["Out"]
    assert out.dtype == np.int8 and out.shape == x.shape
    assert out.reshape(-1).tolist() == [int(table[v + 128]) for v in range(-128, 128)]
    y = i8(2, 3, 4, 5)
    out = run_op("quantized_table", {"X": y, "Table": table})["Out"]
    assert out.reshape(-1).tolist() == [int(table[int(v) + 128]) for v in y.reshape(-1)]
    # a table of the identity is the identity; of relu, relu
    ident = np.arange(-128, 128).astype(np.int8)
    assert run_op("quantized_table", {"X": y, "Table": ident})["Out"].tolist() == y.tolist()
    relu = np.maximum(ident, 0).astype(np.int8)
    out = run_op("quantized_table", {"X": y, "Table": relu})["Out"]
    assert out.tolist() == np.maximum(y, 0).tolist()


def test_quantized_table_checks_its_inputs():
    with pytest.raises(ShapeError, match=r"Table must have shape \[256\], got \[255\]"):
        run_op("quantized_table", {"X": i8(2, 3), "Table": i8(255)})
    with pytest.raises(ShapeError, match="X must be int8"):
        run_op("quantized_table", {"X": np.zeros((2, 3), np.int16), "Table": i8(256)})
    with pytest.raises(ShapeError, match="Table must be int8"):
        run_op("quantized_table", {"X": i8(2, 3), "Table": np.zeros(256, np.int32)})


# -- integer only --------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["quantized_fc", "quantized_conv2d", "requantize",
                                "quantized_pool2d", "quantized_table"])
def test_region_kernels_use_no_float_arithmetic(fn):
    """The golden model's promise, checked on the source: no float types, no true division,
    no rounding functions inside the quantised region's kernels."""
    src = inspect.getsource(getattr(quant_kernels, fn))
    tree = ast.parse(src)
    banned = {"float", "float32", "float64", "rint", "round", "floor", "ceil", "true_divide",
              "divide"}
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Div), f"{fn}: true division"
        name = node.attr if isinstance(node, ast.Attribute) else \
            node.id if isinstance(node, ast.Name) else None
        assert name not in banned, f"{fn}: uses {name}"
