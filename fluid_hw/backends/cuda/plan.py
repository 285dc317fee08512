"""Binding a block's ops to device steps, with elementwise chains fused.

:func:`plan_ops` walks ops in order.  Elementwise ops, activations, ``scale``
and ``fused_elemwise_activation`` become :class:`ChainGroup` steps: with
``fuse=True`` consecutive ones where each consumes the previous one's output
form one generated kernel (``mul`` + ``elementwise_add`` + ``relu`` runs as a
cuBLAS GEMM followed by one bias + relu kernel); with ``fuse=False`` each is a
kernel of its own.  An intermediate value is written to memory only when some
op outside the chain reads it (a backward op, another block), it is fetched or
persistable.  ``fc`` and ``conv2d_fusion`` (from the fusion passes) run as a
GEMM / im2col + GEMM followed by their generated epilogue chain.  Every other op
is a :class:`OpStep` (see :func:`.kernels.placement`).

Chains are planned from the program; the kernel is specialised at run time to
the operands' broadcast pattern (an operand is read in full or as a block of the
output's dims, e.g. a bias), compiled once per pattern.  A chain whose run-time
shapes do not fit one index space (an operand bigger than the flowing value,
a non-float32 dtype) runs its ops one by one instead, as their own kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ExecutionError
from ...ir.lod import LoDTensor
from ...ir.ops.common import aligned_shape, elementwise_shape
from ...ir.program import Block, Operator
from ...ir.scope import Scope
from ..cpu.context import lod_tensor, share_lod_plan, with_shared_lod
from ..cpu.kernels import get_kernel
from .codegen import (
    BINARY,
    UNARY,
    ChainSpec,
    KernelSource,
    Ref,
    Step,
    bcast_geometry,
    chain_kernel,
    fixed_kernels,
)
from .kernels import (
    DeviceKernelContext,
    _run_cpu_kernel,
    conv2d_forward,
    device_kernels,
    placement,
)

if TYPE_CHECKING:
    from .runtime import DeviceRuntime

__all__ = ["ChainGroup", "DevicePlan", "OpStep", "plan_ops", "run_plan"]

_FLOAT32 = 5  # VarType.FP32


# -- what a chainable op computes ----------------------------------------------------------


@dataclass(frozen=True)
class Micro:
    """One function of an op inside a chain.  ``args`` are variable names or
    ``("step", k)`` for the op's own micro step ``k``; ``out`` binds a variable."""

    fn: str
    args: tuple[Any, ...]
    consts: tuple[tuple[str, float], ...] = ()
    axis: int = -1
    out: str | None = None


def _f32(op: Operator, names: Iterable[str]) -> bool:
    for n in names:
        v = op.block._find_var_recursive(n)
        if v is None or v.dtype != _FLOAT32:
            return False
    return True


def micro_steps(op: Operator) -> list[Micro] | None:
    """The chain functions of ``op``, or None when it is not a float32 elementwise op."""
    t = op.type
    if t.startswith("elementwise_") and t[12:] in BINARY:
        x, y, out = op.input("X"), op.input("Y"), op.output("Out")
        if len(x) == len(y) == len(out) == 1 and _f32(op, x + y + out):
            return [Micro(t[12:], (x[0], y[0]), axis=op.attr("axis"), out=out[0])]
        return None
    if t in UNARY:
        x, out = op.input("X"), op.output("Out")
        if len(x) == len(out) == 1 and _f32(op, x + out):
            consts: tuple[tuple[str, float], ...] = ()
            if t == "leaky_relu":
                consts = (("alpha", float(op.attr("alpha"))),)
            elif t == "scale":
                consts = (("scale", float(op.attr("scale"))), ("bias", float(op.attr("bias"))),
                          ("bias_after_scale", float(bool(op.attr("bias_after_scale")))))
            return [Micro(t, (x[0],), consts, out=out[0])]
        return None
    if t == "fused_elemwise_activation":
        return _fused_elemwise(op)
    return None


