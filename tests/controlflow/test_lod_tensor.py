"""LoDTensor: building, feeding and fetching, feed-time validation, and LoD sharing
through row-preserving ops (Fluid's ShareLoD)."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors, layers
from fluid_hw.frontend.backward import gradients


def test_create_lod_tensor_and_its_views():
    t = fluid.create_lod_tensor(np.arange(12, dtype=np.float32).reshape(6, 2), [[2, 4]])
    assert t.lod() == [[0, 2, 6]]
    assert t.recursive_sequence_lengths() == [[2, 4]]
    assert t.shape() == [6, 2]
    words = fluid.create_lod_tensor([[1, 2, 3], [4, 5]], [[3, 2]], fluid.CPUPlace())
    assert np.asarray(words).tolist() == [[1], [2], [3], [4], [5]]
    assert words.lod() == [[0, 3, 5]]
    two = fluid.create_lod_tensor(np.zeros((5, 1)), [[2, 1], [1, 3, 1]])
    assert two.lod() == [[0, 2, 3], [0, 1, 4, 5]]
    assert two.has_valid_recursive_sequence_lengths()


@pytest.mark.parametrize("lod, match", [
    ([[0, 3, 2, 5]], "must not decrease"),
    ([[0, 2, 4]], "ends at 4 but there are 5 rows"),
    ([[1, 5]], "must start at 0"),
    ([[0, 1, 2], [0, 2, 4, 5]], "ends at 2 but there are 3 sequences"),
])
def test_invalid_lod_is_refused_at_feed_time(lod, match):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[1], lod_level=len(lod))
        y = layers.scale(x, 2.0)
    bad = fluid.LoDTensor(np.zeros((5, 1), np.float32), lod)  # bypasses set_lod's check
    with fluid.scope_guard(fluid.Scope()), pytest.raises(errors.FeedError, match=match) as e:
        fluid.Executor().run(main, feed={"x": bad}, fetch_list=[y])
    assert "'x'" in str(e.value)


def test_level_count_and_missing_lod_are_refused():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[1], lod_level=1)
        y = layers.scale(x, 2.0)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        two = fluid.create_lod_tensor(np.zeros((3, 1), np.float32), [[1, 1], [1, 2]])
        with pytest.raises(errors.FeedError, match=r"2 LoD level.*lod_level 1"):
            exe.run(main, feed={"x": two}, fetch_list=[y])
        with pytest.raises(errors.FeedError, match="feed a LoDTensor"):
            exe.run(main, feed={"x": np.zeros((3, 1), np.float32)}, fetch_list=[y])
    with pytest.raises(errors.FeedError, match="ends at"):
        fluid.create_lod_tensor(np.zeros((3, 1)), [[1, 1]])


def test_lod_flows_through_row_preserving_ops_and_their_gradients():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = layers.data(name="x", shape=[4], lod_level=1, stop_gradient=False)
        h = layers.fc(x, size=3, act="relu")
        e = layers.elementwise_add(layers.sigmoid(h), h)
        s = layers.scale(layers.exp(e), 0.5)
        loss = layers.mean(layers.sequence_pool(s, "sum"))
        (gx,) = gradients(loss, [x])
    for v in (h, e, s, gx):
        assert v.lod_level == 1, v
    t = fluid.create_lod_tensor(np.random.default_rng(0).random((7, 4), np.float32),
                                [[2, 5]])
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor()
        exe.run(startup)
        outs = exe.run(main, feed={"x": t}, fetch_list=[h, e, s, gx], return_numpy=False)
    for o in outs:
        assert isinstance(o, fluid.LoDTensor) and o.lod() == [[0, 2, 7]]


def test_lod_is_not_invented_for_ops_that_change_rows():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[4], lod_level=1)
        pooled = layers.sequence_pool(x, "max")
    assert pooled.lod_level == 0
    t = fluid.create_lod_tensor(np.zeros((7, 4), np.float32), [[2, 5]])
    with fluid.scope_guard(fluid.Scope()):
        (p,) = fluid.Executor().run(main, feed={"x": t}, fetch_list=[pooled],
                                    return_numpy=False)
    assert p.lod() == [] and np.asarray(p).shape == (2, 4)
