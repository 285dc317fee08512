"""linear_chain_crf, crf_decoding and chunk_eval (issue 20) against brute force over
every tag path, and through the layers as the label_semantic_roles chapter uses them."""

import itertools

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import ShapeError

R = np.random.default_rng(5)
LENS = [3, 1, 4]
D = 3


def _score(x, w, path):
    return w[0, path[0]] + sum(x[t, p] for t, p in enumerate(path)) + \
        sum(w[2 + a, b] for a, b in itertools.pairwise(path)) + w[1, path[-1]]


def _brute(x, w, lab):
    scores = {p: _score(x, w, p) for p in itertools.product(range(x.shape[1]), repeat=len(x))}
    log_z = np.log(sum(np.exp(s) for s in scores.values()))
    return log_z - _score(x, w, tuple(lab)), max(scores, key=scores.get)


def _program(with_label_decode=False):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", shape=[D], dtype="float32", lod_level=1)
        y = fluid.layers.data("y", shape=[1], dtype="int64", lod_level=1)
        cost = fluid.layers.linear_chain_crf(x, y, param_attr=fluid.ParamAttr(name="crfw"))
        path = fluid.layers.crf_decoding(x, param_attr=fluid.ParamAttr(name="crfw"),
                                         label=y if with_label_decode else None)
    return main, start, cost, path


def _feed():
    n = sum(LENS)
    x = R.normal(size=(n, D)).astype(np.float32)
    y = R.integers(0, D, size=(n, 1)).astype(np.int64)
    place = fluid.CPUPlace()
    return x, y, {"x": fluid.create_lod_tensor(x, [LENS], place),
                  "y": fluid.create_lod_tensor(y, [LENS], place)}


def test_crf_cost_and_viterbi_match_brute_force():
    main, start, cost, path = _program()
    x, y, feed = _feed()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        c, p = exe.run(main, feed=feed, fetch_list=[cost, path], return_numpy=False)
        w = np.asarray(fluid.global_scope().find_var("crfw").get_tensor()).astype(np.float64)
    c, pv = np.asarray(c), np.asarray(p.data if hasattr(p, "data") else p)
    assert c.shape == (len(LENS), 1)
    assert p.recursive_sequence_lengths() == [LENS]
    offs = np.cumsum([0, *LENS])
    for s, (b, e) in enumerate(itertools.pairwise(offs)):
        nll, best = _brute(x[b:e].astype(np.float64), w, y[b:e, 0])
        np.testing.assert_allclose(c[s, 0], nll, rtol=1e-5)
        assert tuple(pv[b:e, 0]) == best


def test_crf_decoding_with_label_marks_right_tags():
    main, start, _, hit = _program(with_label_decode=True)
    _, y, feed = _feed()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        main2, _, _, path = _program()
        h, = exe.run(main, feed=feed, fetch_list=[hit])
        p, = exe.run(main2, feed=feed, fetch_list=[path])
    np.testing.assert_array_equal(h[:, 0], (p[:, 0] == y[:, 0]).astype(np.int64))


def test_training_lowers_the_crf_cost_and_decodes_the_labels():
    main, start, cost, path = _program()
    with fluid.program_guard(main, start):
        avg = fluid.layers.mean(cost)
        fluid.optimizer.SGD(learning_rate=0.5).minimize(avg)
    _x, y, feed = _feed()
    # emissions that point at the labels: the CRF only has to learn to trust them
    xs = np.eye(D, dtype=np.float32)[y[:, 0]] * 2
    feed["x"] = fluid.create_lod_tensor(xs, [LENS], fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        losses = [float(exe.run(main, feed=feed, fetch_list=[avg])[0].reshape(()))
                  for _ in range(20)]
        p, = exe.run(main, feed=feed, fetch_list=[path])
    assert losses[-1] < losses[0] * 0.5
    np.testing.assert_array_equal(p[:, 0], y[:, 0])


# IOB, 2 chunk types: B-0=0 I-0=1 B-1=2 I-1=3 O=4
@pytest.mark.parametrize("scheme,label,infer,expect", [
    ("IOB", [0, 1, 4, 2, 3, 3], [0, 1, 4, 2, 3, 4], (2, 2, 1)),
    ("IOB", [1, 1, 4, 2], [0, 1, 4, 2], (2, 2, 2)),  # I starts a chunk after O/start
    ("IOE", [0, 1, 4, 2, 3], [0, 1, 4, 3, 4], (2, 2, 1)),  # I-0 E-0 O I-1 E-1
    ("IOBES", [3, 4, 5, 6, 8], [3, 4, 5, 7, 8], (3, 2, 1)),  # S-0 B-1 I-1 E-1 O
    ("plain", [0, 0, 1, 2, 1], [0, 1, 1, 2, 1], (3, 3, 1)),  # same-type runs are chunks
])
def test_chunk_eval_counts(scheme, label, infer, expect):
    n_types = 2
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = fluid.layers.data("i", shape=[1], dtype="int64", lod_level=1)
        lab = fluid.layers.data("l", shape=[1], dtype="int64", lod_level=1)
        outs = fluid.layers.chunk_eval(i, lab, scheme, n_types)
    place = fluid.CPUPlace()
    lens = [[len(label)]]
    feed = {"i": fluid.create_lod_tensor(np.array(infer, np.int64).reshape(-1, 1), lens, place),
            "l": fluid.create_lod_tensor(np.array(label, np.int64).reshape(-1, 1), lens, place)}
    p, r, f1, ni, nl, nc = fluid.Executor(place).run(main, feed=feed, fetch_list=list(outs))
    assert (int(ni[0]), int(nl[0]), int(nc[0])) == expect
    np.testing.assert_allclose(p[0], expect[2] / expect[0], rtol=1e-6)
    np.testing.assert_allclose(r[0], expect[2] / expect[1], rtol=1e-6)
    np.testing.assert_allclose(f1[0], 2 * p[0] * r[0] / (p[0] + r[0]), rtol=1e-6)


def test_bad_input_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[D], dtype="float32", lod_level=1)
        y = fluid.layers.data("y", shape=[1], dtype="int64", lod_level=1)
        with pytest.raises(ValueError, match="crf_decoding: param_attr must name"):
            fluid.layers.crf_decoding(x, param_attr=fluid.ParamAttr(name="nope"))
        x0 = fluid.layers.data("x0", shape=[D], dtype="float32")
        with pytest.raises(ShapeError, match="Emission 'x0' has lod_level 0"):
            fluid.layers.linear_chain_crf(x0, y)
        fluid.layers.linear_chain_crf(x, y, param_attr=fluid.ParamAttr(name="t"))
        x4 = fluid.layers.data("x4", shape=[D + 1], dtype="float32", lod_level=1)
        with pytest.raises(ShapeError, match="parameter 't' has shape"):
            fluid.layers.crf_decoding(x4, param_attr=fluid.ParamAttr(name="t"))
