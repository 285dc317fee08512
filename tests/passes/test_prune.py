"""prune: Before / Expected (numeric and property checks: test_equivalence.py)."""

import pytest

import fluid_hw as fluid
from fluid_hw.frontend import models
from fluid_hw.passes import PassContext, PassError, get_pass
from tests.passes._util import assert_same_outputs, digits, op_types


def test_prune_drops_backward_optimizer_and_unneeded_feeds():
    m = models.digits_mlp(optimizer=fluid.optimizer.Adam(learning_rate=0.01))
    ctx = PassContext(feed_names=["pixels", "label"], fetch_names=[m.prediction.name])
    out, changed = get_pass("prune").apply(m.main, ctx)
    assert changed
    assert op_types(out) == ["mul", "elementwise_add", "relu"] * 2 + \
        ["mul", "elementwise_add", "softmax"]
    gb = out.global_block()
    assert not gb.has_var("label")  # a feed nothing needed
    assert not any("@GRAD" in n or "moment" in n for n in gb.vars)
    assert "adam" in op_types(m.main)  # the input program is untouched


def test_prune_switches_to_test_mode():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4])
        y = fluid.layers.dropout(fluid.layers.fc(x, size=3), dropout_prob=0.5)
    out, _ = get_pass("prune").apply(main, PassContext(feed_names=["x"], fetch_names=[y.name]))
    (drop,) = [op for op in out.global_block().ops if op.type == "dropout"]
    assert drop.attr("is_test")


def test_prune_keeps_feed_and_fetch_ops_of_a_saved_model(tmp_path):
    b = digits("mlp")
    exe = fluid.Executor()
    with fluid.scope_guard(b.scope):
        fluid.io.save_inference_model(str(tmp_path), ["pixels", "label"],
                                      [b.program.global_block().var(b.fetch[0])], exe,
                                      main_program=b.program)
        prog, feeds, _fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert feeds == ["pixels", "label"]
    out, changed = get_pass("prune").apply(prog)  # targets and feeds from its ops
    assert changed
    types = op_types(out)
    assert types[0] == "feed" and types[-1] == "fetch" and types.count("feed") == 1
    (feed,) = [op for op in out.global_block().ops if op.type == "feed"]
    assert feed.output("Out") == ["pixels"] and feed.attr("col") == 0
    assert_same_outputs(prog, out, b)


def test_prune_needs_targets():
    b = digits("mlp")
    with pytest.raises(PassError, match="fetch_names"):
        get_pass("prune").apply(b.program)
    with pytest.raises(PassError, match="nope"):
        get_pass("prune").apply(b.program, PassContext(fetch_names=["nope"]))
