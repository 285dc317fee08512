"""Kernels of the neural-network ops: convolution, pooling, batch_norm, dropout, lookup_table.

Convolution is im2col: a strided window view of the padded input
(``sliding_window_view``, no copy) is gathered once into a column matrix per
group and multiplied with the filters by one batched matmul; pooling reduces
the same window view directly.  No Python loop runs over pixels.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ....ir.ops.nn import window_geometry
from ..context import KernelContext
from . import register_kernel


def _pad_hw(x: np.ndarray, pads: list[int], value: float = 0.0) -> np.ndarray:
    """``x`` padded by ``[top, bottom, left, right]`` along its last two axes."""
    if not any(pads):
        return x
    t, b, l, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def _windows(xp: np.ndarray, ksize: list[int], strides: list[int], dilations: list[int],
             out_hw: list[int]) -> np.ndarray:
    """View [N, C, OH, OW, kh, kw] of the windows of the padded input (no copy)."""
    (kh, kw), (sh, sw), (dh, dw) = ksize, strides, dilations
    eff = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    win = sliding_window_view(xp, eff, axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :out_hw[0], :out_hw[1]]


def _conv_cols(x: np.ndarray, w: np.ndarray, a: dict) -> tuple[np.ndarray, list[int],
                                                                  list[int], list[int]]:
    """im2col: columns [g, N*OH*OW, C/g*kh*kw] (the one copy), output size, pads, dilations."""
    n = x.shape[0]
    _, cg, kh, kw = w.shape
    g = a["groups"]
    out_hw, pads, dil = window_geometry(x.shape[2:], (kh, kw), a["strides"], a["paddings"],
                                        a["dilations"], a["padding_algorithm"])
    oh, ow = out_hw
    win = _windows(_pad_hw(x, pads), [kh, kw], a["strides"], dil, out_hw)
    cols = (win.reshape(n, g, cg, oh, ow, kh, kw)
            .transpose(1, 0, 3, 4, 2, 5, 6)
            .reshape(g, n * oh * ow, cg * kh * kw))
    return cols, out_hw, pads, dil


@register_kernel("conv2d", "depthwise_conv2d")
def conv2d(ctx: KernelContext) -> None:
    x, w = ctx.input("Input"), ctx.input("Filter")
    n = x.shape[0]
    m, cg, kh, kw = w.shape
    g = ctx.attrs["groups"]
    cols, (oh, ow), _, _ = _conv_cols(x, w, ctx.attrs)
    # [g, N*OH*OW, C/g*kh*kw] @ [g, C/g*kh*kw, M/g]
    wmat = w.reshape(g, m // g, cg * kh * kw).transpose(0, 2, 1)
    out = np.matmul(cols, wmat)  # [g, N*OH*OW, M/g]
    out = out.reshape(g, n, oh, ow, m // g).transpose(1, 0, 4, 2, 3).reshape(n, m, oh, ow)
    ctx.set_output("Output", np.ascontiguousarray(out, dtype=x.dtype))


def _valid_counts(out: int, k: int, s: int, pad: int, size: int) -> np.ndarray:
    """Real (unpadded) input cells in each of ``out`` windows along one axis."""
    start = np.arange(out) * s - pad
    return np.clip(np.minimum(start + k, size) - np.maximum(start, 0), 0, None)


def _adaptive_pool(x: np.ndarray, out_hw: list[int], is_max: bool) -> np.ndarray:
    """Fluid's adaptive bins: cell i pools floor(i*H/OH) .. ceil((i+1)*H/OH) - 1.

    Max and mean over a rectangle are separable, so rows then columns are
    reduced: one numpy reduction per output row / column, none per pixel.
    """
    red = np.max if is_max else np.mean
    for axis, o in ((2, out_hw[0]), (3, out_hw[1])):
        size = x.shape[axis]
        bins = [(i * size // o, -(-(i + 1) * size // o)) for i in range(o)]
        x = np.stack([red(x.take(range(s, e), axis=axis), axis=axis) for s, e in bins],
                     axis=axis)
    return x


def pool_geometry(hw: tuple[int, int], a: dict) -> tuple[list[int], list[int], list[int],
                                                           list[int]]:
    """ksize, strides, output size and paddings [top, bottom, left, right] of a pool2d;
    with ceil_mode the bottom/right padding is extended so the last window is whole."""
    h, w = hw
    ksize, strides = list(a["ksize"]), list(a["strides"])
    out_hw, pads, _ = window_geometry((h, w), ksize, strides, a["paddings"],
                                      algorithm=a["padding_algorithm"], ceil_mode=a["ceil_mode"])
    pads = list(pads)
    pads[1] += max(0, (out_hw[0] - 1) * strides[0] + ksize[0] - (h + pads[0] + pads[1]))
    pads[3] += max(0, (out_hw[1] - 1) * strides[1] + ksize[1] - (w + pads[2] + pads[3]))
    return ksize, strides, out_hw, pads


def _avg_counts(a: dict, hw: tuple[int, int], ksize: list[int], strides: list[int],
                out_hw: list[int], pads: list[int], dtype: np.dtype) -> np.ndarray:
    """The divisor of each average window: [OH, OW] (exclusive) or a scalar."""
    if a["exclusive"]:
        ch = _valid_counts(out_hw[0], ksize[0], strides[0], pads[0], hw[0])
        cw = _valid_counts(out_hw[1], ksize[1], strides[1], pads[2], hw[1])
        # a window wholly in the padding (possible with ceil_mode) averages to 0
        return np.maximum(np.outer(ch, cw), 1).astype(dtype)
    return np.asarray(ksize[0] * ksize[1], dtype=dtype)


@register_kernel("pool2d")
def pool2d(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    is_max = a["pooling_type"] == "max"
    h, w = x.shape[2:]
    if a["global_pooling"]:
        red = np.max if is_max else np.mean
        ctx.set_output("Out", red(x, axis=(2, 3), keepdims=True).astype(x.dtype, copy=False))
        return
    if a["adaptive"]:
        ctx.set_output("Out", _adaptive_pool(x, list(a["ksize"]), is_max).astype(x.dtype,
                                                                                 copy=False))
        return
    ksize, strides, out_hw, pads = pool_geometry((h, w), a)
    # max: Fluid starts from -FLT_MAX, which is also what a window with no real
    # cell (possible with ceil_mode) yields
    fill = np.finfo(x.dtype).min if is_max else 0.0
    win = _windows(_pad_hw(x, pads, fill), ksize, strides, [1, 1], out_hw)
    if is_max:
        out = win.max(axis=(-2, -1))
    else:
        total = win.sum(axis=(-2, -1))
        count = _avg_counts(a, (h, w), ksize, strides, out_hw, pads, x.dtype)
        out = total / count
    ctx.set_output("Out", out.astype(x.dtype, copy=False))


@register_kernel("batch_norm")
def batch_norm(ctx: KernelContext) -> None:
    x = ctx.input("X")
    scale, bias = ctx.input("Scale"), ctx.input("Bias")
    mean, var = ctx.input("Mean"), ctx.input("Variance")
    a = ctx.attrs
    axis = x.ndim - 1 if a["data_layout"] == "NHWC" else 1
    reduce = tuple(i for i in range(x.ndim) if i != axis)
    bshape = [1] * x.ndim
    bshape[axis] = x.shape[axis]
    eps = a["epsilon"]
    if a["is_test"] or a["use_global_stats"]:
        use_mean, use_var = mean.astype(np.float64), var.astype(np.float64)
        mean_out, var_out = mean, var
    else:
        x64 = x.astype(np.float64)
        use_mean = x64.mean(axis=reduce)
        use_var = np.square(x64 - use_mean.reshape(bshape)).mean(axis=reduce)  # biased
        mom = a["momentum"]
        mean_out = (mom * mean.astype(np.float64) + (1 - mom) * use_mean).astype(mean.dtype)
        var_out = (mom * var.astype(np.float64) + (1 - mom) * use_var).astype(var.dtype)
    inv_std = 1.0 / np.sqrt(use_var + eps)
    mul = (inv_std * scale).reshape(bshape)
    y = (x - use_mean.reshape(bshape)) * mul + bias.reshape(bshape)
    ctx.set_output("Y", y.astype(x.dtype), lod=ctx.input_lod("X") or None)
    ctx.set_output("MeanOut", mean_out)
    ctx.set_output("VarianceOut", var_out)
    ctx.set_output("SavedMean", use_mean.astype(mean.dtype))
    ctx.set_output("SavedVariance", inv_std.astype(mean.dtype))


def _dropout_rng(ctx: KernelContext) -> np.random.Generator:
    """Fluid: the ``seed`` attr counts only with ``fix_seed``; else the executor's stream."""
    if ctx.attrs["fix_seed"]:
        return ctx.rng()
    ex = ctx.executor
    return ex.rng if ex is not None else np.random.default_rng()


