"""fluid.optimizer.ExponentialMovingAverage and ModelAverage (issue 20): the averages
apply() puts into the parameters, against numpy over the parameters' trajectory, and
restore()."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import OpAttrError

R = np.random.default_rng(41)
XS = R.normal(size=(16, 3)).astype(np.float32)
YS = (XS @ np.array([[1.0], [-2.0], [0.5]])).astype(np.float32)


def _model():
    x = fluid.layers.data("x", shape=[3], dtype="float32")
    y = fluid.layers.data("y", shape=[1], dtype="float32")
    pred = fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w"),
                           bias_attr=fluid.ParamAttr(name="b"))
    cost = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
    fluid.optimizer.SGD(0.1).minimize(cost)
    return cost


def _train(main, start, steps, check):
    exe = fluid.Executor(fluid.CPUPlace())
    traj = []
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        for _ in range(steps):
            exe.run(main, feed={"x": XS, "y": YS})
            traj.append(np.asarray(fluid.global_scope().find_value("w")).copy())
        check(exe, traj)


@pytest.mark.parametrize("thres", [False, True])
def test_ema_apply_is_the_bias_corrected_average(thres):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        _model()
        t = fluid.layers.fill_constant([1], "int64", 5) if thres else None
        ema = fluid.optimizer.ExponentialMovingAverage(0.9, thres_steps=t)
        ema.update()
    decay = min(0.9, 6 / 15) if thres else 0.9

    def check(exe, traj):
        e = np.zeros_like(traj[0], np.float64)
        for w in traj:
            e = decay * e + (1 - decay) * w
        want = e / (1 - decay ** len(traj))
        with ema.apply(exe):
            np.testing.assert_allclose(fluid.global_scope().find_value("w"), want, rtol=1e-5)
        np.testing.assert_array_equal(fluid.global_scope().find_value("w"), traj[-1])

    _train(main, start, 4, check)


def test_model_average_apply_is_the_mean_and_restore_puts_back():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        _model()
        avg = fluid.optimizer.ModelAverage(0.5, min_average_window=100,
                                           max_average_window=100)

    def check(exe, traj):
        with avg.apply(exe, need_restore=False):
            np.testing.assert_allclose(fluid.global_scope().find_value("w"),
                                       np.mean(traj, axis=0), rtol=1e-5)
        avg.restore(exe)
        np.testing.assert_array_equal(fluid.global_scope().find_value("w"), traj[-1])

    _train(main, start, 5, check)
    assert sum(op.type == "average_accumulates" for op in main.global_block().ops) == 2


def test_bad_arguments_are_named():
    with pytest.raises(OpAttrError, match="ExponentialMovingAverage: decay"):
        fluid.optimizer.ExponentialMovingAverage(1.5)
    with fluid.program_guard(fluid.Program(), fluid.Program()), \
            pytest.raises(OpAttrError, match="ModelAverage: need 1 <= min_average_window"):
        fluid.optimizer.ModelAverage(0.1, min_average_window=5, max_average_window=2)
