"""Differential checks of the CUDA executor against the CPU executor, for any runtime.

The same functions run on the host shim in CI (``test_host_shim.py``) and on a
real GPU (``test_gpu.py``, marker ``gpu``).

* :func:`op_suite_programs`: every gradient-check case (``tests/grad``), in
  float32, as a forward + backward program fetching the op's outputs and the
  gradients of its inputs: the whole op suite, forward and backward kernels;
* :func:`train_and_predict`: a few training steps of a digits model and a
  prediction with its test program.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw.backends.cuda import CUDAExecutor
from fluid_hw.datasets import load_digits_split
from fluid_hw.frontend import models
from fluid_hw.frontend.backward import gradients
from fluid_hw.ir.registry import get_op
from tests.grad_harness import GradCase, _build
from tests.test_grad_check import CASES

RTOL, ATOL = 2e-4, 2e-5


def _float32(case: GradCase) -> GradCase:
    def conv(v: Any) -> Any:
        if isinstance(v, list):
            return [conv(x) for x in v]
        a = np.asarray(v)
        return a.astype(np.float32) if a.dtype == np.float64 else a

    return dataclasses.replace(case, inputs={k: conv(v) for k, v in case.inputs.items()})


def op_suite_programs() -> list[tuple[str, fluid.Program, dict[str, np.ndarray], list[str]]]:
    """(id, program, feed, fetch names) for every single-op gradient-check case, in
    float32 (float64 where the op's attributes pin it)."""
    out = []
    for case in CASES:
        if not isinstance(case, GradCase):  # program-level (LoD, control-flow) cases
            continue
        try:
            prog, feed, float_inputs, _ = _build(_float32(case))
        except (fluid.errors.FluidError, AssertionError):
            try:  # float64 attributes (cast's in_dtype): the case as it is
                prog, feed, float_inputs, _ = _build(case)
            except (fluid.errors.FluidError, AssertionError):
                continue  # the case does not build: test_grad_check reports it
        gb = prog.global_block()
        op = gb.ops[0]
        slots = [s.name for s in get_op(op.type).outputs if not s.intermediate]
        outs = [n for s in slots for n in op.output(s)
                if gb.var(n).dtype_name in ("float32", "float64", "int64", "int32")]
        gvars = gradients(gb.var("loss"), [gb.var(n) for n in float_inputs])
        fetch = outs + [g.name for g in gvars if g is not None]
        out.append((str(case), prog, feed, fetch))
    return out


def run_op_suite(make_executor: Any) -> tuple[list[str], dict[str, int]]:
    """Run every case on the CPU executor and on ``make_executor()``; the failures
    (as messages) and the device executor's host-op counts."""
    progs = op_suite_programs()
    exe = make_executor()
    with exe.runtime.deferred():  # compile every program's kernels in one go
        for _, prog, feed, fetch in progs:
            exe.prepare_device(prog, list(feed), fetch)
    failures = []
    for cid, prog, feed, fetch in progs:
        with fluid.scope_guard(fluid.Scope()):
            want = fluid.Executor(fluid.CPUPlace(), seed=0).run(prog, feed=feed,
                                                                fetch_list=fetch)
        exe.rng = np.random.default_rng(0)
        with fluid.scope_guard(fluid.Scope()):
            try:
                got = exe.run(prog, feed=feed, fetch_list=fetch)
            except fluid.errors.FluidError as e:
                failures.append(f"{cid}: {e}")
                continue
        for name, w, g in zip(fetch, want, got):
            w, g = np.asarray(w), np.asarray(g)
            if w.shape != g.shape or w.dtype != g.dtype or not np.allclose(
                    g, w, rtol=RTOL, atol=ATOL, equal_nan=True):
                err = np.abs(g.astype(np.float64) - w).max() if w.shape == g.shape else "-"
                failures.append(f"{cid}: {name}: device {g.dtype}{list(g.shape)} vs CPU "
                                f"{w.dtype}{list(w.shape)}, max abs error {err}")
    return failures, dict(exe.host_op_runs)


def train_and_predict(exe: Any, model: str = "mlp", steps: int = 4, batch: int = 32,
                      optimizer: str = "adam") -> tuple[list[float], dict[str, np.ndarray],
                                                        np.ndarray]:
    """Losses of ``steps`` training steps, the persistables after them, and the
    test program's predictions on 64 test images."""
    xtr, xte, ytr, yte = load_digits_split(image=model == "cnn")
    opt = (fluid.optimizer.Adam(learning_rate=0.01) if optimizer == "adam" else
           fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9))
    m = (models.digits_cnn if model == "cnn" else models.digits_mlp)(optimizer=opt)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor().run(m.startup)
        losses = []
        for i in range(steps):
            sl = slice(i * batch, (i + 1) * batch)
            (lv,) = exe.run(m.main, feed={"pixels": xtr[sl], "label": ytr[sl]},
                            fetch_list=[m.loss])
            losses.append(float(np.asarray(lv).reshape(-1)[0]))
        (pred,) = exe.run(m.test_program, feed={"pixels": xte[:64], "label": yte[:64]},
                          fetch_list=[m.prediction])
    state = {v.name: np.array(scope.find_value(v.name)) for v in m.main.list_vars()
             if v.persistable and scope.find_value(v.name) is not None
             and not isinstance(scope.find_value(v.name), list)}
    return losses, state, np.asarray(pred)


def assert_same_training(exe: CUDAExecutor, model: str, optimizer: str = "adam",
                         steps: int = 4) -> None:
    want = train_and_predict(fluid.Executor(), model, steps, optimizer=optimizer)
    got = train_and_predict(exe, model, steps, optimizer=optimizer)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, err_msg="losses")
    assert got[1].keys() == want[1].keys()
    for n in want[1]:
        np.testing.assert_allclose(got[1][n], want[1][n], rtol=1e-4, atol=1e-6, err_msg=n)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-6, err_msg="predictions")
