"""Sequence ops on LoD tensors against per-sequence numpy loops (gradients are in
tests/grad/cases_sequence.py)."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors, layers

LENS = [3, 1, 0, 4, 2]
RNG = np.random.default_rng(4)
X = RNG.standard_normal((10, 3)).astype(np.float32)


def _seqs(x, lens):
    out, o = [], 0
    for n in lens:
        out.append(x[o:o + n])
        o += n
    return out


def _run(build, feed, lod=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build()
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor()
        exe.run(startup)
        return exe.run(main, feed=feed, fetch_list=list(outs), return_numpy=not lod)


def _x(lod_level=1, width=3, name="x", dtype="float32"):
    return layers.data(name=name, shape=[width], dtype=dtype, lod_level=lod_level)


FEED = {"x": fluid.create_lod_tensor(X, [LENS])}

POOLS = {
    "sum": lambda s: s.sum(0),
    "average": lambda s: s.mean(0),
    "sqrt": lambda s: s.sum(0) / np.sqrt(len(s)),
    "max": lambda s: s.max(0),
    "first": lambda s: s[0],
    "last": lambda s: s[-1],
}


@pytest.mark.parametrize("kind", list(POOLS))
def test_sequence_pool(kind):
    (got,) = _run(lambda: layers.sequence_pool(_x(), kind, pad_value=-7.0), FEED)
    want = [POOLS[kind](s) if len(s) else np.full(3, -7.0) for s in _seqs(X, LENS)]
    np.testing.assert_allclose(got, np.array(want), rtol=1e-5, atol=1e-6)


def test_sequence_pool_keeps_the_upper_level():
    lod = [[2, 3], [3, 1, 0, 4, 2]]
    (got,) = _run(lambda: layers.sequence_pool(_x(lod_level=2), "sum"),
                  {"x": fluid.create_lod_tensor(X, lod)}, lod=True)
    assert got.recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_allclose(np.asarray(got),
                               [s.sum(0) if len(s) else np.zeros(3) for s in _seqs(X, LENS)],
                               rtol=1e-5, atol=1e-6)


def test_sequence_softmax():
    v = RNG.standard_normal((10, 1)).astype(np.float32)
    (got,) = _run(lambda: layers.sequence_softmax(_x(width=1)),
                  {"x": fluid.create_lod_tensor(v, [LENS])})
    want = np.concatenate([np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                           for s in _seqs(v, LENS) if len(s)])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_sequence_expand_rows_and_sequences():
    y = fluid.create_lod_tensor(np.zeros((6, 1), np.float32), [[2, 0, 3, 1]])
    xr = RNG.standard_normal((4, 2)).astype(np.float32)
    (a,) = _run(lambda: layers.sequence_expand(_x(0, 2), _x(1, 1, "y")),
                {"x": xr, "y": y}, lod=True)
    np.testing.assert_array_equal(np.asarray(a), xr[[0, 0, 2, 2, 2, 3]])
    assert a.recursive_sequence_lengths() == []  # X has no LoD: Out neither (Fluid's)
    xs = fluid.create_lod_tensor(X[:5], [[2, 3]])
    y2 = fluid.create_lod_tensor(np.zeros((3, 1), np.float32), [[2, 1]])
    (b,) = _run(lambda: layers.sequence_expand(_x(), _x(1, 1, "y")), {"x": xs, "y": y2},
                lod=True)
    np.testing.assert_array_equal(np.asarray(b), X[[0, 1, 0, 1, 2, 3, 4]])
    assert b.recursive_sequence_lengths() == [[2, 2, 3]]


def test_sequence_concat():
    x2 = RNG.standard_normal((4, 3)).astype(np.float32)
    lens2 = [1, 1, 2, 0, 0]
    (got,) = _run(lambda: layers.sequence_concat([_x(), _x(name="x2")]),
                  {"x": FEED["x"], "x2": fluid.create_lod_tensor(x2, [lens2])}, lod=True)
    want = np.concatenate([np.concatenate([a, b]) for a, b in zip(_seqs(X, LENS),
                                                                  _seqs(x2, lens2))])
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.recursive_sequence_lengths() == [[a + b for a, b in zip(LENS, lens2)]]


def test_sequence_reshape():
    v = np.arange(24, dtype=np.float32).reshape(6, 4)
    (got,) = _run(lambda: layers.sequence_reshape(_x(width=4), 2),
                  {"x": fluid.create_lod_tensor(v, [[1, 3, 2]])}, lod=True)
    np.testing.assert_array_equal(np.asarray(got), v.reshape(12, 2))
    assert got.recursive_sequence_lengths() == [[2, 6, 4]]
    with pytest.raises(errors.ExecutionError, match="new_dim"):
        _run(lambda: layers.sequence_reshape(_x(width=4), 3),
             {"x": fluid.create_lod_tensor(v, [[1, 3, 2]])})


def test_sequence_conv_sees_only_its_own_sequence():
    def build():
        return layers.sequence_conv(_x(), num_filters=2, filter_size=3, bias_attr=False,
                                    param_attr=fluid.initializer.Constant(1.0))
    (got,) = _run(build, FEED)
    want = []
    for s in _seqs(X, LENS):
        for t in range(len(s)):
            ctx = [s[j] if 0 <= j < len(s) else np.zeros(3) for j in (t - 1, t, t + 1)]
            want.append(np.full(2, np.sum(ctx)))
    np.testing.assert_allclose(got, np.array(want), rtol=1e-5, atol=1e-6)


def test_pad_unpad_and_mask_round_trip():
    def build():
        x = _x()
        padded, length = layers.sequence_pad(x, 0.0)
        back = layers.sequence_unpad(padded, length)
        mask = layers.sequence_mask(length, dtype="float32")
        return padded, length, back, mask

    padded, length, back, mask = _run(build, FEED, lod=True)
    padded, length, mask = (np.asarray(v) for v in (padded, length, mask))
    assert padded.shape == (5, 4, 3) and length.tolist() == LENS
    for i, s in enumerate(_seqs(X, LENS)):
        np.testing.assert_array_equal(padded[i, :len(s)], s)
        assert not padded[i, len(s):].any()
        np.testing.assert_array_equal(mask[i], np.arange(4) < len(s))
    np.testing.assert_array_equal(np.asarray(back), X)
    assert back.recursive_sequence_lengths() == [LENS]


def test_sequence_layers_need_lod():
    with fluid.program_guard(fluid.Program(), fluid.Program()), \
            pytest.raises(errors.ShapeError, match="lod_level 0"):
        layers.sequence_pool(_x(0), "sum")
    with fluid.program_guard(fluid.Program(), fluid.Program()), \
            pytest.raises(errors.ShapeError, match="pool_type"):
        layers.sequence_pool(_x(), "median")
