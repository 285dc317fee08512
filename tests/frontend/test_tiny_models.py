"""MLPerf Tiny's reference networks: the published topology (MACs, parameters, layer
shapes), a forward pass, training that lowers the loss, folding and quantising, and
the example script."""

import importlib.util
import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.frontend import models, tiny_models
from fluid_hw.passes import PassContext, QuantConfig, get_pass, inference_pipeline, quantize

ROOT = Path(__file__).resolve().parents[2]

#: builder -> input shape, classes (0: the autoencoder), exact MACs and parameters of
#: this build (Keras' "Total params": BN statistics included) and the published figures
#: (MLPerf Tiny / EEMBC: ResNet-8 12.5 M MACs, 78 k parameters; DS-CNN 2.7 M MACs and
#: 23 k trainable parameters; FC autoencoder 0.264 M MACs, 270 k parameters)
FIGURES = {
    "resnet8": ((3, 32, 32), 10, 12_501_632, 78_666, 78_186, 12.5e6, 78e3),
    "ds_cnn": ((1, 49, 10), 12, 2_656_768, 24_908, 23_756, 2.7e6, 23e3),
    "fc_autoencoder": ((640,), 0, 264_192, 269_992, 267_928, 0.264e6, 270e3),
}
NAMES = sorted(FIGURES)


def _build(name, **kw):
    return getattr(models, name)(**kw)  # through models' re-export


def _feed(name, m, n, seed=0):
    shape, classes = FIGURES[name][:2]
    rng = np.random.default_rng(seed)
    feed = {m.image.name: rng.standard_normal((n, *shape)).astype(np.float32)}
    if classes:
        feed["label"] = rng.integers(0, classes, (n, 1)).astype(np.int64)
    return feed


def _init(m, stats_seed=None):
    """A scope with the startup values; with ``stats_seed`` random BN statistics, so
    folding them is not trivial."""
    scope, exe = fluid.Scope(), fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
    if stats_seed is not None:
        rng = np.random.default_rng(stats_seed)
        for v in m.test_program.global_block().vars.values():
            if v.name.startswith("batch_norm") and v.persistable:
                lo = 0.5 if v.name.endswith(".w_2") else -0.5  # variance / the others
                scope.vars[v.name] = rng.uniform(lo, 1.5, tuple(v.shape)).astype(np.float32)
    return scope, exe


def _shape(program, name):
    return list(program.global_block().var(name).shape)


def _ops(program, kind):
    return [op for op in program.global_block().ops if op.type == kind]


@pytest.mark.parametrize("name", NAMES)
def test_macs_and_parameters_match_the_published_models(name):
    _, _, mac, params, trainable, pub_macs, pub_params = FIGURES[name]
    p = _build(name).test_program
    assert tiny_models.macs(p) == mac
    assert tiny_models.parameter_count(p) == params
    assert tiny_models.parameter_count(p, trainable_only=True) == trainable
    assert abs(mac / pub_macs - 1) < 0.03
    got = trainable if name == "ds_cnn" else params
    assert abs(got / pub_params - 1) < 0.035


def test_resnet8_layers():
    m = models.resnet8()
    p = m.test_program
    convs = _ops(p, "conv2d")
    assert len(convs) == 9 and len(_ops(p, "batch_norm")) == 7
    outs = [_shape(p, c.output("Output")[0])[1:] for c in convs]
    assert outs == [[16, 32, 32]] * 3 + [[32, 16, 16]] * 3 + [[64, 8, 8]] * 3
    # Keras 'same' with stride 2: the extra row and column at the bottom / right
    strided = [c for c in convs if c.attr("strides") == [2, 2]]
    assert [c.attr("paddings") for c in strided] == [[0, 1, 0, 1], [0, 0, 0, 0]] * 2
    assert [_shape(p, c.input("Filter")[0])[2:] for c in strided] == [[3, 3], [1, 1]] * 2
    joins = [op for op in _ops(p, "elementwise_add")
             if not p.global_block().var(op.input("Y")[0]).persistable]
    assert len(joins) == 3
    pool = _ops(p, "pool2d")[0]
    assert pool.attr("global_pooling") and pool.attr("pooling_type") == "avg"
    assert _shape(p, m.prediction.name) == [-1, 10]


def test_ds_cnn_layers():
    m = models.ds_cnn()
    p = m.test_program
    first = _ops(p, "conv2d")[0]
    assert first.attr("strides") == [2, 2] and first.attr("paddings") == [4, 5, 1, 1]
    assert _shape(p, first.output("Output")[0]) == [-1, 64, 25, 5]
    dw = _ops(p, "depthwise_conv2d")
    assert len(dw) == 4 and all(op.attr("groups") == 64 for op in dw)
    assert all(_shape(p, op.input("Filter")[0]) == [64, 1, 3, 3] for op in dw)
    assert len(_ops(p, "conv2d")) == 5 and len(_ops(p, "batch_norm")) == 9
    pool = _ops(p, "pool2d")[0]
    assert pool.attr("ksize") == [24, 5] and pool.attr("strides") == [24, 5]
    assert _shape(p, pool.output("Out")[0]) == [-1, 64, 1, 1]
    assert [op.attr("dropout_prob") for op in _ops(m.main, "dropout")] == \
        pytest.approx([0.2, 0.4])
    assert _shape(p, m.prediction.name) == [-1, 12]


