"""Optimizers, weight decay, gradient clipping, learning-rate schedules and the
control-flow layers they use.

Most tests feed the gradients (a ``<param>@GRAD`` variable) and call
``apply_gradients``, so they check the update against numpy without depending on
the backward pass; the ``minimize`` tests at the end use it.
"""

import math

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw import errors
from fluid_hw.frontend import clip, regularizer
from fluid_hw.frontend import optimizer as opt
from fluid_hw.frontend.layers import control_flow as cf
from fluid_hw.frontend.layers import learning_rate_scheduler as lrs
from fluid_hw.ir.ops.tensor import ASSIGN_VALUE_ATTRS

RNG = np.random.default_rng(11)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _param(main, startup, name, value):
    """A parameter of ``main`` initialised to ``value`` by the startup program, and its
    gradient as a feedable variable."""
    value = np.asarray(value, "float32")
    p = main.global_block().create_parameter(name=name, shape=list(value.shape))
    sb = startup.global_block()
    sv = sb.create_var(name=name, shape=list(value.shape), persistable=True)
    sb.append_op("assign_value", {}, {"Out": sv},
                 {"shape": list(value.shape), "dtype": sv.dtype,
                  ASSIGN_VALUE_ATTRS[sv.dtype]: value.ravel().tolist()})
    g = main.global_block().create_var(name=f"{name}@GRAD", shape=list(value.shape))
    return p, g


def _value(scope, name):
    return np.array(scope.find_var(name).get_tensor())


def _run_steps(optimizer, params, grads_per_step, fetch=()):
    """Build the updates for ``params`` ({name: initial value}), run one step per
    entry of ``grads_per_step`` ({name: grad}); return the scope and fetches."""
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        pgs = [_param(main, startup, n, v) for n, v in params.items()]
        optimizer.apply_gradients(pgs)
    exe = fluid.Executor(fluid.CPUPlace())
    fetched = []
    with fluid.scope_guard(scope):
        exe.run(startup)
        for grads in grads_per_step:
            fetched.append(exe.run(main, feed={f"{n}@GRAD": g for n, g in grads.items()},
                                   fetch_list=list(fetch)))
    return main, startup, scope, fetched


# -- program structure ------------------------------------------------------------------

@pytest.mark.parametrize("make, accs", [
    (lambda: opt.SGD(0.1), {}),
    (lambda: opt.Momentum(0.1, 0.9), {"velocity": 0.0}),
    (lambda: opt.Adam(0.01, beta1=0.8, beta2=0.9),
     {"moment1": 0.0, "moment2": 0.0, "beta1_pow_acc": 0.8, "beta2_pow_acc": 0.9}),
    (lambda: opt.RMSProp(0.01), {"momentum": 0.0, "mean_square": 0.0, "mean_grad": 0.0}),
])
def test_update_structure(make, accs):
    o = make()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        fluid.layers.fc(x, 2)
        w = main.global_block().var("fc_0.w_0")
        g = main.global_block().create_var(name="fc_0.w_0@GRAD", shape=[4, 2])
        ops = o.apply_gradients([(w, g)])
    gb, sb = main.global_block(), startup.global_block()
    assert [op.type for op in ops] == [o.type]
    op = ops[0]
    assert op.attr("op_role") == "optimize"
    assert op.attr("op_role_var") == ["fc_0.w_0", "fc_0.w_0@GRAD"]
    assert op.output("ParamOut") == ["fc_0.w_0"]
    lr = gb.var(op.input("LearningRate")[0])
    assert lr.name == "learning_rate_0" and lr.persistable and list(lr.shape) == [1]
    assert lr.dtype_name == "float32"
    fills = {o_.output("Out")[0]: o_ for o_ in sb.ops if o_.type == "fill_constant"}
    assert fills["learning_rate_0"].attr("value") == pytest.approx(o._learning_rate)
    for acc, value in accs.items():
        name = f"fc_0.w_0_{acc}_0"
        v = gb.var(name)
        assert v.persistable and not v.is_parameter
        assert list(v.shape) == ([1] if "pow" in acc else [4, 2])
        assert sb.var(name).persistable
        assert fills[name].attr("value") == pytest.approx(value)
        assert name in op.input_arg_names and name in op.output_arg_names
    fluid.ir.verify_program(main)
    fluid.ir.verify_program(startup)


