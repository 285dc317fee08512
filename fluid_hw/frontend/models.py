"""Reference models used by the demo, the tests and the benchmarks.

Each builder returns a :class:`Model`: its main and startup programs, the
input/label variables, the prediction, the loss and the accuracy (the autoencoder's
``AutoencoderModel`` has neither label nor accuracy).  With
``optimizer=...`` the main program also trains (``optimizer.minimize(loss)``); a
zero-argument factory is called inside the model's program guard, so that the
optimizer can build its learning-rate schedule (``layers.exponential_decay`` ...) there;
``model.test_program`` is the inference clone taken before the backward pass.

The digits models, LeNet-5 and hls4ml's jet-tagging MLP are here; MLPerf Tiny's
``resnet8``, ``ds_cnn`` and ``fc_autoencoder`` (with ``AutoencoderModel``, ``macs`` and
``parameter_count``) live in :mod:`fluid_hw.frontend.tiny_models` and are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ir import unique_name
from ..ir.default_programs import program_guard
from ..ir.program import Program, Variable
from . import layers

if TYPE_CHECKING:  # at run time through __getattr__ below
    from .tiny_models import (
        AutoencoderModel,
        ds_cnn,
        fc_autoencoder,
        macs,
        parameter_count,
        resnet8,
    )

__all__ = ["AutoencoderModel", "Model", "digits_cnn", "digits_mlp", "ds_cnn", "fc_autoencoder",
           "gru_kws", "jet_mlp", "lenet5", "macs", "parameter_count", "resnet8",
           "sequence_classifier"]


@dataclass
class Model:
    main: Program
    startup: Program
    test_program: Program
    image: Variable
    label: Variable
    prediction: Variable
    loss: Variable
    accuracy: Variable

    @property
    def feed_names(self) -> list[str]:
        return [self.image.name, self.label.name]


def _finish(main: Program, startup: Program, image: Variable, label: Variable,
            logits: Variable, optimizer: Any) -> Model:
    prob = layers.softmax(logits)
    xent = layers.softmax_with_cross_entropy(logits, label)
    assert isinstance(xent, Variable)  # not (loss, softmax): return_softmax is False
    loss = layers.mean(xent)
    acc = layers.accuracy(prob, label)
    test_program = main.clone(for_test=True)
    if optimizer is not None:
        if not hasattr(optimizer, "minimize") and callable(optimizer):
            optimizer = optimizer()
        optimizer.minimize(loss)
    return Model(main, startup, test_program, image, label, prob, loss, acc)


def digits_mlp(hidden: tuple[int, ...] = (128, 64), seed: int = 1,
               optimizer: Any = None) -> Model:
    """64-128-64-10 MLP on flattened 8x8 digits."""
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        image = layers.data(name="pixels", shape=[64], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        h = image
        for n in hidden:
            h = layers.fc(h, size=n, act="relu")
        logits = layers.fc(h, size=10)
        return _finish(main, startup, image, label, logits, optimizer)


def digits_cnn(channels: tuple[int, int] = (16, 32), seed: int = 1,
               optimizer: Any = None) -> Model:
    """(conv3x3 - batch_norm - relu - maxpool2) x 2, then fc, on 1x8x8 digits."""
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        image = layers.data(name="pixels", shape=[1, 8, 8], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        h = image
        for c in channels:
            h = layers.conv2d(h, num_filters=c, filter_size=3, padding=1, bias_attr=False)
            h = layers.batch_norm(h, act="relu")
            h = layers.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
        logits = layers.fc(h, size=10)
        return _finish(main, startup, image, label, logits, optimizer)


def lenet5(num_classes: int = 10, seed: int = 1, optimizer: Any = None) -> Model:
    """LeNet-5 on 1x28x28 images, with ReLU and max pooling: conv 6@5x5 pad 2 - max
    pool 2 - conv 16@5x5 - max pool 2 - fc 120 - fc 84 - fc ``num_classes`` (every
    layer with a bias; ReLU after all but the last).  416,520 MACs."""
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        image = layers.data(name="image", shape=[1, 28, 28], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        h = image
        for c, pad in ((6, 2), (16, 0)):
            h = layers.conv2d(h, num_filters=c, filter_size=5, padding=pad, act="relu")
            h = layers.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
        for n in (120, 84):
            h = layers.fc(h, size=n, act="relu")
        logits = layers.fc(h, size=num_classes)
        return _finish(main, startup, image, label, logits, optimizer)


def jet_mlp(hidden: tuple[int, ...] = (64, 32, 32), features: int = 16, num_classes: int = 5,
            seed: int = 1, optimizer: Any = None) -> Model:
    """hls4ml's jet-tagging MLP: 16 features - 64 - 32 - 32 (ReLU) - 5 classes (the
    softmax is the host's when compiled for the FPGA).  4,256 MACs."""
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        x = layers.data(name="features", shape=[features], dtype="float32")
        label = layers.data(name="label", shape=[1], dtype="int64")
        h = x
        for n in hidden:
            h = layers.fc(h, size=n, act="relu")
        logits = layers.fc(h, size=num_classes)
        return _finish(main, startup, x, label, logits, optimizer)