def test_fc_autoencoder_layers():
    m = models.fc_autoencoder()
    p = m.test_program
    sizes = [_shape(p, op.input("Y")[0]) for op in _ops(p, "mul")]
    widths = [640] + [128] * 4 + [8] + [128] * 4 + [640]
    assert sizes == [[a, b] for a, b in itertools.pairwise(widths)]
    assert len(_ops(p, "batch_norm")) == 9 and len(_ops(p, "relu")) == 9
    assert m.feed_names == ["features"]
    assert _shape(p, m.prediction.name) == [-1, 640]


@pytest.mark.parametrize("name", NAMES)
def test_forward_pass_on_the_cpu(name):
    m = _build(name)
    scope, exe = _init(m)
    feed = _feed(name, m, 4)
    (pred,) = exe.run(m.test_program, feed=feed, fetch_list=[m.prediction], scope=scope)
    classes = FIGURES[name][1]
    assert pred.shape == (4, classes or 640) and np.isfinite(pred).all()
    if classes:
        np.testing.assert_allclose(pred.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_training_steps_lower_the_loss(name):
    m = _build(name, seed=3, optimizer=lambda: fluid.optimizer.Adam(learning_rate=0.003))
    scope, exe = _init(m)
    feed = _feed(name, m, 16, seed=1)

    def test_loss():
        (lv,) = exe.run(m.test_program, feed=feed, fetch_list=[m.loss], scope=scope)
        return float(lv.reshape(-1)[0])

    for _ in range(3):  # the running statistics settle on the batch
        exe.run(m.main, feed=feed, fetch_list=[m.loss], scope=scope)
    before = test_loss()
    for _ in range(8):
        exe.run(m.main, feed=feed, fetch_list=[m.loss], scope=scope)
    assert test_loss() < 0.95 * before


@pytest.mark.parametrize("name", NAMES)
def test_the_inference_pipeline_folds_every_batch_norm(name):
    m = _build(name)
    scope, exe = _init(m, stats_seed=2)
    fetch = [m.prediction.name]
    ctx = PassContext(scope=scope, executor=exe, feed_names=[m.image.name], fetch_names=fetch)
    out = inference_pipeline().run(m.test_program, ctx)
    types = Counter(op.type for op in out.global_block().ops)
    assert "batch_norm" not in types and "dropout" not in types
    if name == "fc_autoencoder":
        assert types["fc"] == 10 and "mul" not in types
    feed = _feed(name, m, 3)  # the test program still computes the loss: label too
    (want,) = exe.run(m.test_program, feed=feed, fetch_list=fetch, scope=fluid.Scope(scope))
    (got,) = exe.run(out, feed={m.image.name: feed[m.image.name]}, fetch_list=fetch,
                     scope=fluid.Scope(scope))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["ds_cnn", "fc_autoencoder"])
def test_int8_with_calibration(name):
    """DS-CNN quantises as built; the autoencoder once its batch norms are folded into the
    fc layers (quantize's own fuse step does not run fc_bn_fuse yet)."""
    m = _build(name)
    scope, exe = _init(m, stats_seed=2)
    fetch = [m.prediction.name]
    ctx = PassContext(scope=scope, executor=exe, feed_names=[m.image.name], fetch_names=fetch)
    program = m.test_program
    if name == "fc_autoencoder":
        program, _ = get_pass("prune").apply(program, ctx)
        program, changed = get_pass("fc_bn_fuse").apply(program, ctx)
        assert changed
    feeds = [_feed(name, m, 8, seed=s) for s in (5, 6)]
    cal = [{m.image.name: f[m.image.name]} for f in feeds]
    q = quantize(program, cal, QuantConfig(), scope=scope, executor=exe, fetch_names=fetch,
                 feed_names=[m.image.name])
    types = Counter(op.type for op in q.global_block().ops)
    assert types["quantize"] == 1 and types["dequantize"] == 1  # one int8 region
    assert types["quantized_fc"] + types["quantized_conv2d"] == 10
    assert "batch_norm" not in types
    (want,) = exe.run(m.test_program, feed=feeds[0], fetch_list=fetch, scope=fluid.Scope(scope))
    (got,) = exe.run(q, feed=cal[0], fetch_list=fetch, scope=fluid.Scope(scope))
    assert np.abs(got - want).max() <= 0.1 * np.abs(want).max()


def _example():
    spec = importlib.util.spec_from_file_location("train_tiny", ROOT / "examples/train_tiny.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NAMES)
def test_example_trains_and_saves_an_inference_model(name, tmp_path, capsys):
    ex = _example()
    out = tmp_path / name
    assert ex.main(["--model", name, "--epochs", "1", "--samples", "32", "--batch-size", "16",
                    "--out", str(out), "--calibration", str(tmp_path / "cal.npy")]) == 0
    assert "epoch   1/1  loss" in capsys.readouterr().out
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(out), exe)
        x = np.load(tmp_path / "cal.npy")[:2]
        (pred,) = exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches)
    assert pred.shape == (2, FIGURES[name][1] or 640)
