"""Shared helpers of the synthetic datasets: a seeded generator per dataset and
split, and class prototypes for the image sets."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

Reader = Callable[[], Iterator[Any]]


def rng(dataset: str, split: str) -> np.random.RandomState:
    """The generator of one dataset split: the same samples on every call."""
    return np.random.RandomState(zlib.crc32(f"{dataset}/{split}".encode()) & 0x7FFFFFFF)


def prototypes(dataset: str, classes: int, shape: tuple[int, ...],
               blobs: int = 3) -> np.ndarray:
    """One smooth pattern in [0, 1] per class (a few Gaussian blobs on each
    channel), shape ``(classes, *shape)``: images are drawn around them."""
    r = rng(dataset, "prototypes")
    *lead, h, w = shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = np.zeros((classes, int(np.prod(lead or [1])), h, w), np.float32)
    for c in range(classes):
        for ch in range(out.shape[1]):
            for _ in range(blobs):
                cy, cx = r.uniform(0.15, 0.85, 2) * (h, w)
                s = r.uniform(0.08, 0.2) * h
                out[c, ch] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    out /= out.max(axis=(2, 3), keepdims=True)
    return out.reshape((classes, *shape))


def image_reader(dataset: str, split: str, count: int, classes: int,
                 shape: tuple[int, ...], noise: float) -> Reader:
    """Samples ``(pixels flattened, label)`` in [0, 1]: the class prototype plus
    Gaussian noise, labels cycling through the classes in a seeded order."""
    protos = prototypes(dataset, classes, shape)

    def reader() -> Iterator[tuple[np.ndarray, int]]:
        r = rng(dataset, split)
        labels = r.randint(0, classes, size=count)
        for label in labels:
            img = protos[label] + noise * r.standard_normal(shape).astype(np.float32)
            yield np.clip(img, 0.0, 1.0).reshape(-1).astype(np.float32), int(label)

    return reader
