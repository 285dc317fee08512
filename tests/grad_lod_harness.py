"""Gradient checks for ops that need LoD inputs, tensor arrays or sub-blocks: the
companion of tests/grad_harness.py (which feeds plain arrays).

Two kinds of case, both checked by central differences in float64 like the plain
harness, with the loss ``sum_k sum(out_k * w_k)`` over fixed random weights:

* :class:`LoDGradCase` - one op, some inputs fed as LoD tensors (``lod`` gives the
  recursive sequence lengths per input slot);
* :class:`ProgramGradCase` - a small program built by ``build()`` that exercises
  the op (``while``, ``write_to_array``...): the op cannot run on fed arrays alone.

Each case carries ``checker``, so a runner calls ``case.checker(case)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fluid_hw as fluid
from fluid_hw.frontend.backward import gradients
from fluid_hw.ir import get_op
from tests.grad_harness import GradCase, compare_with_central_differences

Feed = dict[str, Any]


def _run(prog: fluid.Program, feed: Feed, fetch: list[str]) -> list[np.ndarray]:
    with fluid.scope_guard(fluid.Scope()):
        return fluid.Executor(fluid.CPUPlace(), seed=0).run(prog, feed=feed, fetch_list=fetch)


def _numeric_check(case: Any, prog: fluid.Program, forward: fluid.Program, feed: Feed,
                   arrays: dict[str, np.ndarray], lods: dict[str, list[list[int]]],
                   names: list[str], loss: str) -> None:
    """Analytic gradients of ``names`` (already appended to ``prog``) against central
    differences of ``forward``'s ``loss``."""
    gvars = gradients(prog.global_block().var(loss),
                      [prog.global_block().var(n) for n in names])
    missing = [n for n, g in zip(names, gvars) if g is None]
    assert not missing, f"{case}: no gradient for {missing}"
    analytic = _run(prog, feed, [g.name for g in gvars])

    def value(over: dict[str, np.ndarray]) -> float:
        f = dict(feed)
        for n, a in over.items():
            f[n] = fluid.create_lod_tensor(a, lods[n]) if n in lods else a
        return float(np.asarray(_run(forward, f, [loss])[0]).reshape(()))

    compare_with_central_differences(case, {n: arrays[n] for n in names}, analytic, value)


def _weighted_loss(b: fluid.Block, outs: list[str], shapes: dict[str, tuple[int, ...]],
                   feed: Feed) -> str:
    rng = np.random.default_rng(123)
    terms = []
    for n in outs:
        wname = f"w_{n}"
        shape = shapes[n]
        b.create_var(name=wname, shape=[-1, *shape[1:]], dtype="float64", stop_gradient=True)
        feed[wname] = rng.standard_normal(shape)
        prod = b.create_var(name=f"prod_{n}", dtype="float64")
        b.append_op("elementwise_mul", {"X": n, "Y": wname}, {"Out": prod})
        red = b.create_var(name=f"red_{n}", dtype="float64")
        b.append_op("reduce_sum", {"X": prod}, {"Out": red}, {"reduce_all": True})
        terms.append(red.name)
    loss = b.create_var(name="loss", dtype="float64")
    b.append_op("sum", {"X": terms}, {"Out": loss})
    return loss.name


def _lod_for(spec: Any, i: int) -> list[list[int]] | None:
    """``spec`` is one LoD (for the slot's first input) or a list of them (one each)."""
    if not spec:
        return None
    per_input = isinstance(spec[0][0], list)
    if per_input:
        return spec[i] if i < len(spec) else None
    return spec if i == 0 else None


def check_lod_grad(case: LoDGradCase) -> None:
    prog = fluid.Program()
    b = prog.global_block()
    opdef = get_op(case.op)
    feed: Feed = {}
    arrays: dict[str, np.ndarray] = {}
    lods: dict[str, list[list[int]]] = {}
    ins: dict[str, list[str]] = {}
    checked: list[str] = []
    for slot, val in case.inputs.items():
        vals = val if isinstance(val, list) else [val]
        names = []
        for i, v in enumerate(vals):
            v = np.asarray(v)
            name = f"{slot.lower()}_{i}"
            lens = _lod_for(case.lod.get(slot), i)
            check = v.dtype.kind == "f" and (case.check is None or slot in case.check)
            shape = [-1, *v.shape[1:]] if lens else list(v.shape)
            b.create_var(name=name, shape=shape, dtype=v.dtype,
                         lod_level=len(lens) if lens else 0, stop_gradient=not check)
            arrays[name] = v
            if lens:
                lods[name] = lens
                feed[name] = fluid.create_lod_tensor(v, lens)
            else:
                feed[name] = v
            names.append(name)
            if check:
                checked.append(name)
        ins[slot] = names
    out_slots = case.outputs or [s.name for s in opdef.outputs if not s.intermediate]
    all_slots = list(dict.fromkeys([*out_slots, *[s.name for s in opdef.outputs]]))
    outs = {s: [b.create_var(name=f"out_{s.lower()}_{i}").name
                for i in range(case.output_counts.get(s, 1))] for s in all_slots}
    b.append_op(case.op, ins, outs, case.attrs)
    float_outs = [n for s in out_slots for n in outs[s]
                  if b.var(n).dtype_name in ("float32", "float64")]
    shapes = {n: np.asarray(v).shape for n, v in zip(float_outs,
                                                      _run(prog, feed, float_outs))}
    loss = _weighted_loss(b, float_outs, shapes, feed)
    assert checked, f"{case}: no float input to check"
    _numeric_check(case, prog, prog.clone(), feed, arrays, lods, checked, loss)


@dataclass
class LoDGradCase(GradCase):
    """A one-op case whose inputs may be LoD tensors: ``lod[slot]`` holds the recursive
    sequence lengths of the slot's first input, or a list of them, one per input."""

    lod: dict[str, Any] = field(default_factory=dict)
    checker: Callable[[Any], None] = field(default=check_lod_grad, repr=False)


def check_program_grad(case: ProgramGradCase) -> None:
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup), fluid.unique_name.guard():
        built = case.build()
    feed: Feed = dict(built.feed)
    b = prog.global_block()
    shapes = {n: np.asarray(v).shape for n, v in zip(built.outputs,
                                                      _run(prog, feed, built.outputs))}
    loss = _weighted_loss(b, built.outputs, shapes, feed)
    arrays = {n: np.asarray(feed[n].data if isinstance(feed[n], fluid.LoDTensor) else feed[n])
              for n in built.check}
    lods = {n: feed[n].recursive_sequence_lengths() for n in built.check
            if isinstance(feed[n], fluid.LoDTensor)}
    _numeric_check(case, prog, prog.clone(), feed, arrays, lods, list(built.check), loss)


@dataclass
class Built:
    """What a :class:`ProgramGradCase` builds: feeds, inputs to check, outputs in the loss."""

    feed: Feed
    check: list[str]
    outputs: list[str]


@dataclass
class ProgramGradCase:
    """A gradient check of ``op`` through a small program (``build`` runs under a
    program guard and returns :class:`Built`)."""

    op: str
    build: Callable[[], Built]
    id: str = ""
    eps: float = 1e-6
    rtol: float = 1e-5
    atol: float = 1e-7
    checker: Callable[[Any], None] = field(default=check_program_grad, repr=False)

    def __str__(self) -> str:
        return self.id or self.op
