"""Reference tests of conv2d, depthwise_conv2d, pool2d, batch_norm, dropout, lookup_table.

Each reference is written independently of the kernels: convolution and pooling
by explicit loops over output pixels with Fluid's window-clipping rules.
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import ExecutionError, OpAttrError, ShapeError
from tests.op_harness import build_op, run_op

RNG = np.random.default_rng(1234)


def _randn(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def _unchanged(inputs):
    """Snapshot inputs; call the result to assert no kernel changed them in place."""
    saved = {k: np.array(v, copy=True) for k, v in inputs.items()}

    def check():
        for k, v in inputs.items():
            np.testing.assert_array_equal(v, saved[k], err_msg=f"input {k} was modified")

    return check


# -- conv2d ------------------------------------------------------------------


def _four(p):
    return [p[0], p[0], p[1], p[1]] if len(p) == 2 else list(p)


def ref_conv2d(x, w, strides, pads4, dilations, groups):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    t, b, l, r = pads4
    xp = np.zeros((n, c, h + t + b, wd + l + r), np.float64)
    xp[:, :, t:t + h, l:l + wd] = x
    (sh, sw), (dh, dw) = strides, dilations
    oh = (h + t + b - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + l + r - (dw * (kw - 1) + 1)) // sw + 1
    out = np.zeros((n, m, oh, ow))
    per_group = m // groups
    for o in range(m):
        g = o // per_group
        for i in range(oh):
            for j in range(ow):
                acc = np.zeros(n)
                for ci in range(cg):
                    for a in range(kh):
                        for bb in range(kw):
                            acc += (xp[:, g * cg + ci, i * sh + a * dh, j * sw + bb * dw]
                                    * w[o, ci, a, bb])
                out[:, o, i, j] = acc
    return out


def _same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


CONV_CASES = [
    # id, x shape, w shape, attrs
    ("plain", (2, 3, 7, 5), (4, 3, 3, 3), {}),
    ("stride2_pad1", (2, 3, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "paddings": [1, 1]}),
    ("asym_pad4", (1, 2, 7, 5), (3, 2, 3, 3), {"paddings": [1, 0, 2, 1], "strides": [2, 1]}),
    ("dilation2", (1, 2, 7, 6), (2, 2, 3, 3), {"dilations": [2, 2], "paddings": [2, 1]}),
    ("groups2", (2, 4, 7, 5), (6, 2, 3, 3), {"groups": 2, "paddings": [1, 1]}),
    ("rect_kernel", (1, 3, 6, 7), (2, 3, 2, 3), {"strides": [2, 3], "paddings": [0, 1]}),
    ("same", (1, 2, 7, 5), (3, 2, 3, 3), {"padding_algorithm": "SAME", "strides": [2, 2]}),
    ("valid", (1, 2, 7, 5), (3, 2, 3, 3), {"padding_algorithm": "VALID",
                                           "paddings": [5, 5]}),
]


@pytest.mark.parametrize("xs,ws,attrs", [c[1:] for c in CONV_CASES],
                         ids=[c[0] for c in CONV_CASES])
def test_conv2d_matches_loops(xs, ws, attrs):
    x, w = _randn(*xs), _randn(*ws)
    check = _unchanged({"x": x, "w": w})
    out = run_op("conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
    check()
    algo = attrs.get("padding_algorithm", "EXPLICIT")
    strides = attrs.get("strides", [1, 1])
    if algo == "SAME":
        pads = [*_same_pads(xs[2], ws[2], strides[0]), *_same_pads(xs[3], ws[3], strides[1])]
    elif algo == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = _four(attrs.get("paddings", [0, 0]))
    want = ref_conv2d(x, w, strides, pads, attrs.get("dilations", [1, 1]),
                      attrs.get("groups", 1))
    assert out.dtype == np.float32 and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_conv2d_matches_loops(multiplier):
    x = _randn(2, 3, 7, 5)
    w = _randn(3 * multiplier, 1, 3, 3)
    attrs = {"groups": 3, "strides": [2, 2], "paddings": [1, 1]}
    out = run_op("depthwise_conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
    want = ref_conv2d(x, w, [2, 2], [1, 1, 1, 1], [1, 1], 3)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_conv2d_float64_and_unknown_batch():
    x, w = _randn(3, 2, 5, 5, dtype="float64"), _randn(2, 2, 3, 3, dtype="float64")
    out = run_op("conv2d", {"Input": x, "Filter": w}, {"paddings": [1, 1]},
                 batch_dims=True)["Output"]
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, ref_conv2d(x, w, [1, 1], [1] * 4, [1, 1], 1), rtol=1e-10)


def _conv_error(x_shape, w_shape, attrs=None, op="conv2d"):
    return lambda: build_op(op, {"Input": np.zeros(x_shape, "float32"),
                                 "Filter": np.zeros(w_shape, "float32")}, attrs)


@pytest.mark.parametrize("make,err,words", [
    (_conv_error((1, 3, 7, 5), (2, 4, 3, 3)), ShapeError,
     ["conv2d", "3 channels", "expects 4", "[1, 3, 7, 5]", "[2, 4, 3, 3]"]),
    (_conv_error((1, 4, 7, 5), (3, 2, 3, 3), {"groups": 2}), ShapeError,
     ["conv2d", "3 filters", "groups=2"]),
    (_conv_error((1, 2, 2, 5), (2, 2, 3, 3)), ShapeError, ["conv2d", "height", "[1, 2, 2, 5]"]),
    (_conv_error((1, 2, 7, 5), (2, 2, 3)), ShapeError, ["conv2d", "Filter", "4-D"]),
    (_conv_error((1, 4, 7, 5), (4, 2, 3, 3), {"groups": 2}, "depthwise_conv2d"), ShapeError,
     ["depthwise_conv2d", "groups == input channels"]),
    (_conv_error((1, 2, 7, 5), (2, 2, 3, 3), {"strides": [0, 1]}), OpAttrError,
     ["conv2d", "strides", "[0, 1]"]),
    (_conv_error((1, 2, 7, 5), (2, 2, 3, 3), {"paddings": [1, 1, 1]}), OpAttrError,
     ["conv2d", "paddings", "2 or 4"]),
    (_conv_error((1, 2, 7, 5), (2, 2, 3, 3), {"data_format": "NHWC"}), OpAttrError,
     ["conv2d", "data_format", "NCHW"]),
], ids=["channels", "groups", "window", "filter_rank", "depthwise", "stride", "pads",
        "layout"])
def test_conv2d_inference_errors(make, err, words):
    with pytest.raises(err) as info:
        make()
    for word in words:
        assert word in str(info.value)


# -- pool2d ------------------------------------------------------------------


def ref_pool2d(x, ksize, strides, pads4, pool_type, ceil_mode=False, exclusive=True):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw) = ksize, strides
    t, b, l, r = pads4
    extra_h = sh - 1 if ceil_mode else 0
    extra_w = sw - 1 if ceil_mode else 0
    oh = (h + t + b - kh + extra_h) // sh + 1
    ow = (w + l + r - kw + extra_w) // sw + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * sh - t, j * sw - l
            he, we = min(hs + kh, h), min(ws + kw, w)
            hs, ws = max(hs, 0), max(ws, 0)
            region = x[:, :, hs:he, ws:we].astype(np.float64)
            if region.size == 0:  # only padding (ceil_mode, stride > kernel): Fluid's rule
                out[:, :, i, j] = np.finfo(np.float32).min if pool_type == "max" else 0.0
            elif pool_type == "max":
                out[:, :, i, j] = region.max(axis=(2, 3))
            else:
                div = region.shape[2] * region.shape[3] if exclusive else kh * kw
                out[:, :, i, j] = region.sum(axis=(2, 3)) / div
    return out


POOL_CASES = [
    ("k3s2p1", dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1])),
    ("k2s2_ceil", dict(ksize=[2, 2], strides=[2, 2], paddings=[0, 0], ceil_mode=True)),
    ("k3s2_asym_ceil", dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 0, 0, 1],
                            ceil_mode=True)),
    ("k3s1p1_inclusive", dict(ksize=[3, 3], strides=[1, 1], paddings=[1, 1],
                              exclusive=False)),
    ("k3s2_ceil_inclusive", dict(ksize=[3, 2], strides=[2, 3], paddings=[1, 1],
                                 ceil_mode=True, exclusive=False)),
    ("k2x3_s1", dict(ksize=[2, 3], strides=[1, 2], paddings=[0, 0])),
]


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("attrs", [c[1] for c in POOL_CASES], ids=[c[0] for c in POOL_CASES])
def test_pool2d_matches_loops(pool_type, attrs):
    x = _randn(2, 3, 7, 5)
    check = _unchanged({"x": x})
    out = run_op("pool2d", {"X": x}, {**attrs, "pooling_type": pool_type})["Out"]
    check()
    want = ref_pool2d(x, attrs["ksize"], attrs["strides"], _four(attrs["paddings"]), pool_type,
                      attrs.get("ceil_mode", False), attrs.get("exclusive", True))
    assert out.dtype == np.float32 and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_pool2d_global(pool_type):
    x = _randn(2, 3, 7, 5)
    out = run_op("pool2d", {"X": x}, {"pooling_type": pool_type, "ksize": [2, 2],
                                      "paddings": [1, 1], "global_pooling": True})["Out"]
    red = np.max if pool_type == "max" else np.mean
    np.testing.assert_allclose(out, red(x.astype(np.float64), axis=(2, 3), keepdims=True),
                               rtol=1e-5)


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("out_hw", [[3, 2], [7, 5], [1, 1], [4, 4]])
def test_pool2d_adaptive(pool_type, out_hw):
    x = _randn(2, 3, 7, 5)
    out = run_op("pool2d", {"X": x}, {"pooling_type": pool_type, "ksize": out_hw,
                                      "adaptive": True})["Out"]
    h, w = x.shape[2:]
    want = np.zeros((2, 3, *out_hw))
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            hs, he = (i * h) // out_hw[0], -(-((i + 1) * h) // out_hw[0])
            ws, we = (j * w) // out_hw[1], -(-((j + 1) * w) // out_hw[1])
            region = x[:, :, hs:he, ws:we].astype(np.float64)
            want[:, :, i, j] = region.max((2, 3)) if pool_type == "max" else region.mean((2, 3))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_pool2d_same_padding():
    x = _randn(1, 2, 7, 5)
    out = run_op("pool2d", {"X": x}, {"pooling_type": "max", "ksize": [3, 3],
                                      "strides": [2, 2], "padding_algorithm": "SAME"})["Out"]
    pads = [*_same_pads(7, 3, 2), *_same_pads(5, 3, 2)]
    np.testing.assert_allclose(out, ref_pool2d(x, [3, 3], [2, 2], pads, "max"))
    assert out.shape == (1, 2, 4, 3)


@pytest.mark.parametrize("attrs,err,words", [
    ({"ksize": [9, 3]}, ShapeError, ["pool2d", "height", "[1, 2, 7, 5]"]),
    ({"ksize": [3]}, OpAttrError, ["pool2d", "ksize"]),
    ({"ksize": [3, 3], "pooling_type": "sum"}, OpAttrError, ["pooling_type", "'max'"]),
    ({"ksize": [3, 3], "strides": [1, -1]}, OpAttrError, ["strides"]),
])
def test_pool2d_inference_errors(attrs, err, words):
    with pytest.raises(err) as info:
        build_op("pool2d", {"X": np.zeros((1, 2, 7, 5), "float32")}, attrs)
    for word in words:
        assert word in str(info.value)


# -- batch_norm --------------------------------------------------------------

BN_OUTS = ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"]


def _bn_inputs(shape, channels):
    return {"X": _randn(*shape) * 2 + 1, "Scale": _randn(channels),
            "Bias": _randn(channels), "Mean": _randn(channels),
            "Variance": RNG.uniform(0.5, 2.0, channels).astype("float32")}


@pytest.mark.parametrize("shape,layout", [((4, 3, 5, 2), "NCHW"), ((6, 3), "NCHW"),
                                          ((4, 5, 2, 3), "NHWC"), ((2, 3, 4), "NCHW")])
def test_batch_norm_training(shape, layout):
    ins = _bn_inputs(shape, 3)
    check = _unchanged(ins)
    eps, mom = 1e-4, 0.8
    res = run_op("batch_norm", ins, {"epsilon": eps, "momentum": mom, "data_layout": layout},
                 outputs=BN_OUTS)
    check()
    x = ins["X"].astype(np.float64)
    xc = np.moveaxis(x, -1 if layout == "NHWC" else 1, -1).reshape(-1, 3)  # rows x channels
    mean = xc.mean(axis=0)
    var = ((xc - mean) ** 2).sum(axis=0) / xc.shape[0]  # biased
    yc = (xc - mean) / np.sqrt(var + eps) * ins["Scale"] + ins["Bias"]
    axis = len(shape) - 1 if layout == "NHWC" else 1
    moved = list(np.moveaxis(x, axis, -1).shape)
    want_y = np.moveaxis(yc.reshape(moved), -1, axis)
    np.testing.assert_allclose(res["Y"], want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["MeanOut"], mom * ins["Mean"] + (1 - mom) * mean, rtol=1e-5)
    np.testing.assert_allclose(res["VarianceOut"], mom * ins["Variance"] + (1 - mom) * var,
                               rtol=1e-5)
    np.testing.assert_allclose(res["SavedMean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res["SavedVariance"], 1 / np.sqrt(var + eps), rtol=1e-5)
    assert res["Y"].dtype == np.float32 and res["MeanOut"].dtype == np.float32


@pytest.mark.parametrize("attrs", [{"is_test": True}, {"use_global_stats": True}])
def test_batch_norm_running_stats(attrs):
    ins = _bn_inputs((4, 3, 5, 2), 3)
    res = run_op("batch_norm", ins, attrs, outputs=BN_OUTS)
    x = ins["X"].astype(np.float64)
    c = (1, 3, 1, 1)
    want = ((x - ins["Mean"].reshape(c)) / np.sqrt(ins["Variance"].reshape(c) + 1e-5)
            * ins["Scale"].reshape(c) + ins["Bias"].reshape(c))
    np.testing.assert_allclose(res["Y"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(res["MeanOut"], ins["Mean"])
    np.testing.assert_array_equal(res["VarianceOut"], ins["Variance"])


def test_batch_norm_errors():
    ins = _bn_inputs((4, 3, 5, 2), 3)
    ins["Scale"] = _randn(4)
    with pytest.raises(ShapeError) as info:
        build_op("batch_norm", ins)
    assert "batch_norm" in str(info.value) and "Scale" in str(info.value)
    assert "[4, 3, 5, 2]" in str(info.value)
    with pytest.raises(OpAttrError, match="epsilon"):
        build_op("batch_norm", _bn_inputs((4, 3), 3), {"epsilon": 0.1})


# -- dropout -----------------------------------------------------------------


@pytest.mark.parametrize("impl,scale", [("downgrade_in_infer", 0.7), ("upscale_in_train", 1.0)])
def test_dropout_inference(impl, scale):
    x = _randn(4, 5)
    out = run_op("dropout", {"X": x}, {"dropout_prob": 0.3, "is_test": True,
                                       "dropout_implementation": impl})["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x * scale, rtol=1e-6)


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_training_mask(impl):
    x = RNG.uniform(1, 2, (200, 100)).astype("float32")
    p = 0.3
    res = run_op("dropout", {"X": x}, {"dropout_prob": p, "dropout_implementation": impl,
                                       "seed": 5, "fix_seed": True}, outputs=["Out", "Mask"])
    mask = res["Mask"]
    assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
    assert abs(mask.mean() - (1 - p)) < 0.01  # 20000 draws: sd 0.0032
    want = x * mask / ((1 - p) if impl == "upscale_in_train" else 1)
    np.testing.assert_allclose(res["Out"], want, rtol=1e-6)
    assert res["Out"].dtype == np.float32


def _dropout_program(seed, fix_seed=True):
    prog, feed, outs = build_op("dropout", {"X": np.ones((50, 40), "float32")},
                                {"dropout_prob": 0.5, "seed": seed, "fix_seed": fix_seed},
                                outputs=["Out", "Mask"])
    return prog, feed, outs["Mask"][0]


def _masks(seed, runs, exe_seed=0, fix_seed=True):
    prog, feed, mask = _dropout_program(seed, fix_seed)
    exe = fluid.Executor(fluid.CPUPlace(), seed=exe_seed)
    with fluid.scope_guard(fluid.Scope()):
        return [exe.run(prog, feed=feed, fetch_list=[mask])[0] for _ in range(runs)]


def test_dropout_seed_determinism():
    a1, a2 = _masks(7, 2, exe_seed=1)
    b1, b2 = _masks(7, 2, exe_seed=2)  # a fixed seed ignores the executor's stream
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert (a1 != a2).any(), "each run must draw a new mask"
    (c1,) = _masks(8, 1)
    assert (a1 != c1).any(), "another seed gives another mask"
    # without fix_seed the seed attribute is ignored (Fluid): the executor's stream decides
    (d1,) = _masks(7, 1, exe_seed=1, fix_seed=False)
    (e1,) = _masks(7, 1, exe_seed=2, fix_seed=False)
    assert (d1 != e1).any()


@pytest.mark.parametrize("p,impl", [(1.0, "upscale_in_train"), (1.0, "downgrade_in_infer"),
                                    (0.0, "upscale_in_train")])
def test_dropout_extreme_probabilities(p, impl):
    x = _randn(6, 7)
    res = run_op("dropout", {"X": x}, {"dropout_prob": p, "dropout_implementation": impl},
                 outputs=["Out", "Mask"])
    np.testing.assert_array_equal(res["Out"], x * (1 - p))
    assert res["Mask"].sum() == x.size * (1 - p)


def test_dropout_bad_probability():
    with pytest.raises(OpAttrError, match=r"dropout.*dropout_prob must be in \[0, 1\]"):
        build_op("dropout", {"X": np.zeros((2, 2), "float32")}, {"dropout_prob": 1.5})


# -- lookup_table ------------------------------------------------------------


@pytest.mark.parametrize("ids_shape", [(5, 1), (2, 3, 1), (1,)])
@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_lookup_table(ids_shape, padding_idx):
    w = _randn(6, 4)
    ids = RNG.integers(0, 6, ids_shape).astype("int64")
    ids.reshape(-1)[0] = 2
    check = _unchanged({"w": w, "ids": ids})
    out = run_op("lookup_table", {"W": w, "Ids": ids}, {"padding_idx": padding_idx})["Out"]
    check()
    want = np.zeros((*ids_shape[:-1], 4), np.float32)
    for pos in np.ndindex(*ids_shape[:-1]):
        i = int(ids[(*pos, 0)])
        want[pos] = 0 if i == padding_idx else w[i]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("bad", [6, -1])
def test_lookup_table_id_out_of_range(bad):
    ids = np.array([[1], [bad], [0]], "int64")
    with pytest.raises(ExecutionError) as info:
        run_op("lookup_table", {"W": _randn(6, 4), "Ids": ids})
    msg = str(info.value)
    assert "lookup_table" in msg and str(bad) in msg and "[0, 6)" in msg


@pytest.mark.parametrize("ids,attrs,err,word", [
    # int32 Ids build (Fluid checks their dtype when the op runs: tests/compat)
    (np.zeros((3, 2), "int64"), {}, ShapeError, "last dimension of Ids must be 1"),
    (np.zeros((3, 1), "int64"), {"padding_idx": 6}, OpAttrError, "padding_idx 6"),
])
def test_lookup_table_errors(ids, attrs, err, word):
    with pytest.raises(err) as info:
        build_op("lookup_table", {"W": _randn(6, 4), "Ids": ids}, attrs)
    assert "lookup_table" in str(info.value) and word in str(info.value)
