"""fluid.DataFeeder (reader minibatches -> feed dicts, LoD from nested lists) and
fluid.nets (checked against numpy)."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors


def test_data_feeder_dense_and_lod_slots(fresh):
    main, _, _ = fresh
    img = fluid.layers.data(name="img", shape=[1, 2, 2])
    words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    para = fluid.layers.data(name="para", shape=[1], dtype="int64", lod_level=2)
    feeder = fluid.DataFeeder(feed_list=[img, "words", para], place=fluid.CPUPlace())
    batch = [([1, 2, 3, 4], [5, 6, 7], [[1], [2, 3]]),
             ([0, 0, 0, 1], [8], [[4, 5, 6]])]
    feed = feeder.feed(batch)
    assert feed["img"].shape == (2, 1, 2, 2) and feed["img"].dtype == np.float32
    assert feed["words"].recursive_sequence_lengths() == [[3, 1]]
    np.testing.assert_array_equal(np.asarray(feed["words"]).ravel(), [5, 6, 7, 8])
    assert np.asarray(feed["words"]).dtype == np.int64
    assert feed["para"].recursive_sequence_lengths() == [[2, 1], [1, 2, 3]]
    # the executor takes it as it is
    pooled = fluid.layers.sequence_pool(fluid.layers.cast(words, "float32"), "sum")
    with fluid.scope_guard(fluid.Scope()):
        (out,) = fluid.Executor().run(main, feed={"words": feed["words"]},
                                      fetch_list=[pooled])
    np.testing.assert_array_equal(out.ravel(), [18, 8])


def test_data_feeder_errors(fresh):
    x = fluid.layers.data(name="x", shape=[3])
    feeder = fluid.DataFeeder([x], fluid.CPUPlace())
    with pytest.raises(errors.FeedError, match="sample 0 has 2 entries"):
        feeder.feed([([1, 2, 3], 4)])
    with pytest.raises(errors.FeedError, match="'x' has 2 value"):
        feeder.feed([([1, 2],)])
    with pytest.raises(errors.FeedError, match="no variable 'nope'"):
        fluid.DataFeeder(["nope"], fluid.CPUPlace())


def _run(main, feed, fetch):
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    return exe.run(main, feed=feed, fetch_list=fetch)


def test_nets_against_numpy(fresh):
    main, _, _ = fresh
    q = fluid.layers.data(name="q", shape=[5, 8])
    att = fluid.nets.scaled_dot_product_attention(q, q, q)
    att2 = fluid.nets.scaled_dot_product_attention(q, q, q, num_heads=2)
    g = fluid.nets.glu(q)
    img = fluid.layers.data(name="img", shape=[1, 8, 8])
    cp = fluid.nets.simple_img_conv_pool(img, num_filters=2, filter_size=3, pool_size=2,
                                         pool_stride=2, act="relu")
    grp = fluid.nets.img_conv_group(img, [2, 3], pool_size=2, pool_stride=2,
                                    conv_act="relu", conv_with_batchnorm=True,
                                    conv_batchnorm_drop_rate=[0.5, 0.0])
    qv = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    iv = np.random.default_rng(1).standard_normal((2, 1, 8, 8)).astype(np.float32)
    a, a2, gv, c, gr = _run(main, {"q": qv, "img": iv}, [att, att2, g, cp, grp])
    p = qv @ qv.transpose(0, 2, 1) / np.sqrt(8)
    p = np.exp(p - p.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(a, p @ qv, rtol=1e-5, atol=1e-6)
    assert a2.shape == (2, 5, 8)
    np.testing.assert_allclose(gv, qv[..., :4] / (1 + np.exp(-qv[..., 4:])), rtol=1e-5,
                               atol=1e-6)
    assert c.shape == (2, 2, 3, 3) and (c >= 0).all()
    assert gr.shape == (2, 3, 4, 4)
    with pytest.raises(ValueError, match="2 entries for 1 convolutions"):
        fluid.nets.img_conv_group(img, [2], pool_size=2, conv_padding=[1, 1])
    with pytest.raises(ValueError, match="3-D"):
        fluid.nets.scaled_dot_product_attention(img, img, img)


def test_data_feeder_decorate_reader_and_feed_parallel(fresh):
    x = fluid.layers.data(name="x", shape=[2])
    feeder = fluid.DataFeeder([x], fluid.CPUPlace())

    def batches():
        yield [([1, 2],), ([3, 4],), ([5, 6],), ([7, 8],)]
        yield [([9, 10],)]

    single = list(feeder.decorate_reader(batches, multi_devices=False)())
    assert [f["x"].shape for f in single] == [(4, 2), (1, 2)]
    multi = list(feeder.decorate_reader(batches, multi_devices=True, num_places=2)())
    assert len(multi) == 1  # the batch of 1 cannot be split in two: dropped
    np.testing.assert_array_equal(multi[0][1]["x"], [[5, 6], [7, 8]])
    parts = list(feeder.feed_parallel([[([1, 2],)], [([3, 4],)]], num_places=2))
    assert [p["x"].tolist() for p in parts] == [[[1, 2]], [[3, 4]]]
