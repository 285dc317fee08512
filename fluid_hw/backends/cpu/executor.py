"""The CPU reference executor: runs a block op by op with numpy kernels.

It is the specification of every op: other back ends are tested against it.
A program is verified and its ops bound to kernels once per program version
(:meth:`Executor.prepare`); :meth:`Executor.run` then only moves data.

It also owns what every back end's ``run`` does around the ops, so that they
agree: :func:`target_name` (a fetch-list entry's name), :func:`resolve_targets`
(verify, look up feeds and fetches), :func:`with_feed_fetch` (the program with
feed and fetch ops), :func:`check_feed` (a fed value against its variable) and
:func:`fetch_value` (what a fetched value is returned as).  A back end's executor
subclasses :class:`Executor` and overrides the two hooks :meth:`Executor._bind`
(what a prepared program is bound to) and :meth:`Executor._execute` (one run);
``run``'s prologue and epilogue are shared.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...errors import ExecutionError, FeedError, FetchError, FluidError
from ...ir import dtypes
from ...ir.default_programs import default_main_program
from ...ir.lod import LoDTensor, check_lod
from ...ir.program import Block, Program, Variable, VarType
from ...ir.scope import Scope, global_scope
from ...ir.verifier import verify_program
from .context import KernelContext, share_lod_plan, with_shared_lod
from .fetched import fetched
from .kernels import get_kernel
from .place import CPUPlace

__all__ = [
    "PLACE_EXECUTORS", "Executor", "FeedTarget", "OpHook", "PreparedBlock", "PreparedRun",
    "check_feed", "fetch_value", "prepare_block", "resolve_targets", "run_prepared_block",
    "target_name", "with_feed_fetch",
]


@dataclass
class PreparedBlock:
    """A block's ops bound to kernels, ready to run in any scope."""

    block: Block
    ops: list[tuple[Any, KernelContext]]
    random_ctxs: list[KernelContext] = field(default_factory=list)
    runs: int = 0


def prepare_block(block: Block, executor: Any = None) -> PreparedBlock:
    ops = []
    rand = []
    for i, op in enumerate(block.ops):
        try:
            fn = get_kernel(op.type)
        except FluidError as e:
            raise ExecutionError(f"block {block.idx}, op #{i} ({op.type}): {e}") from None
        ctx = KernelContext(op, i, executor)
        plan = share_lod_plan(op)
        if plan is not None:
            fn = with_shared_lod(fn, *plan)
        ops.append((fn, ctx))
        if "seed" in ctx.attrs:
            rand.append(ctx)
    return PreparedBlock(block, ops, rand)


OpHook = Callable[[KernelContext], None]


def run_prepared_block(pb_: PreparedBlock, scope: Scope,
                       hooks: Sequence[OpHook] = ()) -> None:
    """Run every op of a prepared block in ``scope``; wrap kernel failures.

    ``hooks`` are called after each op with its (scope-bound) context: the way to
    trace what kernels actually received, at no cost when there are none.
    """
    for c in pb_.random_ctxs:
        c.step = pb_.runs
    pb_.runs += 1
    ctx = None
    try:
        if hooks:
            for fn, ctx in pb_.ops:
                ctx.scope = scope
                fn(ctx)
                for h in hooks:
                    h(ctx)
        else:
            for fn, ctx in pb_.ops:
                ctx.scope = scope
                fn(ctx)
    except ExecutionError:
        raise
    except (Exception, MemoryError) as e:
        assert ctx is not None
        outs = ", ".join(ctx.op.output_arg_names) or "none"
        raise ExecutionError(
            f"op {ctx.op_type} #{ctx.op_index} in block {ctx.block_idx} (outputs: {outs}) "
            f"failed: {type(e).__name__}: {e}"
        ) from e