def _fused_elemwise(op: Operator) -> list[Micro] | None:
    x, y, out = op.input("X"), op.input("Y"), op.output("Out")
    if not (len(x) == len(y) == len(out) == 1 and _f32(op, x + y + out)):
        return None
    try:
        from ...ir.ops.fused import functor_form  # the fusion passes' op definitions

        f0, f1 = list(op.attr("functor_list"))
        form = functor_form([f0, f1])
    except (ImportError, ValueError, TypeError):
        return None
    axis = op.attr("axis")
    inter = op.output("IntermediateOut")
    keep = inter[0] if inter and op.attr("save_intermediate_out") else None

    def unary(fn: str, arg: Any, out_name: str | None) -> Micro:
        consts: tuple[tuple[str, float], ...] = ()
        if fn == "scale":  # fused_elemwise_activation's scale functor: x * scale
            consts = (("scale", float(op.attr("scale"))), ("bias", 0.0),
                      ("bias_after_scale", 1.0))
        return Micro(fn, (arg,), consts, out=out_name)

    if form == "binary_of_unary":  # Out = f0(X, f1(Y))
        return [unary(f1, y[0], keep), Micro(f0[12:], (x[0], ("step", 0)), axis=axis,
                                             out=out[0])]
    return [Micro(f1[12:], (x[0], y[0]), axis=axis, out=keep),  # Out = f0(f1(X, Y))
            unary(f0, ("step", 0), out[0])]


# -- steps ------------------------------------------------------------------------------


def _wrap_error(op: Operator, index: int, e: BaseException) -> ExecutionError:
    outs = ", ".join(op.output_arg_names) or "none"
    return ExecutionError(f"op {op.type} #{index} in block {op.block.idx} (outputs: {outs}) "
                          f"failed on the device: {type(e).__name__}: {e}")


@dataclass
class OpStep:
    """One op: a device kernel, the shared CPU kernel, or the CPU kernel on the host."""

    ctx: DeviceKernelContext
    fn: Callable[[DeviceKernelContext], None]
    how: str  # "device" | "shared" | "host"

    @property
    def describe(self) -> str:
        return f"{self.ctx.op_type} [{self.how}]"

    def run(self, scope: Scope) -> None:
        ctx = self.ctx
        ctx.scope = scope
        try:
            self.fn(ctx)
        except ExecutionError:
            raise
        except (Exception, MemoryError) as e:
            raise _wrap_error(ctx.op, ctx.op_index, e) from e


def _host_kernel(ctx: DeviceKernelContext) -> None:
    ex = ctx.executor
    if ex is not None and hasattr(ex, "host_op_runs"):
        ex.host_op_runs[ctx.op_type] += 1
    _run_cpu_kernel(ctx, host=True)


def op_step(op: Operator, index: int, executor: Any, runtime: DeviceRuntime) -> OpStep:
    ctx = DeviceKernelContext(op, index, executor, runtime)
    how = placement(op.type)
    if how == "device":
        fn = device_kernels()[op.type]
    elif how == "shared":
        fn = get_kernel(op.type)
    else:
        get_kernel(op.type)  # an op without a CPU kernel fails here, at planning
        fn = _host_kernel
    share = share_lod_plan(op)  # the CPU executor's LoD sharing (Fluid's ShareLoD)
    if share is not None:
        fn = with_shared_lod(fn, *share)
    return OpStep(ctx, fn, how)


