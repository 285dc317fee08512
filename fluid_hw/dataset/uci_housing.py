"""Synthetic ``paddle.dataset.uci_housing``: 13 normalised features and a price
(float32 ``[1]``), the price a fixed linear function of the features plus a little
noise. 404 training and 102 test samples, as the real split."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ._synth import Reader, rng

feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX",
                 "PTRATIO", "B", "LSTAT"]

_COUNTS = {"train": 404, "test": 102}


def _reader(split: str) -> Reader:
    weights = rng("uci_housing", "weights").uniform(-8.0, 8.0, size=13).astype(np.float32)

    def reader() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        r = rng("uci_housing", split)
        for _ in range(_COUNTS[split]):
            x = r.uniform(-0.5, 0.5, size=13).astype(np.float32)
            price = 22.5 + float(x @ weights) + 0.5 * r.standard_normal()
            yield x, np.array([price], np.float32)

    return reader


def train() -> Reader:
    """Training reader: ``(features float32[13], price float32[1])``."""
    return _reader("train")


def test() -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test")