@dataclass(frozen=True)
class FeedTarget:
    """What a fed value is checked against (read from the var desc once)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int, ...]
    lod_level: int

    @staticmethod
    def of(var: Variable) -> FeedTarget:
        dt = dtypes.to_numpy(var.dtype) if var.dtype in dtypes.TENSOR_DTYPES else None
        return FeedTarget(var.name, dt, tuple(var.shape), var.lod_level)


def resolve_targets(program: Program, feed_names: Sequence[str],
                    fetch_names: Sequence[str]) -> tuple[list[FeedTarget], list[bool]]:
    """Verify ``program`` and look up what is fed and fetched: every back end's first
    step of preparing a run.  Returns the feed targets and, per fetch target, whether
    it is persistable (its value must be copied out, not lent)."""
    try:
        verify_program(program)
    except FluidError as e:
        raise ExecutionError(f"program cannot run: {e}") from None
    gb = program.global_block()
    feeds = []
    for n in feed_names:
        v = gb._find_var_recursive(n)
        if v is None:
            data = [v.name for v in gb.vars.values() if not v.persistable][:20]
            raise FeedError(f"feed {n!r} is not a variable of the program; "
                            f"its non-persistable variables are: {', '.join(data)}")
        feeds.append(FeedTarget.of(v))
    persist = []
    for n in fetch_names:
        v = gb._find_var_recursive(n)
        if v is None:
            raise FetchError(f"fetch target {n!r} is not a variable of the program's "
                             "global block")
        persist.append(v.persistable)
    return feeds, persist


@dataclass
class PreparedRun:
    """A program made ready to run with given feeds and fetches, once per program
    version (:meth:`Executor.prepare`); a back end's executor extends it with what
    its :meth:`Executor._bind` binds (kernels, a device plan)."""

    source: Program
    version: int
    #: ``source`` with feed ops in front and fetch ops at the end (:func:`with_feed_fetch`)
    program: Program
    feed_vars: list[FeedTarget]
    fetch_names: list[str]
    #: per fetch target: persistable, so its value is copied out, not lent
    persistable_fetch: list[bool]
    feed_var_name: str
    fetch_var_name: str
    #: the global block's non-persistable tensor arrays: emptied at the start of each
    #: run (Fluid creates them afresh in each run's local scope)
    arrays: list[str]

    def shared_fields(self) -> dict[str, Any]:
        """These fields by name: what a back end's extension is built from."""
        return {f.name: getattr(self, f.name) for f in fields(PreparedRun)}


@dataclass
class _Prepared(PreparedRun):
    main: PreparedBlock


#: place type name -> "module:Executor class" of the back end that runs it
PLACE_EXECUTORS: dict[str, str] = {
    "CUDAPlace": "fluid_hw.backends.cuda.executor:CUDAExecutor",
    "FPGAPlace": "fluid_hw.backends.fpga.place:FPGAExecutor",
}


