"""DynamicRNN on LoD tensors: equal to a padded-and-masked numpy reference (forward and
gradients), with no padding (a trace of what the step block's kernels receive), and
with its parameters in the global block."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import layers
from fluid_hw.frontend.backward import append_backward
from tests.controlflow import refs

D_IN, H = 3, 4


def _tanh_rnn(x):
    drnn = layers.DynamicRNN()
    with drnn.block():
        word = drnn.step_input(x)
        prev = drnn.memory(shape=[H], value=0.0, dtype=x.dtype)
        h = layers.fc([word, prev], size=H, act="tanh")
        drnn.update_memory(prev, h)
        drnn.output(h)
    return drnn, drnn()


def _build(dtype="float64"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[D_IN], dtype=dtype, lod_level=1)
        wout = layers.data(name="wout", shape=[H], dtype=dtype, lod_level=1)
        drnn, out = _tanh_rnn(x)
        loss = layers.reduce_sum(layers.elementwise_mul(out, wout))
        grads = append_backward(loss)
    return main, startup, out, loss, grads, drnn


LENGTHS = {
    "ragged": refs.ragged_lengths(np.random.default_rng(5), 7),
    "all-length-1": [1, 1, 1, 1],
    "all-equal": [6, 6, 6],
    "one-sequence": [9],
}


@pytest.mark.parametrize("case", list(LENGTHS))
def test_forward_and_gradients_equal_padded_reference(case):
    lens = LENGTHS[case]
    main, startup, out, loss, grads, _ = _build()
    rng = np.random.default_rng(len(lens))
    xv = rng.standard_normal((sum(lens), D_IN))
    wv = rng.standard_normal((sum(lens), H))
    scope = fluid.Scope()
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p, _ in grads}
        res = exe.run(main, feed={"x": fluid.create_lod_tensor(xv, [lens]),
                                  "wout": fluid.create_lod_tensor(wv, [lens])},
                      fetch_list=[out, loss] + [g for _, g in grads], return_numpy=False)
    assert res[0].recursive_sequence_lengths() == [lens]  # outputs keep the input's LoD
    wx, wh, b = (params[p.name] for p, _ in grads)
    ref = refs.rnn_tanh(xv, lens, wx, wh, b)
    np.testing.assert_allclose(np.asarray(res[0]), ref, rtol=1e-12, atol=1e-12)

    def loss_of():
        return float((refs.rnn_tanh(xv, lens, wx, wh, b) * wv).sum())

    np.testing.assert_allclose(float(np.asarray(res[1])[0]), loss_of(), rtol=1e-12)
    for arr, got in zip((wx, wh, b), res[2:]):
        refs.assert_grad(loss_of, arr, got)


def test_step_block_kernels_see_only_active_rows():
    """No padding: per while step, the rows the step block's kernels actually receive
    (recorded by an executor hook) equal the number of sequences still active."""
    main, startup, _, loss, _, _ = _build("float32")
    step_block = next(op for op in main.global_block().ops if op.type == "while")
    sub = step_block.attr("sub_block")
    lens = [5, 1, 3, 8, 3, 1, 2]
    trace: dict[int, list[int]] = {}  # step scope -> rows seen by each kernel input
    order: list[int] = []

    def hook(ctx):
        if ctx.block_idx != sub or ctx.op_type not in ("mul", "tanh", "elementwise_add"):
            return
        key = id(ctx.scope)
        if key not in trace:
            trace[key] = []
            order.append(key)
        trace[key].append(ctx.input("X").shape[0])

    exe = fluid.Executor()
    exe.hooks.append(hook)
    rng = np.random.default_rng(0)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        exe.run(main, feed={
            "x": fluid.create_lod_tensor(rng.random((sum(lens), D_IN), np.float32), [lens]),
            "wout": fluid.create_lod_tensor(rng.random((sum(lens), H), np.float32), [lens])},
            fetch_list=[loss])
    per_step = []
    for key in order:
        seen = set(trace[key])
        assert len(seen) == 1, f"kernels of one step saw different row counts: {seen}"
        per_step.append(seen.pop())
    active = [sum(n > t for n in lens) for t in range(max(lens))]
    assert per_step == active == [7, 5, 4, 2, 2, 1, 1, 1]
    assert sum(per_step) == sum(lens)


def test_parameters_live_in_global_block_and_scope():
    main, startup, _, _, grads, _ = _build("float32")
    names = {p.name for p in main.global_block().all_parameters()}
    assert names == {"fc_0.w_0", "fc_0.w_1", "fc_0.b_0"}
    for b in main.blocks[1:]:
        assert not b.all_parameters()
    assert {p.name for p, _ in grads} == names
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
    for n in names:
        assert scope.find_var(n) is not None and scope.find_var(n).is_initialized()


def test_static_input_and_memory_init_follow_the_rank_order():
    """static_input and memory(init, need_reorder) take one row per sequence in input
    order; the body sees them in rank order and shrunk with the batch."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[2], dtype="float64", lod_level=1)
        ctxv = layers.data(name="c", shape=[2], dtype="float64")
        h0 = layers.data(name="h0", shape=[2], dtype="float64")
        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(x)
            c = drnn.static_input(ctxv)
            prev = drnn.memory(init=h0, need_reorder=True)
            h = layers.elementwise_add(layers.elementwise_mul(prev, c), word)
            drnn.update_memory(prev, h)
            drnn.output(h)
        out = drnn()
    lens = [2, 4, 1]
    rng = np.random.default_rng(1)
    xv, cv, hv = rng.random((7, 2)), rng.random((3, 2)), rng.random((3, 2))
    with fluid.scope_guard(fluid.Scope()):
        (got,) = fluid.Executor().run(main, feed={"x": fluid.create_lod_tensor(xv, [lens]),
                                                  "c": cv, "h0": hv}, fetch_list=[out])
    want, o = [], 0
    for i, n in enumerate(lens):
        h = hv[i]
        for t in range(n):
            h = h * cv[i] + xv[o + t]
            want.append(h)
        o += n
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12)


