"""beam_search and beam_search_decode (issue 20): a hand-worked search of two source
sentences, step by step, and the machine_translation chapter's decoder loop."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers

END = 0
PLACE = fluid.CPUPlace()


def _lod_tensor(values, lod, dtype):
    t = fluid.LoDTensor()
    t.set(np.asarray(values, dtype).reshape(-1, 1), PLACE)
    t.set_lod(lod)
    return t


def _step(pre_ids, pre_scores, lod, ids, scores):
    """One beam_search step (beam 2), fed as the decoder feeds it."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        pi = layers.data("pi", shape=[1], dtype="int64", lod_level=2)
        ps = layers.data("ps", shape=[1], dtype="float32", lod_level=2)
        ci = layers.data("ci", shape=[3], dtype="int64", lod_level=2)
        cs = layers.data("cs", shape=[3], dtype="float32", lod_level=2)
        outs = layers.beam_search(pi, ps, ci, cs, beam_size=2, end_id=END,
                                  return_parent_idx=True)
    cand = fluid.LoDTensor()
    cand.set(np.asarray(ids, np.int64), PLACE)
    cand.set_lod(lod)
    cscore = fluid.LoDTensor()
    cscore.set(np.asarray(scores, np.float32), PLACE)
    cscore.set_lod(lod)
    feed = {"pi": _lod_tensor(pre_ids, lod, np.int64),
            "ps": _lod_tensor(pre_scores, lod, np.float32), "ci": cand, "cs": cscore}
    sid, ssc, parent = fluid.Executor(PLACE).run(main, feed=feed, fetch_list=list(outs),
                                                 return_numpy=False)
    return (np.asarray(sid).reshape(-1).tolist(), np.asarray(ssc).reshape(-1),
            sid.lod(), np.asarray(parent).tolist())


def test_beam_search_steps_by_hand():
    # step 1: source 0 continues 2 (-0.1) and 4 (-0.3); source 1 ends (-0.2) or 6 (-0.4)
    ids, sc, lod, parent = _step([1, 1], [0, 0], [[0, 1, 2], [0, 1, 2]],
                                 [[2, 3, 4], [0, 5, 6]],
                                 [[-0.1, -0.5, -0.3], [-0.2, -0.9, -0.4]])
    assert ids == [2, 4, 0, 6] and lod == [[0, 1, 2], [0, 2, 4]] and parent == [0, 0, 1, 1]
    np.testing.assert_allclose(sc, [-0.1, -0.3, -0.2, -0.4], rtol=1e-6)
    # step 2: the ended prefix keeps itself with its score; source 0 ends twice
    ids, sc, lod, parent = _step(ids, sc, lod,
                                 [[7, 0, 8], [9, 0, 7], [1, 2, 3], [0, 3, 5]],
                                 [[-0.6, -0.15, -0.9], [-0.35, -0.32, -1], [-9, -9, -9],
                                  [-0.5, -0.45, -0.41]])
    assert ids == [0, 0, 0, 5] and lod == [[0, 2, 4], [0, 1, 2, 3, 4]] and parent == [0, 1, 2, 3]
    np.testing.assert_allclose(sc, [-0.15, -0.32, -0.2, -0.41], rtol=1e-6)
    # step 3: every row of source 0 ended already: pruned; source 1 goes on
    ids, sc, lod, parent = _step(ids, sc, lod,
                                 [[1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 9, 8]],
                                 [[-1, -1, -1], [-1, -1, -1], [-1, -1, -1],
                                  [-0.6, -0.7, -0.8]])
    assert ids == [0, 0] and lod == [[0, 2, 4], [0, 0, 0, 1, 2]] and parent == [2, 3]
    # step 4: source 1 ended too: nothing is selected
    ids, sc, lod, parent = _step(ids, sc, lod, [[1, 1, 1], [1, 1, 1]],
                                 [[-1, -1, -1], [-1, -1, -1]])
    assert ids == [] and lod == [[0, 0, 2], [0, 0, 0]]


