"""Synthetic ``paddle.dataset.cifar``: 3x32x32 colour images flattened to 3072
float32 values in [0, 1] and an ``int`` label (10 or 100 classes), each image a
noisy copy of its class prototype. 1000 training and 200 test samples a set."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ._synth import Reader, image_reader


def _reader(name: str, split: str, classes: int, count: int, cycle: bool = False) -> Reader:
    base = image_reader(name, split, count, classes, (3, 32, 32), noise=0.2)
    if not cycle:
        return base

    def reader() -> Iterator[tuple[np.ndarray, int]]:
        while True:
            yield from base()

    return reader


def train10(cycle: bool = False) -> Reader:
    """CIFAR-10 training reader: ``(image float32[3072] in [0, 1], label 0-9)``;
    ``cycle`` repeats it without end, as Paddle's does."""
    return _reader("cifar10", "train", 10, 1000, cycle)


def test10(cycle: bool = False) -> Reader:
    """CIFAR-10 test reader."""
    return _reader("cifar10", "test", 10, 200, cycle)


def train100() -> Reader:
    """CIFAR-100 training reader (labels 0-99)."""
    return _reader("cifar100", "train", 100, 1000)


def test100() -> Reader:
    """CIFAR-100 test reader."""
    return _reader("cifar100", "test", 100, 200)
