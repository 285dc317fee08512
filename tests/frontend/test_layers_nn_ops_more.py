"""row_conv, add_position_encoding, random_crop, npair_loss, affine_grid and
spectral_norm (issue 20), against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from tests.frontend._layer_util import run_layers_with_scope as _run

R = np.random.default_rng(19)
PLACE = fluid.CPUPlace()


def _pe(length, size):
    half = size // 2
    out = np.zeros((length, size))
    for p in range(length):
        for k in range(half):
            v = p / 10000 ** (k / (half - 1))
            out[p, k], out[p, half + k] = np.sin(v), np.cos(v)
    return out


def test_row_conv_and_position_encoding():
    x = R.normal(size=(5, 4)).astype(np.float32)
    xp = R.normal(size=(2, 3, 6)).astype(np.float32)

    def build():
        xv = layers.data("x", shape=[4], dtype="float32", lod_level=1)
        pv = layers.data("p", shape=[3, 6], dtype="float32")
        rc = layers.row_conv(xv, 1, param_attr=fluid.ParamAttr(
            name="rcw", initializer=fluid.initializer.Constant(0.5)))
        return [rc, layers.add_position_encoding(pv, 0.5, 2.0),
                layers.add_position_encoding(xv, 1.0, 1.0)]

    (rc, pe, pel), _ = _run(build, {"x": fluid.create_lod_tensor(x, [[3, 2]], PLACE), "p": xp},
                            return_numpy=False)
    want = 0.5 * x.copy()
    want[0:2] += 0.5 * x[1:3]
    want[3:4] += 0.5 * x[4:5]
    np.testing.assert_allclose(np.asarray(rc), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(pe), 0.5 * xp + 2 * _pe(3, 6)[None], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(pel), x + np.concatenate([_pe(3, 4), _pe(2, 4)]),
                               rtol=1e-5, atol=1e-6)


def test_random_crop_takes_windows():
    x = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)
    (out,), _ = _run(lambda: [layers.random_crop(layers.data("x", shape=[5, 6],
                                                             dtype="float32"), [3, 4], seed=5)],
                     {"x": x})
    assert out.shape == (2, 3, 4)
    for n in range(2):
        r, c = divmod(int(out[n, 0, 0]) - n * 30, 6)
        np.testing.assert_array_equal(out[n], x[n, r:r + 3, c:c + 4])


def test_npair_loss_matches_formula():
    a, p = R.normal(size=(4, 3)).astype(np.float32), R.normal(size=(4, 3)).astype(np.float32)
    lab = np.array([1, 2, 1, 3], np.float32)
    (loss,), _ = _run(lambda: [layers.npair_loss(
        layers.data("a", shape=[4, 3], dtype="float32", append_batch_size=False),
        layers.data("p", shape=[4, 3], dtype="float32", append_batch_size=False),
        layers.data("l", shape=[4], dtype="float32", append_batch_size=False))],
        {"a": a, "p": p, "l": lab})
    t = (lab[:, None] == lab[None, :]).astype(np.float64)
    t /= t.sum(1, keepdims=True)
    sim = a.astype(np.float64) @ p.T
    logp = sim - np.log(np.exp(sim).sum(1, keepdims=True))
    ce = -(t * logp).sum(1, keepdims=True)
    want = 0.25 * 0.002 * ((a ** 2).sum(1).mean() + (p ** 2).sum(1).mean()) + \
        (t * ce).sum(0).mean()
    np.testing.assert_allclose(loss.reshape(-1), [want], rtol=1e-5)


def test_affine_grid_identity_and_shift():
    theta = np.array([[[1, 0, 0], [0, 1, 0]], [[1, 0, 0.5], [0, 2, 0]]], np.float32)
    (g,), _ = _run(lambda: [layers.affine_grid(
        layers.data("t", shape=[2, 3], dtype="float32"), [2, 1, 2, 3])], {"t": theta})
    xs, ys = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 2))
    np.testing.assert_allclose(g[0], np.stack([xs, ys], -1), atol=1e-6)
    np.testing.assert_allclose(g[1], np.stack([xs + 0.5, 2 * ys], -1), atol=1e-6)


def test_spectral_norm_divides_by_the_largest_singular_value():
    w = R.normal(size=(4, 6)).astype(np.float32)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        out = layers.spectral_norm(layers.data("w", shape=[4, 6], dtype="float32",
                                               append_batch_size=False), power_iters=3)
    exe = fluid.Executor(PLACE)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        for _ in range(10):  # u and v converge over the runs
            got, = exe.run(main, feed={"w": w}, fetch_list=[out])
    np.testing.assert_allclose(got, w / np.linalg.svd(w, compute_uv=False)[0], rtol=1e-4)


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[3], dtype="float32", lod_level=1)
        with pytest.raises(ValueError, match="row_conv: future_context_size"):
            layers.row_conv(x, -1)
        with pytest.raises(ValueError, match="affine_grid: out_shape"):
            layers.affine_grid(x, [2, 3])
