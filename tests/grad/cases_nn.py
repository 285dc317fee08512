"""Gradient-check cases for the nn and loss ops (conv, pool, batch_norm, dropout,
lookup_table, cross entropies)."""

import numpy as np

from tests.grad_harness import GradCase

R = np.random.default_rng(11)


def f64(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float64)


def distinct(*shape):
    """Values at least 0.05 apart (a random permutation of a grid): no max ties, and
    eps-size perturbations never change which cell of a window is the maximum."""
    n = int(np.prod(shape))
    return (R.permutation(n).astype(np.float64) * 0.05 - n * 0.025).reshape(shape)


def ids(*values):
    return np.array(values, dtype=np.int64).reshape(-1, 1)


def conv(op, x_shape, w_shape, id, **attrs):
    return GradCase(op, {"Input": f64(*x_shape), "Filter": f64(*w_shape)}, attrs, id=id)


CASES = [
    conv("conv2d", (2, 2, 5, 5), (3, 2, 3, 3), "conv2d-plain"),
    conv("conv2d", (1, 2, 6, 5), (2, 2, 3, 3), "conv2d-stride2-pad1",
         strides=[2, 2], paddings=[1, 1]),
    conv("conv2d", (1, 2, 5, 6), (2, 2, 2, 3), "conv2d-asym-pad",
         strides=[1, 2], paddings=[1, 0, 2, 1]),
    conv("conv2d", (1, 2, 7, 6), (2, 2, 2, 2), "conv2d-dilation2",
         dilations=[2, 2], paddings=[1, 1]),
    conv("conv2d", (2, 4, 4, 5), (4, 2, 2, 3), "conv2d-groups2", groups=2, paddings=[0, 1]),
    conv("conv2d", (1, 2, 5, 5), (2, 2, 3, 2), "conv2d-same",
         strides=[2, 2], padding_algorithm="SAME"),
    conv("depthwise_conv2d", (1, 3, 5, 5), (3, 1, 3, 3), "depthwise_conv2d",
         groups=3, paddings=[1, 1]),
    conv("depthwise_conv2d", (1, 2, 5, 4), (4, 1, 2, 2), "depthwise_conv2d-mult2-stride2",
         groups=2, strides=[2, 2], paddings=[0, 1, 1, 0]),
]


def pool(id, shape=(2, 2, 5, 5), **attrs):
    return GradCase("pool2d", {"X": distinct(*shape)}, attrs, id=id)


CASES += [
    pool("pool2d-max", pooling_type="max", ksize=[2, 2], strides=[2, 2]),
    pool("pool2d-max-overlap-pad", pooling_type="max", ksize=[3, 3], strides=[2, 1],
         paddings=[1, 1]),
    pool("pool2d-max-ceil", pooling_type="max", ksize=[2, 2], strides=[2, 2], ceil_mode=True),
    pool("pool2d-max-global", pooling_type="max", ksize=[1, 1], global_pooling=True),
    pool("pool2d-max-adaptive", (1, 2, 5, 7), pooling_type="max", ksize=[2, 3],
         adaptive=True),
    pool("pool2d-avg-exclusive", pooling_type="avg", ksize=[3, 3], strides=[2, 2],
         paddings=[1, 1], exclusive=True),
    pool("pool2d-avg-inclusive", pooling_type="avg", ksize=[3, 3], strides=[2, 2],
         paddings=[1, 1], exclusive=False),
    pool("pool2d-avg-ceil", pooling_type="avg", ksize=[2, 2], strides=[2, 2], ceil_mode=True,
         paddings=[0, 1, 1, 0]),
    pool("pool2d-avg-ceil-inclusive", pooling_type="avg", ksize=[2, 2], strides=[2, 2],
         ceil_mode=True, exclusive=False),
    pool("pool2d-avg-global", pooling_type="avg", ksize=[1, 1], global_pooling=True),
    pool("pool2d-avg-adaptive", (1, 2, 5, 7), pooling_type="avg", ksize=[2, 3],
         adaptive=True),
]


