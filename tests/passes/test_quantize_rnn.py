"""Post-training quantisation of recurrent programs: fc + dynamic_lstm / dynamic_gru
become quantized_fc + quantized_lstm / quantized_gru (docs/fixed_point.md, "Recurrent
cells").  A small sequence classifier (embedding, fc, recurrence, last step, fc) is
trained briefly on synthetic sequences of 1 to 50 tokens, quantised, and run on the CPU;
the quantised cell is checked bit for bit against the independent Python-int model."""

from __future__ import annotations

import time

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.errors import QuantizationError
from fluid_hw.passes.quantize import QuantConfig, quantize
from fluid_hw.passes.quantize_rnn import SIGMOID_SAT, TANH_SAT, gate_table, term_params
from tests.ops._quant_rnn_model import gru_model, lstm_model
from tests.rtl._recurrent_programs import word_classifier

VOCAB, EMB, HIDDEN = 10, 16, 32


def make_data(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Sequences of 1..50 tokens; label 1 when token 3 occurs more often than token 7."""
    seqs = [rng.integers(0, VOCAB, size=int(rng.integers(1, 51))) for _ in range(n)]
    labels = [int((s == 3).sum() > (s == 7).sum()) for s in seqs]
    return seqs, np.array(labels, np.int64).reshape(-1, 1)


def to_lod(seqs: list[np.ndarray]) -> fluid.LoDTensor:
    return fluid.create_lod_tensor(np.concatenate(seqs).reshape(-1, 1).astype(np.int64),
                                   [[len(s) for s in seqs]])


def build(cell: str, **kw):
    with word_classifier(VOCAB, EMB) as (main, startup, emb, label):
        if cell == "gru":
            proj = layers.fc(emb, size=3 * HIDDEN)
            hidden = layers.dynamic_gru(proj, size=HIDDEN, **kw)
        else:
            proj = layers.fc(emb, size=4 * HIDDEN)
            hidden, _ = layers.dynamic_lstm(proj, size=4 * HIDDEN,
                                            use_peepholes=cell == "lstm", **kw)
        prob = layers.fc(layers.sequence_last_step(hidden), size=2, act="softmax")
        test_prog = main.clone(for_test=True)
        loss = layers.mean(layers.cross_entropy(prob, label))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    return main, startup, test_prog, loss, prob


def _accuracy(prob: np.ndarray, labels: np.ndarray) -> float:
    return float((np.argmax(prob, axis=1) == labels[:, 0]).mean())


def _quantize(test_prog, prob, scope, exe, rng, config=None):
    cal = [{"words": to_lod(make_data(rng, 64)[0])} for _ in range(4)]
    return quantize(test_prog, cal, config or QuantConfig(), scope=scope, executor=exe,
                    fetch_names=[prob.name], feed_names=["words"])


def _cell_op(qprog, cell: str):
    ops = [op for op in qprog.global_block().ops if op.type == f"quantized_{cell}"]
    assert len(ops) == 1
    return ops[0]


def _check_cell_bit_exact(qprog, scope, exe, op, seqs) -> None:
    """The quantised program's cell against the independent model, on its own
    parameters (those the pass chose) and its own input accumulators."""
    feed = {"words": to_lod(seqs)}
    outs = [op.input("Input")[0], op.output("Hidden")[0]]
    if op.type == "quantized_lstm":
        outs.append(op.output("Cell")[0])
    vals = [np.asarray(v) for v in exe.run(qprog, feed=feed, fetch_list=outs, scope=scope)]
    params = {slot: np.asarray(scope.find_var(op.input(slot)[0]).get_tensor())
              for slot in op.input_names if op.input(slot) and slot != "Input"}
    lengths = [len(s) for s in seqs]
    if op.type == "quantized_lstm":
        want_h, want_c = lstm_model(vals[0], lengths, params, op.all_attrs())
        np.testing.assert_array_equal(vals[2], want_c)
    else:
        want_h = gru_model(vals[0], lengths, params, op.all_attrs())
    np.testing.assert_array_equal(vals[1], want_h)


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["lstm", "lstm_no_peepholes", "gru"])
def test_trained_sequence_classifier_keeps_its_accuracy(cell):
    rng = np.random.default_rng(0)
    main, startup, test_prog, loss, prob = build(cell)
    exe = fluid.Executor()
    scope = fluid.Scope()
    start = time.perf_counter()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(120):
            xs, ys = make_data(rng, 32)
            exe.run(main, feed={"words": to_lod(xs), "label": ys}, fetch_list=[loss])
        trained = time.perf_counter() - start
        test_x, test_y = make_data(rng, 500)
        (fprob,) = exe.run(test_prog, feed={"words": to_lod(test_x)}, fetch_list=[prob])
        qprog = _quantize(test_prog, prob, scope, exe, rng)
        (qprob,) = exe.run(qprog, feed={"words": to_lod(test_x)}, fetch_list=[prob.name])
    kind = "gru" if cell == "gru" else "lstm"
    op = _cell_op(qprog, kind)
    assert [o.type for o in qprog.global_block().ops] == [
        "lookup_table", "quantize", "quantized_fc", f"quantized_{kind}", "sequence_pool",
        "quantized_fc", "requantize", "dequantize", "softmax"]
    f_acc, q_acc = _accuracy(fprob, test_y), _accuracy(qprob, test_y)
    agree = float((np.argmax(fprob, 1) == np.argmax(qprob, 1)).mean())
    print(f"{cell}: float {f_acc:.3f}, int8 {q_acc:.3f}, decisions agree {agree:.3f} "
          f"(500 held-out sequences of 1..50 tokens; trained {trained:.1f} s)")
    assert f_acc >= 0.85
    assert q_acc >= f_acc - 0.02
    assert agree >= 0.95
    # the pass's parameters, on a batch with lengths 1 and 50: bit for bit
    batch = [test_x[i] for i in range(12)] + [np.array([3]), rng.integers(0, VOCAB, 50)]
    _check_cell_bit_exact(qprog, scope, exe, op, batch)


@pytest.mark.parametrize("cell, observer", [("lstm", "max"), ("gru", "max"),
                                           ("lstm", "percentile")])
def test_reverse_and_initial_state_quantise_and_stay_close(cell, observer):
    """is_reverse and H0 / C0 (int8 / int16 at the states' scales) on an untrained model:
    the quantised hidden states stay close to the float ones."""
    rng = np.random.default_rng(1)
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 2
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[8], dtype="float32", lod_level=1)
        h0 = layers.data(name="h0", shape=[HIDDEN], dtype="float32")
        c0 = layers.data(name="c0", shape=[HIDDEN], dtype="float32")
        if cell == "gru":
            hidden = layers.dynamic_gru(layers.fc(x, size=3 * HIDDEN), size=HIDDEN, h_0=h0,
                                        is_reverse=True)
        else:
            hidden, _ = layers.dynamic_lstm(layers.fc(x, size=4 * HIDDEN), size=4 * HIDDEN,
                                            h_0=h0, c_0=c0, is_reverse=True)
        out = layers.sequence_last_step(hidden)
    exe = fluid.Executor()
    scope = fluid.Scope()
    lengths = [1, 50, 3, 1, 17, 9]

    def feed():
        data = rng.normal(size=(sum(lengths), 8)).astype(np.float32)
        f = {"x": fluid.create_lod_tensor(data, [lengths]),
             "h0": rng.uniform(-0.5, 0.5, (len(lengths), HIDDEN)).astype(np.float32)}
        if cell == "lstm":
            f["c0"] = rng.uniform(-1, 1, (len(lengths), HIDDEN)).astype(np.float32)
        return f

    with fluid.scope_guard(scope):
        exe.run(startup)
        qprog = quantize(main, [feed() for _ in range(3)], QuantConfig(observer=observer),
                         scope=scope, executor=exe, fetch_names=[out.name])
        f = feed()
        (want,) = exe.run(main, feed=f, fetch_list=[out])
        (got,) = exe.run(qprog, feed=f, fetch_list=[out.name])
    op = _cell_op(qprog, cell)
    assert op.attr("is_reverse") and op.input("H0")
    if cell == "lstm":
        assert op.input("C0")
    err = np.abs(np.asarray(got) - np.asarray(want))
    # a few steps of the hidden state's scale (range / 127)
    assert err.max() <= 8 * float(np.abs(want).max()) / 127, err.max()


def _untrained(cell: str, **kw):
    _, startup, test_prog, _, prob = build(cell, **kw)
    exe = fluid.Executor()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
    return test_prog, prob, scope, exe


@pytest.mark.parametrize("cell, kw, what", [
    ("lstm", {"candidate_activation": "relu"}, "candidate_activation is 'relu'"),
    ("lstm", {"gate_activation": "tanh"}, "gate_activation is 'tanh'"),
    ("gru", {"candidate_activation": "identity"}, "activation is 'identity'"),
])
def test_unsupported_activations_name_the_op_and_the_ways_out(cell, kw, what):
    test_prog, prob, scope, exe = _untrained(cell, **kw)
    rng = np.random.default_rng(2)
    layer = "dynamic_gru" if cell == "gru" else "dynamic_lstm"
    op_type = "gru" if cell == "gru" else "lstm"
    with pytest.raises(QuantizationError, match=rf"{layer} \(op {op_type} -> .*\) cannot be "
                       rf"quantised: {what}.*exclude=\['{op_type}'\].*float_fallback=True"):
        _quantize(test_prog, prob, scope, exe, rng)
    # either way out gives a program that runs, the recurrence in float on the host
    test_x, _ = make_data(rng, 20)
    feed = {"words": to_lod(test_x)}
    (want,) = exe.run(test_prog, feed=feed, fetch_list=[prob], scope=scope)
    for cfg in (QuantConfig(exclude=(op_type,)), QuantConfig(float_fallback=True)):
        qprog = _quantize(test_prog, prob, scope, exe, rng, cfg)
        types = [o.type for o in qprog.global_block().ops]
        assert op_type in types and f"quantized_{op_type}" not in types
        (got,) = exe.run(qprog, feed=feed, fetch_list=[prob.name], scope=scope)
        assert np.abs(np.asarray(got) - np.asarray(want)).max() < 0.1


def test_tables_and_term_parameters():
    """The tables saturate where the docs say; each term of a sum requantiser keeps 15
    significant bits (1/127, the gate scale, is exact to 2^-15)."""
    sig = gate_table("sigmoid", SIGMOID_SAT / 127)
    assert sig[0] == 0 and sig[255] == 127 and sig[128] == 64  # sigmoid(0) * 127 = 63.5
    assert sig[1] == 0 and sig[254] == 127  # on the rails before the last entries
    th = gate_table("tanh", TANH_SAT / 127)
    assert th[0] == -127 and th[255] == 127 and th[128] == 0
    assert np.all(np.diff(sig.astype(int)) >= 0) and np.all(np.diff(th.astype(int)) >= 0)
    ms, ns = term_params([1 / 127, 0.001, 0.0], "test")
    assert ms[2] == ns[2] == 0
    for m, n, want in zip(ms[:2], ns[:2], [1 / 127, 0.001]):
        assert 2**14 <= m <= 2**15 - 1 and abs(m * 2.0**-n - want) <= want * 2**-15
    with pytest.raises(QuantizationError, match="the cell update: requantisation multiplier"):
        term_params([1e6], "the cell update")


def test_refused_projections_and_widths_name_the_op():
    """The projection must be a plain fc, and the cell is int8: other configurations
    are refused with the op and the ways out."""
    rng = np.random.default_rng(4)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[8], dtype="float32", lod_level=1)
        hidden, _ = layers.dynamic_lstm(layers.fc(x, size=4 * 8, act="relu"), size=4 * 8)
        out = layers.fc(layers.sequence_last_step(hidden), size=2)
    exe = fluid.Executor()
    scope = fluid.Scope()
    lengths = [1, 5, 50]
    cal = [{"x": fluid.create_lod_tensor(rng.normal(size=(56, 8)).astype(np.float32),
                                         [lengths])}]
    with fluid.scope_guard(scope):
        exe.run(startup)
        with pytest.raises(QuantizationError, match=r"dynamic_lstm \(op lstm -> .*\) cannot "
                           r"be quantised: its input projection fc .* has activation 'relu'"):
            quantize(main, cal, scope=scope, executor=exe, fetch_names=[out.name])
    test_prog, prob, scope, exe = _untrained("gru")
    with pytest.raises(QuantizationError, match=r"dynamic_gru \(op gru -> .*\) cannot be "
                       r"quantised: the quantised program has 16-bit activations"):
        _quantize(test_prog, prob, scope, exe, rng, QuantConfig(activation_bits=16))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_quantised_recurrent_program_round_trips_through_save_and_load(cell, tmp_path):
    test_prog, prob, scope, exe = _untrained(cell)
    rng = np.random.default_rng(6)
    qprog = _quantize(test_prog, prob, scope, exe, rng)
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["words"],
                                      [qprog.global_block().var(prob.name)], exe,
                                      main_program=qprog)
    loaded_scope = fluid.Scope()
    with fluid.scope_guard(loaded_scope):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert feeds == ["words"] and f"quantized_{cell}" in [o.type for o in
                                                         prog.global_block().ops]
    feed = {"words": to_lod(make_data(rng, 30)[0])}
    (want,) = exe.run(qprog, feed=feed, fetch_list=[prob.name], scope=scope)
    (got,) = exe.run(prog, feed=feed, fetch_list=[v.name for v in fetches], scope=loaded_scope)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
