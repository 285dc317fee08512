"""MLPerf Tiny's reference networks (github.com/mlcommons/tiny, ``benchmark/training``),
built with the layers API; re-exported by :mod:`fluid_hw.frontend.models`.

* :func:`resnet8` -- image classification (CIFAR-10, 3x32x32): EEMBC's ResNet-v1
  with three stacks of one residual block each;
* :func:`ds_cnn` -- keyword spotting (49x10 MFCC, 12 classes): a 10x4 stride-2
  convolution and four depthwise-separable blocks;
* :func:`fc_autoencoder` -- anomaly detection (640 log-mel features): the dense
  autoencoder 640-128x4-8-128x4-640 trained on the mean squared reconstruction error.

Layer for layer as the Keras models: every convolution and dense layer has a bias
(Keras' default, even before a batch norm; ``conv_bn_fuse`` / ``fc_bn_fuse`` fold
them), and Keras' ``padding='same'`` becomes the explicit, possibly asymmetric, pads
TensorFlow uses (the extra cell at the bottom / right), so Keras weights load
unchanged.  Dropout is ``upscale_in_train`` as in Keras: the test program's dropouts
are identities.  :func:`macs` and :func:`parameter_count` measure a program; the
figures are in ``tests/frontend/test_tiny_models.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import unique_name
from ..ir.default_programs import program_guard
from ..ir.ops.nn import window_geometry
from ..ir.program import Program, Variable
from . import layers
from .models import Model, _finish

__all__ = ["AutoencoderModel", "ds_cnn", "fc_autoencoder", "macs", "parameter_count",
           "resnet8"]


@dataclass
class AutoencoderModel:
    """:class:`~fluid_hw.frontend.models.Model` without label and accuracy: the
    prediction is the reconstruction of ``image``, the loss its mean squared error."""

    main: Program
    startup: Program
    test_program: Program
    image: Variable
    prediction: Variable
    loss: Variable

    @property
    def feed_names(self) -> list[str]:
        return [self.image.name]


def _same_pads(x: Variable, kernel: Sequence[int], stride: Sequence[int]) -> list[int]:
    """[top, bottom, left, right] of Keras/TensorFlow ``padding='same'`` on x's H, W."""
    _, pads, _ = window_geometry(list(x.shape[2:4]), list(kernel), list(stride), [0, 0],
                                 algorithm="SAME")
    return pads


def _conv(x: Variable, filters: int, kernel: int | Sequence[int], stride: int = 1,
          groups: int | None = None) -> Variable:
    """Keras ``Conv2D`` / ``DepthwiseConv2D`` (``padding='same'``, with a bias)."""
    k = [kernel, kernel] if isinstance(kernel, int) else list(kernel)
    return layers.conv2d(x, num_filters=filters, filter_size=k, stride=stride,
                         padding=_same_pads(x, k, [stride, stride]), groups=groups)


def _conv_bn(x: Variable, filters: int, kernel: int | Sequence[int], stride: int = 1,
             groups: int | None = None, act: str | None = "relu") -> Variable:
    return layers.batch_norm(_conv(x, filters, kernel, stride, groups), act=act)


