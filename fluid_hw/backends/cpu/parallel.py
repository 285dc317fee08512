"""Data parallelism over several places: Fluid's ``CompiledProgram``.

::

    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * 4)
    exe.run(compiled, feed={...}, fetch_list=[loss])

Each step:

1. the fed batch is split along its first dimension (LoD tensors: by top-level
   sequence) into one near-equal share per place;
2. every place runs the forward and backward ops (phase A) in its own scope, on
   its own replica of the persistable variables;
3. the parameter gradients are combined across places: each place's gradient is
   weighted by its share of the batch (``GradientScaleStrategy.CoeffNumDevice``:
   ``n_i / N``, Fluid's ``1 / num_places`` when the batch divides evenly, and
   exactly the gradient of a mean loss over the whole batch when it does not;
   ``One``: a plain sum);
4. the ops after the backward pass (clipping, weight decay, learning rate, the
   updates: phase B) run with the combined gradients.  ``AllReduce``: every place
   gets the combined gradients and runs phase B on its replica.  ``Reduce``: each
   parameter has one owner place, which alone receives its combined gradient and
   runs its update ops, then broadcasts the new parameter to the other places;
5. the persistable variables the step wrote are published to the scope the
   executor runs in (place 0's values, or the owner's), so ``scope_guard``,
   ``io.save_persistables`` and a later single-device run see the trained model.

Persistables written in phase A stay per place, as in Fluid: ``batch_norm``'s
running mean and variance are each place's statistics of its own share (the
scope gets place 0's), and its batch statistics normalise each share on its own,
so a model with batch_norm trained on k places is *not* the single-device model
(there is no synchronised batch norm).  Programs without batch_norm (the MLP)
train to the single-device parameters within float rounding.

Replicas are refreshed from the scope whenever the scope's value of a
persistable is no longer the object the runner last published (a
``load_persistables`` or a manual ``set`` between steps).

The runner is generic over places: a place is a :class:`PlaceDevice` (a scope,
a way to prepare and run ops, uploads and downloads) and places talk through a
:class:`Communicator`.  CPU places use the CPU kernels and an in-process
reduction; CUDA places come from the CUDA back end (NCCL), looked up in
:data:`PLACE_DEVICES` by the place's type name.
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...errors import ExecutionError, FeedError, FetchError
from ...ir.grad import grad_var_name
from ...ir.lod import LoDTensor
from ...ir.program import Block, Program
from ...ir.scope import Scope, global_scope
from .executor import (
    FeedTarget,
    PreparedBlock,
    check_feed,
    prepare_block,
    resolve_targets,
    run_prepared_block,
    target_name,
)
from .place import CPUPlace

__all__ = [
    "BuildStrategy", "CompiledProgram", "Communicator", "ExecutionStrategy", "HostCommunicator",
    "PLACE_DEVICES", "PlaceDevice", "CPUPlaceDevice",
]


class BuildStrategy:
    """How the data-parallel program is built (Fluid's names)."""

    class ReduceStrategy(enum.IntEnum):
        AllReduce = 0
        Reduce = 1

    class GradientScaleStrategy(enum.IntEnum):
        CoeffNumDevice = 0
        One = 1
        Customized = 2

    def __init__(self) -> None:
        self.reduce_strategy = BuildStrategy.ReduceStrategy.AllReduce
        self.gradient_scale_strategy = BuildStrategy.GradientScaleStrategy.CoeffNumDevice
        #: accepted for Fluid code; batch statistics stay per place (see module doc)
        self.sync_batch_norm = False


class ExecutionStrategy:
    """Accepted for Fluid code; places run one after another in this process."""

    def __init__(self) -> None:
        self.num_threads = 0
        self.num_iteration_per_drop_scope = 1


# -- places -------------------------------------------------------------------------------


class PlaceDevice(Protocol):
    """One place of a data-parallel run."""

    place: Any
    scope: Scope  # this place's own scope: replicas, its share of the feed, temporaries

    def prepare(self, block: Block, op_indices: Sequence[int], executor: Any) -> Any:
        """Bind ``block.ops[i]`` for ``i`` in ``op_indices`` to this place's kernels."""

    def run(self, prepared: Any, executor: Any) -> None:
        """Run prepared ops in :attr:`scope`."""

    def upload(self, host: Any) -> Any:
        """A host value (array or LoDTensor) as a value of this place (always a copy)."""

    def download(self, value: Any) -> Any:
        """A value of this place as a host value (a copy)."""


class Communicator(Protocol):
    """Collective operations on one variable held by every place's scope."""

    def all_reduce(self, devices: Sequence[PlaceDevice], name: str,
                   weights: Sequence[float]) -> None:
        """Every place's ``name`` becomes ``sum_i weights[i] * value_i``."""

    def reduce(self, devices: Sequence[PlaceDevice], name: str, weights: Sequence[float],
               root: int) -> None:
        """Place ``root``'s ``name`` becomes the weighted sum (the others are unchanged)."""

    def broadcast(self, devices: Sequence[PlaceDevice], name: str, root: int) -> None:
        """Every place's ``name`` becomes a copy of place ``root``'s."""


def _data(v: Any) -> Any:
    return v.data if isinstance(v, LoDTensor) else v


class CPUPlaceDevice:
    """A CPU place: the CPU executor's kernels in a scope of its own."""

    def __init__(self, place: Any) -> None:
        self.place = place
        self.scope = Scope()

    def prepare(self, block: Block, op_indices: Sequence[int], executor: Any) -> PreparedBlock:
        full = prepare_block(block, executor)
        keep = set(op_indices)
        ops = [oc for i, oc in enumerate(full.ops) if i in keep]
        rand = [c for c in full.random_ctxs if c.op_index in keep]
        return PreparedBlock(block, ops, rand)

    def run(self, prepared: PreparedBlock, executor: Any) -> None:
        run_prepared_block(prepared, self.scope, getattr(executor, "hooks", ()))

    def upload(self, host: Any) -> Any:
        if isinstance(host, LoDTensor):
            return LoDTensor(np.array(host.data, copy=True), host.lod())
        return np.array(host, copy=True)

    def download(self, value: Any) -> Any:
        return self.upload(value)


class HostCommunicator:
    """Collectives between places that share host memory: numpy in this process."""

    def _get(self, dev: PlaceDevice, name: str) -> np.ndarray:
        v = dev.scope.vars.get(name)
        if v is None:
            raise ExecutionError(f"data parallel: gradient {name!r} was not computed on "
                                 f"place {dev.place!r}")
        return np.asarray(_data(v))

    def _weighted_sum(self, devices: Sequence[PlaceDevice], name: str,
                      weights: Sequence[float]) -> np.ndarray:
        vals = [self._get(d, name) for d in devices]
        t = vals[0].dtype.type
        acc = vals[0] * t(weights[0])
        for v, w in zip(vals[1:], weights[1:]):
            acc += v * t(w)
        return acc

    def all_reduce(self, devices: Sequence[PlaceDevice], name: str,
                   weights: Sequence[float]) -> None:
        acc = self._weighted_sum(devices, name, weights)
        for i, d in enumerate(devices):
            d.scope.vars[name] = acc if i == 0 else acc.copy()

    def reduce(self, devices: Sequence[PlaceDevice], name: str, weights: Sequence[float],
               root: int) -> None:
        devices[root].scope.vars[name] = self._weighted_sum(devices, name, weights)

    def broadcast(self, devices: Sequence[PlaceDevice], name: str, root: int) -> None:
        src = devices[root].scope.vars.get(name)
        for i, d in enumerate(devices):
            if i != root:
                d.scope.vars[name] = d.upload(src)


DeviceFactory = Callable[[Sequence[Any]], tuple[list[PlaceDevice], Communicator]]


def _cpu_devices(places: Sequence[Any]) -> tuple[list[PlaceDevice], Communicator]:
    return [CPUPlaceDevice(p) for p in places], HostCommunicator()


#: place type name -> factory of (devices, communicator), or "module:attr" loaded on first use
PLACE_DEVICES: dict[str, DeviceFactory | str] = {
    "CPUPlace": _cpu_devices,
    "CUDAPlace": "fluid_hw.backends.cuda.parallel:cuda_devices",
}


def _make_devices(places: Sequence[Any]) -> tuple[list[PlaceDevice], Communicator]:
    kinds = {type(p).__name__ for p in places}
    if len(kinds) != 1:
        raise ExecutionError(f"data parallel: all places must be of one kind, got "
                             f"{sorted(kinds)}; run CPU and CUDA places separately")
    kind = kinds.pop()
    factory = PLACE_DEVICES.get(kind)
    if factory is None:
        raise ExecutionError(f"data parallel: no back end for places of type {kind}; "
                             f"known: {', '.join(sorted(PLACE_DEVICES))}")
    if isinstance(factory, str):
        mod, attr = factory.split(":")
        factory = getattr(importlib.import_module(mod), attr)
        PLACE_DEVICES[kind] = factory
    return factory(places)


# -- the program's structure --------------------------------------------------------------


@dataclass
class _Plan:
    """A program split for data parallelism (built once per program version)."""

    version: int
    feed: list[FeedTarget]
    fetch: list[str]
    phase_a: list[int]
    #: place index -> op indices of phase B it runs
    phase_b: list[list[int]]
    grads: list[str]  # gradient names combined across places, in op order
    grad_owner: dict[str, int]  # grad name -> place that receives it (Reduce) or -1 (all)
    #: persistable name -> place whose value is published (-1: not written by the program)
    publish_from: dict[str, int]
    broadcast: list[tuple[str, int]]  # (param, owner) broadcast after phase B (Reduce)
    reads: list[str]  # persistables the program reads (kept replicated)
    prepared: list[tuple[Any, Any]] = field(default_factory=list)  # per place (A, B)
    executor_id: int = 0


def _param_grads(block: Block) -> dict[str, str]:
    """grad name -> parameter name, for trainable parameters whose gradient is written."""
    written = {n for op in block.ops for n in op.output_arg_names}
    out = {}
    for p in block.all_parameters():
        g = grad_var_name(p.name)
        if p.trainable and g in written:
            out[g] = p.name
    return out


def _split_phases(block: Block, grads: Mapping[str, str]) -> int:
    """Index of the first op that reads a parameter gradient (end of phase A)."""
    ops = block.ops
    k = next((i for i, op in enumerate(ops) if set(op.input_arg_names) & grads.keys()),
             len(ops))
    for i in range(k, len(ops)):
        op = ops[i]
        for n in op.output_arg_names:
            if n in grads and n not in op.input_arg_names:
                raise ExecutionError(
                    f"data parallel: op #{i} ({op.type}) writes gradient {n!r} after op #{k} "
                    f"({ops[k].type}) already read a parameter gradient; the backward pass "
                    "must come before clipping, weight decay and the updates")
    return k


def _owners(block: Block, grads: Mapping[str, str], n_places: int) -> dict[str, int]:
    """Parameter -> owner place, balancing element counts (largest first)."""
    load = [0] * n_places
    owner: dict[str, int] = {}
    params = sorted(set(grads.values()),
                    key=lambda p: (-abs(int(np.prod(block.var(p).shape))), p))
    for p in params:
        j = min(range(n_places), key=lambda i: (load[i], i))
        owner[p] = j
        load[j] += abs(int(np.prod(block.var(p).shape)))
    return owner


def _phase_b_placement(block: Block, k: int, grads: Mapping[str, str],
                       owner: Mapping[str, int], n_places: int) -> list[int]:
    """For each op of phase B: the place that runs it, or -1 for every place.

    An op depends on the parameters whose gradients flow into it; it runs on
    their owner.  Ops depending on no gradient (learning-rate arithmetic) run
    everywhere; an op needing gradients owned by different places cannot run
    under the Reduce strategy.
    """
    deps: dict[str, set[str]] = {g: {p} for g, p in grads.items()}
    where = []
    for i in range(k, len(block.ops)):
        op = block.ops[i]
        d: set[str] = set()
        for n in op.input_arg_names:
            d |= deps.get(n, set())
        places = {owner[p] for p in d}
        if len(places) > 1:
            raise ExecutionError(
                f"data parallel, Reduce strategy: op #{i} ({op.type}) needs the gradients of "
                f"{sorted(d)}, which are owned by different places; use "
                "BuildStrategy.ReduceStrategy.AllReduce (e.g. for clipping by global norm)")
        for n in op.output_arg_names:
            deps[n] = deps.get(n, set()) | d
        where.append(places.pop() if places else -1)
    return where


# -- CompiledProgram ------------------------------------------------------------------------


class CompiledProgram:
    """A program prepared for a special way of running (Fluid 1.x).

    Only data parallelism is offered: :meth:`with_data_parallel`.  Without it,
    running a CompiledProgram runs its program as it is.
    """

    def __init__(self, program_or_graph: Program, build_strategy: BuildStrategy | None = None
                 ) -> None:
        if not isinstance(program_or_graph, Program):
            raise ExecutionError(f"CompiledProgram expects a Program, got "
                                 f"{type(program_or_graph).__name__}")
        self._program = program_or_graph
        self._build_strategy = build_strategy or BuildStrategy()
        self._exec_strategy = ExecutionStrategy()
        self._loss_name: str | None = None
        self._places: list[Any] | None = None
        self._is_data_parallel = False
        self._devices: list[PlaceDevice] = []
        self._comm: Communicator | None = None
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        self._published: dict[str, Any] = {}  # persistable -> object last put in the scope
        self._scope: Scope | None = None

    @property
    def program(self) -> Program:
        return self._program

    def with_data_parallel(self, loss_name: str | None = None,
                           build_strategy: BuildStrategy | None = None,
                           exec_strategy: ExecutionStrategy | None = None,
                           share_vars_from: CompiledProgram | None = None,
                           places: Sequence[Any] | None = None) -> CompiledProgram:
        """Run on ``places`` (default: ``CPU_NUM`` CPU places, 1 if unset), splitting
        each fed batch; ``loss_name`` (the mean loss) makes it train: gradients are
        combined across places (see the module doc)."""
        if self._is_data_parallel:
            raise ExecutionError("with_data_parallel was already called on this "
                                 "CompiledProgram; make a new one")
        gb = self._program.global_block()
        if loss_name is not None and gb._find_var_recursive(loss_name) is None:
            raise ExecutionError(f"with_data_parallel: loss {loss_name!r} is not a variable "
                                 "of the program; pass loss_name=loss.name")
        if build_strategy is not None:
            self._build_strategy = build_strategy
        if exec_strategy is not None:
            self._exec_strategy = exec_strategy
        gs = self._build_strategy.gradient_scale_strategy
        if gs == BuildStrategy.GradientScaleStrategy.Customized:
            raise ExecutionError("GradientScaleStrategy.Customized is not supported; use "
                                 "CoeffNumDevice (mean loss) or One (summed loss)")
        if places is None:
            places = [CPUPlace()] * max(1, int(os.environ.get("CPU_NUM", "1")))
        places = list(places)
        if not places:
            raise ExecutionError("with_data_parallel: places is empty; give at least one place")
        self._loss_name = loss_name
        self._places = places
        self._is_data_parallel = True
        self._devices, self._comm = _make_devices(places)
        del share_vars_from  # every run reads the executor's scope: nothing to share
        return self

    # -- preparation ---------------------------------------------------------------------
    def _plan(self, executor: Any, feed_names: Sequence[str],
              fetch_names: Sequence[str]) -> _Plan:
        prog = self._program
        key = (tuple(feed_names), tuple(fetch_names))
        plan = self._plans.get(key)
        if plan is not None and plan.version == prog._version and \
                plan.executor_id == id(executor):
            return plan
        feed, _ = resolve_targets(prog, feed_names, fetch_names)
        gb = prog.global_block()
        n_places = len(self._devices)
        grads = _param_grads(gb) if self._loss_name is not None else {}
        if not grads and any(op.attr("op_role") == "optimize" for op in gb.ops
                             if op.has_attr("op_role")):
            raise ExecutionError("data parallel: the program updates parameters but no "
                                 "loss_name was given; pass with_data_parallel(loss_name="
                                 "loss.name)")
        k = _split_phases(gb, grads) if grads else len(gb.ops)
        reduce = self._build_strategy.reduce_strategy == BuildStrategy.ReduceStrategy.Reduce
        owner = _owners(gb, grads, n_places) if reduce else {}
        where = _phase_b_placement(gb, k, grads, owner, n_places) if reduce else \
            [-1] * (len(gb.ops) - k)
        phase_b = [[k + j for j, w in enumerate(where) if w in (-1, i)]
                   for i in range(n_places)]
        persist = {v.name for v in gb.vars.values() if v.persistable}
        publish: dict[str, int] = {}
        for i, op in enumerate(gb.ops):
            w = -1 if i < k else where[i - k]
            for n in op.output_arg_names:
                if n in persist:
                    publish[n] = max(w, 0)
        reads = sorted({n for op in gb.ops for n in op.input_arg_names if n in persist}
                       | set(publish))
        a_reads = {n for op in gb.ops[:k] for n in op.input_arg_names}
        bcast = sorted((p, owner[p]) for p in set(grads.values())
                       if p in a_reads and p in publish) if reduce else []
        ordered = [g for op in gb.ops[:k] for g in op.output_arg_names if g in grads]
        plan = _Plan(prog._version, feed, list(fetch_names), list(range(k)), phase_b,
                     list(dict.fromkeys(ordered)),
                     {g: owner[p] if reduce else -1 for g, p in grads.items()},
                     publish, bcast, reads, executor_id=id(executor))
        plan.prepared = [(d.prepare(gb, plan.phase_a, executor),
                          d.prepare(gb, plan.phase_b[i], executor))
                         for i, d in enumerate(self._devices)]
        self._plans[key] = plan
        return plan

    # -- running -------------------------------------------------------------------------
    def _run_with(self, executor: Any, feed: Any = None, fetch_list: Sequence[Any] | None = None,
                  scope: Scope | None = None, return_numpy: bool = True) -> list[Any]:
        """What ``executor.run(compiled, ...)`` calls."""
        if not self._is_data_parallel:
            return executor.run(self._program, feed=feed, fetch_list=fetch_list, scope=scope,
                                return_numpy=return_numpy)
        scope = scope if scope is not None else global_scope()
        fetch_names = [target_name(f) for f in (fetch_list or [])]
        shares = self._split_feed(feed)
        plan = self._plan(executor, list(shares[0]), fetch_names)
        devs, comm = self._devices, self._comm
        assert comm is not None
        self._sync_replicas(plan, scope)
        units = [_units(next(iter(s.values()))) if s else 1 for s in shares]
        total = sum(units)
        one = self._build_strategy.gradient_scale_strategy == \
            BuildStrategy.GradientScaleStrategy.One
        weights = [1.0 if one else u / total for u in units]
        for d, share, (a, _) in zip(devs, shares, plan.prepared):
            for t in plan.feed:
                d.scope.vars[t.name] = d.upload(check_feed(t, share[t.name]))
            d.run(a, executor)
        for g in plan.grads:
            root = plan.grad_owner[g]
            if root < 0:
                comm.all_reduce(devs, g, weights)
            else:
                comm.reduce(devs, g, weights, root)
        for d, (_, b) in zip(devs, plan.prepared):
            d.run(b, executor)
        for name, root in plan.broadcast:
            comm.broadcast(devs, name, root)
        self._publish(plan, scope)
        return self._fetch(plan, scope, return_numpy)

    def _split_feed(self, feed: Any) -> list[dict[str, Any]]:
        n = len(self._devices)
        if isinstance(feed, (list, tuple)):
            if len(feed) != n:
                raise FeedError(f"data parallel: got {len(feed)} per-place feeds for {n} "
                                "places; give one dict per place, or one dict to split")
            shares = [dict(f) for f in feed]
            if any(s.keys() != shares[0].keys() for s in shares):
                raise FeedError("data parallel: every per-place feed must name the same "
                                "variables")
            return shares
        feed = dict(feed or {})
        counts = {k: _units(v) for k, v in feed.items()}
        if len(set(counts.values())) > 1:
            raise FeedError(f"data parallel: fed variables have different batch sizes "
                            f"{counts}; they are split along their first dimension (LoD "
                            "tensors: by sequence) and must agree")
        batch = next(iter(counts.values()), n)
        if batch < n:
            raise FeedError(f"data parallel: a batch of {batch} cannot be split across "
                            f"{n} places; feed at least {n} examples")
        # np.array_split's shares: the first ``batch % n`` places get one more
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + batch // n + (1 if i < batch % n else 0))
        return [{k: _slice(v, bounds[i], bounds[i + 1], k) for k, v in feed.items()}
                for i in range(n)]

    def _sync_replicas(self, plan: _Plan, scope: Scope) -> None:
        """Copy each persistable the program reads from ``scope`` to every place whose
        replica is missing or stale (the scope's value changed since we published)."""
        for name in plan.reads:
            host = scope.find_value(name)
            if host is None:
                continue  # a kernel reports the missing input if it is read
            fresh = self._published.get(name) is not host
            for d in self._devices:
                if fresh or name not in d.scope.vars:
                    d.scope.vars[name] = d.upload(host)
            self._published[name] = host

    def _publish(self, plan: _Plan, scope: Scope) -> None:
        for name, root in plan.publish_from.items():
            v = self._devices[root].scope.vars.get(name)
            if v is None:
                continue
            host = self._devices[root].download(v)
            scope.vars[name] = host
            self._published[name] = host

    def _fetch(self, plan: _Plan, scope: Scope, return_numpy: bool) -> list[Any]:
        gb = self._program.global_block()
        out = []
        for name in plan.fetch:
            var = gb._find_var_recursive(name)
            if var is not None and var.persistable and scope.find_value(name) is not None:
                v = scope.find_value(name)
                out.append(np.array(_data(v)) if return_numpy else v)
                continue
            parts = []
            for d in self._devices:
                v = d.scope.vars.get(name)
                if v is None:
                    raise FetchError(f"fetch target {name!r} was never computed on place "
                                     f"{d.place!r}")
                parts.append(d.download(v))
            merged = _merge(parts)
            if return_numpy:
                out.append(merged.data if isinstance(merged, LoDTensor) else merged)
            else:
                out.append(merged if isinstance(merged, LoDTensor) else LoDTensor(merged))
        return out


# -- feed splitting and fetch merging ------------------------------------------------------


def _units(v: Any) -> int:
    """Examples in a fed value: top-level sequences of a LoD tensor, else rows."""
    if isinstance(v, LoDTensor) and v.lod():
        return len(v.lod()[0]) - 1
    a = _data(v)
    shape = getattr(a, "shape", None)
    if shape is None:
        shape = np.shape(a)
    return int(shape[0]) if len(shape) else 1


def _slice(v: Any, start: int, end: int, name: str) -> Any:
    if isinstance(v, LoDTensor) and v.lod():
        lod = v.lod()
        new_lod, lo, hi = [], start, end
        for level in lod:
            offs = level[lo:hi + 1]
            new_lod.append([o - offs[0] for o in offs])
            lo, hi = offs[0], offs[-1]
        return LoDTensor(np.asarray(v.data)[lo:hi], new_lod)
    a = np.asarray(_data(v))
    if a.ndim == 0:
        raise FeedError(f"data parallel: feed {name!r} is a scalar and cannot be split; "
                        "give it a batch dimension")
    return a[start:end]


def _merge(parts: list[Any]) -> Any:
    """Per-place fetched values concatenated along the first axis (LoD offsets shifted)."""
    datas = [np.asarray(_data(p)) for p in parts]
    merged = np.concatenate([d.reshape(1) if d.ndim == 0 else d for d in datas])
    lods = [p.lod() if isinstance(p, LoDTensor) else [] for p in parts]
    if not any(lods):
        return merged
    levels = len(lods[0])
    new = [[0] for _ in range(levels)]
    for lod in lods:
        for lv in range(levels):
            base = new[lv][-1]  # entries of the level below (or rows) merged so far
            new[lv].extend(base + o for o in lod[lv][1:])
    return LoDTensor(merged, new)
