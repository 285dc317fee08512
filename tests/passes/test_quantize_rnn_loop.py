"""Recurrences written as DynamicRNN loops (docs/fixed_point.md, "Recurrences written as
loops"): a body that is one cell -- gru_unit with its fc, lstm_unit with its fc over
[x, h], or fc([x, h], act=tanh | sigmoid | relu) -- becomes the whole-sequence op
(rnn_loop_to_sequence) and then quantized_gru / quantized_lstm / quantized_rnn.  The
float rewrite equals the loop; the quantised program stays close to the float one; the
quantised cell equals the independent Python-int model bit for bit; every other loop
stays a float loop, with the reason logged."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.passes import PassContext, PassManager, fixpoint
from fluid_hw.passes.quantize import QuantConfig, quantize
from fluid_hw.passes.quantize_rnn_loop import LoopToSequence
from tests.ops._quant_rnn_model import gru_model, lstm_model, srq

D_IN, HIDDEN = 8, 16
CELLS = ["gru", "lstm", "tanh", "relu", "sigmoid"]
QOP = {"gru": "quantized_gru", "lstm": "quantized_lstm"}


def _body(kind: str, drnn, word, h0=None):
    """The body of one cell as a user writes it (Fluid 1.x idioms)."""
    if kind == "gru":
        prev = drnn.memory(shape=[HIDDEN], value=0.0) if h0 is None else \
            drnn.memory(init=h0, need_reorder=True)
        h, _, _ = layers.gru_unit(layers.fc(word, size=3 * HIDDEN), prev, size=3 * HIDDEN)
        drnn.update_memory(prev, h)
    elif kind == "lstm":
        hp = drnn.memory(shape=[HIDDEN], value=0.0)
        cp = drnn.memory(shape=[HIDDEN], value=0.0)
        h, c = layers.lstm_unit(word, hp, cp, forget_bias=1.0)
        drnn.update_memory(hp, h)
        drnn.update_memory(cp, c)
    else:
        prev = drnn.memory(shape=[HIDDEN], value=0.0) if h0 is None else \
            drnn.memory(init=h0, need_reorder=True)
        h = layers.fc([word, prev], size=HIDDEN, act=kind)
        drnn.update_memory(prev, h)
    drnn.output(h)


def build(kind: str, with_h0: bool = False, body=None):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[D_IN], dtype="float32", lod_level=1)
        h0 = layers.data(name="h0", shape=[HIDDEN], dtype="float32") if with_h0 else None
        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(x)
            (body or _body)(kind, drnn, word, h0)
        seq = drnn()
        last = layers.sequence_last_step(seq)
        prob = layers.fc(last, size=4, act="softmax")
    return main, startup, seq, last, prob


def _feed(rng, n: int, with_h0: bool = False, lengths=None):
    lens = list(lengths) if lengths is not None else [int(v) for v in rng.integers(1, 51, n)]
    data = rng.normal(size=(sum(lens), D_IN)).astype(np.float32)
    f = {"x": fluid.create_lod_tensor(data, [lens])}
    if with_h0:
        f["h0"] = rng.uniform(-0.5, 0.5, (len(lens), HIDDEN)).astype(np.float32)
    return f


def _setup(kind: str, with_h0: bool = False, body=None):
    main, startup, seq, last, prob = build(kind, with_h0, body)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, seq, last, prob, exe, scope


@pytest.mark.parametrize("kind", CELLS)
def test_float_rewrite_equals_the_loop(kind):
    main, seq, _, _, exe, scope = _setup(kind, with_h0=kind in ("gru", "tanh"))
    rng = np.random.default_rng(1)
    with_h0 = kind in ("gru", "tanh")
    ctx = PassContext(scope=scope, fetch_names=[seq.name])
    prog = PassManager(["prune", LoopToSequence(), fixpoint("dead_code_elimination")]).run(
        main, ctx)
    made = {"gru": "gru", "lstm": "lstm"}.get(kind, "simple_rnn")
    types = [o.type for o in prog.global_block().ops]
    assert made in types and "while" not in types and not prog.block(1).ops, types
    assert "lod_rank_table" not in types  # the loop's set-up went with it
    feed = _feed(rng, 0, with_h0, lengths=[3, 1, 50, 7, 1, 12])
    (want,) = exe.run(main, feed=feed, fetch_list=[seq], scope=scope, return_numpy=False)
    (got,) = exe.run(prog, feed=feed, fetch_list=[seq.name], scope=scope, return_numpy=False)
    assert got.recursive_sequence_lengths() == want.recursive_sequence_lengths()
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2e-6)


def _quantised(kind: str, with_h0: bool = False, seed: int = 2):
    main, _seq, last, prob, exe, scope = _setup(kind, with_h0)
    rng = np.random.default_rng(seed)
    cal = [_feed(rng, 32, with_h0) for _ in range(3)]
    feeds = ["x", "h0"] if with_h0 else ["x"]
    q = quantize(main, cal, QuantConfig(), scope=scope, executor=exe,
                 fetch_names=[last.name, prob.name], feed_names=feeds)
    return main, q, last, prob, exe, scope, rng


def _cell(q, kind: str):
    ops = [o for o in q.global_block().ops if o.type == QOP.get(kind, "quantized_rnn")]
    assert len(ops) == 1, [o.type for o in q.global_block().ops]
    return ops[0]


def rnn_model(x: np.ndarray, lengths: list[int], p: dict, a: dict,
              h0: np.ndarray | None = None) -> np.ndarray:
    """quantized_rnn, one sequence and one unit at a time in Python ints
    (docs/fixed_point.md, "Plain recurrences")."""
    w = p["Weight"].astype(int).tolist()
    d = len(w)
    gm, gs = p["GateMultiplier"].tolist(), p["GateShift"].tolist()
    t = p["Tables"].astype(int).tolist()[0]
    out = np.zeros((x.shape[0], d), np.int8)
    start = 0
    for s, n in enumerate(lengths):
        rows = list(range(start, start + n))
        start += n
        h = [int(v) for v in h0[s]] if h0 is not None else [0] * d
        for r in (rows[::-1] if a["is_reverse"] else rows):
            xr = [int(v) for v in x[r]]
            z = [srq([(xr[j], gm[0][j], gs[0][j]),
                      (sum(h[e] * w[e][j] for e in range(d)), gm[1][j], gs[1][j])], -128, 127)
                 for j in range(d)]
            h = [t[v + 128] for v in z]
            out[r] = h
    return out


@pytest.mark.parametrize("kind", CELLS)
def test_quantised_loop_is_close_and_its_cell_is_bit_exact(kind):
    main, q, last, prob, exe, scope, rng = _quantised(kind)
    op = _cell(q, kind)
    types = [o.type for o in q.global_block().ops]
    assert types[:3] == ["quantize", "quantized_fc", op.type] and "while" not in types
    feed = _feed(rng, 100)
    want_last, want_p = (np.asarray(v) for v in exe.run(main, feed=feed, fetch_list=[
        last, prob], scope=scope))
    got_last, got_p = (np.asarray(v) for v in exe.run(q, feed=feed, fetch_list=[
        last.name, prob.name], scope=scope))
    s_h = float(op.attr("hidden_scale"))
    err = np.abs(got_last - want_last)
    # the last hidden state of 100 sequences of 1..50 steps: within a few steps of s_h
    assert err.max() <= 8 * s_h and err.mean() <= 1.5 * s_h, (err.max() / s_h,
                                                               err.mean() / s_h)
    assert (np.argmax(want_p, 1) == np.argmax(got_p, 1)).mean() >= 0.9
    # the cell on the pass's own parameters and input accumulators, bit for bit
    lens = [1, 50, 3, 17, 1, 9]
    feed = _feed(rng, 0, lengths=lens)
    outs = [op.input("Input")[0], op.output("Hidden")[0], *op.output("Cell")]
    vals = [np.asarray(v) for v in exe.run(q, feed=feed, fetch_list=outs, scope=scope)]
    params = {s: np.asarray(scope.find_var(op.input(s)[0]).get_tensor())
              for s in op.input_names if op.input(s) and s != "Input"}
    a = op.all_attrs()
    if kind == "lstm":
        want_h, want_c = lstm_model(vals[0], lens, params, a)
        np.testing.assert_array_equal(vals[2], want_c)
    elif kind == "gru":
        want_h = gru_model(vals[0], lens, params, a)
    else:
        want_h = rnn_model(vals[0], lens, params, a)
    np.testing.assert_array_equal(vals[1], want_h)


@pytest.mark.parametrize("kind", ["gru", "tanh"])
def test_initial_state_given_with_need_reorder_becomes_h0(kind):
    main, q, last, _, exe, scope, rng = _quantised(kind, with_h0=True)
    op = _cell(q, kind)
    assert op.input("H0")
    feed = _feed(rng, 40, with_h0=True)
    (want,) = exe.run(main, feed=feed, fetch_list=[last], scope=scope)
    (got,) = exe.run(q, feed=feed, fetch_list=[last.name], scope=scope)
    assert np.abs(np.asarray(got) - np.asarray(want)).max() <= 8 * op.attr("hidden_scale")


def _extra_op(kind, drnn, word, h0):
    prev = drnn.memory(shape=[HIDDEN], value=0.0)
    h = layers.fc([word, prev], size=HIDDEN, act="tanh")
    drnn.update_memory(prev, layers.scale(h, 0.5))
    drnn.output(h)


def _rank_order_init(kind, drnn, word, h0):
    prev = drnn.memory(init=h0)  # need_reorder=False: the init is in rank order
    h = layers.fc([word, prev], size=HIDDEN, act="tanh")
    drnn.update_memory(prev, h)
    drnn.output(h)


def _two_cells(kind, drnn, word, h0):
    p1 = drnn.memory(shape=[HIDDEN], value=0.0)
    p2 = drnn.memory(shape=[HIDDEN], value=0.0)
    h1 = layers.fc([word, p1], size=HIDDEN, act="tanh")
    h2 = layers.fc([h1, p2], size=HIDDEN, act="tanh")
    drnn.update_memory(p1, h1)
    drnn.update_memory(p2, h2)
    drnn.output(h2)


def _softsign(kind, drnn, word, h0):
    prev = drnn.memory(shape=[HIDDEN], value=0.0)
    h = layers.fc([word, prev], size=HIDDEN, act="softsign")
    drnn.update_memory(prev, h)
    drnn.output(h)


def _gru_relu(kind, drnn, word, h0):
    prev = drnn.memory(shape=[HIDDEN], value=0.0)
    h, _, _ = layers.gru_unit(layers.fc(word, size=3 * HIDDEN), prev, size=3 * HIDDEN,
                              activation="relu")
    drnn.update_memory(prev, h)
    drnn.output(h)


@pytest.mark.parametrize("body, why", [
    (_extra_op, "is not an fc's tanh / sigmoid / relu"),
    (_rank_order_init, "initialised in rank order"),
    (_two_cells, "2 memories and no gru_unit / lstm_unit"),
    (_softsign, "is not an fc's tanh / sigmoid / relu"),
    (_gru_relu, "gru_unit activation is code 3"),
])
def test_other_loops_stay_float_loops_with_the_reason_logged(body, why, caplog):
    with_h0 = body is _rank_order_init
    main, _seq, _last, prob, exe, scope = _setup("", with_h0, body)
    rng = np.random.default_rng(3)
    cal = [_feed(rng, 16, with_h0) for _ in range(2)]
    feeds = ["x", "h0"] if with_h0 else ["x"]
    with caplog.at_level(logging.WARNING, logger="fluid_hw.quantize"):
        q = quantize(main, cal, QuantConfig(), scope=scope, executor=exe,
                     fetch_names=[prob.name], feed_names=feeds)
    assert "while" in [o.type for o in q.global_block().ops]
    msgs = [r.getMessage() for r in caplog.records if r.name == "fluid_hw.quantize"]
    assert any("stays a float loop on the host" in m and why in m for m in msgs), msgs
    feed = _feed(rng, 20, with_h0)
    (want,) = exe.run(main, feed=feed, fetch_list=[prob], scope=scope)
    (got,) = exe.run(q, feed=feed, fetch_list=[prob.name], scope=scope)
    assert np.abs(np.asarray(got) - np.asarray(want)).max() < 0.1


def test_exclude_keeps_the_loop():
    main, _seq, _last, prob, exe, scope = _setup("gru")
    rng = np.random.default_rng(4)
    for ex in ("gru", "while"):
        q = quantize(main, [_feed(rng, 8)], QuantConfig(exclude=(ex,)), scope=scope,
                     executor=exe, fetch_names=[prob.name], feed_names=["x"])
        types = [o.type for o in q.global_block().ops]
        assert "while" in types and "quantized_gru" not in types


def test_quantised_loop_program_round_trips_through_save_and_load(tmp_path):
    _main, q, _last, prob, exe, scope, rng = _quantised("tanh")
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [q.global_block().var(prob.name)],
                                      exe, main_program=q)
    loaded = fluid.Scope()
    with fluid.scope_guard(loaded):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert feeds == ["x"] and "quantized_rnn" in [o.type for o in prog.global_block().ops]
    feed = _feed(rng, 20)
    (want,) = exe.run(q, feed=feed, fetch_list=[prob.name], scope=scope)
    (got,) = exe.run(prog, feed=feed, fetch_list=[v.name for v in fetches], scope=loaded)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# -- StaticRNN: a time-major [T, N, D] input, N sequences of T steps -------------------------

T_STEPS = 6


def build_static(kind: str):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 9
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xs = layers.data(name="xs", shape=[T_STEPS, -1, D_IN], dtype="float32",
                         append_batch_size=False)
        h0 = layers.data(name="h0", shape=[-1, HIDDEN], dtype="float32",
                         append_batch_size=False)
        rnn = layers.StaticRNN()
        with rnn.step():
            word = rnn.step_input(xs)
            if kind == "lstm":
                hp = rnn.memory(shape=[-1, HIDDEN], batch_ref=word)
                cp = rnn.memory(shape=[-1, HIDDEN], batch_ref=word)
                h, c = layers.lstm_unit(word, hp, cp)
                rnn.update_memory(cp, c)
            elif kind == "gru":
                hp = rnn.memory(init=h0)  # the batch's order: H0
                h, _, _ = layers.gru_unit(layers.fc(word, size=3 * HIDDEN), hp,
                                          size=3 * HIDDEN)
            else:
                hp = rnn.memory(shape=[-1, HIDDEN], batch_ref=word)
                h = layers.fc([word, hp], size=HIDDEN, act=kind)
            rnn.update_memory(hp, h)
            rnn.step_output(h)
        out = rnn()
    return main, startup, out


@pytest.mark.parametrize("kind", ["gru", "lstm", "tanh"])
def test_static_rnn_cell_becomes_the_whole_sequence_op(kind):
    main, startup, out = build_static(kind)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(5)
    feeds = ["xs", "h0"] if kind == "gru" else ["xs"]

    def feed(n):
        f = {"xs": rng.normal(size=(T_STEPS, n, D_IN)).astype(np.float32),
             "h0": rng.uniform(-0.5, 0.5, (n, HIDDEN)).astype(np.float32)}
        return {k: f[k] for k in feeds}

    ctx = PassContext(scope=scope, fetch_names=[out.name], feed_names=feeds)
    prog = PassManager(["prune", LoopToSequence(), fixpoint("dead_code_elimination")]).run(
        main, ctx)
    types = [o.type for o in prog.global_block().ops]
    assert "while" not in types and types[:3] == ["transpose2", "fill_constant_batch_size_like",
                                                  "sequence_unpad"], types
    f = feed(5)
    (want,) = exe.run(main, feed=f, fetch_list=[out], scope=scope)
    (got,) = exe.run(prog, feed=f, fetch_list=[out.name], scope=scope)
    assert np.asarray(got).shape == (T_STEPS, 5, HIDDEN)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2e-6)
    q = quantize(main, [feed(16) for _ in range(3)], QuantConfig(), scope=scope, executor=exe,
                 fetch_names=[out.name], feed_names=feeds)
    op = _cell(q, kind)
    f = feed(20)
    (want,) = exe.run(main, feed=f, fetch_list=[out], scope=scope)
    (got,) = exe.run(q, feed=f, fetch_list=[out.name], scope=scope)
    err = np.abs(np.asarray(got) - np.asarray(want)) / op.attr("hidden_scale")
    # every step of 20 sequences, in hidden-state steps (s_h); a few values beyond the
    # calibrated ranges (48 calibration sequences) clamp, hence a percentile
    assert err.mean() <= 1.0 and np.percentile(err, 99) <= 5, (err.mean(),
                                                               np.percentile(err, 99))


# -- trained: the sequence classifier of test_quantize_rnn with its cell as a DynamicRNN -----

@pytest.mark.parametrize("kind", ["gru", "tanh", "relu"])
def test_trained_dynamic_rnn_classifier_keeps_its_accuracy(kind):
    from tests.passes.test_quantize_rnn import EMB, VOCAB, make_data, to_lod
    from tests.rtl._recurrent_programs import word_classifier

    with word_classifier(VOCAB, EMB) as (main, startup, emb, label):
        drnn = layers.DynamicRNN()
        with drnn.block():
            _body(kind, drnn, drnn.step_input(emb))
        prob = layers.fc(layers.sequence_last_step(drnn()), size=2, act="softmax")
        test_prog = main.clone(for_test=True)
        loss = layers.mean(layers.cross_entropy(prob, label))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    rng = np.random.default_rng(0)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(120):
        xs, ys = make_data(rng, 32)
        exe.run(main, feed={"words": to_lod(xs), "label": ys}, fetch_list=[loss], scope=scope)
    test_x, test_y = make_data(rng, 500)
    feed = {"words": to_lod(test_x)}
    (fprob,) = exe.run(test_prog, feed=feed, fetch_list=[prob], scope=scope)
    cal = [{"words": to_lod(make_data(rng, 64)[0])} for _ in range(4)]
    q = quantize(test_prog, cal, QuantConfig(), scope=scope, executor=exe,
                 fetch_names=[prob.name], feed_names=["words"])
    (qprob,) = exe.run(q, feed=feed, fetch_list=[prob.name], scope=scope)
    assert [o.type for o in q.global_block().ops] == [
        "lookup_table", "quantize", "quantized_fc", QOP.get(kind, "quantized_rnn"),
        "sequence_pool", "quantized_fc", "requantize", "dequantize", "softmax"]
    fp, qp = np.argmax(fprob, 1), np.argmax(qprob, 1)
    f_acc, q_acc = (fp == test_y[:, 0]).mean(), (qp == test_y[:, 0]).mean()
    agree = (fp == qp).mean()
    print(f"DynamicRNN {kind}: float {f_acc:.3f}, int8 {q_acc:.3f}, decisions agree "
          f"{agree:.3f} (500 held-out sequences of 1..50 tokens)")
    # a plain recurrence of 16 units learns this 50-step counting task only partly (its
    # float accuracy is about the majority class's 0.61); the point is that the integer
    # program decides as the float one does
    assert f_acc >= (0.9 if kind == "gru" else 0.6)
    assert q_acc >= f_acc - 0.02 and agree >= 0.95


def test_fpga_partition_takes_every_cell_as_a_recurrent_stage():
    """The recurrent stage kind takes quantized_rnn as it takes quantized_gru /
    quantized_lstm: the projection, the cell and the last-step pool are one accelerator
    segment, nothing of the recurrence runs on the host."""
    from fluid_hw.hls.partition import segment

    rng = np.random.default_rng(6)
    for kind, cell in (("tanh", "quantized_rnn"), ("gru", "quantized_gru")):
        main, _, _, prob, exe, scope = _setup(kind)
        q = quantize(main, [_feed(rng, 16)], QuantConfig(float_fallback=True), scope=scope,
                     executor=exe, fetch_names=[prob.name], feed_names=["x"])
        segs = segment(q, ["x"], [prob.name]).describe()["segments"]
        fpga = [s["ops"] for s in segs if s["where"].startswith("fpga")]
        host = [t for s in segs if s["where"] == "host" for t in s["ops"]]
        assert fpga[0][:3] == ["quantized_fc", cell, "sequence_pool"]
        assert cell not in host


def _idioms(kind: str, x):
    """Other ways users write the same cells (Fluid 1.x): the GRU's projection before the
    loop, one fc over concat([x, h]), an fc without bias, an LSTM outputting its cell."""
    if kind == "gru_outer":
        x = layers.fc(x, size=3 * HIDDEN)
    drnn = layers.DynamicRNN()
    with drnn.block():
        word = drnn.step_input(x)
        prev = drnn.memory(shape=[HIDDEN], value=0.0)
        if kind == "gru_outer":
            h, _, _ = layers.gru_unit(word, prev, size=3 * HIDDEN, origin_mode=True)
        elif kind == "tanh_concat":
            h = layers.fc(layers.concat([word, prev], axis=1), size=HIDDEN, act="tanh")
        elif kind == "relu_nobias":
            h = layers.fc([word, prev], size=HIDDEN, act="relu", bias_attr=False)
        else:  # lstm_cell_out
            cp = drnn.memory(shape=[HIDDEN], value=0.0)
            h, c = layers.lstm_unit(word, prev, cp)
            drnn.update_memory(cp, c)
            drnn.output(c)
        drnn.update_memory(prev, h)
        drnn.output(h)
    outs = drnn()
    return outs if isinstance(outs, list) else [outs]


@pytest.mark.parametrize("kind, made", [("gru_outer", "gru"), ("tanh_concat", "simple_rnn"),
                                        ("relu_nobias", "simple_rnn"),
                                        ("lstm_cell_out", "lstm")])
def test_other_idioms_of_the_same_cells(kind, made):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[D_IN], dtype="float32", lod_level=1)
        outs = _idioms(kind, x)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    names = [o.name for o in outs]
    ctx = PassContext(scope=scope, fetch_names=names)
    prog = PassManager(["prune", LoopToSequence(), fixpoint("dead_code_elimination")]).run(
        main, ctx)
    types = [o.type for o in prog.global_block().ops]
    assert made in types and "while" not in types, (types, ctx.reports)
    feed = _feed(np.random.default_rng(8), 0, lengths=[4, 1, 30, 9])
    want = exe.run(main, feed=feed, fetch_list=names, scope=scope)
    got = exe.run(prog, feed=feed, fetch_list=names, scope=scope)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=0, atol=2e-6)
    rng = np.random.default_rng(9)
    q = quantize(main, [_feed(rng, 16) for _ in range(2)], QuantConfig(), scope=scope,
                 executor=exe, fetch_names=names, feed_names=["x"])
    qtypes = [o.type for o in q.global_block().ops]
    assert {"gru": "quantized_gru", "lstm": "quantized_lstm"}.get(made, "quantized_rnn") \
        in qtypes and "while" not in qtypes, qtypes


# -- the quantized_rnn op itself -------------------------------------------------------------

@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("initial", [False, True], ids=["zero_state", "h0"])
def test_quantized_rnn_matches_the_python_int_model(reverse, initial):
    """Random integer parameters (every rail reached), lengths 1..50 in no order."""
    import ast
    import inspect

    from fluid_hw.backends.cpu.kernels import quant_rnn as kernels
    from tests.ops._quant_rnn_model import run_cell

    rng = np.random.default_rng([reverse, initial, 3])
    d, lengths = 6, [1, 50, 7, 1, 23, 2, 1, 38, 12, 5, 1, 49]
    p = {"Weight": rng.integers(-127, 128, (d, d)).astype(np.int8),
         "GateMultiplier": rng.integers(0, 2**15, (2, d)).astype(np.int32),
         "GateShift": rng.integers(20, 26, (2, d)).astype(np.int32),
         "Tables": rng.integers(-128, 128, (1, 256)).astype(np.int8)}
    x = rng.integers(-30000, 30001, (sum(lengths), d)).astype(np.int32)
    init = {"H0": rng.integers(-128, 128, (len(lengths), d)).astype(np.int8)} if initial \
        else {}
    attrs = {"is_reverse": reverse, "activation": "tanh"}
    for table in (p["Tables"], np.arange(-128, 128, dtype=np.int8).reshape(1, 256)):
        p["Tables"] = table
        got = run_cell("quantized_rnn", x, lengths, p, attrs, init)["Hidden"]
        want = rnn_model(x, lengths, p, attrs, init.get("H0"))
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, want)
    # with the identity table h is the requantiser's output: both rails reached
    assert {-128, 127} <= set(np.unique(want).tolist())
    # integers only, as the other golden kernels
    for fn in ("quantized_rnn", "_run_steps", "_cell_inputs"):
        for node in ast.walk(ast.parse(inspect.getsource(getattr(kernels, fn)))):
            assert not isinstance(node, ast.Div), f"{fn}: true division"
            name = node.attr if isinstance(node, ast.Attribute) else \
                node.id if isinstance(node, ast.Name) else None
            assert name not in {"float", "float32", "float64", "rint", "round"}, fn


@pytest.mark.parametrize("level", [0, 1])
def test_nested_lod_input_stays_a_loop(level):
    """A two-level LoD input (steps over its level-0 or level-1 sequences): the whole-
    sequence ops step over one level only, so the loop stays, with the reason."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[D_IN], dtype="float32", lod_level=2)
        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(x, level=level)
            prev = drnn.memory(shape=[HIDDEN], value=0.0)
            h = layers.fc([word, prev], size=HIDDEN, act="tanh")
            drnn.update_memory(prev, h)
            drnn.output(h)
        out = drnn()
    scope = fluid.Scope()
    fluid.Executor().run(startup, scope=scope)
    ctx = PassContext(scope=scope, fetch_names=[out.name])
    prog = PassManager(["prune", LoopToSequence()]).run(main, ctx)
    assert "while" in [o.type for o in prog.global_block().ops]
    (note,) = ctx.reports["rnn_loop_to_sequence"]
    assert "stays a float loop" in note and ("level 0" in note or "lod_level 2" in note)