def test_beam_search_decode_backtracks_the_steps():
    steps = [
        ([1, 1], [0, 0], [[0, 1, 2], [0, 1, 2]]),
        ([2, 4, 0, 6], [-0.1, -0.3, -0.2, -0.4], [[0, 1, 2], [0, 2, 4]]),
        ([0, 0, 0, 5], [-0.15, -0.32, -0.2, -0.41], [[0, 2, 4], [0, 1, 2, 3, 4]]),
        ([0, 0], [-0.2, -0.6], [[0, 2, 4], [0, 0, 0, 1, 2]]),
        ([], [], [[0, 0, 2], [0, 0, 0]]),
    ]
    main = fluid.Program()
    feed = {}
    with fluid.program_guard(main, fluid.Program()):
        ids_arr, sc_arr = layers.create_array("int64"), layers.create_array("float32")
        for t, (ids, sc, lod) in enumerate(steps):
            i = layers.fill_constant([1], "int64", t)
            vi = layers.data(f"i{t}", shape=[1], dtype="int64", lod_level=2)
            vs = layers.data(f"s{t}", shape=[1], dtype="float32", lod_level=2)
            layers.array_write(vi, i, array=ids_arr)
            layers.array_write(vs, i, array=sc_arr)
            feed[f"i{t}"] = _lod_tensor(ids, lod, np.int64)
            feed[f"s{t}"] = _lod_tensor(sc, lod, np.float32)
        out_ids, out_sc = layers.beam_search_decode(ids_arr, sc_arr, beam_size=2, end_id=END)
    got_ids, got_sc = fluid.Executor(PLACE).run(main, feed=feed, fetch_list=[out_ids, out_sc],
                                                return_numpy=False)
    # source 0: 1 2 0 (-0.15) before 1 4 0 (-0.32); source 1: 1 0 (-0.2), 1 6 5 0 (-0.6)
    assert np.asarray(got_ids).reshape(-1).tolist() == [1, 2, 0, 1, 4, 0, 1, 0, 1, 6, 5, 0]
    assert got_ids.lod() == [[0, 2, 4], [0, 3, 6, 8, 12]]
    np.testing.assert_allclose(np.asarray(got_sc).reshape(-1),
                               [0, -0.1, -0.15, 0, -0.3, -0.32, 0, -0.2, 0, -0.4, -0.41, -0.6],
                               rtol=1e-6)


def _book_decoder(dict_size, beam_size, max_length, hidden):
    """The machine_translation chapter's decoder_decode (Fluid 1.5), small."""
    context = layers.data("context", shape=[hidden], dtype="float32")
    init_state = context
    array_len = layers.fill_constant(shape=[1], dtype="int64", value=max_length)
    counter = layers.zeros(shape=[1], dtype="int64", force_cpu=True)
    state_array = layers.create_array("float32")
    layers.array_write(init_state, array=state_array, i=counter)
    ids_array = layers.create_array("int64")
    scores_array = layers.create_array("float32")
    init_ids = layers.data(name="init_ids", shape=[1], dtype="int64", lod_level=2)
    init_scores = layers.data(name="init_scores", shape=[1], dtype="float32", lod_level=2)
    layers.array_write(init_ids, array=ids_array, i=counter)
    layers.array_write(init_scores, array=scores_array, i=counter)
    cond = layers.less_than(x=counter, y=array_len)
    while_op = layers.While(cond=cond)
    with while_op.block():
        pre_ids = layers.array_read(array=ids_array, i=counter)
        pre_state = layers.array_read(array=state_array, i=counter)
        pre_score = layers.array_read(array=scores_array, i=counter)
        pre_state_expanded = layers.sequence_expand(pre_state, pre_score)
        pre_ids_emb = layers.embedding(input=pre_ids, size=[dict_size, 8], dtype="float32")
        current_state = layers.fc(input=[pre_state_expanded, pre_ids_emb], size=hidden,
                                  act="tanh")
        current_state_with_lod = layers.lod_reset(x=current_state, y=pre_score)
        current_score = layers.fc(input=current_state_with_lod, size=dict_size,
                                  act="softmax")
        topk_scores, topk_indices = layers.topk(current_score, k=beam_size)
        accu_scores = layers.elementwise_add(x=layers.log(topk_scores),
                                             y=layers.reshape(pre_score, shape=[-1]), axis=0)
        selected_ids, selected_scores = layers.beam_search(
            pre_ids, pre_score, topk_indices, accu_scores, beam_size, end_id=END, level=0)
        layers.increment(x=counter, value=1, in_place=True)
        layers.array_write(current_state, array=state_array, i=counter)
        layers.array_write(selected_ids, array=ids_array, i=counter)
        layers.array_write(selected_scores, array=scores_array, i=counter)
        length_cond = layers.less_than(x=counter, y=array_len)
        finish_cond = layers.logical_not(layers.is_empty(x=selected_ids))
        layers.logical_and(x=length_cond, y=finish_cond, out=cond)
    return layers.beam_search_decode(ids=ids_array, scores=scores_array,
                                     beam_size=beam_size, end_id=END)


