"""conv3d, conv2d_transpose, conv3d_transpose, pool3d and adaptive_pool3d (issue 20)
against naive loops over every output (or input) cell."""

import itertools

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from tests.op_harness import run_op

R = np.random.default_rng(17)


def naive_conv(x, w, s, p, d, g):
    n, c = x.shape[:2]
    m = w.shape[0]
    k = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0), *((v, v) for v in p)])
    out_sp = [(x.shape[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
              for i in range(len(k))]
    out = np.zeros((n, m, *out_sp))
    cg, mg = c // g, m // g
    for o in range(m):
        gi = o // mg
        for pos in itertools.product(*(range(v) for v in out_sp)):
            acc = np.zeros(n)
            for t in itertools.product(*(range(v) for v in k)):
                idx = tuple(pos[i] * s[i] + t[i] * d[i] for i in range(len(k)))
                acc += np.einsum("nc,c->n", xp[(slice(None), slice(gi * cg, (gi + 1) * cg),
                                                *idx)], w[(o, slice(None), *t)])
            out[(slice(None), o, *pos)] = acc
    return out


def naive_convt(x, w, s, p, d, g, out_sp):
    n, c = x.shape[:2]
    mg = w.shape[1]
    k = w.shape[2:]
    full = [(x.shape[2 + i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(len(k))]
    full = [max(f, o + 2 * pi) for f, o, pi in zip(full, out_sp, p)]
    out = np.zeros((n, mg * g, *full))
    cg = c // g
    for ci in range(c):
        gi = ci // cg
        for pos in itertools.product(*(range(v) for v in x.shape[2:])):
            for t in itertools.product(*(range(v) for v in k)):
                idx = tuple(pos[i] * s[i] + t[i] * d[i] for i in range(len(k)))
                out[(slice(None), slice(gi * mg, (gi + 1) * mg), *idx)] += \
                    x[(slice(None), ci, *pos)][:, None] * w[(ci, slice(None), *t)][None, :]
    return out[(slice(None), slice(None), *(slice(pi, pi + o) for pi, o in zip(p, out_sp)))]


def test_conv3d_matches_naive():
    x = R.normal(size=(2, 4, 4, 5, 3))
    w = R.normal(size=(6, 2, 2, 3, 1))
    got = run_op("conv3d", {"Input": x, "Filter": w},
                 {"strides": [1, 2, 1], "paddings": [1, 0, 1], "dilations": [2, 1, 1],
                  "groups": 2})["Output"]
    np.testing.assert_allclose(got, naive_conv(x, w, [1, 2, 1], [1, 0, 1], [2, 1, 1], 2),
                               rtol=1e-10)


@pytest.mark.parametrize("nd,s,p,d,g,extra", [(2, [2, 2], [1, 0], [1, 1], 1, 0),
                                              (2, [2, 1], [0, 1], [1, 2], 2, 1),
                                              (3, [1, 2, 1], [0, 0, 1], [1, 1, 1], 1, 0)])
def test_conv_transpose_matches_naive(nd, s, p, d, g, extra):
    x = R.normal(size=(2, 4, *([3] * nd)))
    w = R.normal(size=(4, 3, *([2] * nd)))
    base = [(3 - 1) * s[i] - 2 * p[i] + d[i] * (2 - 1) + 1 for i in range(nd)]
    out_sp = [b + (extra if s[i] > 1 else 0) for i, b in enumerate(base)]
    got = run_op(f"conv{nd}d_transpose", {"Input": x, "Filter": w},
                 {"strides": s, "paddings": p, "dilations": d, "groups": g,
                  "output_size": out_sp if extra else []})["Output"]
    np.testing.assert_allclose(got, naive_convt(x, w, s, p, d, g, out_sp), rtol=1e-10)


def naive_pool(x, k, s, p, is_max, exclusive):
    out_sp = [(x.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(3)]
    out = np.zeros((*x.shape[:2], *out_sp))
    for pos in itertools.product(*(range(v) for v in out_sp)):
        lo = [pos[i] * s[i] - p[i] for i in range(3)]
        sl = tuple(slice(max(lo[i], 0), min(lo[i] + k[i], x.shape[2 + i])) for i in range(3))
        blk = x[(slice(None), slice(None), *sl)]
        if is_max:
            v = blk.max(axis=(2, 3, 4))
        else:
            v = blk.sum(axis=(2, 3, 4)) / (blk[0, 0].size if exclusive else np.prod(k))
        out[(slice(None), slice(None), *pos)] = v
    return out


@pytest.mark.parametrize("pool_type,exclusive", [("max", True), ("avg", True), ("avg", False)])
def test_pool3d_matches_naive(pool_type, exclusive):
    x = R.normal(size=(2, 3, 5, 4, 4))
    got = run_op("pool3d", {"X": x}, {"pooling_type": pool_type, "ksize": [3, 2, 2],
                                      "strides": [2, 2, 1], "paddings": [1, 0, 1],
                                      "exclusive": exclusive})["Out"]
    np.testing.assert_allclose(got, naive_pool(x, [3, 2, 2], [2, 2, 1], [1, 0, 1],
                                               pool_type == "max", exclusive), rtol=1e-10)


def test_layers_build_and_run():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        v = layers.data("v", shape=[2, 4, 4, 4], dtype="float32")
        img = layers.data("img", shape=[3, 5, 5], dtype="float32")
        c3 = layers.conv3d(v, 4, 3, padding=1, act="relu")
        ct = layers.conv2d_transpose(img, 2, output_size=[10, 10], stride=2, padding=0)
        c3t = layers.conv3d_transpose(v, 2, filter_size=2, stride=2)
        p3 = layers.pool3d(c3, pool_size=2, pool_stride=2)
        ap = layers.adaptive_pool3d(v, [1, 2, 3], pool_type="avg")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(start)
    vv = R.normal(size=(2, 2, 4, 4, 4)).astype(np.float32)
    outs = exe.run(main, feed={"v": vv, "img": R.normal(size=(2, 3, 5, 5)).astype(np.float32)},
                   fetch_list=[c3, ct, c3t, p3, ap])
    assert [o.shape for o in outs] == [(2, 4, 4, 4, 4), (2, 2, 10, 10), (2, 2, 8, 8, 8),
                                      (2, 4, 2, 2, 2), (2, 2, 1, 2, 3)]
    # adaptive bins of 4: [0, 4) / [0, 2), [2, 4) / [0, 2), [1, 3), [2, 4)
    np.testing.assert_allclose(outs[4][:, :, 0, 1, 2], vv[:, :, :, 2:, 2:].mean(axis=(2, 3, 4)),
                               rtol=1e-5)


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        img = layers.data("img", shape=[3, 5, 5], dtype="float32")
        with pytest.raises(Exception, match="conv3d: input 'img' must be 5-D"):
            layers.conv3d(img, 2, 3)
        with pytest.raises(ValueError, match="conv2d_transpose: give filter_size"):
            layers.conv2d_transpose(img, 2)
        with pytest.raises(ValueError, match="pool3d: pool_type"):
            layers.pool3d(img, 2, pool_type="min")
