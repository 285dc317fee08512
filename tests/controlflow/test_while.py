"""``while``: data-dependent loops (Collatz steps, a power series to convergence),
nesting, tensor arrays in loops, inference mode, errors and gradient limits."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors, layers
from fluid_hw.frontend.backward import append_backward, gradients


def _op(op_type, x, **attrs):
    helper = fluid.LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": x}, {"Out": out}, attrs)
    return out


def _any(mask, cond=None):
    """One bool: does any entry of the bool tensor ``mask`` hold (into ``cond``)?"""
    m = layers.reduce_max(layers.cast(mask, "float64"))
    return layers.greater_than(m, layers.fill_constant([1], "float64", 0.5), cond=cond)


def _collatz_numpy(n):
    out = []
    for v in n.reshape(-1):
        v, k = int(v), 0
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            k += 1
        out.append(k)
    return np.array(out, np.float64).reshape(n.shape)


def test_collatz_steps_per_row():
    """Each row runs a data-dependent number of steps; the loop runs until the last one
    reaches 1."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        n = layers.data(name="n", shape=[1], dtype="float64")
        one = layers.fill_constant([1], "float64", 1.0)
        cur = layers.assign(n)
        count = layers.scale(n, 0.0)
        cond = _any(layers.greater_than(cur, one))
        loop = layers.While(cond)
        with loop.block():
            active = layers.cast(layers.greater_than(cur, one), "float64")
            half = layers.scale(cur, 0.5)
            even = layers.cast(layers.equal(_op("floor", half), half), "float64")
            odd = layers.scale(even, -1.0, 1.0)
            nxt = layers.elementwise_add(layers.elementwise_mul(even, half),
                                         layers.elementwise_mul(odd, layers.scale(cur, 3.0,
                                                                                  1.0)))
            new = layers.elementwise_add(
                layers.elementwise_mul(active, nxt),
                layers.elementwise_mul(layers.scale(active, -1.0, 1.0), cur))
            layers.assign(new, cur)
            layers.assign(layers.elementwise_add(count, active), count)
            _any(layers.greater_than(cur, one), cond=cond)
    nv = np.array([[1], [2], [3], [6], [7], [27], [97]], np.float64)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        got, final = exe.run(main, feed={"n": nv}, fetch_list=[count, cur])
        np.testing.assert_array_equal(got, _collatz_numpy(nv))
        np.testing.assert_array_equal(final, np.ones_like(nv))
        # a second batch: the loop runs a different number of times
        got2, = exe.run(main, feed={"n": nv[:3]}, fetch_list=[count])
    np.testing.assert_array_equal(got2, _collatz_numpy(nv[:3]))


def test_power_series_until_convergence():
    """exp(x) = sum x^k / k!, adding terms until the largest is below a tolerance."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[3], dtype="float64")
        k = layers.fill_constant([1], "float64", 0.0)
        term = layers.scale(x, 0.0, 1.0)  # x^0 / 0! = 1
        total = layers.scale(x, 0.0)
        tol = layers.fill_constant([1], "float64", 1e-12)
        steps = layers.fill_constant([1], "int64", 0)
        cond = layers.greater_than(layers.reduce_max(layers.abs(term)), tol)
        loop = layers.While(cond)
        with loop.block():
            layers.assign(layers.elementwise_add(total, term), total)
            layers.increment(k, 1.0)
            layers.increment(steps, 1.0)
            layers.assign(layers.elementwise_div(layers.elementwise_mul(term, x), k), term)
            layers.greater_than(layers.reduce_max(layers.abs(term)), tol, cond=cond)
    xv = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -2.5]])
    with fluid.scope_guard(fluid.Scope()):
        got, n = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[total, steps])
    np.testing.assert_allclose(got, np.exp(xv), rtol=1e-12, atol=1e-12)
    t, i = 1.0, 0  # the number of terms numpy needs for the largest |x|
    while abs(t) > 1e-12:
        t, i = t * 3.0 / (i + 1), i + 1
    assert int(n[0]) == i


def test_nested_while_with_arrays():
    """Outer loop i < 3, inner loop j < i + 1: collects i * 10 + j in an array."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = layers.fill_constant([1], "int64", 0)
        three = layers.fill_constant([1], "int64", 3)
        slot = layers.fill_constant([1], "int64", 0)
        arr = layers.create_array("float64")
        outer_cond = layers.less_than(i, three)
        outer = layers.While(outer_cond)
        with outer.block():
            j = layers.fill_constant([1], "int64", 0)
            limit = layers.elementwise_add(i, layers.fill_constant([1], "int64", 1))
            inner_cond = layers.less_than(j, limit)
            inner = layers.While(inner_cond)
            with inner.block():
                v = layers.elementwise_add(layers.scale(layers.cast(i, "float64"), 10.0),
                                           layers.cast(j, "float64"))
                layers.array_write(v, slot, arr)
                layers.increment(slot)
                layers.increment(j)
                layers.less_than(j, limit, cond=inner_cond)
            layers.increment(i)
            layers.less_than(i, three, cond=outer_cond)
        n = layers.array_length(arr)
        stacked, _ = layers.tensor_array_to_tensor(arr, axis=0)
    assert main.num_blocks == 3 and main.block(2).parent_idx == 1
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        for _ in range(2):  # arrays start empty on every run
            got_n, got = exe.run(main, fetch_list=[n, stacked])
            assert int(got_n[0]) == 6
            np.testing.assert_array_equal(got, [0, 10, 11, 20, 21, 22])


