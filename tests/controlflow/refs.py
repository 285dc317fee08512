"""Padded-and-masked numpy references for the recurrent layers, and a central-difference
gradient of any of them: the independent check of the no-padding implementations."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def pad(x: np.ndarray, lens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """[total, ...] rows of sequences -> ([B, Tmax, ...] zero-padded, [B, Tmax] mask)."""
    tmax = max(lens)
    out = np.zeros((len(lens), tmax, *x.shape[1:]), x.dtype)
    mask = np.zeros((len(lens), tmax), bool)
    o = 0
    for i, n in enumerate(lens):
        out[i, :n] = x[o:o + n]
        mask[i, :n] = True
        o += n
    return out, mask


def unpad(y: np.ndarray, lens: list[int]) -> np.ndarray:
    return np.concatenate([y[i, :n] for i, n in enumerate(lens)])


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _rev(xp: np.ndarray, lens: list[int]) -> np.ndarray:
    """Reverse each padded sequence within its length."""
    out = xp.copy()
    for i, n in enumerate(lens):
        out[i, :n] = xp[i, :n][::-1]
    return out


def rnn_tanh(x: np.ndarray, lens: list[int], w_x: np.ndarray, w_h: np.ndarray,
             b: np.ndarray) -> np.ndarray:
    """h_t = tanh(x_t W_x + h_{t-1} W_h + b) per sequence, padded and masked."""
    xp, mask = pad(x, lens)
    h = np.zeros((len(lens), w_h.shape[0]))
    outs = np.zeros((len(lens), xp.shape[1], w_h.shape[0]))
    for t in range(xp.shape[1]):
        new = np.tanh(xp[:, t] @ w_x + h @ w_h + b)
        m = mask[:, t:t + 1]
        h = np.where(m, new, h)
        outs[:, t] = np.where(m, new, 0)
    return unpad(outs, lens)


def lstm(x: np.ndarray, lens: list[int], w: np.ndarray, b: np.ndarray, peep: bool,
         reverse: bool = False, h0: np.ndarray | None = None,
         c0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fluid's lstm op (gates [c~, i, f, o], peepholes in b[4D:]) on padded data."""
    d = w.shape[0]
    xp, mask = pad(x, lens)
    if reverse:
        xp = _rev(xp, lens)
    b = b.reshape(-1)
    w_ic, w_fc, w_oc = (b[4 * d:5 * d], b[5 * d:6 * d], b[6 * d:]) if peep else (0, 0, 0)
    bsz = len(lens)
    h = np.zeros((bsz, d)) if h0 is None else h0.copy()
    c = np.zeros((bsz, d)) if c0 is None else c0.copy()
    hs = np.zeros((bsz, xp.shape[1], d))
    cs = np.zeros((bsz, xp.shape[1], d))
    for t in range(xp.shape[1]):
        g = xp[:, t] + h @ w + b[:4 * d]
        cand = np.tanh(g[:, :d])
        i = sigmoid(g[:, d:2 * d] + w_ic * c)
        f = sigmoid(g[:, 2 * d:3 * d] + w_fc * c)
        cn = f * c + i * cand
        o = sigmoid(g[:, 3 * d:] + w_oc * cn)
        hn = o * np.tanh(cn)
        m = mask[:, t:t + 1]
        h, c = np.where(m, hn, h), np.where(m, cn, c)
        hs[:, t], cs[:, t] = np.where(m, hn, 0), np.where(m, cn, 0)
    if reverse:
        hs, cs = _rev(hs, lens), _rev(cs, lens)
    return unpad(hs, lens), unpad(cs, lens)


def gru(x: np.ndarray, lens: list[int], w: np.ndarray, b: np.ndarray, reverse: bool = False,
        origin: bool = False, h0: np.ndarray | None = None) -> np.ndarray:
    """Fluid's gru op (gates [u, r, c]) on padded data."""
    d = w.shape[0]
    xp, mask = pad(x, lens)
    if reverse:
        xp = _rev(xp, lens)
    b = b.reshape(-1)
    h = np.zeros((len(lens), d)) if h0 is None else h0.copy()
    hs = np.zeros((len(lens), xp.shape[1], d))
    for t in range(xp.shape[1]):
        g = xp[:, t] + b
        u = sigmoid(g[:, :d] + h @ w[:, :d])
        r = sigmoid(g[:, d:2 * d] + h @ w[:, d:2 * d])
        c = np.tanh(g[:, 2 * d:] + (r * h) @ w[:, 2 * d:])
        hn = u * h + (1 - u) * c if origin else u * c + (1 - u) * h
        m = mask[:, t:t + 1]
        h = np.where(m, hn, h)
        hs[:, t] = np.where(m, hn, 0)
    if reverse:
        hs = _rev(hs, lens)
    return unpad(hs, lens)


def numeric_grad(f: Callable[[], float], arr: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f / d arr by central differences (``arr`` is perturbed in place and restored)."""
    g = np.zeros_like(arr, dtype=np.float64)
    for idx in np.ndindex(arr.shape):
        old = arr[idx]
        arr[idx] = old + eps
        hi = f()
        arr[idx] = old - eps
        lo = f()
        arr[idx] = old
        g[idx] = (hi - lo) / (2 * eps)
    return g


def ragged_lengths(rng: np.random.Generator, n: int, lo: int = 1, hi: int = 20) -> list[int]:
    return [int(v) for v in rng.integers(lo, hi + 1, size=n)]


def assert_grad(f: Callable[[], float], arr: np.ndarray, got: np.ndarray,
                rtol: float = 1e-6, atol: float = 1e-8, eps: float = 1e-6) -> None:
    """``got`` is d f / d arr: element by element for small arrays, else along five
    random directions (each a central difference of f along the direction)."""
    got = np.asarray(got)
    assert got.shape == arr.shape, f"gradient shape {got.shape} != {arr.shape}"
    if arr.size <= 64:
        np.testing.assert_allclose(got, numeric_grad(f, arr, eps), rtol=rtol, atol=atol)
        return
    rng = np.random.default_rng(arr.size)
    orig = arr.copy()
    for _ in range(5):
        v = rng.standard_normal(arr.shape)
        arr[...] = orig + eps * v
        hi = f()
        arr[...] = orig - eps * v
        lo = f()
        arr[...] = orig
        np.testing.assert_allclose(float((got * v).sum()), (hi - lo) / (2 * eps),
                                   rtol=rtol, atol=atol * arr.size)
