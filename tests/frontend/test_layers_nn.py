"""Each nn layer built under program_guard and run on the executor.

The op-level references live in tests/ops; here the checks are about what the
layers create (parameters, initialisers, attributes, op choice) and that the
built program runs and computes the right thing end to end.
"""

import math

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import ShapeError
from fluid_hw.frontend.initializer import Constant

RNG = np.random.default_rng(7)
layers = fluid.layers


def _run(main, startup, feed, fetch):
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    exe.run(startup)
    return exe, exe.run(main, feed=feed, fetch_list=fetch)


def _value(scope, name):
    return np.asarray(scope.find_var(name).get_tensor())


def _ops(prog):
    return [op.type for op in prog.global_block().ops]


def _conv_ref(x, w, pad):
    n, _, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, m, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,mchw->nm", xp[:, :, i:i + kh, j:j + kw], w)
    return out


def test_conv2d_layer(fresh):
    main, startup, scope = fresh
    x = layers.data("x", [3, 7, 5])
    y = layers.conv2d(x, num_filters=4, filter_size=3, padding=1, act="relu",
                      bias_attr=fluid.ParamAttr(name="cb", initializer=Constant(0.5)))
    assert y.shape == (-1, 4, 7, 5)
    assert _ops(main) == ["conv2d", "elementwise_add", "relu"]
    # Fluid's default filter initializer: Normal(0, sqrt(2 / (kh * kw * C_in)))
    init = next(op for op in startup.global_block().ops if op.type == "gaussian_random")
    assert init.attr("std") == pytest.approx(math.sqrt(2 / (3 * 3 * 3)))
    w_name = main.global_block().ops[0].input("Filter")[0]
    xv = RNG.standard_normal((2, 3, 7, 5)).astype("float32")
    _, (out,) = _run(main, startup, {"x": xv}, [y])
    want = np.maximum(_conv_ref(xv, _value(scope, w_name), 1) + 0.5, 0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups,filters,op", [(3, 6, "depthwise_conv2d"), (3, 3,
                                               "depthwise_conv2d"), (1, 6, "conv2d")])