class Executor:
    """Fluid's ``Executor``: ``exe.run(program, feed={...}, fetch_list=[...])``."""

    def __new__(cls, place: Any = None, *args: Any, **kwargs: Any) -> Executor:
        # Executor(CUDAPlace(i)) is the CUDA back end's executor: back ends are found
        # by name (PLACE_EXECUTORS), so this reference back end imports none of them
        spec = PLACE_EXECUTORS.get(type(place).__name__) if cls is Executor else None
        if spec is not None:
            module, _, name = spec.partition(":")
            return super().__new__(getattr(importlib.import_module(module), name))
        return super().__new__(cls)

    def __init__(self, place: Any = None, seed: int | None = None) -> None:
        self.place = place if place is not None else CPUPlace()
        self.rng = np.random.default_rng(seed)
        self._cache: dict[tuple[Any, ...], PreparedRun] = {}
        self._blocks: dict[tuple[int, int], tuple[Program, int, PreparedBlock]] = {}
        #: called after every op (see :func:`run_prepared_block`); empty = no cost
        self.hooks: list[OpHook] = []
        #: a ``while`` op stopping after this many steps raises ExecutionError; None
        #: (Fluid's behaviour): a loop whose condition stays true runs forever
        self.max_while_steps: int | None = None

    def close(self) -> None:
        self._cache.clear()
        self._blocks.clear()

    def run_block(self, block: Block, scope: Scope) -> None:
        """Run one block (e.g. a control-flow op's sub-block) in ``scope``.

        The block is bound to kernels once per program version and cached.
        """
        program = block.program
        key = (id(program), block.idx)
        hit = self._blocks.get(key)
        if hit is None or hit[0] is not program or hit[1] != program._version:
            hit = (program, program._version, prepare_block(block, self))
            self._blocks[key] = hit
        run_prepared_block(hit[2], scope, self.hooks)

    # -- preparation ---------------------------------------------------
    def prepare(self, program: Program, feed_names: Sequence[str], fetch_names: Sequence[str],
                feed_var_name: str = "feed", fetch_var_name: str = "fetch") -> PreparedRun:
        """``program`` ready to run with these feeds and fetches: verified, targets
        looked up, feed and fetch ops added, then bound by :meth:`_bind`; cached per
        program version."""
        key = (id(program), tuple(feed_names), tuple(fetch_names), feed_var_name, fetch_var_name)
        hit = self._cache.get(key)
        if hit is not None and hit.source is program and hit.version == program._version:
            return hit
        feed_vars, persist = resolve_targets(program, feed_names, fetch_names)
        run_prog = with_feed_fetch(program, list(feed_names), list(fetch_names),
                                   feed_var_name, fetch_var_name)
        arrays = [v.name for v in program.global_block().vars.values()
                  if v.type == VarType.LOD_TENSOR_ARRAY and not v.persistable]
        prepared = self._bind(PreparedRun(program, program._version, run_prog, feed_vars,
                                          list(fetch_names), persist, feed_var_name,
                                          fetch_var_name, arrays))
        self._cache[key] = prepared
        return prepared

    def _bind(self, run: PreparedRun) -> PreparedRun:
        """The back-end hook of :meth:`prepare`: bind ``run.program`` to what runs it.
        Here: the global block's ops to CPU kernels."""
        return _Prepared(**run.shared_fields(), main=prepare_block(run.program.global_block(),
                                                                   self))

    # -- running -------------------------------------------------------
    def run(
        self,
        program: Program | None = None,
        feed: Mapping[str, Any] | None = None,
        fetch_list: Sequence[Any] | None = None,
        feed_var_name: str = "feed",
        fetch_var_name: str = "fetch",
        scope: Scope | None = None,
        return_numpy: bool = True,
        use_program_cache: bool = True,
    ) -> list[Any]:
        """Run ``program`` (default: the default main program) in ``scope`` (default:
        the global scope) with ``feed``; the values of ``fetch_list`` (variables or
        names), as :func:`fetch_value` returns them.

        Every back end's executor runs this: only :meth:`_bind` and :meth:`_execute`
        are its own.
        """
        if program is None:
            program = default_main_program()
        readers = getattr(getattr(program, "_program", program), "_py_readers", ())
        if readers and (feed is None or isinstance(feed, Mapping)):  # fluid.layers.py_reader
            feed = dict(feed or {})
            for reader in readers:
                feed.update(reader._next_feed(feed))
        runner = getattr(program, "_run_with", None)
        if runner is not None:  # e.g. a CompiledProgram (data parallel)
            return runner(self, feed=feed, fetch_list=fetch_list, scope=scope,
                          return_numpy=return_numpy)
        if not isinstance(program, Program):
            raise ExecutionError(f"Executor.run expects a Program, got {type(program).__name__}")
        feed = dict(feed or {})
        fetch_names = [target_name(f) for f in (fetch_list or [])]
        if scope is None:
            scope = global_scope()
        if not use_program_cache:
            self._cache.clear()
        prep = self.prepare(program, list(feed), fetch_names, feed_var_name, fetch_var_name)
        fed = [check_feed(v, feed[v.name]) for v in prep.feed_vars]
        results = self._execute(prep, fed, scope)
        out: list[Any] = []
        for name, val, persist in zip(fetch_names, results, prep.persistable_fetch):
            if val is None:
                raise FetchError(f"fetch target {name!r} was never computed")
            out.append(fetch_value(name, val, return_numpy, persist))
        return out

    def _execute(self, prep: PreparedRun, feeds: list[Any], scope: Scope) -> list[Any]:
        """The back-end hook of :meth:`run`: run ``prep`` in ``scope`` with ``feeds``
        (checked values, one per ``prep.feed_vars``); the fetch targets' values (None
        for one never computed), which ``run`` converts with :func:`fetch_value`."""
        assert isinstance(prep, _Prepared)
        scope.vars[prep.feed_var_name] = feeds
        scope.vars[prep.fetch_var_name] = [None] * len(prep.fetch_names)
        for n in prep.arrays:
            scope.vars[n] = []
        run_prepared_block(prep.main, scope, self.hooks)
        return scope.vars[prep.fetch_var_name]


def fetch_value(name: str, val: Any, return_numpy: bool, copy: bool = False) -> Any:
    """What ``run`` returns for fetch target ``name`` holding ``val``.

    A tensor is a numpy array (``return_numpy``) or a :class:`LoDTensor`; a LoD tensor
    array (a list in the scope) is, as in Fluid, a list of those, one per element.
    ``copy``: the value is persistable, so the caller gets a copy, not the scope's own.
    """
    if isinstance(val, list):
        return [fetch_value(f"{name}[{i}]", v, return_numpy, copy) for i, v in enumerate(val)]
    if isinstance(val, LoDTensor):
        if val.data is None:
            raise FetchError(f"fetch target {name!r} holds an empty LoDTensor (no data)")
        if not return_numpy:
            return val
        return fetched(val.data.copy() if copy else val.data)
    try:
        arr = np.asarray(val)
    except (ValueError, TypeError) as e:
        raise FetchError(f"fetch target {name!r} holds a {type(val).__name__}, which is "
                         f"not a tensor ({e})") from None
    if arr.dtype == object:
        raise FetchError(f"fetch target {name!r} holds a {type(val).__name__}, which is "
                         "not a tensor")
    if return_numpy:
        return fetched(arr.copy() if copy and arr is val else arr)
    return LoDTensor(arr)


