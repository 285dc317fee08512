"""Small recurrent programs: quantised ones (fc + dynamic_lstm / dynamic_gru, or a
DynamicRNN plain recurrence, quantised by the pass) and their stage arrays, for the
recurrent stage's tests; float DynamicRNN programs and the word-sequence classifiers'
inputs, for the pass, back-end and control flow tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.hls.kinds.recurrent import CELLS
from fluid_hw.ir.ops.quant_rnn import RNN_ACTIVATIONS
from fluid_hw.passes.quantize import QuantConfig, quantize
from fluid_hw.rtl.recurrent import RecurrentParams
from fluid_hw.rtl.recurrent_spec import CELL_ATTRS

#: the plain recurrences' activations (quantized_rnn)
PLAIN = RNN_ACTIVATIONS


def lod(seqs: list[np.ndarray]) -> fluid.LoDTensor:
    return fluid.create_lod_tensor(np.concatenate(seqs).astype(np.float32),
                                   [[len(s) for s in seqs]])


def quantised_cell(cell: str, in_dim: int, hidden: int, seed: int = 0, pool: bool = True,
                   **kw: Any) -> tuple[Any, Any, Any, Any]:
    """``(qprog, scope, exe, output name)``: ``x`` (float, lod 1) -> fc -> recurrence
    -> ``sequence_last_step`` (``pool``; else the whole hidden sequence), random weights,
    quantised on random sequences of 1..50 steps; ``cell`` ``lstm`` (peepholes),
    ``lstm_np`` (none), ``gru``, or an activation of :data:`PLAIN` (a DynamicRNN body
    ``fc([x, h], act=cell)``, quantised to ``quantized_fc`` + ``quantized_rnn``)."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = seed + 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[in_dim], dtype="float32", lod_level=1)
        if cell == "gru":
            proj = layers.fc(x, size=3 * hidden)
            hid = layers.dynamic_gru(proj, size=hidden, **kw)
        elif cell in PLAIN:
            drnn = layers.DynamicRNN()
            with drnn.block():
                word = drnn.step_input(x)
                prev = drnn.memory(shape=[hidden], value=0.0)
                h = layers.fc([word, prev], size=hidden, act=cell)
                drnn.update_memory(prev, h)
                drnn.output(h)
            hid = drnn()
        else:
            proj = layers.fc(x, size=4 * hidden)
            hid, _ = layers.dynamic_lstm(proj, size=4 * hidden,
                                         use_peepholes=cell == "lstm", **kw)
        last = layers.sequence_last_step(hid) if pool else hid
    exe = fluid.Executor()
    scope = fluid.Scope()
    rng = np.random.default_rng(seed)
    with fluid.scope_guard(scope):
        exe.run(startup)
        cal = [{"x": lod(sequences(rng, 32, in_dim))} for _ in range(2)]
        qprog = quantize(main, cal, QuantConfig(), scope=scope, executor=exe,
                         fetch_names=[last.name], feed_names=["x"])
    return qprog, scope, exe, last.name


def sequences(rng: np.random.Generator, n: int, in_dim: int, lengths: list[int] | None = None
              ) -> list[np.ndarray]:
    lens = lengths or [int(v) for v in rng.integers(1, 51, n)]
    return [rng.normal(0, 1, (t, in_dim)).astype(np.float32) for t in lens]


def stage_arrays(qprog: Any, scope: Any) -> tuple[str, RecurrentParams]:
    """The cell (``lstm`` | ``gru`` | ``rnn``) and the integers of the program's
    quantized_fc + quantized_lstm | quantized_gru | quantized_rnn."""
    ops = qprog.global_block().ops
    rec = next(op for op in ops if op.type in CELLS)
    fc = next(op for op in ops if op.type == "quantized_fc"
              and op.output("Out")[0] == rec.input("Input")[0])

    def val(name: str) -> np.ndarray:
        return np.asarray(scope.find_var(name).get_tensor())

    cell = rec.type.removeprefix("quantized_")
    attrs = rec.all_attrs()
    peep = rec.input("Peephole") if cell == "lstm" and attrs["use_peepholes"] else []
    params = RecurrentParams(
        wx=val(fc.input("W")[0]), bias=val(fc.input("Bias")[0]).reshape(-1),
        wh=val(rec.input("Weight")[0]), gm=val(rec.input("GateMultiplier")[0]),
        gs=val(rec.input("GateShift")[0]), tables=val(rec.input("Tables")[0]),
        peephole=val(peep[0]) if peep else None,
        attrs={k: attrs[k] for k in CELL_ATTRS[cell]})
    return cell, params


def golden(qprog: Any, scope: Any, exe: Any, seqs: list[np.ndarray]
           ) -> tuple[np.ndarray, np.ndarray]:
    """The CPU executor's int8 inputs of the projection (``[sum T, in_dim]``) and the
    recurrence's int8 hidden states (``[sum T, D]``) on ``seqs``."""
    ops = qprog.global_block().ops
    rec = next(op for op in ops if op.type in CELLS)
    fc = next(op for op in ops if op.type == "quantized_fc"
              and op.output("Out")[0] == rec.input("Input")[0])
    with fluid.scope_guard(scope):
        xq, hid = exe.run(qprog, feed={"x": lod(seqs)},
                          fetch_list=[fc.input("X")[0], rec.output("Hidden")[0]],
                          scope=scope)
    return np.asarray(xq).astype(np.int64), np.asarray(hid).astype(np.int64)


def dynamic_rnn_program(feed: str, in_dim: int, hidden: int,
                        step: Callable[[Any, Any, Any], Any],
                        head: Callable[[Any], Any]) -> tuple[Any, Any, Any]:
    """``(main, startup, y)``, the startup program's seed 1: ``feed`` (float, lod 1,
    ``in_dim`` wide) -> a DynamicRNN whose step is ``h = step(drnn, word, prev)``
    (``prev``: the ``hidden``-wide memory, zeros at first, that ``h`` updates; ``h`` is
    the step's output) -> ``y = head(the sequence of h)``."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name=feed, shape=[in_dim], dtype="float32", lod_level=1)
        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(x)
            prev = drnn.memory(shape=[hidden], value=0.0)
            h = step(drnn, word, prev)
            drnn.update_memory(prev, h)
            drnn.output(h)
        y = head(drnn())
    return main, startup, y


@contextlib.contextmanager
def word_classifier(vocab: int, emb: int) -> Iterator[tuple[Any, Any, Any, Any]]:
    """The inputs of a word-sequence classifier: yields ``(main, startup, embedding,
    label)`` inside ``program_guard(main, startup)`` and a fresh unique-name scope, the
    startup program's seed 1; ``words`` (int64 token ids, lod 1) -> an ``[vocab, emb]``
    embedding, and ``label`` (int64, one a sequence)."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        label = layers.data(name="label", shape=[1], dtype="int64")
        yield main, startup, layers.embedding(words, size=[vocab, emb]), label
