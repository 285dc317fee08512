"""CUDA places for data parallelism (``CompiledProgram.with_data_parallel``).

A :class:`CUDAPlaceDevice` is one GPU with its own scope of device arrays, run by
a :class:`~.executor.CUDAExecutor` plan.  :class:`DeviceCommunicator` combines
gradients with NCCL when CuPy has it and the places are distinct GPUs; otherwise
(one GPU used as several places, no NCCL, or the host shim) it stages values
through the root place: correct everywhere, slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ExecutionError
from ...ir.lod import LoDTensor
from ...ir.program import Block
from ...ir.scope import Scope
from ..cpu.parallel import PlaceDevice
from .executor import CUDAExecutor
from .kernels import to_device_value, to_host_value
from .plan import DevicePlan, plan_ops, run_plan
from .runtime import CuPyRuntime, DeviceRuntime

__all__ = ["CUDAPlaceDevice", "DeviceCommunicator", "cuda_devices"]


class CUDAPlaceDevice:
    """One device place: a runtime, its executor (for sub-blocks) and its scope."""

    def __init__(self, place: Any, runtime: DeviceRuntime | None = None,
                 fuse: bool = True) -> None:
        self.place = place
        self.runtime = runtime if runtime is not None else CuPyRuntime(
            getattr(place, "device_id", 0))
        self.executor = CUDAExecutor(place, runtime=self.runtime, fuse=fuse)
        self.scope = Scope()

    def prepare(self, block: Block, op_indices: Sequence[int], executor: Any) -> DevicePlan:
        with self.runtime.activate():
            return plan_ops(block, op_indices, self.executor, self.runtime,
                            fuse=self.executor.fuse)

    def run(self, prepared: DevicePlan, executor: Any) -> None:
        with self.runtime.activate():
            run_plan(prepared, self.scope)

    def upload(self, host: Any) -> Any:
        with self.runtime.activate():
            return to_device_value(host, self.runtime)

    def download(self, value: Any) -> Any:
        with self.runtime.activate():
            return to_host_value(value, self.runtime)


def _data(v: Any) -> Any:
    return v.data if isinstance(v, LoDTensor) else v


class DeviceCommunicator:
    """Collectives over device places: NCCL, or staged through the root place."""

    def __init__(self, devices: Sequence[CUDAPlaceDevice]) -> None:
        self._nccl: Any = None
        ids = [getattr(d.place, "device_id", None) for d in devices]
        rts = [d.runtime for d in devices]
        if all(isinstance(r, CuPyRuntime) for r in rts) and len(set(ids)) == len(ids) > 1:
            try:
                from cupy.cuda import nccl
                if nccl.available:
                    self._nccl = (nccl, nccl.NcclCommunicator.initAll(list(ids)))
            except Exception:
                self._nccl = None

    @property
    def uses_nccl(self) -> bool:
        return self._nccl is not None

    def _get(self, d: PlaceDevice, name: str) -> Any:
        v = d.scope.vars.get(name)
        if v is None:
            raise ExecutionError(f"data parallel: gradient {name!r} was not computed on "
                                 f"place {d.place!r}")
        return _data(v)

    def _staged_sum(self, devices: Sequence[Any], name: str, weights: Sequence[float],
                    root: int) -> Any:
        rd = devices[root]
        with rd.runtime.activate():
            acc = None
            for d, w in zip(devices, weights):
                v = self._get(d, name)
                if d is not rd:
                    v = rd.upload(d.download(v))
                term = v * v.dtype.type(w)
                acc = term if acc is None else acc + term
        return acc

    def all_reduce(self, devices: Sequence[Any], name: str, weights: Sequence[float]) -> None:
        if self._nccl is not None:
            nccl, comms = self._nccl
            nccl.groupStart()
            for d, c, w in zip(devices, comms, weights):
                with d.runtime.activate():
                    v = self._get(d, name)
                    v = d.runtime.xp.ascontiguousarray(v * v.dtype.type(w))
                    d.scope.vars[name] = v
                    c.allReduce(v.data.ptr, v.data.ptr, v.size, _nccl_dtype(nccl, v),
                                nccl.NCCL_SUM, d.runtime.xp.cuda.get_current_stream().ptr)
            nccl.groupEnd()
            return
        acc = self._staged_sum(devices, name, weights, 0)
        src = devices[0]
        for i, d in enumerate(devices):
            d.scope.vars[name] = acc if i == 0 else d.upload(src.download(acc))

    def reduce(self, devices: Sequence[Any], name: str, weights: Sequence[float],
               root: int) -> None:
        devices[root].scope.vars[name] = self._staged_sum(devices, name, weights, root)

    def broadcast(self, devices: Sequence[Any], name: str, root: int) -> None:
        src = devices[root]
        host = src.download(src.scope.vars[name])
        for i, d in enumerate(devices):
            if i != root:
                d.scope.vars[name] = d.upload(host)


def _nccl_dtype(nccl: Any, v: Any) -> Any:
    table = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
             "float16": nccl.NCCL_FLOAT16}
    try:
        return table[str(v.dtype)]
    except KeyError:
        raise ExecutionError(f"NCCL all-reduce of a {v.dtype} gradient is not supported") \
            from None


def cuda_devices(places: Sequence[Any]) -> tuple[list[CUDAPlaceDevice], DeviceCommunicator]:
    """What :data:`fluid_hw.backends.cpu.parallel.PLACE_DEVICES` calls for CUDAPlaces."""
    devices = [CUDAPlaceDevice(p) for p in places]
    return devices, DeviceCommunicator(devices)
