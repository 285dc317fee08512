"""Fluid 1.5's Adagrad, DecayedAdagrad, Adamax, Adadelta, Ftrl and LarsMomentum (issue
20): three steps on ``loss = sum(w * x)`` (so grad = x) against numpy formulas, and a
small regression that each of them trains."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import OpAttrError

LR = 0.1
W0 = np.array([0.5, -1.0, 2.0], np.float32)
XS = [np.array(v, np.float32) for v in ([1.0, -2.0, 0.5], [0.3, 0.1, -1.0], [2.0, 1.0, 1.0])]


def _numpy(name, steps):
    w = W0.astype(np.float64)
    st = {}
    for t, g in enumerate(steps, 1):
        g = g.astype(np.float64)
        if name == "adagrad":
            st["m"] = st.get("m", 0) + g * g
            w = w - LR * g / (np.sqrt(st["m"]) + 1e-6)
        elif name == "decayed_adagrad":
            st["m"] = 0.95 * st.get("m", 0) + 0.05 * g * g
            w = w - LR * g / (np.sqrt(st["m"]) + 1e-6)
        elif name == "adamax":
            st["m"] = 0.9 * st.get("m", 0) + 0.1 * g
            st["u"] = np.maximum(0.999 * st.get("u", 0) + 1e-8, np.abs(g))
            w = w - LR / (1 - 0.9 ** t) * st["m"] / st["u"]
        elif name == "adadelta":
            st["g2"] = 0.95 * st.get("g2", 0) + 0.05 * g * g
            upd = -np.sqrt((st.get("u2", 0) + 1e-6) / (st["g2"] + 1e-6)) * g
            st["u2"] = 0.95 * st.get("u2", 0) + 0.05 * upd * upd
            w = w + upd
        elif name == "ftrl":
            l1, l2 = 0.01, 0.1
            n = st.get("n", np.zeros(3))
            n2 = n + g * g
            z = st.get("z", np.zeros(3)) + g - (np.sqrt(n2) - np.sqrt(n)) / LR * w
            w = np.where(np.abs(z) > l1, (l1 * np.sign(z) - z) / (np.sqrt(n2) / LR + 2 * l2), 0)
            st["n"], st["z"] = n2, z
        elif name == "lars_momentum":
            pn, gn = np.linalg.norm(w), np.linalg.norm(g)
            local = LR * 0.001 * pn / (gn + 0.0005 * pn)
            st["v"] = 0.9 * st.get("v", 0) + local * (g + 0.0005 * w)
            w = w - st["v"]
    return w


MAKERS = {
    "adagrad": lambda: fluid.optimizer.AdagradOptimizer(LR),
    "decayed_adagrad": lambda: fluid.optimizer.DecayedAdagradOptimizer(LR),
    "adamax": lambda: fluid.optimizer.AdamaxOptimizer(LR),
    "adadelta": lambda: fluid.optimizer.AdadeltaOptimizer(LR),
    "ftrl": lambda: fluid.optimizer.FtrlOptimizer(LR, l1=0.01, l2=0.1),
    "lars_momentum": lambda: fluid.optimizer.LarsMomentumOptimizer(LR, 0.9),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_three_steps_match_numpy(name):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", shape=[3], dtype="float32", append_batch_size=False)
        w = fluid.layers.create_parameter([3], "float32", name="w")
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(w, x))
        MAKERS[name]().minimize(loss)
    assert any(op.type == name for op in main.global_block().ops)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        fluid.global_scope().find_var("w").get_tensor().set(W0, fluid.CPUPlace())
        for xv in XS:
            exe.run(main, feed={"x": xv})
        got = np.asarray(fluid.global_scope().find_var("w").get_tensor())
    np.testing.assert_allclose(got, _numpy(name, XS), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_each_trains_a_regression(name):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(32, 4)).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", shape=[4], dtype="float32")
        y = fluid.layers.data("y", shape=[1], dtype="float32")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
        opt = {"lars_momentum": lambda: fluid.optimizer.LarsMomentum(1.0, 0.9, lars_coeff=0.05),
               "adadelta": lambda: fluid.optimizer.Adadelta(1.0, epsilon=1e-2)}.get(
                   name, lambda: MAKERS[name]().__class__(0.1))()
        opt.minimize(cost)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        losses = [float(exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[cost])[0][0])
                  for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0], losses[::10]


def test_bad_hyper_parameters_are_named():
    with pytest.raises(OpAttrError, match="Adamax: beta1"):
        fluid.optimizer.AdamaxOptimizer(0.1, beta1=1.5)
    with pytest.raises(OpAttrError, match="Ftrl: lr_power"):
        fluid.optimizer.Ftrl(0.1, lr_power=0.5)
    with pytest.raises(OpAttrError, match="Adagrad: epsilon"):
        fluid.optimizer.Adagrad(0.1, epsilon=-1.0)