def resnet8(filters: Sequence[int] = (16, 32, 64), num_classes: int = 10, seed: int = 1,
            optimizer: Any = None) -> Model:
    """MLPerf Tiny image classification: ResNet-8 on 3x32x32 images.

    conv3x3(16)-BN-relu; three stacks of one block (16, 32, 64 filters; the 2nd and
    3rd start with stride 2 and put a 1x1 stride-2 convolution on the skip path):
    conv3x3-BN-relu-conv3x3-BN, ``elementwise_add`` with the skip, relu; then the
    8x8 global average pool and fc ``num_classes`` (softmax).  12.5 M MACs, 78.7 k
    parameters (BN statistics included).
    """
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        image = layers.data(name="image", shape=[3, 32, 32], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        x = _conv_bn(image, filters[0], 3)
        for i, f in enumerate(filters):
            stride = 1 if i == 0 else 2
            y = _conv_bn(x, f, 3, stride)
            y = _conv_bn(y, f, 3, act=None)
            skip = x if stride == 1 and x.shape[1] == f else _conv(x, f, 1, stride)
            x = layers.relu(layers.elementwise_add(skip, y))
        x = layers.pool2d(x, pool_type="avg", global_pooling=True)
        logits = layers.fc(x, size=num_classes)
        return _finish(main, startup, image, label, logits, optimizer)


def ds_cnn(filters: int = 64, blocks: int = 4, num_classes: int = 12,
           input_shape: tuple[int, int] = (49, 10), seed: int = 1,
           optimizer: Any = None) -> Model:
    """MLPerf Tiny keyword spotting: DS-CNN on 1x49x10 MFCC features.

    conv 10x4 stride 2 (64 filters, pads [4, 5, 1, 1]: 25x5 out)-BN-relu-dropout 0.2;
    ``blocks`` x (depthwise 3x3-BN-relu, pointwise 1x1 64-BN-relu); dropout 0.4;
    average pool (24, 5) with that stride (the reference's ``input/2`` pool: on the
    25x5 map it leaves out the last row); fc ``num_classes`` (softmax).  2.66 M MACs,
    24.9 k parameters (BN statistics included).
    """
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        mfcc = layers.data(name="mfcc", shape=[1, *input_shape], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        x = _conv_bn(mfcc, filters, (10, 4), 2)
        x = layers.dropout(x, 0.2, dropout_implementation="upscale_in_train")
        for _ in range(blocks):
            x = _conv_bn(x, filters, 3, groups=filters)  # depthwise
            x = _conv_bn(x, filters, 1)                  # pointwise
        x = layers.dropout(x, 0.4, dropout_implementation="upscale_in_train")
        pool = [input_shape[0] // 2, input_shape[1] // 2]
        x = layers.pool2d(x, pool_size=pool, pool_type="avg", pool_stride=pool)
        logits = layers.fc(x, size=num_classes)
        return _finish(main, startup, mfcc, label, logits, optimizer)


def fc_autoencoder(input_dim: int = 640, hidden: int = 128, depth: int = 4,
                   bottleneck: int = 8, seed: int = 1,
                   optimizer: Any = None) -> AutoencoderModel:
    """MLPerf Tiny anomaly detection: the dense autoencoder on ``input_dim`` features.

    (fc ``hidden``-BN-relu) x ``depth``, fc ``bottleneck``-BN-relu, (fc ``hidden``-BN-
    relu) x ``depth``, fc ``input_dim`` (linear).  ``prediction`` is the reconstruction,
    ``loss`` the mean squared error against the input (the anomaly score).  264 k MACs,
    270 k parameters.
    """
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        features = layers.data(name="features", shape=[input_dim], dtype="float32")
        h = features
        for n in [hidden] * depth + [bottleneck] + [hidden] * depth:
            h = layers.batch_norm(layers.fc(h, size=n), act="relu")
        recon = layers.fc(h, size=input_dim)
        err = layers.elementwise_sub(recon, features)
        loss = layers.mean(layers.elementwise_mul(err, err))
        test_program = main.clone(for_test=True)
        if optimizer is not None:
            if not hasattr(optimizer, "minimize") and callable(optimizer):
                optimizer = optimizer()
            optimizer.minimize(loss)
        return AutoencoderModel(main, startup, test_program, features, recon, loss)


# -- measuring a program ---------------------------------------------------------------------

def _numel(shape: Sequence[int]) -> int:
    return int(np.prod([d for d in shape if d > 0], dtype=np.int64))


def macs(program: Program) -> int:
    """Multiply-accumulates of one inference (batch 1) in the global block: conv2d,
    depthwise_conv2d and conv2d_fusion (output cells x filter size), mul and fc (rows x
    K x C).  Elementwise ops, pooling and normalisation are not counted, as the
    MLPerf Tiny figures do not count them."""
    total = 0
    block = program.global_block()
    for op in block.ops:
        if op.type in ("conv2d", "depthwise_conv2d", "conv2d_fusion"):
            w = block._find_var_recursive(op.input("Filter")[0])
            out = block._find_var_recursive(op.output("Output")[0])
            assert w is not None and out is not None
            total += _numel(out.shape) * _numel(w.shape[1:])
        elif op.type in ("mul", "fc"):
            w_slot, out_slot = ("Y", "Out") if op.type == "mul" else ("W", "Out")
            w = block._find_var_recursive(op.input(w_slot)[0])
            out = block._find_var_recursive(op.output(out_slot)[0])
            assert w is not None and out is not None
            total += _numel(out.shape) * int(w.shape[0])
    return total


def parameter_count(program: Program, trainable_only: bool = False) -> int:
    """Values in the program's parameters (Keras' "Total params": batch-norm running
    statistics included; ``trainable_only`` gives "Trainable params")."""
    return sum(_numel(v.shape) for v in program.global_block().vars.values()
               if v.is_parameter and (v.trainable or not trainable_only))
