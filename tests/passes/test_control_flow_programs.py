"""Passes on programs with control flow (while, DynamicRNN, dynamic_lstm): every pass and
the inference pipeline keep the outputs, and sub-blocks come through untouched."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.passes import all_passes, get_pass, inference_pipeline
from tests.passes._util import Built, assert_same_outputs


def _block_ops(program):
    return [[op.desc.SerializeToString() for op in b.ops] for b in program.blocks[1:]]


def _while_model() -> Built:
    """fc -> a power-series loop (exp(h) to convergence) -> fc -> softmax."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[6])
        h = layers.fc(x, size=4, act="tanh")
        k = layers.fill_constant([1], "float32", 0.0)
        term = layers.scale(h, 0.0, 1.0)
        total = layers.scale(h, 0.0)
        tol = layers.fill_constant([1], "float32", 1e-7)
        cond = layers.greater_than(layers.reduce_max(layers.abs(term)), tol)
        loop = layers.While(cond)
        with loop.block():
            layers.assign(layers.elementwise_add(total, term), total)
            layers.increment(k, 1.0)
            layers.assign(layers.elementwise_div(layers.elementwise_mul(term, h), k), term)
            layers.greater_than(layers.reduce_max(layers.abs(term)), tol, cond=cond)
        scaled = layers.scale(total, 1.0)  # an identity for remove_identity to find
        prob = layers.fc(scaled, size=3, act="softmax")
    prog = main.clone(for_test=True)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    feed = {"x": np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)}
    return Built(prog, scope, feed, [prob.name])


def _rnn_model(recurrence: str) -> Built:
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        emb = layers.embedding(words, size=[10, 8])
        if recurrence == "dynamic_lstm":
            hidden, _ = layers.dynamic_lstm(layers.fc(emb, size=16), size=16)
        else:
            drnn = layers.DynamicRNN()
            with drnn.block():
                w = drnn.step_input(emb)
                prev = drnn.memory(shape=[6])
                h = layers.fc([w, prev], size=6, act="tanh")
                drnn.update_memory(prev, h)
                drnn.output(h)
            hidden = drnn()
        pooled = layers.sequence_pool(hidden, "max")
        prob = layers.fc(pooled, size=2, act="softmax")
    prog = main.clone(for_test=True)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    rng = np.random.default_rng(1)
    lens = [3, 1, 7, 4]
    data = rng.integers(0, 10, (sum(lens), 1)).astype(np.int64)
    feed = {"words": fluid.create_lod_tensor(data, [lens])}
    return Built(prog, scope, feed, [prob.name])


MODELS = {"while": _while_model, "dynamic_rnn": lambda: _rnn_model("dynamic_rnn"),
          "dynamic_lstm": lambda: _rnn_model("dynamic_lstm")}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("name", sorted(all_passes()))
def test_pass_keeps_control_flow_outputs(name, model):
    b = MODELS[model]()
    prog, _ = get_pass("prune").apply(b.program, b.ctx())
    before = _block_ops(prog)
    p = get_pass(name)
    out, _ = p.apply(prog, b.ctx())
    if not p.handles_sub_blocks:  # (rnn_loop_to_sequence replaces a loop and its block)
        assert _block_ops(out) == before, f"{name} edited a sub-block"
    assert_same_outputs(b.program, out, b)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_inference_pipeline_on_control_flow(model):
    b = MODELS[model]()
    out = inference_pipeline(memory_reuse=True).run(b.program, b.ctx())
    assert len(out.blocks) == len(b.program.blocks)
    assert_same_outputs(b.program, out, b)
    if model == "while":
        assert "fc" in [op.type for op in out.global_block().ops]  # fused outside the loop
