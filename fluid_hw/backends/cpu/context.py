"""What a CPU kernel sees: one prepared op, bound to the scope of the current run."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ExecutionError
from ...ir import dtypes
from ...ir.grad import EMPTY_VAR_NAME
from ...ir.lod import LoDTensor

if TYPE_CHECKING:
    from ...ir.program import Operator
    from ...ir.scope import Scope

__all__ = ["CHECK_KERNELS", "KernelContext", "lod_tensor", "share_lod_plan", "with_shared_lod"]

#: check every kernel output against its variable's declared dtype and shape
CHECK_KERNELS = os.environ.get("FLUID_HW_CHECK_KERNELS", "") not in ("", "0")


def _levels_up(block: Any, name: str) -> int:
    """How many parent links from ``block`` to the block that declares ``name``."""
    up, b = 0, block
    while b is not None and up <= len(block.program.blocks):
        if name in b.vars:
            return up
        b, up = b.parent_block, up + 1
    return 0


def _array(v: Any) -> Any:
    """A scope value as a kernel reads it: a LoDTensor's array, anything else as is."""
    return v.data if isinstance(v, LoDTensor) else v


class KernelContext:
    """Prepared once per op; ``scope`` is rebound on every run.

    Kernels read ``ctx.input("X")`` (a numpy array; LoD tensors unwrapped),
    ``ctx.attrs[...]`` and write ``ctx.set_output("Out", array)``.  ``ctx.xp`` is
    the array module (numpy here) so kernels can be shared with other back ends.
    """

    xp = np

    def __init__(self, op: Operator, index: int, executor: Any = None) -> None:
        self.op = op
        self.op_type = op.type
        self.op_index = index
        self.block_idx = op.block.idx
        #: stored attributes plus schema defaults for those a loaded program lacks
        self.attrs: dict[str, Any] = op.all_attrs(with_defaults=True)
        self.in_names: dict[str, list[str]] = op.inputs
        self.out_names: dict[str, list[str]] = op.outputs
        self.executor = executor
        self.scope: Scope = None  # type: ignore[assignment]
        self.step = 0  # how many times this op ran: varies random streams across runs
        self._out_info: dict[str, tuple[np.dtype | None, tuple[int, ...]]] = {}
        #: outputs declared in an ancestor block -> how many blocks up (sub-block ops only)
        self._out_up: dict[str, int] = {}
        for names in self.out_names.values():
            for n in names:
                v = op.block._find_var_recursive(n)
                if v is not None:
                    dt = dtypes.to_numpy(v.dtype) if v.dtype in dtypes.TENSOR_DTYPES else None
                    self._out_info[n] = (dt, v.shape)
                    up = _levels_up(op.block, n)
                    if up:
                        self._out_up[n] = up

    # -- inputs --------------------------------------------------------
    def _lookup(self, name: str) -> Any:
        v = self.scope.vars.get(name)
        if v is None:
            v = self.scope.find_value(name)
            if v is None:
                raise ExecutionError(
                    f"op {self.op_type} #{self.op_index}: input {name!r} has no value; "
                    "feed it, or run the startup program to initialise parameters"
                )
        return v

    def has_input(self, slot: str) -> bool:
        return bool(self.in_names.get(slot))

    def input_value(self, slot: str, i: int = 0) -> Any:
        """The raw scope value (LoDTensor, list for tensor arrays...)."""
        return self._lookup(self.in_names[slot][i])

    def input(self, slot: str, i: int = 0) -> np.ndarray:
        return _array(self._lookup(self.in_names[slot][i]))

    def inputs(self, slot: str) -> list[np.ndarray]:
        return [_array(self._lookup(n)) for n in self.in_names.get(slot, ())]

    def input_with_lod(self, slot: str, i: int = 0) -> tuple[np.ndarray, list[list[int]] | None]:
        """The array and its LoD (None when it has none), in one lookup."""
        v = self._lookup(self.in_names[slot][i])
        return _array(v), ((v._lod or None) if isinstance(v, LoDTensor) else None)

    def input_lod(self, slot: str, i: int = 0) -> list[list[int]]:
        v = self._lookup(self.in_names[slot][i])
        return v.lod() if isinstance(v, LoDTensor) else []

    def attr(self, name: str) -> Any:
        return self.attrs[name]

    # -- outputs -------------------------------------------------------
    def has_output(self, slot: str) -> bool:
        """Whether the slot has a variable to write (``@EMPTY@`` means: not wanted)."""
        names = self.out_names.get(slot)
        return bool(names and any(n != EMPTY_VAR_NAME for n in names))

    def output_dtype(self, slot: str, i: int = 0) -> np.dtype:
        dt = self._out_info[self.out_names[slot][i]][0]
        assert dt is not None
        return dt

    def set_output(self, slot: str, value: Any, i: int = 0,
                   lod: list[list[int]] | None = None) -> None:
        names = self.out_names.get(slot)
        if not names:
            return  # optional output not requested
        name = names[i]
        if name == EMPTY_VAR_NAME:
            return
        if CHECK_KERNELS:
            self._check_output(name, value)
        scope = self.scope if not self._out_up else self.owner_scope(name)
        scope.vars[name] = LoDTensor(value, lod) if lod else value

    def owner_scope(self, name: str) -> Scope:
        """The scope that holds variable ``name`` when this op writes it.

        A sub-block runs in a child scope of its op's scope (one level per block
        level), so a variable declared ``k`` blocks up lives ``k`` scopes up: a
        ``while`` body that increments an outer counter updates the outer value.
        """
        scope = self.scope
        for _ in range(self._out_up.get(name, 0)):
            if scope.parent is None:
                break
            scope = scope.parent
        return scope

    def output_value(self, slot: str, i: int = 0) -> Any:
        """The current value of output ``slot`` (None when it has none): for ops that
        update a tensor array in place."""
        name = self.out_names[slot][i]
        return self.owner_scope(name).vars.get(name)

    def set_outputs(self, slot: str, values: list[Any]) -> None:
        for i, v in enumerate(values):
            self.set_output(slot, v, i)

    def _check_output(self, name: str, value: Any) -> None:
        info = self._out_info.get(name)
        if info is None or not isinstance(value, np.ndarray):
            return
        dt, shape = info
        where = f"op {self.op_type} #{self.op_index}: output {name!r}"
        if dt is not None and value.dtype != dt:
            raise ExecutionError(f"{where}: kernel produced {value.dtype}, declared {dt}")
        if len(shape) != value.ndim or any(
            d != -1 and d != s for d, s in zip(shape, value.shape)
        ):
            raise ExecutionError(f"{where}: kernel produced shape {list(value.shape)}, "
                                 f"declared {list(shape)}")

    # -- randomness ----------------------------------------------------
    def rng(self) -> np.random.Generator:
        """A generator for this op: deterministic when the op's ``seed`` attr is set
        (different for each op and each run), else drawn from the executor's."""
        seed = self.attrs.get("seed", 0)
        if seed:
            return np.random.default_rng([int(seed) & 0xFFFFFFFF, self.block_idx,
                                          self.op_index, self.step])
        return self.executor.rng if self.executor is not None else np.random.default_rng()


