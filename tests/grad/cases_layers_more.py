"""Gradient checks through the composite layers of issue 20 (loss_more.py, nn_more.py):
their gradients are those of the ops they are built from, checked end to end here."""

import numpy as np

from fluid_hw import layers
from tests.grad_lod_harness import Built, ProgramGradCase

R = np.random.default_rng(24)


def _data(name, arr):
    v = layers.data(name, shape=list(arr.shape), dtype="float64", append_batch_size=False)
    v.stop_gradient = False
    return v, arr


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def _two(fn, sx, sy, **kw):
    def build():
        x, fx = _data("x", f64(*sx, **kw))
        y, fy = _data("y", f64(*sy))
        return Built({"x": fx, "y": fy}, ["x", "y"], [fn(x, y).name])
    return build


def _one(fn, shape, **kw):
    def build():
        x, fx = _data("x", f64(*shape, **kw))
        return Built({"x": fx}, ["x"], [fn(x).name])
    return build


def _away(a, gap=0.1):
    return np.where(np.abs(a) < gap, gap, a)


def _huber():
    x, fx = _data("x", f64(3, 1))
    y, fy = _data("y", fx + _away(f64(3, 1, low=-2, high=2)) * np.array([[0.2], [1], [2]]))
    return Built({"x": fx, "y": fy}, ["x", "y"], [layers.huber_loss(x, y, 0.5).name])


def _bpr():
    x, fx = _data("x", f64(4, 3))
    lab = layers.data("lab", shape=[4, 1], dtype="int64", append_batch_size=False)
    return Built({"x": fx, "lab": np.array([[0], [2], [1], [2]], np.int64)}, ["x"],
                 [layers.bpr_loss(x, lab).name])


def _kldiv():
    x, fx = _data("x", f64(3, 4))
    t = layers.data("t", shape=[3, 4], dtype="float64", append_batch_size=False)
    return Built({"x": fx, "t": f64(3, 4, low=0.1, high=1)}, ["x"],
                 [layers.kldiv_loss(x, t, "batchmean").name])


CASES = [
    ProgramGradCase("square_error_cost", _two(layers.square_error_cost, (3, 2), (3, 2))),
    ProgramGradCase("sigmoid_cross_entropy_with_logits",
                    _two(lambda x, y: layers.sigmoid_cross_entropy_with_logits(x, y),
                         (3, 2), (3, 2))),
    ProgramGradCase("log_loss", _two(layers.log_loss, (3, 1), (3, 1), low=0.1, high=0.9)),
    ProgramGradCase("huber_loss", _huber),
    ProgramGradCase("smooth_l1", _two(lambda x, y: layers.smooth_l1(x, y, sigma=2.0),
                                      (3, 2), (3, 2))),
    ProgramGradCase("kldiv_loss", _kldiv),
    ProgramGradCase("bpr_loss", _bpr),
    ProgramGradCase("rank_loss", _two(lambda x, y: layers.rank_loss(x, x, y), (3, 1), (3, 1))),
    ProgramGradCase("cos_sim", _two(layers.cos_sim, (3, 4), (1, 4))),
    ProgramGradCase("l2_normalize", _one(lambda x: layers.l2_normalize(x, 1), (3, 4))),
    ProgramGradCase("layer_norm", _one(lambda x: layers.layer_norm(x, scale=False, shift=False),
                                       (2, 3, 2))),
    ProgramGradCase("group_norm", _one(
        lambda x: layers.group_norm(x, 2, param_attr=False, bias_attr=False), (2, 4, 2, 1))),
    ProgramGradCase("lrn", _one(lambda x: layers.lrn(x, n=3, alpha=0.5), (1, 4, 2, 1))),
    ProgramGradCase("pixel_shuffle", _one(lambda x: layers.pixel_shuffle(x, 2), (1, 4, 1, 2))),
    ProgramGradCase("clip_by_norm", _one(lambda x: layers.clip_by_norm(x, 0.5), (2, 3))),
]
