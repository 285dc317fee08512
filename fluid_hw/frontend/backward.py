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
   (an unused ``split`` piece) get zeros from ``fill_zeros_like``;
4. counters updated in place (``increment`` of an array index) are undone at the
   mirrored position, just before the first grad op that reads them, so that every
   grad op sees the value its forward op saw (``array_read`` / ``array_write`` at
   ``i``), and redone at the end so the counters end as the forward pass left them.

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
from ..ir.ops.control_flow import REVERSIBLE_OPS, SUB_BLOCK_OPS, SubBlockSpec
from ..ir.program import Block, Operator, Parameter, Variable, VarType
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
    """Builds the gradient ops of one block.

    For the global block the gradient ops go into the block itself.  An op with a
    sub-block (``while``, ``conditional_block``) gets a *gradient block*: a new block
    whose parent is the block holding the op's gradient op and whose
    ``forward_block_idx`` is the forward sub-block; a nested ``_Backward`` fills it.
    At run time the gradient block runs in the forward block's scope (each step
    scope of a loop, last first), so it reads the forward values directly:

    * gradients of the sub-block's own variables stay in that scope;
    * gradients of outer tensors (parameters...) are per-step values under
      ``<name>@GRAD`` that ``while_grad`` / ``conditional_block_grad`` sum outside;
    * gradients of tensor arrays are arrays accumulated in place, one entry per
      index, so they are never renamed or summed; they are declared beside the
      array's own block;
    * counters that a loop body increments in place are decremented again, at the
      mirrored position, so every step's gradient ops see the counter value of
      their forward step.
    """

    def __init__(self, block: Block, targets: list[Variable], no_grad: set[str],
                 target_grads: list[Variable] | None = None, *,
                 grad_block: Block | None = None, parent: _Backward | None = None,
                 loop: bool = False) -> None:
        self.block = block
        self.gblock = grad_block if grad_block is not None else block
        self.targets = targets
        self.target_grads = target_grads
        self.parent = parent
        self.loop = loop
        #: forward block index -> the block that holds its gradient ops
        self.gmap: dict[int, int] = dict(parent.gmap) if parent else {}
        self.gmap[block.idx] = self.gblock.idx
        self.no_grad = set(no_grad)
        if parent is None:
            for v in block.program.list_vars():
                if v.stop_gradient:
                    self.no_grad.add(v.name)
        self.pending: dict[str, list[str]] = {}
        self.resolved: set[str] = set()
        self.has_grad: set[str] = set()
        #: in-place counter updates passed on the way back, per counter, not yet undone
        self.to_undo: dict[str, list[Operator]] = {}
        #: the updates undone, in the order they were undone (redone at the end)
        self.undone: list[Operator] = []

    # -- variables ---------------------------------------------------------------
    def _var(self, name: str) -> Variable | None:
        return self.block._find_var_recursive(name)

    def _is_array(self, name: str) -> bool:
        v = self._var(name)
        return v is not None and v.type == VarType.LOD_TENSOR_ARRAY

    def _diff(self, name: str) -> bool:
        return name not in self.no_grad and _is_float(self.block, name)

    def _home(self, name: str) -> Block:
        """The gradient-side block that mirrors the block declaring forward var ``name``."""
        b: Block | None = self.block
        while b is not None and not b.has_var(name):
            b = b.parent_block
        if b is None:
            return self.gblock
        # a block above the differentiated ones holds its own variables' gradients
        return self.block.program.block(self.gmap.get(b.idx, b.idx))

    def _ensure_visible(self, names: Iterable[str]) -> None:
        """Declare forward variables the gradient block reads where it can see them."""
        if self.gblock is self.block:
            return
        for n in names:
            if n == EMPTY_VAR_NAME or self.gblock._find_var_recursive(n) is not None:
                continue
            v = self._var(n)
            if v is None:
                continue
            home = self._home(n)
            if not home.has_var(n):
                vd = home.desc.vars.add()
                vd.CopyFrom(v.desc)
                home.vars[n] = home._make_var_view(vd)
                home.program._bump()

    def _grad_var(self, fwd_name: str, grad_name: str) -> None:
        array = self._is_array(fwd_name)
        home = self._home(fwd_name) if array else self.gblock
        if home.has_var(grad_name):
            return
        v = self.block._var_recursive(fwd_name)
        home.create_var(name=grad_name, shape=v.shape, dtype=v.dtype, lod_level=v.lod_level,
                        type=VarType.LOD_TENSOR_ARRAY if array else VarType.LOD_TENSOR)

    def _append(self, type: str, inputs: dict[str, Any], outputs: dict[str, Any],
                attrs: dict[str, Any] | None = None) -> Operator:
        attrs = dict(attrs or {})
        attrs[ROLE] = "backward"

        def flat(names: Any) -> list[str]:
            return [n if isinstance(n, str) else n.name for n in
                    (names if isinstance(names, (list, tuple)) else [names])]

        if self.to_undo:
            self._undo_counters([n for names in inputs.values() for n in flat(names)])
        for names in (*inputs.values(), *outputs.values()):
            self._ensure_visible(flat(names))
        return self.gblock.append_op(type, inputs, outputs, attrs)

    # -- counters updated in place -------------------------------------------------------
    @staticmethod
    def _is_counter_update(op: Operator) -> bool:
        outs = op.output_arg_names
        return op.type in REVERSIBLE_OPS and len(outs) == 1 and outs == op.input_arg_names

    def _undo_counters(self, names: Iterable[str]) -> None:
        """Undo the updates of the counters in ``names`` passed on the way back (a grad
        op about to be appended reads them and must see their forward value)."""
        for n in names:
            for op in self.to_undo.pop(n, ()):
                gs = REVERSIBLE_OPS[op.type](op)
                self._append(gs.type, gs.inputs, gs.outputs, gs.attrs)
                self.undone.append(op)

    def _redo_counters(self) -> None:
        """Replay the undone updates forwards: the counters end as the forward pass
        left them (for fetches and for ops appended after the backward pass)."""
        for op in reversed(self.undone):
            attrs = {k: v for k, v in op.all_attrs().items() if not k.startswith("op_")}
            self._append(op.type, op.inputs, op.outputs, attrs)
        self.undone.clear()

    # -- analysis --------------------------------------------------------------------
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

    def _flow(self, op: Operator) -> list[str]:
        """The outputs that get a gradient through ``op`` (empty if none flows)."""
        maker = get_op(op.type).grad
        diff_ins = [n for s in (maker.in_grads if isinstance(maker, GradMaker) else ())
                    for n in op.input(s)]
        flows = any(n in self.has_grad for n in
                    (diff_ins if isinstance(maker, GradMaker) else op.input_arg_names))
        if flows and maker is None:
            raise GradientError(
                f"op {op.type} (-> {', '.join(op.output_arg_names)}) in block {self.block.idx} "
                f"is on the path to the loss but has no gradient; mark its inputs "
                f"stop_gradient or pass them in no_grad_set")
        if not (flows and isinstance(maker, GradMaker)):
            return []
        return [n for s in maker.out_grads for n in op.output(s) if self._diff(n)]

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
        for op in on_path:
            for n in op.input_arg_names:
                if n not in produced and self._diff(n):
                    self.has_grad.add(n)  # a leaf: parameter or differentiable input
            self.has_grad.update(self._flow(op))
            produced |= set(op.output_arg_names)
        return on_path

    def _analyse_sub(self, seed: set[str], wanted: set[str]) -> list[Operator]:
        """Like :meth:`_analyse` for a sub-block: gradients enter through the outer
        variables in ``seed`` and leave through those in ``wanted``; in a loop, values
        flow around through tensor arrays, so both passes run to a fixed point."""
        ops = self.block.ops
        self.has_grad = set(seed)
        changed = True
        while changed:
            changed = False
            for op in ops:
                for n in self._flow(op):
                    if n not in self.has_grad:
                        self.has_grad.add(n)
                        changed = True
        needed, on = set(wanted), set()
        changed = True
        while changed:
            changed = False
            for i in range(len(ops) - 1, -1, -1):
                if i not in on and needed & set(ops[i].output_arg_names):
                    on.add(i)
                    needed |= set(ops[i].input_arg_names)
                    changed = True
        return [ops[i] for i in sorted(on)]

    # -- emission ----------------------------------------------------------------------
    def resolve(self, name: str) -> str:
        """The final ``name@GRAD``, summing the pending contributions."""
        g = grad_var_name(name)
        if self._is_array(name):  # accumulated in place; an unwritten entry is zero
            self._grad_var(name, g)
            self.resolved.add(name)
            return g
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

    def _count_uses(self, ops: list[Operator]) -> dict[str, int]:
        uses: dict[str, int] = {}
        for op in ops:
            maker = get_op(op.type).grad
            if isinstance(maker, GradMaker):
                for s in maker.in_grads:
                    for n in op.input(s):
                        if n in self.has_grad and not self._is_array(n):
                            uses[n] = uses.get(n, 0) + 1
        return uses

    def _input_grads(self, op: Operator, maker: GradMaker, uses: dict[str, int],
                     counter: dict[str, int]) -> dict[str, list[str]]:
        in_grads: dict[str, list[str]] = {}
        for s in maker.in_grads:
            names = []
            for n in op.input(s):
                if n not in self.has_grad:
                    names.append(EMPTY_VAR_NAME)
                    continue
                if self._is_array(n):
                    g = grad_var_name(n)
                    self._grad_var(n, g)
                    self.pending[n] = [g]
                    names.append(g)
                    continue
                k = counter.get(n, 0)
                counter[n] = k + 1
                g = grad_var_name(n) if uses.get(n, 0) <= 1 else \
                    f"{grad_var_name(n)}@RENAME@{k}"
                self._grad_var(n, g)
                self.pending.setdefault(n, []).append(g)
                names.append(g)
            in_grads[s] = names
        return in_grads

    def _emit(self, op: Operator, uses: dict[str, int], counter: dict[str, int]) -> None:
        maker = get_op(op.type).grad
        if not isinstance(maker, GradMaker):
            return
        outs_with_grad = [n for s in maker.out_grads for n in op.output(s)
                          if n in self.has_grad]
        # an array's gradient is accumulated in place (in a loop, by later steps too)
        if not any(n in self.pending or self._is_array(n) for n in outs_with_grad):
            return
        spec = SUB_BLOCK_OPS.get(op.type)
        if spec is not None:
            self._emit_sub_block(op, maker, spec, uses, counter)
            return
        out_grads = {s: [self.resolve(n) for n in op.output(s)] for s in maker.out_grads
                     if op.output(s)}
        in_grads = self._input_grads(op, maker, uses, counter)
        for gs in maker.make(GradContext(op, in_grads, out_grads)):
            outputs = {slot: names for slot, names in gs.outputs.items()
                       if not all(n == EMPTY_VAR_NAME for n in names)}
            if outputs:
                self._append(gs.type, gs.inputs, outputs, gs.attrs)

    def _emit_sub_block(self, op: Operator, maker: GradMaker, spec: SubBlockSpec,
                        uses: dict[str, int], counter: dict[str, int]) -> None:
        program = self.block.program
        fwd = program.block(op.attr("sub_block"))
        saved = program._current_block_idx
        gblock = program._create_block(parent_idx=self.gblock.idx)
        program._current_block_idx = saved
        gblock._set_forward_block_idx(fwd.idx)
        sub = _Backward(fwd, [], self.no_grad, grad_block=gblock, parent=self, loop=spec.loop)
        outer_in = op.input(spec.inputs)
        # outer results whose gradient arrives (arrays: accumulated, maybe by the body)
        outer_out = [n for n in op.output(spec.outputs) if n in self.has_grad
                     and (self._is_array(n) or n in self.pending)]
        if spec.loop:
            for n in outer_out:
                if not self._is_array(n):
                    raise GradientError(
                        f"while (block {self.block.idx}): its body (block {fwd.idx}) overwrites "
                        f"the outer variable {n!r} at every step, so its gradient cannot "
                        f"flow back through the steps; carry loop state in a tensor array "
                        f"(array_write / array_read, as DynamicRNN does)")
        on_path = sub._analyse_sub({n for n in outer_in if n in self.has_grad}, set(outer_out))
        og: list[str] = []
        for n in outer_out:
            g = self.resolve(n)
            sub.pending[n] = [g]
            og.append(g)
        sub._emit_all(on_path)
        for n in outer_in:
            if n in sub.has_grad and not sub._is_array(n) and sub.pending.get(n):
                sub.resolve(n)
        if spec.loop:
            sub._check_loop_state(on_path)
        in_grads = self._input_grads(op, maker, uses, counter)
        if all(n == EMPTY_VAR_NAME for names in in_grads.values() for n in names):
            return  # nothing outside needs a gradient from this block
        ctx = _SubBlockGradContext(op, in_grads, {spec.outputs: og}, gblock.idx)
        for gs in maker.make(ctx):
            self._append(gs.type, gs.inputs, gs.outputs, gs.attrs)

    def _emit_all(self, on_path: list[Operator]) -> None:
        """Gradient ops of ``on_path`` in reverse order (with a loop's counters undone)."""
        uses = self._count_uses(on_path)
        counter: dict[str, int] = {}
        on = {id(op) for op in on_path}
        for op in reversed(self.block.ops):
            undo = REVERSIBLE_OPS.get(op.type) if self.loop else None
            if undo is not None and self._is_outer_inplace(op):
                gs = undo(op)
                self._append(gs.type, gs.inputs, gs.outputs, gs.attrs)
            elif id(op) in on:
                self._emit(op, uses, counter)

    def _is_outer_inplace(self, op: Operator) -> bool:
        ins, outs = op.input_arg_names, op.output_arg_names
        return len(outs) == 1 and outs == ins and not self.block.has_var(outs[0])

    def _check_loop_state(self, on_path: list[Operator]) -> None:
        """The gradient block of a loop reads outer variables at their value after the
        last step; only arrays and counters undone above are safe to read there."""
        written: dict[str, str] = {}
        for op in self.block.ops:
            if REVERSIBLE_OPS.get(op.type) and self._is_outer_inplace(op):
                continue
            for n in op.output_arg_names:
                if not self.block.has_var(n) and not self._is_array(n):
                    written.setdefault(n, op.type)
        for gop in self.gblock.ops:
            if gop.type in REVERSIBLE_OPS:
                continue
            for n in gop.input_arg_names:
                if n in written:
                    raise GradientError(
                        f"while body (block {self.block.idx}) overwrites the outer variable "
                        f"{n!r} (op {written[n]}) and its gradient op {gop.type} needs the "
                        f"value of each step; keep per-step values in a tensor array, or "
                        f"count steps with an in-place increment")

    def run(self) -> dict[str, str]:
        on_path = self._analyse()
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
        uses = self._count_uses(on_path)
        counter: dict[str, int] = {}
        on = {id(op) for op in on_path}
        for op in reversed(self._forward_ops()):
            if self._is_counter_update(op):
                self.to_undo.setdefault(op.output_arg_names[0], []).append(op)
            elif id(op) in on:
                self._emit(op, uses, counter)
        grads = {n: self.resolve(n) for n in list(self.pending)}
        self.to_undo.clear()
        self._redo_counters()
        return grads


class _SubBlockGradContext(GradContext):
    """A :class:`GradContext` that also names the gradient block it built."""

    def __init__(self, op: Operator, input_grad_names: dict[str, list[str]],
                 output_grad_names: dict[str, list[str]], grad_block: int) -> None:
        super().__init__(op, input_grad_names, output_grad_names)
        self.grad_block = grad_block


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