def test_conv2d_layer_op_choice(fresh, groups, filters, op):
    main, startup, _ = fresh
    x = layers.data("x", [3, 8, 8])
    y = layers.conv2d(x, num_filters=filters, filter_size=[3, 2], stride=2, padding="SAME",
                      groups=groups, bias_attr=False)
    conv = main.global_block().ops[0]
    assert conv.type == op and conv.attr("padding_algorithm") == "SAME"
    assert list(main.global_block().var(conv.input("Filter")[0]).shape) == [filters,
                                                                          3 // groups, 3, 2]
    _, (out,) = _run(main, startup, {"x": np.ones((1, 3, 8, 8), "float32")}, [y])
    assert out.shape == (1, filters, 4, 4) == (1, *y.shape[1:])


def test_conv2d_layer_errors(fresh):
    x = layers.data("x", [3, 7, 5])
    with pytest.raises(ShapeError, match="divisible by groups=2"):
        layers.conv2d(x, 4, 3, groups=2)
    with pytest.raises(ShapeError, match="padding"):
        layers.conv2d(x, 4, 3, padding=[1, 1, 1])


def test_pool2d_layer(fresh):
    main, startup, _ = fresh
    x = layers.data("x", [2, 7, 5])
    mx = layers.pool2d(x, pool_size=3, pool_stride=2, pool_padding=1)
    avg = layers.pool2d(x, pool_size=2, pool_type="avg", pool_stride=2, ceil_mode=True)
    glob = layers.pool2d(x, pool_type="avg", global_pooling=True)
    ada = layers.adaptive_pool2d(x, pool_size=[2, 2], pool_type="max")
    assert mx.shape == (-1, 2, 4, 3) and avg.shape == (-1, 2, 4, 3)
    xv = RNG.standard_normal((2, 2, 7, 5)).astype("float32")
    _, (m, a, g, ad) = _run(main, startup, {"x": xv}, [mx, avg, glob, ada])
    assert m[0, 0, 0, 0] == xv[0, 0, :2, :2].max()
    assert a[1, 1, 3, 2] == pytest.approx(xv[1, 1, 6, 4])  # ceil_mode: a 1x1 window
    np.testing.assert_allclose(g[..., 0, 0], xv.mean(axis=(2, 3)), rtol=1e-5)
    assert ad[0, 0, 1, 1] == xv[0, 0, 3:, 2:].max()
    with pytest.raises(ShapeError, match="pool_size must be given"):
        layers.pool2d(x)


def test_batch_norm_layer(fresh):
    main, startup, scope = fresh
    x = layers.data("x", [3, 4, 4])
    y = layers.batch_norm(x, act="relu", moving_mean_name="bn_mean",
                          moving_variance_name="bn_var", momentum=0.5)
    gb = main.global_block()
    mean, var = gb.var("bn_mean"), gb.var("bn_var")
    for v in (mean, var):
        assert v.persistable and v.stop_gradient and not v.trainable
    scale, bias = (gb.var(main.global_block().ops[0].input(s)[0]) for s in ("Scale", "Bias"))
    assert scale.trainable and bias.trainable
    bn = gb.ops[0]
    assert bn.output("MeanOut") == ["bn_mean"] and bn.output("VarianceOut") == ["bn_var"]
    test_prog = main.clone(for_test=True)
    assert test_prog.global_block().ops[0].attr("is_test") is True

    xv = (RNG.standard_normal((5, 3, 4, 4)) * 3 + 2).astype("float32")
    exe, (out,) = _run(main, startup, {"x": xv}, [y])
    bm = xv.astype(np.float64).mean(axis=(0, 2, 3))
    bv = xv.astype(np.float64).var(axis=(0, 2, 3))  # biased, as Fluid uses it
    want = np.maximum((xv - bm.reshape(1, 3, 1, 1)) / np.sqrt(bv.reshape(1, 3, 1, 1) + 1e-5), 0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    # running statistics updated in the scope: 0.5 * init + 0.5 * batch
    np.testing.assert_allclose(_value(scope, "bn_mean"), 0.5 * bm, rtol=1e-5)
    np.testing.assert_allclose(_value(scope, "bn_var"), 0.5 + 0.5 * bv, rtol=1e-5)

    (tout,) = exe.run(test_prog, feed={"x": xv}, fetch_list=[y.name])
    rm, rv = 0.5 * bm.reshape(1, 3, 1, 1), (0.5 + 0.5 * bv).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(tout, np.maximum((xv - rm) / np.sqrt(rv + 1e-5), 0),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_value(scope, "bn_mean"), 0.5 * bm, rtol=1e-5)  # unchanged


def test_batch_norm_layer_2d(fresh):
    main, startup, _ = fresh
    x = layers.data("x", [6])
    y = layers.batch_norm(x, is_test=True)
    xv = RNG.standard_normal((4, 6)).astype("float32")
    _, (out,) = _run(main, startup, {"x": xv}, [y])
    np.testing.assert_allclose(out, xv / np.sqrt(1 + 1e-5), rtol=1e-5)


def test_embedding_layer(fresh):
    main, startup, scope = fresh
    ids = layers.data("ids", [1], dtype="int64")
    emb = layers.embedding(ids, size=[10, 4], padding_idx=-1)
    op = main.global_block().ops[0]
    assert op.type == "lookup_table" and op.attr("padding_idx") == 9
    idv = np.array([[3], [9], [0]], "int64")
    _, (out,) = _run(main, startup, {"ids": idv}, [emb])
    table = _value(scope, op.input("W")[0])
    np.testing.assert_array_equal(out, np.stack([table[3], np.zeros(4, "float32"), table[0]]))
    assert emb.shape == (-1, 4)


def test_dropout_layer(fresh):
    main, startup, _ = fresh
    main.random_seed = 11
    x = layers.data("x", [50])
    y = layers.dropout(x, dropout_prob=0.4)
    z = layers.dropout(x, dropout_prob=0.4, dropout_implementation="upscale_in_train",
                       seed=3)
    d1, d2 = main.global_block().ops
    assert (d1.attr("seed"), d1.attr("fix_seed")) == (11, True)  # program random_seed
    assert (d2.attr("seed"), d2.attr("fix_seed")) == (3, True)
    xv = np.ones((40, 50), "float32")
    exe, (a, b) = _run(main, startup, {"x": xv}, [y, z])
    assert set(np.unique(a)) <= {0.0, 1.0} and abs(a.mean() - 0.6) < 0.05
    np.testing.assert_allclose(np.unique(b), [0.0, 1 / 0.6], rtol=1e-6)
    test_prog = main.clone(for_test=True)
    a, b = exe.run(test_prog, feed={"x": xv}, fetch_list=[y.name, z.name])
    np.testing.assert_allclose(a, xv * 0.6, rtol=1e-6)
    np.testing.assert_array_equal(b, xv)


def test_dropout_layer_without_seed(fresh):
    main, _, _ = fresh
    layers.dropout(layers.data("x", [5]), 0.5)
    op = main.global_block().ops[0]
    assert (op.attr("seed"), op.attr("fix_seed")) == (0, False)


def test_cross_entropy_and_accuracy_layers(fresh):
    main, startup, _ = fresh
    x = layers.data("x", [3])
    label = layers.data("label", [1], dtype="int64")
    helper = fluid.LayerHelper("softmax")  # the op, independent of the softmax layer
    prob = helper.create_variable_for_type_inference()
    helper.append_op("softmax", {"X": x}, {"Out": prob})
    ce = layers.cross_entropy(prob, label)
    correct = main.global_block().create_var(name="correct", dtype="int32")
    acc = layers.accuracy(prob, label, k=2, correct=correct)
    xv = np.array([[3, 2, 1], [1, 2, 3], [1, 3, 2], [3, 1, 2]], "float32")
    lv = np.array([[0], [0], [2], [1]], "int64")
    _, (loss, a, c) = _run(main, startup, {"x": xv, "label": lv}, [ce, acc, correct])
    p = np.exp(xv) / np.exp(xv).sum(1, keepdims=True)
    np.testing.assert_allclose(loss[:, 0], -np.log(p[np.arange(4), lv[:, 0]]), rtol=1e-5)
    # top-2 of each row: {0,1}, {2,1}, {1,2}, {0,2}: labels 0, 2 hit; 0, 1 miss
    assert a.tolist() == [0.5] and c.tolist() == [2]


def test_softmax_with_cross_entropy_layer(fresh):
    main, startup, _ = fresh
    logits = layers.data("logits", [4])
    label = layers.data("label", [4])
    loss, sm = layers.softmax_with_cross_entropy(logits, label, soft_label=True,
                                                 return_softmax=True)
    only = layers.softmax_with_cross_entropy(logits, layers.data("hard", [1], dtype="int64"))
    assert loss.shape == (-1, 1) and sm.shape == (-1, 4) and only.shape == (-1, 1)
    zv = RNG.standard_normal((3, 4)).astype("float32")
    lv = np.full((3, 4), 0.25, "float32")
    hv = np.array([[0], [3], [1]], "int64")
    _, (lo, s, h) = _run(main, startup, {"logits": zv, "label": lv, "hard": hv},
                         [loss, sm, only])
    logp = zv - np.log(np.exp(zv).sum(1, keepdims=True))
    np.testing.assert_allclose(s, np.exp(logp), rtol=1e-5)
    np.testing.assert_allclose(lo[:, 0], -logp.mean(1), rtol=1e-5)
    np.testing.assert_allclose(h[:, 0], -logp[np.arange(3), hv[:, 0]], rtol=1e-5)


def test_topk_and_argmax_layers(fresh):
    main, startup, _ = fresh
    x = layers.data("x", [5])
    vals, idx = layers.topk(x, k=2)
    am = layers.argmax(x, axis=1)
    assert idx.stop_gradient and am.stop_gradient and am.shape == (-1,)
    xv = np.array([[1, 4, 4, 0, 2], [5, 1, 5, 5, 0]], "float32")
    _, (v, i, a) = _run(main, startup, {"x": xv}, [vals, idx, am])
    assert v.tolist() == [[4, 4], [5, 5]] and i.tolist() == [[1, 2], [0, 2]]
    assert a.dtype == np.int64 and a.tolist() == [1, 0]
