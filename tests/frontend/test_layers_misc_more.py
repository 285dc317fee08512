"""ctc_greedy_decoder, edit_distance, mean_iou, elementwise_floordiv, the batch-sized
random layers, sampling_id, Print, py_func, temporal_shift and the SelectedRows helpers
(issue 20), against numpy."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from tests.frontend._layer_util import run_layers as _run

PLACE = fluid.CPUPlace()
R = np.random.default_rng(11)


def _lt(a, lens):
    return fluid.create_lod_tensor(np.asarray(a), [lens], PLACE)


def test_ctc_greedy_decoder_and_edit_distance():
    # best classes per step: seq 0: 1 1 0 2 2 1 ; seq 1: 0 0 3  (blank 0)
    best = [1, 1, 0, 2, 2, 1, 0, 0, 3]
    probs = np.full((9, 4), 0.1, np.float32)
    probs[np.arange(9), best] = 0.7

    def build():
        p = layers.data("p", shape=[4], dtype="float32", lod_level=1)
        h = layers.data("h", shape=[1], dtype="int64", lod_level=1)
        r = layers.data("r", shape=[1], dtype="int64", lod_level=1)
        d, n = layers.edit_distance(h, r, normalized=False)
        dn, _ = layers.edit_distance(h, r, ignored_tokens=[9])
        return [layers.ctc_greedy_decoder(p, blank=0), d, n, dn]

    dec, d, n, dn = _run(build, {
        "p": _lt(probs, [6, 3]),
        "h": _lt(np.array([[1], [2], [3], [9], [5]], np.int64), [3, 2]),
        "r": _lt(np.array([[1], [3], [3], [5], [6], [7]], np.int64), [3, 3])},
        return_numpy=False)
    assert np.asarray(dec).reshape(-1).tolist() == [1, 2, 1, 3]
    assert dec.recursive_sequence_lengths() == [[3, 1]]
    # kitten-style: [1 2 3] -> [1 3 3]: 1 substitution; [9 5] -> [5 6 7]: 3 edits
    np.testing.assert_array_equal(np.asarray(d).reshape(-1), [1, 3])
    assert np.asarray(n).tolist() == [2]
    np.testing.assert_allclose(np.asarray(dn).reshape(-1), [1 / 3, 2 / 3], rtol=1e-6)


def test_mean_iou_and_floordiv():
    pred = np.array([0, 1, 1, 2, 2, 2], np.int32)
    lab = np.array([0, 1, 2, 2, 2, 0], np.int32)
    a = np.array([[7, -7, 9]], np.int64)
    b = np.array([[2, 2, -4]], np.int64)

    def build():
        p = layers.data("p", shape=[6], dtype="int32", append_batch_size=False)
        lv = layers.data("l", shape=[6], dtype="int32", append_batch_size=False)
        av = layers.data("a", shape=[1, 3], dtype="int64", append_batch_size=False)
        bv = layers.data("b", shape=[1, 3], dtype="int64", append_batch_size=False)
        return [*layers.mean_iou(p, lv, 3), layers.elementwise_floordiv(av, bv)]

    miou, wrong, correct, fd = _run(build, {"p": pred, "l": lab, "a": a, "b": b})
    assert correct.tolist() == [1, 1, 2] and wrong.tolist() == [1, 1, 2]
    np.testing.assert_allclose(miou, [np.mean([1 / 2, 1 / 2, 2 / 4])], rtol=1e-6)
    assert fd.tolist() == [[3, -4, -3]]


def test_random_like_and_sampling_id():
    x = np.zeros((5, 3), np.float32)
    probs = np.array([[0, 1, 0], [0, 0, 1]] * 3, np.float32)

    def build():
        xv = layers.data("x", shape=[3], dtype="float32")
        pv = layers.data("p", shape=[3], dtype="float32")
        return [layers.uniform_random_batch_size_like(xv, [-1, 4], min=2.0, max=3.0, seed=1),
                layers.gaussian_random_batch_size_like(xv, [-1, 2000], seed=2),
                layers.sampling_id(pv, seed=3)]

    u, g, s = _run(build, {"x": x, "p": probs})
    assert u.shape == (5, 4) and (u >= 2).all() and (u < 3).all()
    assert g.shape == (5, 2000) and abs(g.mean()) < 0.05 and abs(g.std() - 1) < 0.05
    assert s.tolist() == [1, 2] * 3


def test_print_passes_through_and_prints(capsys):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out, = _run(lambda: [layers.Print(layers.data("x", shape=[3], dtype="float32"),
                                      message="look", summarize=2)], {"x": x})
    np.testing.assert_array_equal(out, x)
    printed = capsys.readouterr().out
    assert "look" in printed and "shape: [2, 3]" in printed and "data: [0.0, 1.0]" in printed


def test_py_func_forward_and_backward():
    x = R.normal(size=(3, 2)).astype(np.float32)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        xv = layers.data("x", shape=[2], dtype="float32", stop_gradient=False)
        out = main.global_block().create_var(name="cube", shape=[-1, 2], dtype="float32")
        layers.py_func(lambda a: a ** 3, xv, out,
                       backward_func=lambda a, o, d: 3 * a * a * d)
        loss = layers.reduce_sum(out)
        grad, = fluid.backward.gradients(loss, [xv])
    c, g = fluid.Executor(PLACE).run(main, feed={"x": x}, fetch_list=[out, grad])
    np.testing.assert_allclose(c, x ** 3, rtol=1e-6)
    np.testing.assert_allclose(g, 3 * x * x, rtol=1e-6)


def test_temporal_shift_and_selected_rows_helpers():
    n, t, c = 2, 3, 4
    x = R.normal(size=(n * t, c, 1, 2)).astype(np.float32)
    sh, m, g = _run(lambda: [layers.temporal_shift(
        layers.data("x", shape=[c, 1, 2], dtype="float32"), seg_num=t, shift_ratio=0.25),
        layers.merge_selected_rows(layers.data("x", shape=[c, 1, 2], dtype="float32")),
        layers.get_tensor_from_selected_rows(layers.data("x", shape=[c, 1, 2],
                                                         dtype="float32"))], {"x": x})
    x5 = x.reshape(n, t, c, 1, 2)
    want = np.zeros_like(x5)
    want[:, 1:, 0] = x5[:, :-1, 0]   # channel 0: the previous frame
    want[:, :-1, 1] = x5[:, 1:, 1]   # channel 1: the next frame
    want[:, :, 2:] = x5[:, :, 2:]
    np.testing.assert_array_equal(sh, want.reshape(x.shape))
    np.testing.assert_array_equal(m, x)
    np.testing.assert_array_equal(g, x)


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data("x", shape=[3], dtype="float32")
        with pytest.raises(ValueError, match="Print: print_phase"):
            layers.Print(x, print_phase="later")
        with pytest.raises(TypeError, match="py_func: func"):
            layers.py_func(3, x, None)
        with pytest.raises(ValueError, match="temporal_shift"):
            layers.temporal_shift(x, 2)


def _exact_auc(p, y):
    pos, neg = p[y == 1], p[y == 0]
    return np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])


def test_auc_accumulates_and_batch_auc_is_this_batch():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        pr = layers.data("p", shape=[2], dtype="float32")
        lab = layers.data("y", shape=[1], dtype="int64")
        a, ba, stats = layers.auc(pr, lab, num_thresholds=100000)
    exe = fluid.Executor(PLACE)
    batches = []
    for _ in range(2):
        p1 = R.random(40).astype(np.float32)
        y = (R.random(40) < p1).astype(np.int64)
        batches.append((p1, y))
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        got = [exe.run(main, feed={"p": np.stack([1 - p1, p1], 1), "y": y[:, None]},
                       fetch_list=[a, ba]) for p1, y in batches]
    allp = np.concatenate([b[0] for b in batches])
    ally = np.concatenate([b[1] for b in batches])
    np.testing.assert_allclose(got[0][0], [_exact_auc(*batches[0])], atol=1e-3)
    np.testing.assert_allclose(got[1][0], [_exact_auc(allp, ally)], atol=1e-3)
    np.testing.assert_allclose(got[1][1], [_exact_auc(*batches[1])], atol=1e-3)
    assert len(stats) == 4


def test_load_reads_a_saved_variable(tmp_path):
    w = R.normal(size=(3, 2)).astype(np.float32)
    save = fluid.Program()
    with fluid.program_guard(save, fluid.Program()):
        v = save.global_block().create_var(name="w", shape=[3, 2], dtype="float32",
                                           persistable=True)
    with fluid.scope_guard(fluid.Scope()):
        fluid.global_scope().vars["w"] = w
        fluid.io.save_vars(fluid.Executor(PLACE), str(tmp_path), save, vars=[v])
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = main.global_block().create_var(name="w2", shape=[3, 2], dtype="float32")
        layers.load(out, str(tmp_path / "w.npy"))
        bad = main.global_block().create_var(name="w3", shape=[3, 2], dtype="int64")
    got, = fluid.Executor(PLACE).run(main, fetch_list=[out])
    np.testing.assert_array_equal(got, w)
    bad_prog = fluid.Program()
    with fluid.program_guard(bad_prog, fluid.Program()):
        bad = bad_prog.global_block().create_var(name="w3", shape=[3, 2], dtype="int64")
        layers.load(bad, str(tmp_path / "w.npy"))
    with pytest.raises(Exception, match="holds float32"):
        fluid.Executor(PLACE).run(bad_prog, fetch_list=[bad])