def gru_kws(coefficients: int = 10, hidden: int = 64, num_classes: int = 12, seed: int = 1,
            optimizer: Any = None) -> Model:
    """A GRU keyword spotter (as in the KWS literature: Zhang et al., "Hello Edge"): an
    utterance of MFCC frames (49 frames of 10 coefficients for 1 s, any number as a LoD
    input ``mfcc`` [T, coefficients], lod_level 1) -> fc input projection (3 x hidden)
    -> ``dynamic_gru`` -> the last step -> fc to ``num_classes`` (the softmax is the
    host's when compiled for the FPGA).  For the accelerator the projection fc and the
    recurrence are one recurrent stage (docs/recurrent.md)."""
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        x = layers.data(name="mfcc", shape=[coefficients], dtype="float32", lod_level=1)
        label = layers.data(name="label", shape=[1], dtype="int64")
        proj = layers.fc(x, size=3 * hidden)
        h = layers.dynamic_gru(proj, size=hidden)
        logits = layers.fc(layers.sequence_last_step(h), size=num_classes)
        return _finish(main, startup, x, label, logits, optimizer)


def sequence_classifier(vocab: int = 10, embedding: int = 16, hidden: int = 32,
                        num_classes: int = 2, use_peepholes: bool = True, seed: int = 1,
                        optimizer: Any = None) -> Model:
    """A variable-length sequence classifier: token ids ``words`` [T, 1] int64 (lod_level
    1, sequences of any length) -> embedding (the host's when compiled for the FPGA) ->
    fc input projection (4 x hidden) -> ``dynamic_lstm`` (Fluid's default peepholes)
    -> the last step -> fc to ``num_classes``.

    Training recipe (tests/frontend/test_recurrent_models.py): Adam at 0.01, batches of
    32 synthetic sequences of 1..50 tokens (label: token 3 occurs more often than token
    7), ~150 steps; then ``passes.quantize`` with a few LoD calibration batches."""
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = seed
    with program_guard(main, startup), unique_name.guard():
        words = layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        label = layers.data(name="label", shape=[1], dtype="int64")
        emb = layers.embedding(words, size=[vocab, embedding])
        proj = layers.fc(emb, size=4 * hidden)
        h, _ = layers.dynamic_lstm(proj, size=4 * hidden, use_peepholes=use_peepholes)
        logits = layers.fc(layers.sequence_last_step(h), size=num_classes)
        return _finish(main, startup, words, label, logits, optimizer)


_TINY = ("AutoencoderModel", "resnet8", "ds_cnn", "fc_autoencoder", "macs",
         "parameter_count")


def __getattr__(name: str) -> Any:
    """The MLPerf Tiny builders, from tiny_models (imported on first use: it imports
    this module, so a top-level import here would be circular)."""
    if name in _TINY:
        from . import tiny_models
        return getattr(tiny_models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
