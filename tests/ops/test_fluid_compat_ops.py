"""continuous_value_model, similarity_focus, im2sequence and hsigmoid (issue 20)
against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from tests.op_harness import run_op

R = np.random.default_rng(29)


def test_cvm():
    x = np.abs(R.normal(size=(3, 5)))
    y = run_op("cvm", {"X": x, "CVM": x[:, :2]}, {"use_cvm": True})["Y"]
    want = x.copy()
    want[:, 0] = np.log(x[:, 0] + 1)
    want[:, 1] = np.log(x[:, 1] + 1) - np.log(x[:, 0] + 1)
    np.testing.assert_allclose(y, want)
    np.testing.assert_array_equal(run_op("cvm", {"X": x, "CVM": x[:, :2]},
                                         {"use_cvm": False})["Y"], x[:, 2:])


def test_similarity_focus_greedy_mask():
    x = np.zeros((1, 2, 3, 3))
    x[0, 0] = [[9, 8, 1], [7, 6, 2], [3, 4, 5]]
    out = run_op("similarity_focus", {"X": x}, {"axis": 1, "indexes": [0]})["Out"]
    # 9 at (0, 0); then 6 at (1, 1); then 5 at (2, 2)
    np.testing.assert_array_equal(out[0, 0], np.eye(3))
    np.testing.assert_array_equal(out[0, 1], np.eye(3))  # broadcast along axis 1


def test_im2sequence():
    x = R.normal(size=(2, 2, 3, 4)).astype(np.float32)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = layers.im2sequence(layers.data("x", shape=[2, 3, 4], dtype="float32"),
                                 filter_size=[2, 2], stride=[1, 2], padding=[0, 1])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[out],
                                                return_numpy=False)
    xp = np.pad(x, [(0, 0), (0, 0), (0, 0), (1, 1)])
    rows = [xp[n, :, i:i + 2, j:j + 2].reshape(-1) for n in range(2) for i in range(2)
            for j in range(0, 5, 2)]
    np.testing.assert_array_equal(np.asarray(got), np.stack(rows))
    assert got.recursive_sequence_lengths() == [[6, 6]]


def _hs_ref(x, w, b, labels, n_cls):
    out = []
    for xi, c in zip(x, labels):
        code = c + n_cls
        total = 0.0
        for j in range(int(np.floor(np.log2(code)))):
            node = (code >> (j + 1)) - 1
            bit = (code >> j) & 1
            p = np.clip(xi @ w[node] + b[node, 0], -40, 40)
            total += np.log1p(np.exp(p)) - bit * p
        out.append([total])
    return np.array(out)


def test_hsigmoid_matches_the_tree_and_trains():
    n_cls, d = 6, 4
    x = R.normal(size=(8, d)).astype(np.float32)
    lab = R.integers(0, n_cls, size=(8, 1)).astype(np.int64)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        xv = layers.data("x", shape=[d], dtype="float32")
        lv = layers.data("y", shape=[1], dtype="int64")
        cost = layers.hsigmoid(xv, lv, n_cls, param_attr=fluid.ParamAttr(name="hs_w"),
                               bias_attr=fluid.ParamAttr(name="hs_b"))
        avg = layers.mean(cost)
        fluid.optimizer.SGD(0.5).minimize(avg)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        sc = fluid.global_scope()
        w = np.asarray(sc.find_var("hs_w").get_tensor()).copy()
        b = np.asarray(sc.find_var("hs_b").get_tensor()).copy()
        first, = exe.run(main, feed={"x": x, "y": lab}, fetch_list=[cost])
        losses = [float(exe.run(main, feed={"x": x, "y": lab}, fetch_list=[avg])[0][0])
                  for _ in range(30)]
    np.testing.assert_allclose(first, _hs_ref(x.astype(np.float64), w, b, lab[:, 0], n_cls),
                               rtol=1e-5)
    assert losses[-1] < 0.5 * losses[0]


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[3, 4, 4], dtype="float32")
        with pytest.raises(ValueError, match="similarity_focus: axis"):
            layers.similarity_focus(x, 0, [0])
        with pytest.raises(ValueError, match="hsigmoid: custom trees"):
            layers.hsigmoid(x, x, 4, is_custom=True)


def _ctc_brute(logits, label, blank):
    import itertools as it

    y = np.exp(logits - logits.max(1, keepdims=True))
    y /= y.sum(1, keepdims=True)
    total = 0.0
    for path in it.product(range(logits.shape[1]), repeat=logits.shape[0]):
        collapsed = [c for k, c in enumerate(path) if k == 0 or c != path[k - 1]]
        if [c for c in collapsed if c != blank] == list(label):
            total += np.prod([y[t, c] for t, c in enumerate(path)])
    return -np.log(total)


def test_warpctc_matches_brute_force():
    lens, labels = [4, 3], [[1, 2], [2]]
    x = R.normal(size=(7, 3)).astype(np.float32)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = layers.data("x", shape=[3], dtype="float32", lod_level=1)
        lv = layers.data("l", shape=[1], dtype="int32", lod_level=1)
        loss = layers.warpctc(xv, lv, blank=0)
    place = fluid.CPUPlace()
    feed = {"x": fluid.create_lod_tensor(x, [lens], place),
            "l": fluid.create_lod_tensor(np.array([[1], [2], [2]], np.int32), [[2, 1]], place)}
    got, = fluid.Executor(place).run(main, feed=feed, fetch_list=[loss])
    want = [_ctc_brute(x[:4].astype(np.float64), labels[0], 0),
            _ctc_brute(x[4:].astype(np.float64), labels[1], 0)]
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5)


def test_grid_sampler_matches_bilinear_sampling():
    x = R.normal(size=(1, 2, 3, 4))
    grid = R.uniform(-1.1, 1.1, size=(1, 2, 3, 2))
    out = run_op("grid_sampler", {"X": x, "Grid": grid})["Output"]
    want = np.zeros((1, 2, 2, 3))
    for i in range(2):
        for j in range(3):
            px = (grid[0, i, j, 0] + 1) * 3 / 2
            py = (grid[0, i, j, 1] + 1) * 2 / 2
            for yy in range(3):
                for xx in range(4):
                    wgt = max(0, 1 - abs(px - xx)) * max(0, 1 - abs(py - yy))
                    want[0, :, i, j] += wgt * x[0, :, yy, xx]
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)


def test_nce_cost_with_fixed_negatives_and_training():
    x = R.normal(size=(3, 4))
    w = R.normal(size=(6, 4))
    b = R.normal(size=(6, 1))
    lab = np.array([[1], [4], [0]], np.int64)
    neg = [2, 5]
    got = run_op("nce", {"Input": x, "Label": lab, "Weight": w, "Bias": b},
                 {"num_total_classes": 6, "num_neg_samples": 2,
                  "custom_neg_classes": neg})["Cost"]
    bb = 2 / 6
    want = []
    def o(i, k):
        return 1 / (1 + np.exp(-(x[i] @ w[k] + b[k, 0])))

    for i in range(3):
        c = -np.log(o(i, lab[i, 0]) / (o(i, lab[i, 0]) + bb))
        c -= sum(np.log(bb / (o(i, k) + bb)) for k in neg)
        want.append([c])
    np.testing.assert_allclose(got, want, rtol=1e-10)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        xv = layers.data("x", shape=[4], dtype="float32")
        lv = layers.data("y", shape=[1], dtype="int64")
        avg = layers.mean(layers.nce(xv, lv, 6, num_neg_samples=3, seed=1,
                                     sampler="log_uniform"))
        fluid.optimizer.SGD(0.5).minimize(avg)
    exe = fluid.Executor(fluid.CPUPlace())
    xs = R.normal(size=(16, 4)).astype(np.float32)
    ys = (xs[:, :1] > 0).astype(np.int64) * 3
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        losses = [float(exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[avg])[0][0])
                  for _ in range(40)]
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


def test_teacher_student_sigmoid_loss_cases():
    x = np.array([[0.3], [-1.2], [2.0], [0.7]])
    lab = np.array([[-2.0], [-1.0], [0.4], [1.6]])
    got = run_op("teacher_student_sigmoid_loss", {"X": x, "Label": lab})["Y"]

    def sce(v, t):
        return max(v, 0) - v * t + np.log1p(np.exp(-abs(v)))

    want = [[sce(0.3, 0)], [sce(-1.2, 1)], [sce(2.0, 0) + sce(2.0, 0.4)],
            [sce(0.7, 1) + sce(0.7, 0.6)]]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_space_to_depth_follows_paddles_kernel():
    b, bs = 2, 2
    x = R.normal(size=(b, 8, 4, 6)).astype(np.float32)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = layers.space_to_depth(layers.data("x", shape=[8, 4, 6], dtype="float32"), bs)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[out])
    n, c, h, w = x.shape
    out_c = c // (bs * bs)
    flat = np.zeros(x.size, np.float32)
    for in_index, v in enumerate(x.reshape(-1)):  # Paddle 1.5's space_to_depth_compute
        bb, rest = divmod(in_index, c * h * w)
        k, rest = divmod(rest, h * w)
        j, i = divmod(rest, w)
        c2, offset = k % out_c, k // out_c
        w2, h2 = i * bs + offset % bs, j * bs + offset // bs
        flat[w2 + w * bs * (h2 + h * bs * (c2 + out_c * bb))] = v
    assert got.shape == (n, c * bs * bs, h // bs, w // bs)
    np.testing.assert_array_equal(got.reshape(-1), flat)


def test_where_one_argument_gives_coordinates_and_three_choose():
    c = np.array([[True, False, True], [False, False, True]])
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        cv = layers.data("c", shape=[2, 3], dtype="bool", append_batch_size=False)
        av = layers.data("a", shape=[2, 3], dtype="float32", append_batch_size=False)
        bv = layers.data("b", shape=[2, 3], dtype="float32", append_batch_size=False)
        idx, pick = layers.where(cv), layers.where(cv, av, bv)
        with pytest.raises(ValueError, match="where: give both x and y"):
            layers.where(cv, av)
    got_idx, got_pick = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"c": c, "a": a, "b": b}, fetch_list=[idx, pick])
    assert got_idx.tolist() == [[0, 0], [0, 2], [1, 2]]
    np.testing.assert_array_equal(got_pick, c.astype(np.float32))
