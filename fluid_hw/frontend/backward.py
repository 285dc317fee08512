"""``append_backward``: add the gradient ops of a loss to its program (Fluid's design).

Each forward op's definition says how its gradient is built (``OpDef.grad``, see
:mod:`fluid_hw.ir.grad`); this module only walks the program:

1. the ops that lead to the loss are found (backward reachability);
2. which variables carry a gradient is decided forwards: float variables that
   depend on a trainable parameter or a non-``stop_gradient`` input and are not
   in ``no_grad_set``; ops declared without a gradient stop the flow, and an op
   with *no* declaration on the path is an error;
3. grad ops are appended in reverse order, with gradients of a variable used
   several times produced under ``<var>@GRAD@RENAME@<k>`` and summed into
   ``<var>@GRAD`` just before they are needed; outputs that get no gradient
   (an unused ``split`` piece) get zeros from ``fill_zeros_like``.

Every appended op carries ``op_role="backward"``.  Parameters that the loss
does not depend on get no gradient: with the default parameter list this is a
:class:`GradientWarning` naming them, with an explicit ``parameter_list`` a
:class:`fluid_hw.errors.GradientError`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import GradientError
from ..ir import dtypes
from ..ir.grad import EMPTY_VAR_NAME, GradContext, GradMaker, grad_var_name
from ..ir.program import Block, Operator, Parameter, Variable
from ..ir.registry import get_op

__all__ = ["GradientWarning", "append_backward", "gradients"]

ROLE = "op_role"


class GradientWarning(UserWarning):
    """A parameter has no path to the loss and gets no gradient."""


def _names(items: Iterable[Any] | None) -> set[str]:
    return {v if isinstance(v, str) else v.name for v in (items or ())}


def _is_float(block: Block, name: str) -> bool:
    v = block._find_var_recursive(name)
    return v is not None and v.dtype in dtypes.FLOAT_DTYPES


class _Backward:
    def __init__(self, block: Block, targets: list[Variable], no_grad: set[str],
                 target_grads: list[Variable] | None = None) -> None:
        self.block = block
        self.targets = targets
        self.target_grads = target_grads
        self.no_grad = set(no_grad)
        for v in block.program.list_vars():
            if v.stop_gradient:
                self.no_grad.add(v.name)
        self.pending: dict[str, list[str]] = {}
        self.resolved: set[str] = set()

    # -- analysis --------------------------------------------------------
    def _forward_ops(self) -> list[Operator]:
        ops = self.block.ops
        wanted = {t.name for t in self.targets}
        last = -1
        for i, op in enumerate(ops):
            if op.has_attr(ROLE) and op.attr(ROLE) not in ("forward", "lr_sched"):
                continue
            if wanted & set(op.output_arg_names):
                last = i
        if last < 0:
            raise GradientError(f"no op in block {self.block.idx} computes "
                                f"{sorted(wanted)}; nothing to differentiate")
        return [op for op in ops[: last + 1]
                if not (op.has_attr(ROLE) and op.attr(ROLE) not in ("forward",))]

    def _analyse(self) -> list[Operator]:
        fwd = self._forward_ops()
        needed = {t.name for t in self.targets}
        on_path: list[Operator] = []
        for op in reversed(fwd):
            if needed & set(op.output_arg_names):
                on_path.append(op)
                needed |= set(op.input_arg_names)
        on_path.reverse()
        produced: set[str] = set()
        self.has_grad: set[str] = set()
        for op in on_path:
            for n in op.input_arg_names:
                if n not in produced and n not in self.no_grad and _is_float(self.block, n):
                    self.has_grad.add(n)  # a leaf: parameter or differentiable input
            opdef = get_op(op.type)
            maker = opdef.grad
            diff_ins = [n for s in (maker.in_grads if isinstance(maker, GradMaker) else ())
                        for n in op.input(s)]
            flows = any(n in self.has_grad for n in
                        (diff_ins if isinstance(maker, GradMaker) else op.input_arg_names))
            if flows and maker is None:
                raise GradientError(
                    f"op {op.type} (-> {', '.join(op.output_arg_names)}) is on the path to the "
                    f"loss but has no gradient; mark its inputs stop_gradient or pass them in "
                    f"no_grad_set")
            if flows and isinstance(maker, GradMaker):
                grad_outs = {n for s in maker.out_grads for n in op.output(s)}
                for n in grad_outs:
                    if n not in self.no_grad and _is_float(self.block, n):
                        self.has_grad.add(n)
            produced |= set(op.output_arg_names)
        return on_path

    # -- emission --------------------------------------------------------
    def _grad_var(self, fwd_name: str, grad_name: str) -> None:
        if self.block.has_var(grad_name):
            return
        v = self.block._var_recursive(fwd_name)
        self.block.create_var(name=grad_name, shape=v.shape, dtype=v.dtype,
                              lod_level=v.lod_level)

    def _append(self, type: str, inputs: dict[str, Any], outputs: dict[str, Any],
                attrs: dict[str, Any] | None = None) -> Operator:
        attrs = dict(attrs or {})
        attrs[ROLE] = "backward"
        return self.block.append_op(type, inputs, outputs, attrs)

    def resolve(self, name: str) -> str:
        """The final ``name@GRAD``, summing the pending contributions."""
        g = grad_var_name(name)
        if name in self.resolved:
            return g
        parts = self.pending.get(name, [])
        if not parts:
            self._grad_var(name, g)
            self._append("fill_zeros_like", {"X": name}, {"Out": g})
        elif parts != [g]:
            self._grad_var(name, g)
            self._append("sum", {"X": parts}, {"Out": g})
        self.resolved.add(name)
        return g

    def run(self) -> dict[str, str]:
        on_path = self._analyse()
        uses: dict[str, int] = {}
        for op in on_path:
            maker = get_op(op.type).grad
            if isinstance(maker, GradMaker):
                for s in maker.in_grads:
                    for n in op.input(s):
                        if n in self.has_grad:
                            uses[n] = uses.get(n, 0) + 1
        for i, t in enumerate(self.targets):
            g = grad_var_name(t.name)
            self._grad_var(t.name, g)
            if self.target_grads is not None and self.target_grads[i] is not None:
                self._append("assign", {"X": self.target_grads[i]}, {"Out": g})
            else:
                shape = [d if d > 0 else 1 for d in t.shape] or [1]
                self._append("fill_constant", {}, {"Out": g},
                             {"shape": shape, "dtype": t.dtype, "value": 1.0})
            self.pending[t.name] = [g]
        counter: dict[str, int] = {}
        for op in reversed(on_path):
            maker = get_op(op.type).grad
            if not isinstance(maker, GradMaker):
                continue
            outs_with_grad = [n for s in maker.out_grads for n in op.output(s)
                              if n in self.has_grad]
            if not any(n in self.pending for n in outs_with_grad):
                continue
            out_grads = {s: [self.resolve(n) for n in op.output(s)] for s in maker.out_grads
                         if op.output(s)}
            in_grads: dict[str, list[str]] = {}
            for s in maker.in_grads:
                names = []
                for n in op.input(s):
                    if n not in self.has_grad:
                        names.append(EMPTY_VAR_NAME)
                        continue
                    k = counter.get(n, 0)
                    counter[n] = k + 1
                    g = grad_var_name(n) if uses.get(n, 0) <= 1 else \
                        f"{grad_var_name(n)}@RENAME@{k}"
                    self._grad_var(n, g)
                    self.pending.setdefault(n, []).append(g)
                    names.append(g)
                in_grads[s] = names
            for spec in maker.make(GradContext(op, in_grads, out_grads)):
                outputs = {}
                for slot, names in spec.outputs.items():
                    if all(n == EMPTY_VAR_NAME for n in names):
                        continue
                    outputs[slot] = names
                if outputs:
                    self._append(spec.type, spec.inputs, outputs, spec.attrs)
        return {n: self.resolve(n) for n in list(self.pending)}


def _check_loss(loss: Variable) -> None:
    shape = [d for d in loss.shape]
    if any(d == -1 for d in shape) or math.prod(shape) != 1:
        raise GradientError(f"append_backward: loss {loss.name!r} has shape {shape}; it must "
                            "hold one value (shape [1]) — reduce it, e.g. with layers.mean")
    if loss.dtype not in dtypes.FLOAT_DTYPES:
        raise GradientError(f"append_backward: loss {loss.name!r} is {loss.dtype_name}; "
                            "only a float loss can be differentiated")


def append_backward(loss: Variable, parameter_list: Sequence[Any] | None = None,
                    no_grad_set: Iterable[Any] | None = None,
                    callbacks: Any = None) -> list[tuple[Parameter, Variable]]:
    """Append the gradient ops of ``loss``; return ``(parameter, gradient)`` pairs."""
    _check_loss(loss)
    block = loss.block
    program = block.program
    if block.idx != 0:
        raise GradientError(f"append_backward: loss {loss.name!r} must be in the global block")
    gb = program.global_block()
    explicit = parameter_list is not None
    if explicit:
        params = []
        for p in parameter_list or ():
            name = p if isinstance(p, str) else p.name
            v = gb._find_var_recursive(name)
            if v is None:
                raise GradientError(f"append_backward: parameter {name!r} is not a variable "
                                    "of the program")
            if v.dtype not in dtypes.FLOAT_DTYPES:
                raise GradientError(f"append_backward: parameter {name!r} is {v.dtype_name}; "
                                    "only float parameters have gradients")
            params.append(v)
    else:
        params = [p for p in gb.all_parameters() if p.trainable]
    bw = _Backward(block, [loss], _names(no_grad_set))
    grads = bw.run()
    out: list[tuple[Parameter, Variable]] = []
    missing = []
    for p in params:
        if p.name in grads and p.name in bw.has_grad:
            out.append((p, gb.var(grads[p.name])))  # type: ignore[arg-type]
        elif p.name not in bw.no_grad or explicit:
            missing.append(p.name)
    if missing:
        msg = (f"parameters {missing} have no path to the loss {loss.name!r} (or are excluded "
               "by stop_gradient/no_grad_set) and get no gradient")
        if explicit:
            raise GradientError(f"append_backward: {msg}")
        warnings.warn(msg, GradientWarning, stacklevel=2)
    return out


def gradients(targets: Variable | Sequence[Variable], inputs: Variable | Sequence[Variable],
              target_gradients: Sequence[Variable] | None = None,
              no_grad_set: Iterable[Any] | None = None) -> list[Variable | None]:
    """Gradients of ``sum(targets)`` with respect to ``inputs`` (None where no path)."""
    ts = [targets] if isinstance(targets, Variable) else list(targets)
    ins = [inputs] if isinstance(inputs, Variable) else list(inputs)
    if target_gradients is None:
        for t in ts:
            _check_loss(t)
    block = ts[0].block
    no_grad = _names(no_grad_set)
    # inputs asked for explicitly carry gradients even if marked stop_gradient (data vars)
    saved = {v.name: v.stop_gradient for v in ins}
    for v in ins:
        v.stop_gradient = False
    try:
        bw = _Backward(block, ts, no_grad - set(saved),
                       list(target_gradients) if target_gradients is not None else None)
        grads = bw.run()
    finally:
        for v in ins:
            v.stop_gradient = saved[v.name]
    return [block._var_recursive(grads[v.name]) if v.name in grads and v.name in bw.has_grad
            else None for v in ins]


calc_gradient = gradients