def test_lr_multiplier_scales_the_learning_rate():
    p0, g0 = _rand(3), _rand(3)
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        p, g = _param(main, startup, "w", p0)
        q, h = _param(main, startup, "v", p0)
        p.optimize_attr = {"learning_rate": 0.5}
        ops = opt.SGD(0.2).apply_gradients([(p, g), (q, h)])
    lr_w = ops[1].input("LearningRate")[0]  # sorted by name: v, w
    scale_op = next(o for o in main.global_block().ops if o.output_arg_names == [lr_w])
    assert scale_op.type == "scale" and scale_op.attr("scale") == 0.5
    assert ops[0].input("LearningRate") == ["learning_rate_0"]
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(main, feed={"w@GRAD": g0, "v@GRAD": g0})
    np.testing.assert_allclose(_value(scope, "w"), p0 - 0.1 * g0, rtol=1e-6)
    np.testing.assert_allclose(_value(scope, "v"), p0 - 0.2 * g0, rtol=1e-6)


# -- updates over several steps, against numpy -------------------------------------------

def test_sgd_steps():
    p0 = _rand(2, 3)
    gs = [_rand(2, 3) for _ in range(3)]
    _, _, scope, _ = _run_steps(opt.SGD(0.1), {"w": p0}, [{"w": g} for g in gs])
    ref = p0 - 0.1 * sum(gs)
    np.testing.assert_allclose(_value(scope, "w"), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_steps(nesterov):
    p0 = _rand(4)
    gs = [_rand(4) for _ in range(3)]
    _, _, scope, _ = _run_steps(opt.Momentum(0.1, 0.9, use_nesterov=nesterov), {"w": p0},
                                [{"w": g} for g in gs])
    p, v = p0.astype("float64"), 0.0
    for g in gs:
        v = 0.9 * v + g
        p = p - (g + 0.9 * v) * 0.1 if nesterov else p - 0.1 * v
    np.testing.assert_allclose(_value(scope, "w"), p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_value(scope, "w_velocity_0"), v, rtol=1e-5, atol=1e-6)


def test_adam_steps_and_beta_pows():
    p0 = _rand(3, 2)
    gs = [_rand(3, 2) for _ in range(3)]
    _, _, scope, _ = _run_steps(opt.Adam(0.01), {"w": p0}, [{"w": g} for g in gs])
    b1, b2, eps = 0.9, 0.999, 1e-8
    p, m1, m2 = p0.astype("float64"), 0.0, 0.0
    for t, g in enumerate(gs, 1):
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g.astype("float64") ** 2
        lr_t = 0.01 * math.sqrt(1 - b2**t) / (1 - b1**t)
        p = p - lr_t * m1 / (np.sqrt(m2) + eps * math.sqrt(1 - b2**t))
    np.testing.assert_allclose(_value(scope, "w"), p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_value(scope, "w_beta1_pow_acc_0"), [b1**4], rtol=1e-6)
    np.testing.assert_allclose(_value(scope, "w_beta2_pow_acc_0"), [b2**4], rtol=1e-6)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_steps(centered):
    p0 = _rand(5)
    gs = [_rand(5) for _ in range(3)]
    o = opt.RMSProp(0.01, rho=0.9, epsilon=1e-6, momentum=0.5, centered=centered)
    _, _, scope, _ = _run_steps(o, {"w": p0}, [{"w": g} for g in gs])
    p, ms, mg, mom = p0.astype("float64"), 0.0, 0.0, 0.0
    for g in gs:
        ms = 0.9 * ms + 0.1 * g.astype("float64") ** 2
        mg = 0.9 * mg + 0.1 * g
        denom = ms - mg**2 + 1e-6 if centered else ms + 1e-6
        mom = 0.5 * mom + 0.01 * g / np.sqrt(denom)
        p = p - mom
    np.testing.assert_allclose(_value(scope, "w"), p, rtol=1e-4, atol=1e-6)


# -- weight decay -----------------------------------------------------------------------

@pytest.mark.parametrize("reg, term", [
    (regularizer.L2Decay(0.1), lambda p: 0.1 * p),
    (regularizer.L1Decay(0.1), lambda p: 0.1 * np.sign(p)),
    (regularizer.L2DecayRegularizer(regularization_coeff=0.3), lambda p: 0.3 * p),
])
def test_weight_decay_changes_the_update(reg, term):
    p0, g0 = _rand(3, 3), _rand(3, 3)
    main, _, scope, _ = _run_steps(opt.SGD(0.5, regularization=reg), {"w": p0},
                                   [{"w": g0}], fetch=["w@GRAD"])
    np.testing.assert_allclose(_value(scope, "w"), p0 - 0.5 * (g0 + term(p0)), rtol=1e-5,
                               atol=1e-6)
    ops = main.global_block().ops
    reg_ops = [o for o in ops if o.attr("op_role") == "backward"]
    assert reg_ops and reg_ops[-1].type == "sum" and reg_ops[-1].output("Out") == ["w@GRAD"]
    assert ops[-1].type == "sgd" and ops[-1].input("Grad") == ["w@GRAD"]


def test_parameter_regularizer_overrides_the_optimizers():
    p0, g0 = _rand(4), _rand(4)
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a, ga = _param(main, startup, "a", p0)
        b, gb = _param(main, startup, "b", p0)
        a.regularizer = regularizer.L1Decay(0.2)
        opt.SGD(1.0, regularization=regularizer.L2Decay(0.1)).apply_gradients(
            [(a, ga), (b, gb)])
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(main, feed={"a@GRAD": g0, "b@GRAD": g0})
    np.testing.assert_allclose(_value(scope, "a"), p0 - (g0 + 0.2 * np.sign(p0)), rtol=1e-5)
    np.testing.assert_allclose(_value(scope, "b"), p0 - (g0 + 0.1 * p0), rtol=1e-5)


def test_param_attr_regularizer_through_fc():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(regularizer=regularizer.L2Decay(0.5)))
        w = main.global_block().var("fc_0.w_0")
        assert isinstance(w.regularizer, regularizer.L2Decay)


