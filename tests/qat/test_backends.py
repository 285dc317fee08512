"""QAT programs on the other back ends: data parallelism over CPU places
(CompiledProgram) and the CUDA executor (host shim runtime).

The moving scales are state written in the forward pass, like batch_norm's running
statistics: under CompiledProgram each place observes its own share of the batch and
keeps its own scale; the scope (what the test program, ``freeze`` and
``save_persistables`` read) gets place 0's.  Parameters stay replicated: the
gradients are combined as for any program.
"""

import numpy as np
import pytest

import fluid_hw as fluid
from fluid_hw.backends.cpu.parallel import CompiledProgram
from fluid_hw.frontend import models
from fluid_hw.passes.precision import Precision
from fluid_hw.passes.qat import QATConfig, quant_aware
from tests.qat._digits import data

XTR, XTE, YTR, YTE = data()
STATE = ("pixels.scale", "pixels.accum", "pixels.state")


def _model():
    m = models.digits_mlp(hidden=(16,))
    with fluid.program_guard(m.main, m.startup), fluid.unique_name.guard():
        q = quant_aware(m.main, m.startup, QATConfig(Precision(4, 4)))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(m.loss)
    return m, q


def _values(m, scope):
    return {v.name: np.array(scope.find_value(v.name)) for v in m.main.list_vars()
            if v.persistable and scope.find_value(v.name) is not None
            and not isinstance(scope.find_value(v.name), list)}


def _moving(xs, rate=0.9):
    """pixels.scale / accum / state after observing max|x| of each batch in turn."""
    accum = state = 0.0
    for x in xs:
        state, accum = rate * state + 1, rate * accum + float(np.abs(x).max())
    return {"pixels.scale": accum / state, "pixels.accum": accum, "pixels.state": state}


def test_data_parallel_scales_are_per_place_and_the_scope_gets_place_0s():
    halves = (slice(0, 16), slice(16, 32))
    singles = []
    for half in halves:  # one step of single-device training on each half
        m, _ = _model()
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            fluid.Executor().run(m.startup)
            fluid.Executor().run(m.main, feed={"pixels": XTR[half], "label": YTR[half]},
                                 fetch_list=[m.loss])
        singles.append(_values(m, scope))
    m, q = _model()
    scope = fluid.Scope()
    cp = CompiledProgram(m.main).with_data_parallel(loss_name=m.loss.name,
                                                    places=[fluid.CPUPlace()] * 2)
    exe = fluid.Executor()
    with fluid.scope_guard(scope):
        exe.run(m.startup)
        exe.run(cp, feed={"pixels": XTR[:32], "label": YTR[:32]}, fetch_list=[m.loss])
        got = _values(m, scope)
        scales = [n for n in got if n.endswith((".scale", ".accum", ".state"))
                  and not n.endswith(".w_0.scale")]
        assert len(scales) == 3 * 3  # input, hidden and logits quantisers
        for n in scales:  # place 0's observation of its own half
            np.testing.assert_allclose(got[n], singles[0][n], rtol=1e-5, err_msg=n)
        assert not np.allclose(got["fc_0.tmp_2.scale"], singles[1]["fc_0.tmp_2.scale"])
        for n in (p.name for p in m.main.all_parameters() if p.trainable):
            np.testing.assert_allclose(got[n], (singles[0][n] + singles[1][n]) / 2, rtol=1e-4,
                                       atol=1e-6, err_msg=n)
        # more steps: each place's input scale is the moving average of its own shares
        for step in (1, 2):
            sl = slice(32 * step, 32 * step + 32)
            exe.run(cp, feed={"pixels": XTR[sl], "label": YTR[sl]}, fetch_list=[m.loss])
        shares = [[XTR[32 * s + 16 * p:32 * s + 16 * p + 16] for s in range(3)] for p in (0, 1)]
        for p, want in enumerate(_moving(sh) for sh in shares):
            # place 0: the scope; place 1: its own replica (the runner's private scope)
            held = scope if p == 0 else cp._devices[1].scope
            for n, v in want.items():
                assert float(np.asarray(held.find_value(n))[0]) == pytest.approx(v, rel=1e-6), \
                    (p, n)
        # the test clone reads the published (place 0) scales
        (acc,) = exe.run(q.test_program, feed={"pixels": XTE, "label": YTE},
                         fetch_list=[m.accuracy])
        assert 0.0 < float(acc[0]) <= 1.0


def test_cuda_executor_runs_qat_like_the_cpu():
    """The CUDA back end has no kernels of its own for the fake quantisers: they run on
    the host (the CPU kernels, inputs copied over), the rest on the device; training
    equals the CPU executor's."""
    pytest.importorskip("fluid_hw.backends.cuda")
    from fluid_hw.backends.cuda import CUDAExecutor, HostShimRuntime, placement

    assert placement("fake_quantize_dequantize_moving_average_abs_max") == "host"
    results = []
    for exe in (fluid.Executor(), CUDAExecutor(runtime=HostShimRuntime())):
        m, q = _model()
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            fluid.Executor().run(m.startup)
            for i in range(3):
                sl = slice(32 * i, 32 * i + 32)
                exe.run(m.main, feed={"pixels": XTR[sl], "label": YTR[sl]}, fetch_list=[m.loss])
            (pred,) = exe.run(q.test_program, feed={"pixels": XTE[:64], "label": YTE[:64]},
                              fetch_list=[m.prediction])
        results.append((_values(m, scope), np.asarray(pred), exe))
    (want, wpred, _), (got, gpred, cuda) = results
    assert got.keys() == want.keys()
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-4, atol=1e-6, err_msg=n)
    np.testing.assert_allclose(gpred, wpred, rtol=1e-4, atol=1e-6)
    assert "fake_quantize_dequantize_moving_average_abs_max" in cuda.host_op_runs
