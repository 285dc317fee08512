"""``Executor(CUDAPlace(i))``: programs run on a GPU.

The scope keeps host (numpy) values, as every other part of fluid-hw expects;
the executor keeps a device copy of each of them beside it (per scope):

* persistable variables (and anything else the program reads but neither feeds
  nor computes) are uploaded when the scope's value is not the object uploaded
  last time (the first run after the startup program, a ``load_persistables``),
  else reused on the device;
* feeds are uploaded, fetches downloaded;
* persistable variables the program writes (parameters after an update,
  batch_norm's running statistics) are downloaded into the scope after the run;
* every other value stays on the device.

So host-device copies happen only at feed, fetch and for persistables.  How each
op runs is in :mod:`.plan` and :mod:`.kernels`.  ``run`` is the CPU executor's
(the same feed checks, program preparation and fetch results); this executor
supplies its two hooks, ``_bind`` (a device plan) and ``_execute`` (the copies
above around the plan).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...ir.program import Block, Program
from ...ir.scope import Scope
from ..cpu.executor import Executor, PreparedRun
from ..cpu.place import CUDAPlace
from .kernels import to_device_value, to_host_value
from .plan import DevicePlan, plan_ops, run_plan
from .runtime import CuPyRuntime, DeviceRuntime

__all__ = ["CUDAExecutor"]


@dataclass
class _Prepared(PreparedRun):
    plan: DevicePlan
    reads: list[str]  # values taken from the scope (not fed, read before written)
    writes: list[str]  # persistables written, downloaded after a run


class _DeviceScope:
    """The device copies kept for one user scope."""

    def __init__(self) -> None:
        self.scope = Scope()
        self.uploaded: dict[str, int] = {}  # name -> id() of the host object uploaded
        self.hosts: dict[str, Any] = {}  # keeps those objects alive so ids stay unique


def program_io(block: Block, op_indices: Sequence[int], fed: set[str]
               ) -> tuple[list[str], list[str]]:
    """(values read from outside the ops, persistables they write), in op order."""
    persist = {v.name for v in block.vars.values() if v.persistable}
    written: set[str] = set()
    reads: list[str] = []
    writes: list[str] = []
    for i in op_indices:
        op = block.ops[i]
        for n in op.input_arg_names:
            if n not in written and n not in fed and n not in reads:
                reads.append(n)
        for n in op.output_arg_names:
            written.add(n)
            if n in persist and n not in writes:
                writes.append(n)
    return reads, writes


class CUDAExecutor(Executor):
    """Runs programs on one CUDA device (or, with ``runtime=HostShimRuntime()``, on
    the host shim that runs the generated CUDA C as C++: how CI tests it).

    ``fuse=False`` runs each elementwise op as its own kernel (for comparison).
    ``host_op_runs`` counts ops that ran on the host (copies in and out).
    """

    def __init__(self, place: Any = None, seed: int | None = None,
                 runtime: DeviceRuntime | None = None, fuse: bool = True) -> None:
        place = place if place is not None else CUDAPlace(0)
        super().__init__(place, seed)
        self.runtime = runtime if runtime is not None else CuPyRuntime(
            getattr(place, "device_id", 0))
        self.fuse = fuse
        self.host_op_runs: Counter[str] = Counter()
        self._sub_plans: dict[tuple[int, int], tuple[Program, int, DevicePlan]] = {}
        self._device_scopes: weakref.WeakKeyDictionary[Scope, _DeviceScope] = \
            weakref.WeakKeyDictionary()

    @property
    def _prepared(self) -> dict[tuple[Any, ...], PreparedRun]:
        """The prepared runs (each with its device ``plan``), by cache key."""
        return self._cache

    def close(self) -> None:
        super().close()
        self._sub_plans.clear()
        self._device_scopes = weakref.WeakKeyDictionary()

    # -- preparation ---------------------------------------------------------------------
    def prepare_device(self, program: Program, feed_names: Sequence[str],
                       fetch_names: Sequence[str]) -> _Prepared:
        """:meth:`prepare`, typed: the run with its device plan (to inspect it, or to
        compile several programs' kernels together inside ``runtime.deferred()``)."""
        prep = self.prepare(program, feed_names, fetch_names)
        assert isinstance(prep, _Prepared)
        return prep

    def _bind(self, run: PreparedRun) -> _Prepared:
        """Plan the run program's ops on the device.  It is the CPU executor's program
        (feed ops in front: the same op indices, so seeded random ops draw the same
        numbers); its feed and fetch ops are left out: :meth:`_execute` feeds and
        fetches."""
        rb = run.program.global_block()
        idx = [i for i, op in enumerate(rb.ops) if op.type not in ("feed", "fetch")]
        plan = plan_ops(rb, idx, self, self.runtime, keep=run.fetch_names, fuse=self.fuse)
        reads, writes = program_io(rb, idx, {t.name for t in run.feed_vars})
        return _Prepared(**run.shared_fields(), plan=plan, reads=reads, writes=writes)

    def run_block(self, block: Block, scope: Scope) -> None:
        """A control-flow op's sub-block, on the device."""
        program = block.program
        key = (id(program), block.idx)
        hit = self._sub_plans.get(key)
        if hit is None or hit[0] is not program or hit[1] != program._version:
            plan = plan_ops(block, range(len(block.ops)), self, self.runtime, fuse=self.fuse)
            hit = (program, program._version, plan)
            self._sub_plans[key] = hit
        run_plan(hit[2], scope)

    # -- running -------------------------------------------------------------------------
    def _execute(self, prep: PreparedRun, feeds: list[Any], scope: Scope) -> list[Any]:
        """Upload what changed, feed, empty the tensor arrays, run the plan, download
        the fetch targets (host values: the shared ``run`` returns them as the CPU
        executor does) and the persistables written."""
        assert isinstance(prep, _Prepared)
        dev = self._device_scopes.get(scope)
        if dev is None:
            dev = self._device_scopes[scope] = _DeviceScope()
        rt = self.runtime
        with rt.activate():
            self._upload_reads(prep, scope, dev)
            for t, value in zip(prep.feed_vars, feeds):
                dev.scope.vars[t.name] = to_device_value(value, rt)
            for n in prep.arrays:  # as the CPU executor: tensor arrays start empty
                dev.scope.vars[n] = []
            run_plan(prep.plan, dev.scope)
            out = []
            for name in prep.fetch_names:
                v = dev.scope.vars.get(name)
                if v is None:
                    v = scope.find_value(name)
                out.append(None if v is None else to_host_value(v, rt))
            for name in prep.writes:
                v = dev.scope.vars.get(name)
                if v is not None:
                    host = to_host_value(v, rt)
                    scope.vars[name] = host
                    dev.uploaded[name] = id(host)
                    dev.hosts[name] = host
        return out

    def _upload_reads(self, prep: _Prepared, scope: Scope, dev: _DeviceScope) -> None:
        for name in prep.reads:
            host = scope.find_value(name)
            if host is None:
                continue  # the op reading it reports the missing value
            if dev.uploaded.get(name) == id(host) and name in dev.scope.vars:
                continue
            dev.scope.vars[name] = to_device_value(host, self.runtime)
            dev.uploaded[name] = id(host)
            dev.hosts[name] = host