# -- gradient clipping -------------------------------------------------------------------

def test_global_norm_clip_caps_the_update():
    pa, pb = _rand(3, 2), _rand(4)
    ga, gb = 10 * _rand(3, 2), 10 * _rand(4)
    c = clip.GradientClipByGlobalNorm(clip_norm=1.0)
    main, _, scope, _ = _run_steps(opt.SGD(1.0, grad_clip=c), {"a": pa, "b": pb},
                                   [{"a": ga, "b": gb}])
    gnorm = math.sqrt(float((ga.astype("float64") ** 2).sum() + (gb.astype("float64") ** 2)
                            .sum()))
    k = 1.0 / max(gnorm, 1.0)
    np.testing.assert_allclose(_value(scope, "a"), pa - k * ga, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_value(scope, "b"), pb - k * gb, rtol=1e-5, atol=1e-6)
    step = np.concatenate([(pa - _value(scope, "a")).ravel(), (pb - _value(scope, "b")).ravel()])
    assert np.linalg.norm(step) == pytest.approx(1.0, rel=1e-5)
    sgd = [o for o in main.global_block().ops if o.type == "sgd"]
    assert sgd[0].input("Grad") == ["a@GRAD@CLIP_0"]


def test_global_norm_clip_leaves_small_gradients():
    p0, g0 = _rand(3), 0.01 * _rand(3)
    _, _, scope, _ = _run_steps(opt.SGD(1.0, grad_clip=clip.GradientClipByGlobalNorm(5.0)),
                                {"w": p0}, [{"w": g0}])
    np.testing.assert_allclose(_value(scope, "w"), p0 - g0, rtol=1e-6)