@register_kernel("dropout")
def dropout(ctx: KernelContext) -> None:
    x = ctx.input("X")
    a = ctx.attrs
    p = a["dropout_prob"]
    upscale = a["dropout_implementation"] == "upscale_in_train"
    lod = ctx.input_lod("X") or None
    if a["is_test"]:
        out = x if upscale else x * x.dtype.type(1.0 - p)
        ctx.set_output("Out", out, lod=lod)
        return
    if p >= 1.0:
        mask = np.zeros(x.shape, np.uint8)
    else:
        mask = (_dropout_rng(ctx).random(x.shape) >= p).astype(np.uint8)
    keep = mask.astype(bool)
    if upscale and p < 1.0:
        out = np.where(keep, x / x.dtype.type(1.0 - p), x.dtype.type(0))
    else:
        out = np.where(keep, x, x.dtype.type(0))
    ctx.set_output("Out", out, lod=lod)
    ctx.set_output("Mask", mask)


@register_kernel("lookup_table")
def lookup_table(ctx: KernelContext) -> None:
    w, ids = ctx.input("W"), ctx.input("Ids")
    if ids.dtype != np.int64:
        raise ValueError(f"Ids must be int64, got {ids.dtype}; declare the ids variable "
                         "int64 (fluid.layers.data(..., dtype='int64'))")
    rows = w.shape[0]
    flat = ids.reshape(-1)
    bad = (flat < 0) | (flat >= rows)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"Ids[{i}] (flattened) is {int(flat[i])}, outside the {rows} rows "
                         f"[0, {rows}) of the table W {list(w.shape)}")
    out = w[flat]  # fancy indexing: a new array
    pad = ctx.attrs["padding_idx"]
    if pad != -1:
        out[flat == pad] = 0
    ctx.set_output("Out", out.reshape(*ids.shape[:-1], w.shape[1]),
                   lod=ctx.input_lod("Ids") or None)


