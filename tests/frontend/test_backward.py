"""append_backward / gradients: naming, summing, pruning and errors."""

import warnings

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors
from fluid_hw.frontend.backward import GradientWarning, append_backward, gradients
from fluid_hw.ir import registry
from fluid_hw.ir.registry import OpDef, Slot


def _run(main, feed, fetch):
    with fluid.scope_guard(fluid.Scope()):
        return fluid.Executor().run(main, feed=feed, fetch_list=fetch)


def test_variable_used_twice_gets_summed_gradient(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[3], stop_gradient=False)
    y = fluid.layers.elementwise_add(fluid.layers.elementwise_mul(x, x), x)
    loss = fluid.layers.reduce_sum(y)
    (gx,) = gradients(loss, [x])
    assert gx.name == "x@GRAD"
    types = [op.type for op in main.global_block().ops]
    assert "sum" in types  # three contributions: two from mul, one from add
    xv = np.array([[1.0, -2.0, 0.5]], np.float32)
    (g,) = _run(main, {"x": xv}, [gx])
    np.testing.assert_allclose(g, 2 * xv + 1)


def test_grad_ops_are_marked_backward(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[4])
    loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
    pg = append_backward(loss)
    assert [p.name for p, _ in pg] == ["fc_0.w_0", "fc_0.b_0"]
    assert all(g.name == p.name + "@GRAD" for p, g in pg)
    roles = [op.attr("op_role") for op in main.global_block().ops if op.has_attr("op_role")]
    assert roles and set(roles) == {"backward"}


def test_stop_gradient_and_no_grad_set_prune(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[4])
    h = fluid.layers.fc(x, size=3)
    loss = fluid.layers.mean(fluid.layers.fc(h, size=2))
    frozen = main.global_block().var("fc_0.w_0")
    frozen.stop_gradient = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # excluded on purpose: no warning
        pg = append_backward(loss, no_grad_set={"fc_1.b_0"})
    names = {p.name for p, _ in pg}
    assert names == {"fc_0.b_0", "fc_1.w_0"}
    assert not main.global_block().has_var("fc_0.w_0@GRAD")


def test_non_scalar_loss_is_an_error(fresh):
    x = fluid.layers.data(name="x", shape=[4])
    out = fluid.layers.fc(x, size=2)
    with pytest.raises(errors.GradientError, match="one value"):
        append_backward(out)


def test_parameter_without_path_warns_or_errors(fresh):
    x = fluid.layers.data(name="x", shape=[4])
    loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
    fluid.layers.fc(x, size=3)  # parameters not on the loss's path
    with pytest.warns(GradientWarning, match="fc_1.w_0"):
        append_backward(loss)
    main2, startup2 = fluid.Program(), fluid.Program()
    with fluid.program_guard(main2, startup2):
        x = fluid.layers.data(name="x", shape=[4])
        loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
        fluid.layers.fc(x, size=3)
        with pytest.raises(errors.GradientError, match="no path"):
            append_backward(loss, parameter_list=[p.name for p in
                                                  main2.global_block().all_parameters()])


def test_integer_parameter_is_an_error(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[4])
    loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
    main.global_block().create_parameter("counter", [1], dtype="int64")
    with pytest.raises(errors.GradientError, match="int64"):
        append_backward(loss, parameter_list=["counter"])


def test_op_without_gradient_on_path_is_an_error(fresh):
    registry.register_op(OpDef("test_opaque", (Slot("X"),), (Slot("Out"),),
                               infer=lambda ctx: ctx.share("X", "Out")))
    try:
        main, _, _ = fresh
        x = fluid.layers.data(name="x", shape=[4], stop_gradient=False)
        b = main.global_block()
        out = b.create_var(name="opaque_out")
        b.append_op("test_opaque", {"X": x}, {"Out": out})
        loss = fluid.layers.mean(out)
        with pytest.raises(errors.GradientError, match="test_opaque"):
            gradients(loss, [x])
    finally:
        del registry._REGISTRY["test_opaque"]


def test_unused_split_piece_gets_zero_gradient(fresh):
    main, _, _ = fresh
    x = fluid.layers.data(name="x", shape=[4], stop_gradient=False)
    a, _ = fluid.layers.split(x, 2, dim=1)
    loss = fluid.layers.reduce_sum(a)
    (gx,) = gradients(loss, [x])
    assert "fill_zeros_like" in [op.type for op in main.global_block().ops]
    (g,) = _run(main, {"x": np.ones((2, 4), np.float32)}, [gx])
    np.testing.assert_array_equal(g, [[1, 1, 0, 0], [1, 1, 0, 0]])


def test_metric_ops_stop_the_gradient_quietly(fresh):
    x = fluid.layers.data(name="x", shape=[4])
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    logits = fluid.layers.fc(x, size=3)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
    fluid.layers.accuracy(fluid.layers.softmax(logits), label)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pg = append_backward(loss)
    assert len(pg) == 2