def target_name(t: Any) -> str:
    """The variable name of a ``fetch_list`` entry (a Variable or a name)."""
    if isinstance(t, str):
        return t
    if isinstance(t, Variable):
        return t.name
    raise FetchError(f"fetch_list entries must be Variables or names, got {t!r}")


def with_feed_fetch(program: Program, feed_names: list[str], fetch_names: list[str],
                    feed_var: str, fetch_var: str) -> Program:
    """A copy of ``program`` with feed ops in front and fetch ops at the end.

    A program that already feeds and fetches exactly these names (a loaded
    inference model) is run as it is.
    """
    feeds, fetches = program.get_feed_target_names(), program.get_fetch_target_names()
    if (feeds or fetches) and (feeds, fetches) == (feed_names, fetch_names) and all(
        sorted(op.attr("col") for op in program.global_block().ops if op.type == t)
        == list(range(len(names))) for t, names in (("feed", feeds), ("fetch", fetches))
    ):  # a damaged file's cols may skip or repeat a position: rebuilt then
        return program
    p = program.clone()
    b = p.global_block()
    for i in reversed([i for i, op in enumerate(b.ops) if op.type in ("feed", "fetch")]):
        b._remove_op(i)
    p.add_feed_fetch_ops(feed_names, fetch_names, feed_var, fetch_var)
    return p


def convert_feed(name: str, arr: np.ndarray, want: np.dtype) -> np.ndarray:
    """``arr`` as ``want``, where Fluid 1.5 converts a fed value too: between float
    types (float64 data for a float32 variable, Python floats' default), between
    integer types and from integers to floats when every value is held exactly.
    Anything else (floats to integers, booleans, strings, values out of range) is a
    :class:`FeedError` naming the variable and the fix."""
    kind, to = arr.dtype.kind, want.kind
    if kind == "f" and to == "f":
        with np.errstate(over="ignore"):
            out = arr.astype(want)
        if np.isfinite(arr).all() and not np.isfinite(out).all():
            raise FeedError(f"feed {name!r}: {arr.dtype} values overflow {want}; scale "
                            f"them or declare the variable {arr.dtype}")
        return out
    if kind in "iu" and to in "iuf":
        out = arr.astype(want)
        if arr.size and not np.array_equal(out.astype(arr.dtype), arr):
            raise FeedError(f"feed {name!r}: {arr.dtype} values do not fit in {want} (the "
                            f"variable's dtype) exactly; declare the variable {arr.dtype}")
        return out
    raise FeedError(f"feed {name!r}: got {arr.dtype} data, the variable is {want}; "
                    f"convert it with .astype('{want}')")


def check_feed(var: FeedTarget, value: Any) -> Any:
    """Validate a fed value against its variable; return what goes into the scope."""
    lod: list[list[int]] = []
    if isinstance(value, LoDTensor):
        lod = value.lod()
        arr = value.data
        if arr is None:
            raise FeedError(f"feed {var.name!r}: the LoDTensor holds no data")
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise FeedError(f"feed {var.name!r}: cannot convert {type(value).__name__} "
                            f"to an array ({e})") from None
    want = var.dtype
    if want is not None:
        if arr.dtype != want:
            arr = convert_feed(var.name, arr, np.dtype(want))
        shape = var.shape
        if shape and (len(shape) != arr.ndim or any(
                d != -1 and d != s for d, s in zip(shape, arr.shape))):
            raise FeedError(f"feed {var.name!r}: got shape {list(arr.shape)}, the variable "
                            f"is declared {list(shape)} (-1 = any)")
    if var.lod_level and not lod:
        raise FeedError(f"feed {var.name!r}: the variable has lod_level {var.lod_level}; "
                        "feed a LoDTensor (fluid_hw.create_lod_tensor)")
    if lod:
        if var.lod_level and len(lod) != var.lod_level:
            raise FeedError(f"feed {var.name!r}: got {len(lod)} LoD level(s), the variable "
                            f"has lod_level {var.lod_level}")
        check_lod(lod, arr.shape[0], f"feed {var.name!r}")
        return LoDTensor(arr, lod)
    return arr