@dataclass
class ChainGroup:
    """Consecutive elementwise ops computed by one generated kernel."""

    ops: list[OpStep]  # the members, each able to run alone (the fallback)
    micros: list[tuple[Micro, list[Any]]]  # each micro step, args resolved to names / tmp k
    inputs: list[str]  # external variables read
    outputs: list[tuple[int, str]]  # (tmp index, variable) written
    runtime: DeviceRuntime
    #: input modes -> kernel
    kernels: dict[tuple[str, ...], KernelSource] = field(default_factory=dict)
    fallbacks: int = 0  # runs that fell back to one kernel per op

    @property
    def describe(self) -> str:
        return "chain(" + " -> ".join(m.fn for m, _ in self.micros) + ")"

    def spec(self, modes: tuple[str, ...]) -> KernelSource:
        k = self.kernels.get(modes)
        if k is None:
            steps = []
            for m, args in self.micros:
                refs = tuple(Ref("tmp", a) if isinstance(a, int) else
                             Ref("in", self.inputs.index(a)) for a in args)
                steps.append(Step(m.fn, refs, m.consts))
            k = chain_kernel(ChainSpec(tuple(steps), modes, tuple(t for t, _ in self.outputs)))
            self.kernels[modes] = k
        return k

    def geometry(self, shapes: dict[str, tuple[int, ...]]
                 ) -> tuple[tuple[int, ...], tuple[str, ...], list[int]] | None:
        """(index space, input modes, bcast args) for these input shapes, or None."""
        tmp: list[tuple[int, ...]] = []
        uses: dict[str, set[tuple[int, ...]]] = {n: set() for n in self.inputs}
        for m, args in self.micros:
            sh = [tmp[a] if isinstance(a, int) else shapes[a] for a in args]
            if len(sh) == 1:
                tmp.append(tuple(sh[0]))
            else:
                try:
                    tmp.append(tuple(elementwise_shape(sh[0], sh[1], m.axis)))
                except Exception:
                    return None
        space = tmp[-1]
        if any(t != space for t in tmp):
            return None
        for m, args in self.micros:
            for a in args:
                if isinstance(a, str):
                    s = shapes[a]
                    al = s if len(s) == len(space) else (
                        aligned_shape(s, len(space), m.axis) if len(s) < len(space) else None)
                    if al is None:
                        return None
                    uses[a].add(tuple(al))
        modes, extra = [], []
        for n in self.inputs:
            (al, *rest) = uses[n]
            if rest:
                return None
            if al == space:
                modes.append("full")
                continue
            g = bcast_geometry(al, space)
            if g is None:
                return None
            modes.append("bcast")
            extra += list(g)
        return space, tuple(modes), extra

    def run(self, scope: Scope) -> None:
        c0 = self.ops[0].ctx
        vals = []
        for n in self.inputs:
            c0.scope = scope
            vals.append(c0._lookup(n))
        arrays: list[Any] = [v.data if isinstance(v, LoDTensor) else v for v in vals]
        geo = None
        if all(getattr(a, "dtype", None) == np.float32 for a in arrays):
            geo = self.geometry({n: tuple(a.shape) for n, a in zip(self.inputs, arrays)})
        if geo is None:
            self.fallbacks += 1
            for s in self.ops:
                s.run(scope)
            return
        space, modes, extra = geo
        xp = self.runtime.xp
        size = int(np.prod(space))
        outs = [xp.empty(space, dtype=np.float32) for _ in self.outputs]
        ins = [xp.ascontiguousarray(a) for a in arrays]
        try:
            self.runtime.launch(self.spec(modes), size, [*ins, *outs, size, *extra])
        except ExecutionError:
            raise
        except (Exception, MemoryError) as e:
            raise _wrap_error(self.ops[0].ctx.op, self.ops[0].ctx.op_index, e) from e
        lods = self._lods(vals)
        for (_, name), arr in zip(self.outputs, outs):
            lod = lods.get(name)
            scope.vars[name] = lod_tensor(arr, lod) if lod else arr

    def _lods(self, vals: Sequence[Any]) -> dict[str, list[list[int]]]:
        """The LoD each written output carries: elementwise ops keep X's, activations
        none, scale keeps its input's (the CPU kernels' rules)."""
        known: dict[Any, list[list[int]] | None] = {
            n: (v.lod() if isinstance(v, LoDTensor) and v.lod() else None)
            for n, v in zip(self.inputs, vals)}
        tmp_lod: list[list[list[int]] | None] = []
        for m, args in self.micros:
            src = args[0]
            lod = tmp_lod[src] if isinstance(src, int) else known.get(src)
            keep = m.fn in BINARY or m.fn == "scale"
            tmp_lod.append(lod if keep else None)
        return {name: lod for k, name in self.outputs if (lod := tmp_lod[k])}