def test_clip_by_value_and_by_norm():
    p0, g0 = _rand(6), 3 * _rand(6)
    _, _, scope, _ = _run_steps(opt.SGD(1.0, grad_clip=clip.GradientClipByValue(0.5)),
                                {"w": p0}, [{"w": g0}])
    np.testing.assert_allclose(_value(scope, "w"), p0 - np.clip(g0, -0.5, 0.5), rtol=1e-6)
    _, _, scope, _ = _run_steps(opt.SGD(1.0, grad_clip=clip.GradientClipByValue(0.5, -0.1)),
                                {"w": p0}, [{"w": g0}])
    np.testing.assert_allclose(_value(scope, "w"), p0 - np.clip(g0, -0.1, 0.5), rtol=1e-6)
    _, _, scope, _ = _run_steps(opt.SGD(1.0, grad_clip=clip.GradientClipByNorm(0.5)),
                                {"w": p0}, [{"w": g0}])
    np.testing.assert_allclose(_value(scope, "w"), p0 - g0 * 0.5 / np.linalg.norm(g0),
                               rtol=1e-5)


def test_parameter_gradient_clip_attr():
    """Without grad_clip, each parameter's own clip applies; others are left alone."""
    p0, g0 = _rand(4), 3 * _rand(4)
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a, ga = _param(main, startup, "a", p0)
        b, gb = _param(main, startup, "b", p0)
        clip.set_gradient_clip(clip.GradientClipByValue(0.2), param_list=["a"], program=main)
        opt.SGD(1.0).apply_gradients([(a, ga), (b, gb)])
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(main, feed={"a@GRAD": g0, "b@GRAD": g0})
    np.testing.assert_allclose(_value(scope, "a"), p0 - np.clip(g0, -0.2, 0.2), rtol=1e-6)
    np.testing.assert_allclose(_value(scope, "b"), p0 - g0, rtol=1e-6)


def test_clip_then_decay_order():
    """Fluid clips the raw gradient first, then adds the decay term."""
    p0, g0 = _rand(4), 3 * _rand(4)
    _, _, scope, _ = _run_steps(
        opt.SGD(1.0, regularization=regularizer.L2Decay(0.1),
                grad_clip=clip.GradientClipByValue(0.2)), {"w": p0}, [{"w": g0}])
    np.testing.assert_allclose(_value(scope, "w"), p0 - (np.clip(g0, -0.2, 0.2) + 0.1 * p0),
                               rtol=1e-5, atol=1e-6)


def test_clip_need_clip():
    p0, g0 = _rand(4), 3 * _rand(4)
    c = clip.GradientClipByValue(0.2, need_clip=lambda p: p.name != "b")
    _, _, scope, _ = _run_steps(opt.SGD(1.0, grad_clip=c), {"a": p0, "b": p0},
                                [{"a": g0, "b": g0}])
    np.testing.assert_allclose(_value(scope, "a"), p0 - np.clip(g0, -0.2, 0.2), rtol=1e-6)
    np.testing.assert_allclose(_value(scope, "b"), p0 - g0, rtol=1e-6)


# -- learning-rate schedules ------------------------------------------------------------

