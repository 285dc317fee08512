"""Data parallelism over CPU places (CompiledProgram.with_data_parallel).

After N steps on k places the parameters equal single-device training on the
whole batch (both strategies, even and uneven splits, with clipping and weight
decay); batch_norm keeps per-place statistics, as in Fluid.
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.parallel import BuildStrategy, CompiledProgram
from fluid_hw.datasets import load_digits_split
from fluid_hw.errors import ExecutionError, FeedError
from fluid_hw.frontend import models

XTR, _, YTR, _ = load_digits_split()
XIM, _, YIM, _ = load_digits_split(image=True)
RS = BuildStrategy.ReduceStrategy


def _opt(kind, lr=None):
    if kind == "adam":
        return fluid.optimizer.Adam(learning_rate=lr or 0.01)
    if kind == "momentum":
        return fluid.optimizer.Momentum(learning_rate=lr or 0.05, momentum=0.9)
    if kind == "sgd-clip-decay":
        return fluid.optimizer.SGD(learning_rate=lr or 0.1,
                                   regularization=fluid.regularizer.L2Decay(0.01),
                                   grad_clip=fluid.clip.GradientClipByGlobalNorm(0.5))
    return fluid.optimizer.SGD(learning_rate=lr or 0.1)


def _persistables(m, scope):
    return {v.name: np.array(scope.find_value(v.name)) for v in m.main.list_vars()
            if v.persistable and scope.find_value(v.name) is not None
            and not isinstance(scope.find_value(v.name), list)}


def _train(places=None, opt="adam", steps=4, batch=30, strategy=RS.AllReduce, model="mlp",
           scale=None, lr=None):
    builder = models.digits_cnn if model == "cnn" else models.digits_mlp
    m = builder(optimizer=_opt(opt, lr)) if model == "cnn" else \
        builder(hidden=(32,), optimizer=_opt(opt, lr))
    xs, ys = (XIM, YIM) if model == "cnn" else (XTR, YTR)
    exe = fluid.Executor()
    scope = fluid.Scope()
    losses = []
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        prog = m.main
        if places is not None:
            bs = BuildStrategy()
            bs.reduce_strategy = strategy
            if scale is not None:
                bs.gradient_scale_strategy = scale
            prog = CompiledProgram(m.main).with_data_parallel(
                loss_name=m.loss.name, build_strategy=bs, places=places)
        for i in range(steps):
            sl = slice(i * batch, (i + 1) * batch)
            (lv,) = exe.run(prog, feed={"pixels": xs[sl], "label": ys[sl]},
                            fetch_list=[m.loss])
            losses.append(lv)
    return _persistables(m, scope), losses, m


def _assert_close(got, want, rtol=1e-5, atol=1e-6):
    assert got.keys() == want.keys()
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=rtol, atol=atol, err_msg=n)


@pytest.mark.parametrize("strategy", [RS.AllReduce, RS.Reduce], ids=["allreduce", "reduce"])
@pytest.mark.parametrize("places,batch", [(2, 32), (3, 30), (4, 30)],
                         ids=["2-even", "3-even", "4-uneven"])
@pytest.mark.parametrize("opt", ["adam", "momentum"])
def test_mlp_on_cpu_places_matches_single_device(strategy, places, batch, opt):
    want, _, _ = _train(None, opt, batch=batch)
    got, losses, _ = _train([fluid.CPUPlace()] * places, opt, batch=batch, strategy=strategy)
    _assert_close(got, want)
    assert all(lv.shape == (places,) for lv in losses)  # one loss per place, as Fluid


@pytest.mark.parametrize("strategy", [RS.AllReduce, RS.Reduce], ids=["allreduce", "reduce"])
def test_clip_and_weight_decay_apply_to_the_combined_gradient(strategy):
    want, _, _ = _train(None, "sgd-clip-decay", steps=3)
    if strategy == RS.Reduce:  # a global-norm clip needs every gradient on one place
        with pytest.raises(ExecutionError, match="AllReduce"):
            _train([fluid.CPUPlace()] * 2, "sgd-clip-decay", steps=1, strategy=strategy)
        return
    got, _, _ = _train([fluid.CPUPlace()] * 2, "sgd-clip-decay", steps=3, strategy=strategy)
    _assert_close(got, want)


def test_loss_of_even_shares_averages_to_the_whole_batch_loss():
    m = models.digits_mlp(hidden=(16,))
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        feed = {"pixels": XTR[:40], "label": YTR[:40]}
        (whole,) = exe.run(m.test_program, feed=feed, fetch_list=[m.loss])
        cp = CompiledProgram(m.test_program).with_data_parallel(places=[fluid.CPUPlace()] * 4)
        (parts,) = exe.run(cp, feed=feed, fetch_list=[m.loss])
        (pred,) = exe.run(cp, feed=feed, fetch_list=[m.prediction])
        (pred1,) = exe.run(m.test_program, feed=feed, fetch_list=[m.prediction])
    assert parts.shape == (4,)
    np.testing.assert_allclose(parts.mean(), whole[0], rtol=1e-6)
    np.testing.assert_allclose(pred, pred1, rtol=1e-6)  # shares concatenated in order


def test_gradient_scale_one_sums_the_gradients():
    """``One``: place gradients are summed: two even halves give twice the mean-loss
    gradient, so SGD with half the learning rate takes the single-device step."""
    want, _, _ = _train(None, "sgd", steps=2, batch=32, lr=0.3)
    got, _, _ = _train([fluid.CPUPlace()] * 2, "sgd", steps=2, batch=32, lr=0.15,
                       scale=BuildStrategy.GradientScaleStrategy.One)
    for d in (got, want):
        d.pop("learning_rate_0")
    _assert_close(got, want)


def test_updates_land_in_the_scope_and_a_changed_scope_is_rebroadcast():
    m = models.digits_mlp(hidden=(16,), optimizer=fluid.optimizer.SGD(learning_rate=0.1))
    exe = fluid.Executor()
    s_par, s_one = fluid.Scope(), fluid.Scope()
    cp = CompiledProgram(m.main).with_data_parallel(loss_name=m.loss.name,
                                                    places=[fluid.CPUPlace()] * 2)
    for s in (s_par, s_one):
        with fluid.scope_guard(s):
            fluid.Executor().run(m.startup)  # a fresh executor: the same initial values
    w = m.main.all_parameters()[0].name
    for step in range(3):
        feed = {"pixels": XTR[step * 16:(step + 1) * 16], "label": YTR[step * 16:(step + 1) * 16]}
        with fluid.scope_guard(s_par):
            exe.run(cp, feed=feed, fetch_list=[m.loss])
        with fluid.scope_guard(s_one):
            exe.run(m.main, feed=feed, fetch_list=[m.loss])
        if step == 0:  # change a parameter behind the runner's back: replicas follow
            for s in (s_par, s_one):
                s.find_var(w).get_tensor().set(np.full_like(np.array(s.find_value(w)), 0.01))
        np.testing.assert_allclose(np.array(s_par.find_value(w)), np.array(s_one.find_value(w)),
                                   rtol=1e-5, atol=1e-7)


def test_batch_norm_statistics_are_per_place():
    """2 places, one SGD step of the CNN: the scope's running mean is place 0's (its own
    half of the batch), and each parameter is the mean of the two single-device steps on
    the halves (each half normalised by its own batch statistics: no sync batch norm)."""
    singles = []
    for half in (slice(0, 16), slice(16, 32)):
        m = models.digits_cnn(optimizer=fluid.optimizer.SGD(learning_rate=0.1))
        exe, scope = fluid.Executor(), fluid.Scope()
        with fluid.scope_guard(scope):
            exe.run(m.startup)
            exe.run(m.main, feed={"pixels": XIM[half], "label": YIM[half]}, fetch_list=[m.loss])
        singles.append(_persistables(m, scope))
    got, _, m = _train([fluid.CPUPlace()] * 2, "sgd", steps=1, batch=32, model="cnn")
    bn = [op for op in m.main.global_block().ops if op.type == "batch_norm"]
    stats = [n for op in bn for n in op.output("MeanOut") + op.output("VarianceOut")]
    assert len(stats) == 4
    params = [p.name for p in m.main.all_parameters() if p.trainable]
    for n in params:
        np.testing.assert_allclose(got[n], (singles[0][n] + singles[1][n]) / 2, rtol=1e-4,
                                   atol=1e-6, err_msg=n)
    for n in stats:
        np.testing.assert_allclose(got[n], singles[0][n], rtol=1e-5, atol=1e-7, err_msg=n)
        assert not np.allclose(got[n], singles[1][n])


def test_lod_feed_is_split_by_sequence_and_merged_back():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32", lod_level=1)
        y = fluid.layers.scale(x, scale=2.0)
    data = np.arange(18, dtype=np.float32).reshape(9, 2)
    t = fluid.create_lod_tensor(data, [[2, 3, 1, 3]])
    cp = CompiledProgram(main).with_data_parallel(places=[fluid.CPUPlace()] * 3)
    with fluid.scope_guard(fluid.Scope()):
        (out,) = fluid.Executor().run(cp, feed={"x": t}, fetch_list=[y], return_numpy=False)
    np.testing.assert_array_equal(out.data, data * 2)
    assert out.lod() == t.lod()


def test_errors_name_the_problem_and_the_fix():
    m = models.digits_mlp(hidden=(8,), optimizer=fluid.optimizer.SGD(learning_rate=0.1))
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(m.startup)
        cp = CompiledProgram(m.main).with_data_parallel(loss_name=m.loss.name,
                                                        places=[fluid.CPUPlace()] * 4)
        with pytest.raises(FeedError, match="cannot be split across 4 places"):
            exe.run(cp, feed={"pixels": XTR[:3], "label": YTR[:3]}, fetch_list=[m.loss])
        with pytest.raises(FeedError, match="different batch sizes"):
            exe.run(cp, feed={"pixels": XTR[:8], "label": YTR[:9]}, fetch_list=[m.loss])
        no_loss = CompiledProgram(m.main).with_data_parallel(places=[fluid.CPUPlace()] * 2)
        with pytest.raises(ExecutionError, match="loss_name"):
            exe.run(no_loss, feed={"pixels": XTR[:8], "label": YTR[:8]}, fetch_list=[m.loss])
    with pytest.raises(ExecutionError, match="not a variable"):
        CompiledProgram(m.main).with_data_parallel(loss_name="nope")
    with pytest.raises(ExecutionError, match="one kind"):
        CompiledProgram(m.main).with_data_parallel(
            loss_name=m.loss.name, places=[fluid.CPUPlace(), fluid.CUDAPlace(0)])