@dataclass
class GemmEpilogue:
    """``fc`` / ``conv2d_fusion``: GEMM (conv: im2col + GEMM), then a generated
    bias + activation epilogue kernel."""

    step: OpStep
    runtime: DeviceRuntime
    kernels: dict[tuple[str, ...], KernelSource] = field(default_factory=dict)

    @property
    def describe(self) -> str:
        return f"{self.step.ctx.op_type}(gemm + epilogue)"

    def run(self, scope: Scope) -> None:
        ctx = self.step.ctx
        ctx.scope = scope
        try:
            self._run(ctx)
        except ExecutionError:
            raise
        except (Exception, MemoryError) as e:
            raise _wrap_error(ctx.op, ctx.op_index, e) from e

    def _run(self, ctx: DeviceKernelContext) -> None:
        xp = ctx.xp
        conv = ctx.op_type == "conv2d_fusion"
        x, lod = ctx.input_with_lod("Input")
        w = ctx.input("Filter" if conv else "W")
        bias = ctx.input("Bias") if ctx.has_input("Bias") else None
        act = ctx.attrs["activation" if conv else "activation_type"]
        arrays = [x, w] + ([bias] if bias is not None else [])
        if any(a.dtype != np.float32 for a in arrays) or (conv and x.ndim != 4):
            _host_kernel(ctx)
            return
        if conv:
            pre = conv2d_forward(ctx, x, w)
            space = pre.shape
            post = int(np.prod(space[2:]))
        else:
            k = ctx.attrs["in_num_col_dims"]
            x2 = x if x.ndim == 2 and k == 1 else x.reshape(int(np.prod(x.shape[:k])), -1)
            pre = xp.matmul(x2, w)  # cuBLAS
            space = pre.shape
            post = 1
        steps: list[Step] = []
        inputs = ["full"]
        if bias is not None:
            inputs.append("bcast")
            steps.append(Step("add", (Ref("in", 0), Ref("in", 1))))
        if act not in ("", "identity"):
            steps.append(Step(act, (Ref("tmp", len(steps) - 1) if steps else Ref("in", 0),)))
        if steps:
            modes = tuple(inputs)
            kern = self.kernels.get(modes)
            if kern is None:
                kern = self.kernels[modes] = chain_kernel(
                    ChainSpec(tuple(steps), modes, (len(steps) - 1,)))
            out = xp.empty(space, dtype=np.float32)
            n = int(np.prod(space))
            extra = [int(bias.size), post] if bias is not None else []
            args = [pre, *([xp.ascontiguousarray(bias)] if bias is not None else []), out, n,
                    *extra]
            self.runtime.launch(kern, n, args)
        else:
            out = pre
        if conv:
            ctx.set_output("Output", out)
        else:
            if x.ndim != 2:
                out = out.reshape(*x.shape[:ctx.attrs["in_num_col_dims"]], w.shape[1])
            ctx.set_output("Out", out, lod=lod)


# -- plans --------------------------------------------------------------------------------


@dataclass
class DevicePlan:
    block: Block
    steps: list[Any]
    random_ctxs: list[DeviceKernelContext]
    runs: int = 0

    def describe(self) -> list[str]:
        return [s.describe for s in self.steps]

    def kernels(self) -> list[KernelSource]:
        out = []
        for s in self.steps:
            out += list(getattr(s, "kernels", {}).values())
        return out


def _readers(block: Block) -> dict[str, int]:
    """How many ops of the whole program read each variable."""
    count: dict[str, int] = {}
    for b in block.program.blocks:
        for op in b.ops:
            for n in set(op.input_arg_names):
                count[n] = count.get(n, 0) + 1
    return count