SCHEDULES = [
    ("exponential", lambda: lrs.exponential_decay(0.1, 3, 0.5),
     lambda s: 0.1 * 0.5 ** (s / 3)),
    ("exponential_staircase", lambda: lrs.exponential_decay(0.1, 3, 0.5, staircase=True),
     lambda s: 0.1 * 0.5 ** math.floor(s / 3)),
    ("natural_exp", lambda: lrs.natural_exp_decay(0.2, 2, 0.3),
     lambda s: 0.2 * math.exp(-0.3 * s / 2)),
    ("natural_exp_staircase", lambda: lrs.natural_exp_decay(0.2, 2, 0.3, True),
     lambda s: 0.2 * math.exp(-0.3 * math.floor(s / 2))),
    ("inverse_time", lambda: lrs.inverse_time_decay(0.5, 2, 0.7),
     lambda s: 0.5 / (1 + 0.7 * s / 2)),
    ("inverse_time_staircase", lambda: lrs.inverse_time_decay(0.5, 2, 0.7, True),
     lambda s: 0.5 / (1 + 0.7 * math.floor(s / 2))),
    ("piecewise", lambda: lrs.piecewise_decay([2, 5], [1.0, 0.5, 0.1]),
     lambda s: 1.0 if s < 2 else 0.5 if s < 5 else 0.1),
    ("cosine", lambda: lrs.cosine_decay(0.1, 2, 5),
     lambda s: 0.1 * 0.5 * (math.cos(math.floor(s / 2) * math.pi / 5) + 1)),
    ("noam", lambda: lrs.noam_decay(64, 3, learning_rate=2.0),
     lambda s: 2.0 * 64**-0.5 * min((s + 1) ** -0.5, 3**-1.5 * (s + 1))),
    ("polynomial", lambda: lrs.polynomial_decay(0.1, 4, 0.01, power=2.0),
     lambda s: (0.1 - 0.01) * (1 - min(s, 4) / 4) ** 2 + 0.01),
    ("polynomial_cycle", lambda: lrs.polynomial_decay(0.1, 3, 0.01, power=1.0, cycle=True),
     lambda s: (0.1 - 0.01) * (1 - s / (3 * max(math.ceil(s / 3), 1))) + 0.01),
    ("linear_warmup", lambda: lrs.linear_lr_warmup(0.3, 3, 0.0, 0.15),
     lambda s: 0.15 * s / 3 if s < 3 else 0.3),
    ("linear_warmup_of_schedule",
     lambda: lrs.linear_lr_warmup(lrs.exponential_decay(0.1, 3, 0.5), 2, 0.01, 0.05),
     lambda s: 0.01 + 0.04 * s / 2 if s < 2 else 0.1 * 0.5 ** (s / 3)),
]


@pytest.mark.parametrize("name, build, formula", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_schedule_matches_formula(name, build, formula):
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        lr = build()
    assert lr.dtype_name == "float32"
    first = main.global_block().ops[0]
    assert first.type == "increment" and first.output("Out") == ["@LR_DECAY_COUNTER@"]
    assert all(op.attr("op_role") == "lr_sched" for op in main.global_block().ops)
    counter = main.global_block().var("@LR_DECAY_COUNTER@")
    assert counter.persistable and counter.dtype_name == "int64"
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        got = [float(exe.run(main, fetch_list=[lr])[0][0]) for _ in range(9)]
    want = [formula(s) for s in range(9)]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9)


def test_schedule_drives_the_optimizer():
    p0, g0 = _rand(3), _rand(3)
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        lr = lrs.piecewise_decay([1], [0.5, 0.1])
        p, g = _param(main, startup, "w", p0)
        (op,) = opt.SGD(lr).apply_gradients([(p, g)])
    assert op.input("LearningRate") == [lr.name]
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(3):
            exe.run(main, feed={"w@GRAD": g0})
    np.testing.assert_allclose(_value(scope, "w"), p0 - (0.5 + 0.1 + 0.1) * g0, rtol=1e-5)


def test_schedule_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(errors.OpAttrError, match="one more value than boundaries"):
            lrs.piecewise_decay([1, 2], [0.1, 0.2])
        with pytest.raises(errors.OpAttrError, match="strictly increasing"):
            lrs.piecewise_decay([3, 2], [0.1, 0.2, 0.3])
        with pytest.raises(errors.OpAttrError, match="exponential_decay: decay_steps"):
            lrs.exponential_decay(0.1, 0, 0.5)