def bn(id, x, **attrs):
    c = x.shape[-1] if attrs.get("data_layout") == "NHWC" else x.shape[1]
    return GradCase(
        "batch_norm",
        {"X": x, "Scale": f64(c, low=0.5, high=1.5), "Bias": f64(c),
         "Mean": f64(c), "Variance": f64(c, low=0.5, high=1.5)},
        attrs, check=["X", "Scale", "Bias"], outputs=["Y"],
        extra_outputs=["MeanOut", "VarianceOut"], id=id)


CASES += [
    bn("batch_norm-train-nchw", f64(3, 2, 2, 3)),
    bn("batch_norm-train-2d", f64(5, 3)),
    bn("batch_norm-train-nhwc", f64(2, 3, 2, 2), data_layout="NHWC"),
    bn("batch_norm-is_test", f64(2, 3, 2, 2), is_test=True),
    bn("batch_norm-global-stats", f64(2, 3, 2, 2), use_global_stats=True),
]


def dropout(id, **attrs):
    return GradCase("dropout", {"X": f64(4, 5)}, {"dropout_prob": 0.4, **attrs},
                    outputs=["Out"], id=id)


CASES += [
    dropout("dropout-downgrade", fix_seed=True, seed=5),
    dropout("dropout-upscale", fix_seed=True, seed=5,
            dropout_implementation="upscale_in_train"),
    dropout("dropout-is_test-downgrade", is_test=True),
    dropout("dropout-is_test-upscale", is_test=True,
            dropout_implementation="upscale_in_train"),
]

CASES += [
    GradCase("lookup_table", {"W": f64(5, 3), "Ids": ids(0, 3, 3, 1, 4, 3)}, check=["W"],
             id="lookup_table"),
    GradCase("lookup_table", {"W": f64(5, 3), "Ids": ids(2, 0, 2, 4, 0).reshape(5, 1, 1)},
             {"padding_idx": 2}, check=["W"], id="lookup_table-padding_idx"),
]


def probs(*shape):
    return f64(*shape, low=0.1, high=1.0)


def soft(*shape, axis=-1):
    p = R.uniform(0.1, 1.0, size=shape)
    return p / p.sum(axis=axis, keepdims=True)


CASES += [
    GradCase("cross_entropy", {"X": probs(4, 5), "Label": ids(0, 4, 2, 2)},
             id="cross_entropy-hard"),
    GradCase("cross_entropy", {"X": probs(4, 5), "Label": ids(0, 4, -100, 2)},
             id="cross_entropy-ignore_index"),
    GradCase("cross_entropy",
             {"X": probs(2, 3, 4), "Label": ids(1, 3, 0, 2, 2, 1).reshape(2, 3, 1)},
             id="cross_entropy-3d"),
    GradCase("cross_entropy", {"X": probs(4, 5), "Label": soft(4, 5)},
             {"soft_label": True}, check=["X"], id="cross_entropy-soft"),
]


def swce(id, logits, label, **attrs):
    """Loss in the loss; Softmax created but not (its gradient is not propagated)."""
    check = ["Logits"] if attrs.get("soft_label") else None
    return GradCase("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, attrs,
                    check=check, outputs=["Loss"], extra_outputs=["Softmax"],
                    id=f"softmax_with_cross_entropy-{id}")


CASES += [
    swce("hard", f64(4, 5), ids(1, 0, 4, 1)),
    swce("soft", f64(4, 5), soft(4, 5), soft_label=True),
    swce("soft-unnormalised", f64(4, 5), f64(4, 5, low=0.0), soft_label=True),
    swce("ignore_index", f64(4, 5), ids(1, 7, 4, 7), ignore_index=7),
    swce("axis1", f64(2, 4, 3), np.array([[[0, 3, 1]], [[2, 2, 0]]], dtype=np.int64), axis=1),
    swce("axis1-soft", f64(2, 4, 3), soft(2, 4, 3, axis=1), axis=1, soft_label=True),
    swce("large-logits", f64(3, 4) * 30, ids(0, 3, 2)),
]
