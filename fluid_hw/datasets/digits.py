"""sklearn's bundled digits: 1797 8x8 images, the project's one fixed split.

Every test, benchmark and demo uses this split: pixels divided by 16,
``train_test_split(X, y, test_size=360, random_state=0, stratify=y)``.
"""

from __future__ import annotations

import numpy as np

DIGITS_TEST_SIZE = 360


def load_digits_split(image: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                    np.ndarray]:
    """``(x_train, x_test, y_train, y_test)``; x float32 (N, 64) or (N, 1, 8, 8) with
    ``image=True``; y int64 (N, 1)."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as e:  # pragma: no cover - data extra missing
        from ..errors import FluidError

        raise FluidError("the digits data needs scikit-learn: pip install 'fluid-hw[data]'") \
            from e
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64).reshape(-1, 1)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=DIGITS_TEST_SIZE, random_state=0,
                                          stratify=y)
    if image:
        xtr, xte = xtr.reshape(-1, 1, 8, 8), xte.reshape(-1, 1, 8, 8)
    return xtr, xte, ytr, yte