# -- control-flow layers ----------------------------------------------------------------

def test_step_counter_and_increment():
    main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        c = cf.autoincreased_step_counter(begin=5, step=2)
        assert cf.autoincreased_step_counter(begin=5, step=2) is c  # one counter per name
        x = fluid.layers.fill_constant([1], "float32", 1.5)
        same = cf.increment(x, 2.0)
        other = cf.increment(x, 1.0, in_place=False)
    assert same is x and other is not x
    assert main.global_block().ops[0].type == "increment"
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(startup)
        got = [exe.run(main, fetch_list=[c, same, other]) for _ in range(3)]
    assert [int(g[0][0]) for g in got] == [5, 7, 9]
    assert got[0][0].dtype == np.int64
    assert [float(g[1][0]) for g in got] == [3.5] * 3
    assert [float(g[2][0]) for g in got] == [4.5] * 3


def test_compare_and_logical_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3], dtype="float32")
        y = fluid.layers.data("y", [3], dtype="float32")
        outs = [cf.less_than(x, y), cf.less_equal(x, y), cf.greater_than(x, y),
                cf.greater_equal(x, y), cf.equal(x, y), cf.not_equal(x, y)]
        lt, ge = outs[0], outs[3]
        outs += [cf.logical_and(lt, ge), cf.logical_or(lt, ge), cf.logical_xor(lt, ge),
                 cf.logical_not(lt)]
        cond = main.global_block().create_var(name="cond", dtype="bool")
        assert cf.less_than(x, y, cond=cond) is cond
    assert all(o.dtype_name == "bool" and o.stop_gradient for o in outs[:6])
    a = np.array([[1, 2, 3], [3, 2, 1]], "float32")
    b = np.array([[2, 2, 2], [2, 2, 2]], "float32")
    got = fluid.Executor().run(main, feed={"x": a, "y": b}, fetch_list=outs,
                               scope=fluid.Scope())
    want = [a < b, a <= b, a > b, a >= b, a == b, a != b, (a < b) & (a >= b),
            (a < b) | (a >= b), (a < b) ^ (a >= b), ~(a < b)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# -- errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("make, msg", [
    (lambda: opt.SGD(0.0), r"SGD: learning_rate must be a number in \(0"),
    (lambda: opt.SGD(-0.1), r"SGD: learning_rate must be a number in \(0"),
    (lambda: opt.Adam(learning_rate=-1), r"Adam: learning_rate"),
    (lambda: opt.Adam(beta1=1.0), r"Adam: beta1 must be a number in \[0.0, 1.0\)"),
    (lambda: opt.Momentum(0.1, momentum=None), r"Momentum: momentum must be a number"),
    (lambda: opt.SGD(0.1, regularization=0.1), r"SGD: regularization must be"),
    (lambda: opt.SGD(0.1, grad_clip=1.0), r"SGD: grad_clip must be"),
    (lambda: clip.GradientClipByGlobalNorm(0), r"clip_norm must be a positive number"),
    (lambda: regularizer.L2Decay(-1.0), r"L2Decay: regularization_coeff"),
])
def test_bad_hyper_parameters(make, msg):
    with pytest.raises(errors.FluidError, match=msg):
        make()


def test_integer_parameter_is_rejected():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [2])
        main.global_block().create_parameter(name="steps", shape=[1], dtype="int64")
        loss = fluid.layers.mean(x)
        with pytest.raises(errors.GradientError,
                           match=r"SGD.minimize: parameter 'steps' is int64; only float"):
            opt.SGD(0.1).minimize(loss, parameter_list=["steps"])


