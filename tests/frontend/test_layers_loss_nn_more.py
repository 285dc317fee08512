"""The composite loss and network layers of Paddle 1.5 added for issue 20, against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.errors import ShapeError

R = np.random.default_rng(9)
PLACE = fluid.CPUPlace()


def _run(build, **feed):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        vs = {k: layers.data(k, shape=list(v.shape), dtype=str(v.dtype), append_batch_size=False)
              for k, v in feed.items()}
        outs = build(**vs)
    exe = fluid.Executor(PLACE)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        return exe.run(main, feed=feed, fetch_list=list(outs))


def f32(*shape, low=-1.0, high=1.0):
    return R.uniform(low, high, size=shape).astype(np.float32)


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_losses():
    x, y = f32(4, 3), f32(4, 3)
    p, lab = f32(4, 1, low=0.05, high=0.95), (R.random((4, 1)) < 0.5).astype(np.float32)
    z = lab.copy()
    z[1, 0] = -100
    sq, sce, sce_n, ll, hub, sl1 = _run(
        lambda x, y, p, lab, z: [
            layers.square_error_cost(x, y),
            layers.sigmoid_cross_entropy_with_logits(p, z),
            layers.sigmoid_cross_entropy_with_logits(p, z, normalize=True),
            layers.log_loss(p, lab), layers.huber_loss(x, y, 0.3),
            layers.smooth_l1(x, y, sigma=2.0)],
        x=x, y=y, p=p, lab=lab, z=z)
    close(sq, (x - y) ** 2)
    ref = np.maximum(p, 0) - p * z + np.log1p(np.exp(-np.abs(p)))
    ref[1, 0] = 0
    close(sce, ref)
    close(sce_n, ref / 3)
    close(ll, -lab * np.log(p + 1e-4) - (1 - lab) * np.log(1 - p + 1e-4))
    r = np.abs(y - x)
    close(hub, np.where(r <= 0.3, 0.5 * r * r, 0.3 * (r - 0.15)))
    d = np.abs(x - y)
    close(sl1, np.where(d < 0.25, 0.5 * 4 * d * d, d - 0.125).sum(1, keepdims=True))


def test_ranking_and_distribution_losses():
    logp = np.log(np.full((3, 4), 0.25, np.float32)) + f32(3, 4, low=-0.1, high=0.1)
    t = f32(3, 4, low=0, high=1)
    t[0, 0] = 0
    s = f32(3, 4)
    ids = np.array([[1], [3], [0]], np.int64)
    lab, left, right = np.array([[1], [0], [1]], np.float32), f32(3, 1), f32(3, 1)
    prob = np.abs(f32(3, 4)) + 0.1
    prob /= prob.sum(1, keepdims=True)
    kl_none, kl_mean, kl_bm, kl_sum, bpr, mr, rk, dice, ls = _run(
        lambda logp, t, s, ids, lab, left, right, prob: [
            layers.kldiv_loss(logp, t, "none"), layers.kldiv_loss(logp, t),
            layers.kldiv_loss(logp, t, "batchmean"), layers.kldiv_loss(logp, t, "sum"),
            layers.bpr_loss(s, ids), layers.margin_rank_loss(lab, left, right, 0.2),
            layers.rank_loss(lab, left, right), layers.dice_loss(prob, ids),
            layers.label_smooth(prob, epsilon=0.2)],
        logp=logp, t=t, s=s, ids=ids, lab=lab, left=left, right=right, prob=prob)
    k = np.where(t > 0, t * (np.log(np.maximum(t, 1e-30)) - logp), 0)
    close(kl_none, k)
    close(kl_mean, [k.mean()])
    close(kl_bm, [k.sum() / 3])
    close(kl_sum, [k.sum()])
    pos = s[np.arange(3), ids[:, 0]][:, None]
    terms = np.log(1 / (1 + np.exp(-(pos - s))))
    terms[np.arange(3), ids[:, 0]] = 0
    close(bpr, -terms.sum(1, keepdims=True) / 3)
    close(mr, np.maximum(0, -lab * (left - right) + 0.2))
    close(rk, np.log1p(np.exp(left - right)) - lab * (left - right))
    oh = np.eye(4)[ids[:, 0]]
    close(dice, [np.mean(1 - 2 * (prob * oh).sum(1) / (prob.sum(1) + oh.sum(1) + 1e-5))])
    close(ls, 0.8 * prob + 0.05)


def test_normalisations():
    x = f32(2, 6, 3, 2)
    g = f32(4, 5)
    cs, l2, ln, gn, lr = _run(
        lambda x, g: [layers.cos_sim(g, layers.slice(g, [0], [0], [1])),
                      layers.l2_normalize(g, axis=1), layers.layer_norm(x, begin_norm_axis=2),
                      layers.group_norm(x, groups=3), layers.lrn(x, n=3, k=2.0, alpha=0.1)],
        x=x, g=g)
    close(cs, (g @ g[0]).reshape(-1, 1) / np.linalg.norm(g, axis=1, keepdims=True)
          / np.linalg.norm(g[0]))
    close(l2, g / np.sqrt((g * g).sum(1, keepdims=True) + 1e-12))
    r = x.reshape(2, 6, 6)
    close(ln, ((r - r.mean(2, keepdims=True)) / np.sqrt(r.var(2, keepdims=True) + 1e-5))
          .reshape(x.shape))
    q = x.reshape(2, 3, 12)
    close(gn, ((q - q.mean(2, keepdims=True)) / np.sqrt(q.var(2, keepdims=True) + 1e-5))
          .reshape(x.shape))
    sq = np.pad(x * x, [(0, 0), (1, 1), (0, 0), (0, 0)])
    win = sq[:, 0:6] + sq[:, 1:7] + sq[:, 2:8]
    close(lr, x / (2.0 + 0.1 * win) ** 0.75)


def test_layout_layers():
    x = f32(2, 8, 2, 3)
    s = f32(8)
    b = f32(8)
    mo, ps, sc, ac, p2r, p2c, cr, pcl = _run(
        lambda x, s, b: [layers.maxout(x, 2), layers.pixel_shuffle(x, 2),
                         layers.shuffle_channel(x, 4), layers.affine_channel(x, s, b),
                         layers.pad2d(x, [1, 0, 2, 1], mode="reflect"),
                         layers.pad2d(x, [1, 1, 0, 0], pad_value=3.0),
                         layers.crop(x, [1, 3, 2, 2], [1, 2, 0, 1]),
                         layers.pad_constant_like(layers.pad(x, [0, 0] * 4), x, 1.0)],
        x=x, s=s, b=b)
    close(mo, x.reshape(2, 4, 2, 2, 3).max(2))
    want = np.zeros((2, 2, 4, 6), np.float32)
    for c in range(2):
        for i in range(2):
            for j in range(2):
                want[:, c, i::2, j::2] = x[:, c * 4 + i * 2 + j]
    close(ps, want)
    close(sc, x.reshape(2, 4, 2, 2, 3).transpose(0, 2, 1, 3, 4).reshape(x.shape))
    close(ac, x * s[None, :, None, None] + b[None, :, None, None])
    close(p2r, np.pad(x, [(0, 0), (0, 0), (1, 0), (2, 1)], mode="reflect"))
    close(p2c, np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 0)], constant_values=3.0))
    close(cr, x[1:2, 2:5, 0:2, 1:3])
    close(pcl, x)


def test_clip_by_norm_fsp_bilinear():
    x = f32(3, 4)
    a, c = f32(2, 3, 2, 2), f32(2, 2, 2, 2)
    u, v = f32(2, 3), f32(2, 2)
    cl_small, cl_big, fsp, btp = _run(
        lambda x, a, c, u, v: [layers.clip_by_norm(x, 0.5), layers.clip_by_norm(x, 100.0),
                               layers.fsp_matrix(a, c),
                               layers.bilinear_tensor_product(
                                   u, v, 2, param_attr=fluid.ParamAttr(
                                       name="btw",
                                       initializer=fluid.initializer.Constant(0.5)))],
        x=x, a=a, c=c, u=u, v=v)
    close(cl_small, x * 0.5 / np.linalg.norm(x))
    close(cl_big, x)
    close(fsp, np.einsum("nchw,ndhw->ncd", a, c) / 4)
    w = np.full((2, 3, 2), 0.5, np.float32)
    close(btp, np.einsum("ni,kij,nj->nk", u, w, v))


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[6, 3, 2], dtype="float32")
        with pytest.raises(ValueError, match="group_norm: 6 channels"):
            layers.group_norm(x, 4)
        with pytest.raises(ValueError, match="pixel_shuffle: 6 channels"):
            layers.pixel_shuffle(x, 2)
        with pytest.raises(ValueError, match="kldiv_loss: reduction"):
            layers.kldiv_loss(x, x, "avg")
        with pytest.raises(ShapeError, match="square_error_cost"):
            layers.square_error_cost(x, layers.data("y", shape=[5], dtype="float32"))
        with pytest.raises(ValueError, match="pad2d: mode"):
            layers.pad2d(x, mode="wrap")