# -- LoD sharing (Fluid's ShareLoD) ----------------------------------------------------

def share_lod_plan(op: Operator) -> tuple[str, tuple[str, ...]] | None:
    """``(source input, outputs)`` for an op whose outputs are declared with LoD
    (lod_level > 0) and that reads a LoD input; None otherwise (then it costs nothing).

    Row-preserving kernels (fc/mul, elementwise, activations, their grads...) need not
    know about LoD: after such a kernel, an output it left without LoD gets the source
    input's LoD when it has the same number of rows, as Fluid's ``ShareLoD``.
    """
    lod_tensor = dtypes.VarType.LOD_TENSOR

    def has_lod(name: str) -> bool:
        v = op.block._find_var_recursive(name)
        return v is not None and v.type == lod_tensor and v.lod_level > 0

    src = next((n for n in op.input_arg_names if has_lod(n)), None)
    if src is None:
        return None
    outs = tuple(n for n in op.output_arg_names if n != EMPTY_VAR_NAME and has_lod(n))
    return (src, outs) if outs else None


def lod_tensor(data: Any, lod: Any) -> LoDTensor:
    """A LoDTensor around ``data`` as it is: any array object, numpy or a device
    array (``LoDTensor(data, lod)`` would convert it to numpy)."""
    t = LoDTensor()
    t.data = data
    t._lod = [list(map(int, lv)) for lv in lod]
    return t


def with_shared_lod(fn: Any, src: str, outs: tuple[str, ...]) -> Any:
    """``fn`` followed by LoD sharing from ``src`` to ``outs`` (see :func:`share_lod_plan`).

    Works on any array module's values (the CUDA back end wraps its device arrays
    with it too): an output that is an array (not a LoDTensor nor a tensor array)
    with ``src``'s row count is wrapped, without a copy, with ``src``'s LoD.
    """

    def kernel(ctx: KernelContext) -> None:
        fn(ctx)
        v = ctx.scope.find_value(src)
        if not isinstance(v, LoDTensor) or not v._lod or v.data is None:
            return
        rows = v.data.shape[0] if v.data.ndim else -1
        for n in outs:
            scope = ctx.owner_scope(n)
            o = scope.vars.get(n)
            if o is not None and not isinstance(o, (LoDTensor, list)) and \
                    getattr(o, "ndim", 0) > 0 and o.shape[0] == rows:
                scope.vars[n] = lod_tensor(o, v._lod)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__wrapped__ = fn  # type: ignore[attr-defined]
    return kernel