# -- gradients -------------------------------------------------------------------


def _col2im(dwin: np.ndarray, padded_hw: tuple[int, int], strides: list[int],
            dilations: list[int]) -> np.ndarray:
    """Adjoint of :func:`_windows`: sum window gradients [N, C, OH, OW, kh, kw] back into
    the padded input [N, C, Hp, Wp].  One strided slice-add per kernel tap (no pixel loop):
    within a tap the windows hit distinct cells, so ``+=`` on the slice is exact."""
    n, c, oh, ow, kh, kw = dwin.shape
    (sh, sw), (dh, dw) = strides, dilations
    out = np.zeros((n, c, *padded_hw), dtype=dwin.dtype)
    for i in range(kh):
        r0 = i * dh
        for j in range(kw):
            c0 = j * dw
            out[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw] += \
                dwin[:, :, :, :, i, j]
    return out


def _crop(xp: np.ndarray, pads: list[int], hw: tuple[int, ...]) -> np.ndarray:
    """The unpadded [H, W] part of a padded gradient."""
    return xp[:, :, pads[0]:pads[0] + hw[0], pads[2]:pads[2] + hw[1]]


@register_kernel("conv2d_grad", "depthwise_conv2d_grad")
def conv2d_grad(ctx: KernelContext) -> None:
    """dFilter = cols^T @ dOut per group; dInput = col2im(dOut @ Filter) (the forward's
    im2col read backwards), cropped to the unpadded input."""
    x, w = ctx.input("Input"), ctx.input("Filter")
    dout = ctx.input("Output@GRAD")
    a = ctx.attrs
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    g = a["groups"]
    out_hw, pads, dil = window_geometry((h, wd), (kh, kw), a["strides"], a["paddings"],
                                        a["dilations"], a["padding_algorithm"])
    oh, ow = out_hw
    # dOut as the forward's matmul result: [g, N*OH*OW, M/g]
    dmat = (dout.reshape(n, g, m // g, oh, ow).transpose(1, 0, 3, 4, 2)
            .reshape(g, n * oh * ow, m // g))
    if ctx.has_output("Filter@GRAD"):
        cols, _, _, _ = _conv_cols(x, w, a)
        dw = np.matmul(cols.transpose(0, 2, 1), dmat)  # [g, C/g*kh*kw, M/g]
        dw = dw.transpose(0, 2, 1).reshape(m, cg, kh, kw)
        ctx.set_output("Filter@GRAD", np.ascontiguousarray(dw, dtype=w.dtype))
    if ctx.has_output("Input@GRAD"):
        dcols = np.matmul(dmat, w.reshape(g, m // g, cg * kh * kw))  # [g, N*OH*OW, C/g*kh*kw]
        dwin = (dcols.reshape(g, n, oh, ow, cg, kh, kw).transpose(1, 0, 4, 2, 3, 5, 6)
                .reshape(n, c, oh, ow, kh, kw))
        padded = (h + pads[0] + pads[1], wd + pads[2] + pads[3])
        dx = _crop(_col2im(dwin, padded, a["strides"], dil), pads, (h, wd))
        ctx.set_output("Input@GRAD", np.ascontiguousarray(dx, dtype=x.dtype))


def _route(dout: np.ndarray, rows: np.ndarray, cols: np.ndarray,
           hw: tuple[int, int]) -> np.ndarray:
    """[N, C, H, W] zeros with each dout[n, c, i, j] added at (rows, cols)[n, c, i, j]."""
    n, c = dout.shape[:2]
    h, w = hw
    plane = np.arange(n * c).reshape(n, c, *([1] * (dout.ndim - 2)))
    flat = ((plane * h + rows) * w + cols).ravel()
    out = np.bincount(flat, weights=dout.ravel(), minlength=n * c * h * w)
    return out.reshape(n, c, h, w)


def _adaptive_bins(size: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) of Fluid's adaptive bins along one axis."""
    i = np.arange(o)
    return i * size // o, -(-(i + 1) * size // o)


def _adaptive_pool_grad(x: np.ndarray, dout: np.ndarray, is_max: bool) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = dout.shape[2:]
    (sh, eh), (sw, ew) = _adaptive_bins(h, oh), _adaptive_bins(w, ow)
    if not is_max:
        # out = Ah @ x @ Aw^T with Ah[i, r] = 1/|bin i| on bin i: dX = Ah^T @ dOut @ Aw
        def avg_matrix(s: np.ndarray, e: np.ndarray, size: int) -> np.ndarray:
            r = np.arange(size)
            return ((r >= s[:, None]) & (r < e[:, None])) / (e - s)[:, None]

        ah, aw = avg_matrix(sh, eh, h), avg_matrix(sw, ew, w)
        return np.einsum("ih,ncij,jw->nchw", ah, dout, aw)
    # each bin's cells, padded to the largest bin by repeating its last cell (a repeat
    # comes after the original, so argmax still finds the first maximum)
    kh, kw = int((eh - sh).max()), int((ew - sw).max())
    ridx = np.minimum(sh[:, None] + np.arange(kh), eh[:, None] - 1)  # [OH, kh]
    cidx = np.minimum(sw[:, None] + np.arange(kw), ew[:, None] - 1)  # [OW, kw]
    win = x[:, :, ridx[:, :, None, None], cidx[None, None, :, :]]  # [N, C, OH, kh, OW, kw]
    arg = win.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, kh * kw).argmax(axis=-1)
    rows = ridx[np.arange(oh)[:, None], arg // kw]
    cols = cidx[np.arange(ow), arg % kw]
    return _route(dout, rows, cols, (h, w))


@register_kernel("pool2d_grad")
def pool2d_grad(ctx: KernelContext) -> None:
    """max: dOut goes to the first maximum of each window (row-major; padding never
    wins); avg: dOut / divisor to every cell of the window (padding cells dropped)."""
    if not ctx.has_output("X@GRAD"):
        return
    x, dout = ctx.input("X"), ctx.input("Out@GRAD")
    a = ctx.attrs
    is_max = a["pooling_type"] == "max"
    n, c, h, w = x.shape
    if a["global_pooling"]:
        if is_max:
            arg = x.reshape(n, c, h * w).argmax(axis=-1)
            dx = _route(dout.reshape(n, c), arg // w, arg % w, (h, w))
        else:
            dx = np.broadcast_to(dout / dout.dtype.type(h * w), x.shape)
    elif a["adaptive"]:
        dx = _adaptive_pool_grad(x, dout, is_max)
    else:
        ksize, strides, (oh, ow), pads = pool_geometry((h, w), a)
        padded = (h + pads[0] + pads[1], w + pads[2] + pads[3])
        if is_max:
            xp = _pad_hw(x, pads, np.finfo(x.dtype).min)
            win = _windows(xp, ksize, strides, [1, 1], [oh, ow])
            arg = win.reshape(n, c, oh, ow, ksize[0] * ksize[1]).argmax(axis=-1)
            rows = np.arange(oh)[:, None] * strides[0] + arg // ksize[1]
            cols = np.arange(ow) * strides[1] + arg % ksize[1]
            dxp = _route(dout, rows, cols, padded)
        else:
            share = dout / _avg_counts(a, (h, w), ksize, strides, [oh, ow], pads, dout.dtype)
            dwin = np.broadcast_to(share[..., None, None], (n, c, oh, ow, *ksize))
            dxp = _col2im(dwin, padded, strides, [1, 1])
        dx = _crop(dxp, pads, (h, w))
    ctx.set_output("X@GRAD", np.ascontiguousarray(dx, dtype=x.dtype))


@register_kernel("batch_norm_grad")
def batch_norm_grad(ctx: KernelContext) -> None:
    """With x_hat = (X - mean) * inv_std and m cells per channel:
    dBias = sum(dY), dScale = sum(dY * x_hat), and
    training: dX = Scale * inv_std * (dY - dBias / m - x_hat * dScale / m)  (through the
    batch mean and variance, read from SavedMean / SavedVariance = inv_std);
    is_test / use_global_stats: dX = Scale * inv_std * dY with the running statistics."""
    x, dy = ctx.input("X"), ctx.input("Y@GRAD")
    scale, bias = ctx.input("Scale"), ctx.input("Bias")
    a = ctx.attrs
    axis = x.ndim - 1 if a["data_layout"] == "NHWC" else 1
    reduce = tuple(i for i in range(x.ndim) if i != axis)
    bshape = [1] * x.ndim
    bshape[axis] = x.shape[axis]
    global_stats = a["is_test"] or a["use_global_stats"]
    if global_stats:
        mean = ctx.input("Mean").astype(np.float64)
        inv_std = 1.0 / np.sqrt(ctx.input("Variance").astype(np.float64) + a["epsilon"])
    else:
        mean = ctx.input("SavedMean").astype(np.float64)
        inv_std = ctx.input("SavedVariance").astype(np.float64)
    dy64 = dy.astype(np.float64)
    x_hat = (x.astype(np.float64) - mean.reshape(bshape)) * inv_std.reshape(bshape)
    dbias = dy64.sum(axis=reduce)
    dscale = (dy64 * x_hat).sum(axis=reduce)
    if ctx.has_output("X@GRAD"):
        k = (scale.astype(np.float64) * inv_std).reshape(bshape)
        if global_stats:
            dx = dy64 * k
        else:
            m = x.size // x.shape[axis]
            dx = k * (dy64 - (dbias / m).reshape(bshape) - x_hat * (dscale / m).reshape(bshape))
        ctx.set_output("X@GRAD", dx.astype(x.dtype))
    if ctx.has_output("Scale@GRAD"):
        ctx.set_output("Scale@GRAD", dscale.astype(scale.dtype))
    if ctx.has_output("Bias@GRAD"):
        ctx.set_output("Bias@GRAD", dbias.astype(bias.dtype))


@register_kernel("dropout_grad")
def dropout_grad(ctx: KernelContext) -> None:
    """dX = dOut times the forward's factor: Mask (/ (1 - p) for upscale_in_train) in
    training; (1 - p) (downgrade_in_infer) or 1 (upscale_in_train) with is_test."""
    if not ctx.has_output("X@GRAD"):
        return
    d = ctx.input("Out@GRAD")
    a = ctx.attrs
    p = a["dropout_prob"]
    upscale = a["dropout_implementation"] == "upscale_in_train"
    zero = d.dtype.type(0)
    if a["is_test"]:
        dx = d.copy() if upscale else d * d.dtype.type(1.0 - p)
    elif upscale and p >= 1.0:
        dx = np.zeros_like(d)
    else:
        keep = ctx.input("Mask").astype(bool)
        dx = np.where(keep, d / d.dtype.type(1.0 - p) if upscale else d, zero)
    ctx.set_output("X@GRAD", dx.astype(d.dtype, copy=False))


@register_kernel("lookup_table_grad")
def lookup_table_grad(ctx: KernelContext) -> None:
    """A dense W@GRAD: dOut rows summed into the rows of their ids (repeats accumulate);
    the padding_idx row gets none.  (Fluid's is_sparse SelectedRows is not modelled.)"""
    if not ctx.has_output("W@GRAD"):
        return
    w, ids, d = ctx.input("W"), ctx.input("Ids"), ctx.input("Out@GRAD")
    flat = ids.reshape(-1)
    rows = d.reshape(-1, w.shape[1])
    pad = ctx.attrs["padding_idx"]
    if pad != -1:
        keep = flat != pad
        flat, rows = flat[keep], rows[keep]
    dw = np.zeros(w.shape, dtype=w.dtype)
    np.add.at(dw, flat, rows)
    ctx.set_output("W@GRAD", dw)