def test_static_rnn_equals_numpy():
    t_steps, batch = 5, 3
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[t_steps, batch, 2], dtype="float64",
                        append_batch_size=False, stop_gradient=False)
        rnn = layers.StaticRNN()
        with rnn.step():
            word = rnn.step_input(x)
            prev = rnn.memory(shape=[-1, 4], batch_ref=word)
            h = layers.fc([word, prev], size=4, act="tanh")
            rnn.update_memory(prev, h)
            rnn.step_output(h)
        out = rnn()
        loss = layers.reduce_sum(out)
        grads = append_backward(loss)
    xv = np.random.default_rng(2).standard_normal((t_steps, batch, 2))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
        w = [np.array(scope.find_var(n).get_tensor()) for n in ("fc_0.w_0", "fc_0.w_1",
                                                                 "fc_0.b_0")]
        res = fluid.Executor().run(main, feed={"x": xv},
                                   fetch_list=[out] + [g for _, g in grads])

    def forward():
        h, outs = np.zeros((batch, 4)), []
        for t in range(t_steps):
            h = np.tanh(xv[t] @ w[0] + h @ w[1] + w[2])
            outs.append(h)
        return np.stack(outs)

    assert res[0].shape == (t_steps, batch, 4)
    np.testing.assert_allclose(res[0], forward(), rtol=1e-12)
    for arr, got in zip(w, res[1:]):
        np.testing.assert_allclose(got, refs.numeric_grad(lambda: forward().sum(), arr),
                                   rtol=1e-6, atol=1e-8)


def test_dynamic_rnn_misuse_is_reported():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = layers.data(name="x", shape=[2], lod_level=1)
        drnn = layers.DynamicRNN()
        with pytest.raises(ValueError, match="inside the RNN's block"):
            drnn.output(x)
        with pytest.raises(ValueError, match="after step_input"), drnn.block():
            drnn.memory(shape=[3])


def test_ifelse_inside_dynamic_rnn_forward_and_gradients():
    """Nested blocks: an IfElse in the step block; gradients go through while_grad and,
    inside its gradient block, conditional_block_grad."""
    lens = [4, 1, 3, 6]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = layers.data(name="x", shape=[2], dtype="float64", lod_level=1)
        drnn = layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(x)
            prev = drnn.memory(shape=[2], dtype="float64")
            h = layers.fc([word, prev], size=2, act="tanh")
            cond = layers.less_than(layers.reduce_sum(h, dim=[1], keep_dim=True),
                                    layers.fill_constant([1], "float64", 0.0))
            ie = layers.IfElse(cond)
            with ie.true_block():
                ie.output(layers.scale(ie.input(h), -0.5))
            with ie.false_block():
                ie.output(layers.elementwise_mul(ie.input(h), ie.input(h)))
            (hh,) = ie()
            drnn.update_memory(prev, hh)
            drnn.output(hh)
        loss = layers.reduce_sum(layers.sequence_pool(drnn(), "sum"))
        grads = append_backward(loss)
    xv = np.random.default_rng(7).standard_normal((sum(lens), 2))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor()
        exe.run(startup)
        params = [np.array(scope.find_var(p.name).get_tensor()) for p, _ in grads]
        res = exe.run(main, feed={"x": fluid.create_lod_tensor(xv, [lens])},
                      fetch_list=[loss] + [g for _, g in grads])

    def forward():
        wx, wh, b = params
        total, o = 0.0, 0
        for n in lens:
            h = np.zeros(2)
            for t in range(n):
                a = np.tanh(xv[o + t] @ wx + h @ wh + b)
                h = -0.5 * a if a.sum() < 0 else a * a
                total += h.sum()
            o += n
        return total

    np.testing.assert_allclose(res[0][0], forward(), rtol=1e-12)
    for arr, got in zip(params, res[1:]):
        refs.assert_grad(forward, arr, got)
