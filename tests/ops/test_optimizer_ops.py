"""sgd / momentum / adam / rmsprop kernels against numpy formulas written out here."""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.errors import ShapeError
from fluid_hw.ir.grad import NoGrad
from fluid_hw.ir.registry import get_op
from tests.op_harness import run_op

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _lr(v=0.1):
    return np.array([v], "float32")


def test_sgd():
    p, g = _rand(3, 4), _rand(3, 4)
    out = run_op("sgd", {"Param": p, "Grad": g, "LearningRate": _lr(0.05)})["ParamOut"]
    np.testing.assert_allclose(out, p - 0.05 * g, rtol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(nesterov):
    p, g, v = _rand(5, 2), _rand(5, 2), _rand(5, 2)
    mu, lr = 0.9, 0.2
    res = run_op("momentum", {"Param": p, "Grad": g, "Velocity": v, "LearningRate": _lr(lr)},
                 {"mu": mu, "use_nesterov": nesterov})
    v_ref = mu * v + g
    p_ref = p - (g + mu * v_ref) * lr if nesterov else p - lr * v_ref
    np.testing.assert_allclose(res["VelocityOut"], v_ref, rtol=1e-5)
    np.testing.assert_allclose(res["ParamOut"], p_ref, rtol=1e-5, atol=1e-6)


def test_adam_three_steps():
    b1, b2, eps, lr = 0.8, 0.95, 1e-6, 0.01
    p = _rand(4, 3)
    m1 = np.zeros_like(p)
    m2 = np.zeros_like(p)
    b1p, b2p = np.array([b1], "float32"), np.array([b2], "float32")
    rp, rm1, rm2, rb1p, rb2p = p.astype("float64"), 0.0, 0.0, b1, b2
    for _ in range(3):
        g = _rand(4, 3)
        res = run_op("adam", {"Param": p, "Grad": g, "LearningRate": _lr(lr), "Moment1": m1,
                              "Moment2": m2, "Beta1Pow": b1p, "Beta2Pow": b2p},
                     {"beta1": b1, "beta2": b2, "epsilon": eps})
        # reference, in float64
        rm1 = b1 * rm1 + (1 - b1) * g
        rm2 = b2 * rm2 + (1 - b2) * g.astype("float64") ** 2
        lr_t = lr * np.sqrt(1 - rb2p) / (1 - rb1p)
        rp = rp - lr_t * rm1 / (np.sqrt(rm2) + eps * np.sqrt(1 - rb2p))
        rb1p, rb2p = rb1p * b1, rb2p * b2
        p, m1, m2 = res["ParamOut"], res["Moment1Out"], res["Moment2Out"]
        b1p, b2p = res["Beta1PowOut"], res["Beta2PowOut"]
        np.testing.assert_allclose(m1, rm1, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(m2, rm2, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(p, rp, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b1p, [rb1p], rtol=1e-6)
        np.testing.assert_allclose(b2p, [rb2p], rtol=1e-6)
    assert b1p.shape == (1,) and p.dtype == np.float32


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop(centered):
    eps, decay, mom_f, lr = 1e-6, 0.85, 0.5, 0.05
    p, g = _rand(3, 3), _rand(3, 3)
    ms = np.abs(_rand(3, 3)) + 1.0
    mg = 0.1 * _rand(3, 3)
    mom = _rand(3, 3)
    ins = {"Param": p, "MeanSquare": ms, "Grad": g, "Moment": mom, "LearningRate": _lr(lr)}
    outs = ["ParamOut", "MomentOut", "MeanSquareOut"]
    if centered:
        ins["MeanGrad"] = mg
        outs.append("MeanGradOut")
    res = run_op("rmsprop", ins, {"epsilon": eps, "decay": decay, "momentum": mom_f,
                                  "centered": centered}, outputs=outs)
    ms_ref = decay * ms + (1 - decay) * g * g
    if centered:
        mg_ref = decay * mg + (1 - decay) * g
        mom_ref = mom_f * mom + lr * g / np.sqrt(ms_ref - mg_ref**2 + eps)
        np.testing.assert_allclose(res["MeanGradOut"], mg_ref, rtol=1e-5, atol=1e-7)
    else:
        mom_ref = mom_f * mom + lr * g / np.sqrt(ms_ref + eps)
    np.testing.assert_allclose(res["MeanSquareOut"], ms_ref, rtol=1e-5)
    np.testing.assert_allclose(res["MomentOut"], mom_ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(res["ParamOut"], p - mom_ref, rtol=1e-5, atol=1e-6)


def test_rmsprop_defaults_are_fluids():
    attrs = {a.name: a.default for a in get_op("rmsprop").attrs}
    assert attrs == {"epsilon": 1e-10, "decay": 0.9, "momentum": 0.0, "centered": False}
    attrs = {a.name: a.default for a in get_op("adam").attrs}
    assert attrs == {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}


def test_update_in_place_does_not_touch_fed_arrays():
    """ParamOut names the Param variable, as optimizers build it; the fed array stays."""
    prog = fluid.Program()
    b = prog.global_block()
    for n, shape in (("p", [2, 2]), ("g", [2, 2]), ("v", [2, 2]), ("lr", [1])):
        b.create_var(name=n, shape=shape, dtype="float32")
    b.append_op("momentum", {"Param": "p", "Grad": "g", "Velocity": "v", "LearningRate": "lr"},
                {"ParamOut": "p", "VelocityOut": "v"}, {"mu": 0.5})
    p, g, v = _rand(2, 2), _rand(2, 2), _rand(2, 2)
    saved = p.copy(), g.copy(), v.copy()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        p_out, v_out = exe.run(prog, feed={"p": p, "g": g, "v": v, "lr": _lr(0.1)},
                               fetch_list=["p", "v"])
    for a, s in zip((p, g, v), saved):
        np.testing.assert_array_equal(a, s)
    np.testing.assert_allclose(v_out, 0.5 * v + g, rtol=1e-6)
    np.testing.assert_allclose(p_out, p - 0.1 * (0.5 * v + g), rtol=1e-5, atol=1e-7)


def test_optimizer_ops_have_no_gradient():
    for t in ("sgd", "momentum", "adam", "rmsprop"):
        assert get_op(t).grad == NoGrad("optimize")


@pytest.mark.parametrize("ins, msg", [
    ({"Param": np.ones((2, 3), "f4"), "Grad": np.ones((3, 2), "f4"), "LearningRate": _lr()},
     r"sgd.*Grad .*\[3, 2\].*Param .*\[2, 3\]"),
    ({"Param": np.ones((2, 3), "f4"), "Grad": np.ones((2, 3), "f4"),
      "LearningRate": np.ones(2, "f4")}, r"sgd.*LearningRate .* one element.*\[2\]"),
    ({"Param": np.ones(3, "i4"), "Grad": np.ones(3, "i4"), "LearningRate": _lr()},
     r"sgd.*Param .* float tensor, got int32"),
    ({"Param": np.ones(3, "f4"), "Grad": np.ones(3, "f8"), "LearningRate": _lr()},
     r"sgd.*Grad .* float64.*same dtype"),
])
def test_sgd_shape_errors(ins, msg):
    with pytest.raises(ShapeError, match=msg):
        run_op("sgd", ins)


def test_adam_beta_pow_must_be_scalar():
    p = np.ones((2, 2), "f4")
    with pytest.raises(ShapeError, match=r"adam.*Beta1Pow .* one element"):
        run_op("adam", {"Param": p, "Grad": p, "LearningRate": _lr(), "Moment1": p,
                        "Moment2": p, "Beta1Pow": np.ones(2, "f4"), "Beta2Pow": _lr()})


def test_rmsprop_centered_needs_mean_grad():
    p = np.ones((2, 2), "f4")
    with pytest.raises(ShapeError, match="centered=True needs the MeanGrad"):
        run_op("rmsprop", {"Param": p, "MeanSquare": p, "Grad": p, "Moment": p,
                           "LearningRate": _lr()}, {"centered": True},
               outputs=["ParamOut", "MomentOut", "MeanSquareOut"])