def test_aliases():
    assert opt.SGDOptimizer is opt.SGD and opt.AdamOptimizer is opt.Adam
    assert opt.MomentumOptimizer is opt.Momentum and opt.RMSPropOptimizer is opt.RMSProp
    assert regularizer.L1DecayRegularizer is regularizer.L1Decay


# -- minimize (with the backward pass) ---------------------------------------------------

def _mlp(optimizer, startup_seed=5):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = startup_seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        y = fluid.layers.data("y", [3])
        h = fluid.layers.fc(x, 8, act="relu")
        p = fluid.layers.fc(h, 3)
        d = fluid.layers.elementwise_sub(p, y)
        loss = fluid.layers.mean(fluid.layers.elementwise_mul(d, d))
        ops, pgs = optimizer.minimize(loss)
    return main, startup, loss, ops, pgs


def test_minimize_structure():
    main, _, _, ops, pgs = _mlp(opt.Adam(0.01))
    assert sorted(p.name for p, _ in pgs) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    assert all(g.name == f"{p.name}@GRAD" for p, g in pgs)
    roles = [op.attr("op_role") if op.has_attr("op_role") else "forward"
             for op in main.global_block().ops]
    first_bw, first_opt = roles.index("backward"), roles.index("optimize")
    assert set(roles[:first_bw]) == {"forward"}
    assert set(roles[first_bw:first_opt]) == {"backward"}
    assert set(roles[first_opt:]) == {"optimize"} and len(ops) == 4
    persist = {v.name for v in main.list_vars() if v.persistable}
    assert "fc_1.b_0_moment2_0" in persist and "learning_rate_0" in persist
    fluid.ir.verify_program(main)


def test_sgd_mlp_matches_numpy():
    main, startup, loss, _, _ = _mlp(opt.SGD(0.1))
    x = RNG.standard_normal((6, 4)).astype("float32")
    y = RNG.standard_normal((6, 3)).astype("float32")
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    names = ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]
    with fluid.scope_guard(scope):
        exe.run(startup)
        w1, b1, w2, b2 = (_value(scope, n).astype("float64") for n in names)
        losses = [float(exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss])[0][0])
                  for _ in range(3)]
        got = [_value(scope, n) for n in names]
    ref_losses = []
    for _ in range(3):
        z = x @ w1 + b1
        h = np.maximum(z, 0)
        d = h @ w2 + b2 - y
        ref_losses.append(float((d * d).mean()))
        dp = 2 * d / d.size
        dw2, db2 = h.T @ dp, dp.sum(0)
        dz = (dp @ w2.T) * (z > 0)
        dw1, db1 = x.T @ dz, dz.sum(0)
        w1, b1, w2, b2 = w1 - 0.1 * dw1, b1 - 0.1 * db1, w2 - 0.1 * dw2, b2 - 0.1 * db2
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for g, r in zip(got, (w1, b1, w2, b2)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: opt.Momentum(0.05, 0.9),
    lambda: opt.Momentum(0.05, 0.9, use_nesterov=True),
    lambda: opt.Adam(0.05),
    lambda: opt.RMSProp(0.05),
    lambda: opt.RMSProp(0.05, momentum=0.5, centered=True),
    lambda: opt.SGD(0.05, regularization=regularizer.L2Decay(1e-3),
                    grad_clip=clip.GradientClipByGlobalNorm(1.0)),
], ids=["momentum", "nesterov", "adam", "rmsprop", "rmsprop_centered", "sgd_decay_clip"])
def test_optimizers_decrease_the_loss(make):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [5])
        y = fluid.layers.data("y", [1])
        pred = fluid.layers.fc(x, 1)
        d = fluid.layers.elementwise_sub(pred, y)
        loss = fluid.layers.mean(fluid.layers.elementwise_mul(d, d))
        make().minimize(loss)
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((32, 5)).astype("float32")
    ys = (xs @ rng.standard_normal((5, 1)) + 0.5).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace(), seed=0)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        losses = [float(exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])[0][0])
                  for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0], losses[::8]
