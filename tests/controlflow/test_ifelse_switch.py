"""IfElse (per-sample branches on just their rows, merged back in order), Switch and
ConditionalBlock."""

import collections

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.frontend.backward import gradients


def _ifelse_program(lod_level=0):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[3], dtype="float64", lod_level=lod_level,
                        stop_gradient=False)
        if lod_level:
            score = layers.sequence_pool(x, "sum")
        else:
            score = x
        cond = layers.less_than(layers.reduce_sum(score, dim=[1], keep_dim=True),
                                layers.fill_constant([1], "float64", 0.0))
        ie = layers.IfElse(cond)
        with ie.true_block():
            t = ie.input(x)
            ie.output(layers.scale(layers.tanh(t), 2.0))
        with ie.false_block():
            f = ie.input(x)
            ie.output(layers.exp(f))
        (out,) = ie()
        loss = layers.reduce_sum(out)
        (gx,) = gradients(loss, [x])
    return main, out, gx


def _branch_blocks(main):
    return [op.attr("sub_block") for op in main.global_block().ops
            if op.type == "conditional_block"]


def test_ifelse_equals_numpy_where_and_runs_each_branch_once():
    main, out, gx = _ifelse_program()
    blocks = _branch_blocks(main)
    calls = collections.Counter()
    rows = {}

    def hook(ctx):
        if ctx.block_idx in blocks:
            calls[(ctx.block_idx, ctx.op_type)] += 1
            rows[ctx.block_idx] = ctx.input(ctx.op.input_names[0]).shape[0]

    exe = fluid.Executor()
    exe.hooks.append(hook)
    xv = np.random.default_rng(0).standard_normal((9, 3))
    with fluid.scope_guard(fluid.Scope()):
        got, g = exe.run(main, feed={"x": xv}, fetch_list=[out, gx])
    c = xv.sum(1, keepdims=True) < 0
    np.testing.assert_allclose(got, np.where(c, 2 * np.tanh(xv), np.exp(xv)), rtol=1e-12)
    np.testing.assert_allclose(g, np.where(c, 2 * (1 - np.tanh(xv) ** 2), np.exp(xv)),
                               rtol=1e-12)
    # every op of each branch ran exactly once (forward), on just its rows
    assert calls and set(calls.values()) == {1}
    assert rows == {blocks[0]: int(c.sum()), blocks[1]: int((~c).sum())}


def test_a_branch_without_rows_does_not_run():
    main, out, gx = _ifelse_program()
    blocks = _branch_blocks(main)
    ran = set()
    exe = fluid.Executor()
    exe.hooks.append(lambda ctx: ran.add(ctx.block_idx))
    xv = np.abs(np.random.default_rng(1).standard_normal((4, 3)))  # all rows: false
    with fluid.scope_guard(fluid.Scope()):
        got, g = exe.run(main, feed={"x": xv}, fetch_list=[out, gx])
    assert blocks[0] not in ran and blocks[1] in ran
    np.testing.assert_allclose(got, np.exp(xv))
    np.testing.assert_allclose(g, np.exp(xv))


def test_ifelse_routes_whole_sequences_of_a_lod_batch():
    main, out, gx = _ifelse_program(lod_level=1)
    lens = [2, 3, 1, 4]
    xv = np.random.default_rng(2).standard_normal((10, 3))
    with fluid.scope_guard(fluid.Scope()):
        got, g = fluid.Executor().run(main, feed={"x": fluid.create_lod_tensor(xv, [lens])},
                                      fetch_list=[out, gx], return_numpy=False)
    assert got.recursive_sequence_lengths() == [lens]
    seq = np.repeat(np.arange(4), lens)
    c = (np.add.reduceat(xv.sum(1), [0, 2, 5, 6]) < 0)[seq][:, None]
    np.testing.assert_allclose(np.asarray(got), np.where(c, 2 * np.tanh(xv), np.exp(xv)))
    np.testing.assert_allclose(np.asarray(g),
                               np.where(c, 2 * (1 - np.tanh(xv) ** 2), np.exp(xv)))


def test_ifelse_misuse_is_reported():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data(name="x", shape=[1])
        with pytest.raises(TypeError, match="bool"):
            layers.IfElse(x)
        ie = layers.IfElse(layers.less_than(x, x))
        with pytest.raises(ValueError, match="inside true_block"):
            ie.input(x)
        with pytest.raises(ValueError, match="build true_block"):
            ie()


def _switch_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        step = layers.data(name="step", shape=[1], dtype="float32", append_batch_size=False)
        lr = layers.fill_constant([1], "float32", -1.0)
        with layers.Switch() as switch:
            with switch.case(layers.less_than(step, layers.fill_constant([1], "float32",
                                                                         10.0))):
                layers.assign(layers.scale(step, 0.1), lr)
            with switch.case(layers.less_than(step, layers.fill_constant([1], "float32",
                                                                         20.0))):
                layers.assign(layers.fill_constant([1], "float32", 1.0), lr)
            with switch.default():
                layers.assign(layers.fill_constant([1], "float32", 0.5), lr)
    return main, lr


def test_switch_takes_the_first_matching_case():
    main, lr = _switch_program()
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        for s, want in ((3.0, 0.3), (10.0, 1.0), (19.0, 1.0), (20.0, 0.5), (99.0, 0.5)):
            (got,) = exe.run(main, feed={"step": np.array([s], np.float32)},
                             fetch_list=[lr])
            np.testing.assert_allclose(got, [want], rtol=1e-6)


def test_switch_misuse_is_reported():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        s = layers.Switch()
        with pytest.raises(ValueError, match="inside 'with Switch"), s.case(None):
            pass
        with layers.Switch() as s2, pytest.raises(ValueError, match="at least one case"), \
                s2.default():
            pass


def test_conditional_block_on_a_scalar_condition():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        flag = layers.data(name="flag", shape=[1], dtype="bool", append_batch_size=False)
        out = layers.fill_constant([2], "float32", 0.0)
        cb = layers.ConditionalBlock([flag], is_scalar_condition=True)
        with cb.block():
            layers.assign(layers.fill_constant([2], "float32", 7.0), out)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        (a,) = exe.run(main, feed={"flag": np.array([True])}, fetch_list=[out])
        (b,) = exe.run(main, feed={"flag": np.array([False])}, fetch_list=[out])
    np.testing.assert_array_equal(a, [7, 7])
    np.testing.assert_array_equal(b, [0, 0])
