"""Integer reference of the quantised ops, written from docs/fixed_point.md alone (it
shares no code with fluid_hw), in the program's own layouts (NCHW, W [K, C])."""

from __future__ import annotations

import numpy as np


def fc(x: np.ndarray, w_kc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """quantized_fc: sum_k int32(x[n,k]) * int32(w[k,c]) + bias[c] -> int32."""
    out = np.asarray(x, np.int64) @ np.asarray(w_kc, np.int64)
    if bias is not None:
        out = out + np.asarray(bias, np.int64)
    assert np.abs(out).max() < 2**31
    return out


def conv2d(x: np.ndarray, filt: np.ndarray, bias: np.ndarray | None, pad: int, stride: int
           ) -> np.ndarray:
    """quantized_conv2d on NCHW with zero padding, groups = 1 -> int32 NCHW."""
    n, c, h, w = x.shape
    m, _, kh, kw = filt.shape
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), np.int64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, np.asarray(filt, np.int64))
    if bias is not None:
        out += np.asarray(bias, np.int64)[None, :, None, None]
    return out


def requantize(x: np.ndarray, m: np.ndarray, n: np.ndarray, relu: bool, axis: int = 1
               ) -> np.ndarray:
    """p = int64(x) * m; r = (p + 2^(n-1)) >> n if n > 0 else p; clamp to int8."""
    shape = [1] * x.ndim
    shape[axis] = -1
    mm = np.asarray(m, np.int64).reshape(shape)
    nn = np.asarray(n, np.int64).reshape(shape)
    p = np.asarray(x, np.int64) * mm
    r = np.where(nn > 0, (p + (np.int64(1) << np.maximum(nn - 1, 0))) >> nn, p)
    return np.clip(r, 0 if relu else -128, 127).astype(np.int8)


def maxpool2d(x: np.ndarray, k: int, stride: int) -> np.ndarray:
    """pool2d max on NCHW, no padding."""
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.empty((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k] \
                .max(axis=(2, 3))
    return out