def test_inference_clone_keeps_no_step_scopes():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 4)
        acc = layers.fill_constant([1], "float32", 0.0)
        cond = layers.less_than(i, n)
        loop = layers.While(cond)
        with loop.block():
            layers.assign(layers.scale(acc, 2.0, 1.0), acc)
            layers.increment(i)
            layers.less_than(i, n, cond=cond)
    test_prog = main.clone(for_test=True)
    wop = next(op for op in test_prog.global_block().ops if op.type == "while")
    assert wop.attr("is_test") is True
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        (a,) = fluid.Executor().run(test_prog, fetch_list=[acc])
    assert a[0] == 15.0
    assert scope.find_var(wop.output("StepScopes")[0]).value() == []


def test_error_in_loop_body_names_block_op_and_step():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 5)
        arr = layers.create_array("float32")
        layers.array_write(layers.fill_constant([1], "float32", 1.0), i, arr)
        cond = layers.less_than(i, n)
        loop = layers.While(cond)
        with loop.block():
            layers.array_read(arr, i)  # entry 1 was never written
            layers.increment(i)
            layers.less_than(i, n, cond=cond)
    with fluid.scope_guard(fluid.Scope()), \
            pytest.raises(errors.ExecutionError, match=r"step 1.*read_from_array.*block 1"):
        fluid.Executor().run(main)


def test_while_rejects_a_non_bool_condition():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match="bool"):
            layers.While(layers.fill_constant([1], "float32", 1.0))
        with pytest.raises(TypeError, match="one value"):
            layers.While(layers.less_than(layers.fill_constant([2], "int64", 1),
                                          layers.fill_constant([2], "int64", 2)))


def test_gradient_through_overwritten_outer_float_is_refused():
    """State overwritten in place at each step cannot carry a gradient back through the
    steps; the error says to use a tensor array (as DynamicRNN does)."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data(name="x", shape=[2], dtype="float32", stop_gradient=False)
        h = layers.scale(x, 1.0)
        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 3)
        cond = layers.less_than(i, n)
        loop = layers.While(cond)
        with loop.block():
            layers.assign(layers.tanh(h), h)
            layers.increment(i)
            layers.less_than(i, n, cond=cond)
        loss = layers.mean(h)
        with pytest.raises(errors.GradientError, match="tensor array"):
            gradients(loss, [x])


def test_gradient_of_a_loop_carried_through_arrays():
    """h_{k+1} = tanh(h_k * w), carried in an array: d sum(h_3) / d w equals numpy."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5   # the same w every run
    with fluid.program_guard(main, startup):
        x = layers.data(name="x", shape=[2], dtype="float64")
        w = fluid.LayerHelper("loop").create_parameter(fluid.ParamAttr(name="w"), [2],
                                                       "float64")
        i = layers.fill_constant([1], "int64", 0)
        n = layers.fill_constant([1], "int64", 3)
        states = layers.array_write(x, i)
        cond = layers.less_than(i, n)
        loop = layers.While(cond)
        with loop.block():
            h = layers.array_read(states, i)
            nxt = layers.tanh(layers.elementwise_mul(h, w))
            layers.increment(i)
            layers.array_write(nxt, i, states)
            layers.less_than(i, n, cond=cond)
        last = layers.array_read(states, n)
        loss = layers.reduce_sum(last)
        (pg,) = append_backward(loss)
    xv = np.array([[0.3, -0.7], [1.2, 0.4]])
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(startup)
        wv = np.array(scope.find_var("w").get_tensor())
        got, gw = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[last, pg[1]])

    def f(wv):
        h = xv
        for _ in range(3):
            h = np.tanh(h * wv)
        return h

    np.testing.assert_allclose(got, f(wv), rtol=1e-12)
    eps = 1e-6
    num = [(f(wv + eps * e).sum() - f(wv - eps * e).sum()) / (2 * eps) for e in np.eye(2)]
    # a central difference at eps 1e-6 is good to about 1e-10 absolute (float64 rounding
    # over eps): a gradient near 0 needs that atol beside the relative tolerance
    np.testing.assert_allclose(gw, num, rtol=1e-6, atol=1e-9)