@pytest.mark.parametrize("seed", [1, 2])
def test_book_decoder_loop_produces_ranked_sentences(seed):
    n_src, beam, max_len, dict_size, hidden = 3, 2, 6, 7, 5
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids, scores = _book_decoder(dict_size, beam, max_len, hidden)
    rng = np.random.default_rng(seed)
    lod = [list(range(n_src + 1))] * 2
    feed = {"context": rng.normal(size=(n_src, hidden)).astype(np.float32),
            "init_ids": _lod_tensor([1] * n_src, lod, np.int64),
            "init_scores": _lod_tensor([0.0] * n_src, lod, np.float32)}
    exe = fluid.Executor(PLACE)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        got_ids, got_sc = exe.run(main, feed=feed, fetch_list=[ids, scores],
                                  return_numpy=False)
    words = np.asarray(got_ids).reshape(-1)
    sc = np.asarray(got_sc).reshape(-1)
    src_lod, sent_lod = got_ids.lod()
    assert len(src_lod) == n_src + 1
    for s in range(n_src):
        sents = range(src_lod[s], src_lod[s + 1])
        assert 1 <= len(sents) <= beam
        finals = []
        for k in sents:
            w, c = words[sent_lod[k]:sent_lod[k + 1]], sc[sent_lod[k]:sent_lod[k + 1]]
            assert w[0] == 1 and c[0] == 0  # the start token and its score
            assert 2 <= len(w) <= max_len + 1
            assert len(w) == max_len + 1 or w[-1] == END
            assert np.all(np.diff(c) <= 1e-6)  # log-probabilities only add up downwards
            finals.append(c[-1])
        assert finals == sorted(finals, reverse=True)


def test_lod_reset_and_is_empty():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data("x", shape=[2], dtype="float32")
        y = layers.data("y", shape=[1], dtype="float32", lod_level=1)
        by_y = layers.lod_reset(x, y)
        by_target = layers.lod_reset(x, target_lod=[0, 1, 4])
        empty = layers.is_empty(x)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    feed = {"x": x, "y": fluid.create_lod_tensor(np.zeros((4, 1), np.float32), [[3, 1]], PLACE)}
    a, b, e = fluid.Executor(PLACE).run(main, feed=feed, fetch_list=[by_y, by_target, empty],
                                        return_numpy=False)
    assert a.recursive_sequence_lengths() == [[3, 1]]
    assert b.recursive_sequence_lengths() == [[1, 3]]
    np.testing.assert_array_equal(np.asarray(a), x)
    assert not bool(np.asarray(e)[0])
    with fluid.program_guard(fluid.Program()), \
            pytest.raises(ValueError, match="give y or target_lod"):
        layers.lod_reset(layers.data("z", shape=[2], dtype="float32"))
    bad = fluid.Program()
    with fluid.program_guard(bad, fluid.Program()):
        out = layers.lod_reset(layers.data("x", shape=[2], dtype="float32"),
                               target_lod=[0, 2, 3])
    with pytest.raises(Exception, match="offsets from 0 to the 4 rows"):
        fluid.Executor(PLACE).run(bad, feed={"x": x}, fetch_list=[out])
