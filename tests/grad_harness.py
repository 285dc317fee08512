"""Numeric gradient checking: analytic gradients from append_backward against central
differences, in float64.

A case is a :class:`GradCase`: one op, its inputs (arrays; float ones are checked,
integer ones are held fixed), its attrs.  The loss is ``sum_k sum(out_k * w_k)`` with
fixed random weights ``w_k``, over the op's non-intermediate float outputs (or the
ones named in ``outputs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw.frontend.backward import gradients
from fluid_hw.ir import get_op


@dataclass
class GradCase:
    op: str
    inputs: dict[str, Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    check: list[str] | None = None  # input slots to check (default: all float inputs)
    outputs: list[str] | None = None  # output slots in the loss (default: all float ones)
    output_counts: dict[str, int] = field(default_factory=dict)
    extra_outputs: list[str] = field(default_factory=list)  # created but not in the loss
    eps: float = 1e-6
    rtol: float = 1e-5
    atol: float = 1e-7
    id: str = ""

    def __str__(self) -> str:
        return self.id or self.op


def _build(case: GradCase):
    prog = fluid.Program()
    b = prog.global_block()
    opdef = get_op(case.op)
    feed: dict[str, np.ndarray] = {}
    ins: dict[str, list[str]] = {}
    float_inputs: list[str] = []
    for slot, val in case.inputs.items():
        vals = val if isinstance(val, list) else [val]
        names = []
        for i, v in enumerate(vals):
            v = np.asarray(v)
            name = f"{slot.lower()}_{i}"
            check = v.dtype.kind == "f" and (case.check is None or slot in case.check)
            b.create_var(name=name, shape=list(v.shape), dtype=v.dtype,
                         stop_gradient=not check)
            feed[name] = v
            names.append(name)
            if check:
                float_inputs.append(name)
        ins[slot] = names
    out_slots = case.outputs or [s.name for s in opdef.outputs if not s.intermediate]
    all_slots = list(dict.fromkeys([*out_slots, *case.extra_outputs,
                                    *[s.name for s in opdef.outputs if s.intermediate]]))
    outs = {s: [b.create_var(name=f"out_{s.lower()}_{i}").name
                 for i in range(case.output_counts.get(s, 1))] for s in all_slots}
    b.append_op(case.op, ins, outs, case.attrs)
    rng = np.random.default_rng(123)
    terms = []
    for s in out_slots:
        for n in outs[s]:
            v = b.var(n)
            if v.dtype_name not in ("float32", "float64"):
                continue
            wname = f"w_{n}"
            shape = list(v.shape)
            assert -1 not in shape, f"{case}: output {n} shape {shape} must be known"
            b.create_var(name=wname, shape=shape, dtype=v.dtype_name, stop_gradient=True)
            feed[wname] = rng.standard_normal(shape).astype(v.dtype_name)
            prod = b.create_var(name=f"prod_{n}")
            b.append_op("elementwise_mul", {"X": n, "Y": wname}, {"Out": prod})
            red = b.create_var(name=f"red_{n}")
            b.append_op("reduce_sum", {"X": prod}, {"Out": red}, {"reduce_all": True})
            terms.append(red.name)
    loss = b.create_var(name="loss")
    b.append_op("sum", {"X": terms}, {"Out": loss})
    return prog, feed, float_inputs, loss


def _run(prog, feed, fetch):
    with fluid.scope_guard(fluid.Scope()):
        return fluid.Executor(fluid.CPUPlace(), seed=0).run(prog, feed=feed, fetch_list=fetch)


def check_grad(case: GradCase) -> None:
    prog, feed, float_inputs, loss = _build(case)
    assert float_inputs, f"{case}: no float input to check"
    forward = prog.clone()
    gvars = gradients(loss, [prog.global_block().var(n) for n in float_inputs])
    missing = [n for n, g in zip(float_inputs, gvars) if g is None]
    assert not missing, f"{case}: no gradient for {missing}"
    analytic = _run(prog, feed, [g.name for g in gvars])

    def f(values: dict[str, np.ndarray]) -> float:
        return float(_run(forward, {**feed, **values}, [loss.name])[0].reshape(()))

    compare_with_central_differences(case, {n: feed[n] for n in float_inputs}, analytic, f)


def compare_with_central_differences(case, inputs: dict[str, np.ndarray],
                                     analytic: list[np.ndarray], loss_of) -> None:
    """Assert each analytic gradient equals central differences of ``loss_of({name:
    perturbed array})`` element by element (``case`` gives eps and tolerances)."""
    for (name, arr), got in zip(inputs.items(), analytic):
        x = arr.astype(np.float64)
        num = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            hi, lo = x.copy(), x.copy()
            hi[idx] += case.eps
            lo[idx] -= case.eps
            num[idx] = (loss_of({name: hi.astype(arr.dtype)})
                        - loss_of({name: lo.astype(arr.dtype)})) / (2 * case.eps)
        assert got.shape == x.shape, f"{case}: grad of {name} has shape {got.shape}"
        np.testing.assert_allclose(got, num, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case}: gradient of input {name}")