def plan_ops(block: Block, op_indices: Sequence[int], executor: Any, runtime: DeviceRuntime,
             keep: Iterable[str] = (), fuse: bool = True) -> DevicePlan:
    """Bind ``block.ops[i]`` (``i`` in ``op_indices``, ascending) to device steps.

    ``keep``: variables that must be written even when no op reads them (fetch
    targets); persistable variables are always written.
    """
    keep = set(keep) | {v.name for v in block.vars.values() if v.persistable}
    readers = _readers(block)
    steps: list[Any] = []
    rand: list[DeviceKernelContext] = []
    chain: list[tuple[int, OpStep, list[Micro]]] = []

    def close() -> None:
        if chain:
            steps.append(_make_chain(chain, readers, keep, runtime))
            chain.clear()

    for i in op_indices:
        op = block.ops[i]
        micros = micro_steps(op)
        if micros is not None:
            st = op_step(op, i, executor, runtime)
            extend = fuse and chain and chain[-1][0] == i - 1 and any(
                m.out in {a for mm in micros for a in mm.args if isinstance(a, str)}
                for m in chain[-1][2] if m.out)
            if not extend:
                close()
            chain.append((i, st, micros))
            continue
        close()
        st = op_step(op, i, executor, runtime)
        if "seed" in st.ctx.attrs:
            rand.append(st.ctx)
        if op.type in ("fc", "conv2d_fusion") and st.how == "host":
            steps.append(GemmEpilogue(st, runtime))
        else:
            steps.append(st)
    close()
    plan = DevicePlan(block, steps, rand)
    runtime.prepare([*_predict_kernels(plan), *fixed_kernels()])
    return plan


def _make_chain(chain: list[tuple[int, OpStep, list[Micro]]], readers: dict[str, int],
                keep: set[str], runtime: DeviceRuntime) -> ChainGroup:
    micros: list[tuple[Micro, list[Any]]] = []
    produced: dict[str, int] = {}
    inputs: list[str] = []
    internal_reads: dict[str, int] = {}  # chain ops (not uses) reading a produced value
    for _, st, ms in chain:
        base = len(micros)
        for n in set(st.ctx.op.input_arg_names) & produced.keys():
            internal_reads[n] = internal_reads.get(n, 0) + 1
        for m in ms:
            args: list[Any] = []
            for a in m.args:
                if isinstance(a, tuple):
                    args.append(base + a[1])
                elif a in produced:
                    args.append(produced[a])
                else:
                    if a not in inputs:
                        inputs.append(a)
                    args.append(a)
            micros.append((m, args))
            if m.out is not None:
                produced[m.out] = len(micros) - 1
    last = chain[-1][2][-1].out
    outputs = []
    for name, k in produced.items():
        outside = readers.get(name, 0) - internal_reads.get(name, 0)
        if name == last or name in keep or outside > 0:
            outputs.append((k, name))
    return ChainGroup([s for _, s, _ in chain], micros, inputs, outputs, runtime)


def _predict_kernels(plan: DevicePlan) -> list[KernelSource]:
    """Kernels the chains will most likely need, from declared shapes (-1: the same
    batch size everywhere), so they compile together before the first run."""
    out: list[KernelSource] = []
    for s in plan.steps:
        if not isinstance(s, ChainGroup):
            continue
        blk = s.ops[0].ctx.op.block
        shapes = {}
        for n in s.inputs:
            v = blk._find_var_recursive(n)
            if v is None:
                break
            shapes[n] = tuple(7919 if d == -1 else d for d in v.shape)
        else:
            geo = s.geometry(shapes)
            if geo is not None:
                out.append(s.spec(geo[1]))
    return out


def run_plan(plan: DevicePlan, scope: Scope) -> None:
    for c in plan.random_ctxs:
        c.step = plan.runs
    plan.runs += 1
    for s in plan.steps:
        s.run(scope)
