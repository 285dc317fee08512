"""Synthetic ``paddle.dataset.mnist``: 28x28 grey images flattened to 784 float32
values in [-1, 1] and an ``int`` label 0-9, each image a noisy copy of its digit's
prototype pattern. 2000 training and 500 test samples."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ._synth import Reader, image_reader


def _reader(split: str, count: int) -> Reader:
    base = image_reader("mnist", split, count, 10, (28, 28), noise=0.25)

    def reader() -> Iterator[tuple[np.ndarray, int]]:
        for img, label in base():
            yield img * 2.0 - 1.0, label

    return reader


def train() -> Reader:
    """Training reader: ``(image float32[784] in [-1, 1], label int)``."""
    return _reader("train", 2000)


def test() -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test", 500)
