"""What ``Executor.run`` returns for a fetched tensor: a numpy array that, like
NumPy 1.x's, converts to a Python number when it holds one value.

Fluid 1.5 ran on NumPy 1.x, where ``float(np.array([0.5]))`` is 0.5; NumPy 2
refuses it, and Fluid scripts do it everywhere (``float(avg_cost)``,
``"%f" % cost``, ``"%.2f" % results[0][i]``, ``math.isnan(float(loss))``).
:class:`FetchedArray` is an ``ndarray`` in every other respect (slices and
results of arithmetic stay FetchedArrays; ``np.asarray`` gives the plain array);
an array of several values still refuses ``float()`` as NumPy does."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FetchedArray", "fetched"]


class FetchedArray(np.ndarray):
    """``float()``, ``int()``, ``complex()`` and format specs read a one-element
    array (of any number of dimensions) as its element."""

    def _plain(self) -> np.ndarray:
        return self.view(np.ndarray)

    def _one(self) -> Any:
        # one element: the number (as NumPy 1.x); else NumPy's own conversion error
        return self._plain().reshape(-1)[0] if self.size == 1 else self._plain()

    def __float__(self) -> float:
        return float(self._one())

    def __int__(self) -> int:
        return int(self._one())

    def __complex__(self) -> complex:
        return complex(self._one())

    def __format__(self, spec: str) -> str:
        if spec and self.size == 1:
            return format(self._one().item(), spec)
        return self._plain().__format__(spec)

    def __repr__(self) -> str:
        return repr(self._plain())


def fetched(arr: np.ndarray) -> Any:
    """``arr`` viewed as :class:`FetchedArray` (numeric arrays of one or more
    dimensions; anything else as it is)."""
    if isinstance(arr, np.ndarray) and arr.ndim >= 1 and arr.dtype.kind in "biufc":
        return arr.view(FetchedArray)
    return arr
