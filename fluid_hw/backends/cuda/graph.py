"""A prepared program's steady-state run as one CUDA graph, with pinned host buffers.

At batch 1 a GPU spends its time launching kernels, not running them.
:class:`GraphRun` plans a program once on a :class:`~.executor.CUDAExecutor`
(the same device plan, fused kernels included), runs it once to compile the kernels
and upload the parameters, then captures a second run on its own stream
(``cupy.cuda.Stream.begin_capture`` / ``end_capture``) into a ``cupy.cuda.Graph``.
An inference is then

    copy the feeds into pinned host buffers -> one async upload each ->
    ``graph.launch`` -> one async download per fetch into pinned buffers -> sync

with fixed device buffers: the feeds are written where the captured kernels read
them, the fetches read where they write.  The arrays of the capture are allocated
from a memory pool of the graph's own, which nothing else uses, so no other
allocation can take the memory the graph replays into; the parameters stay in the
executor's device scope (uploaded once, by an ordinary run before the capture) and
the graph holds them.

Only programs whose every op runs on the device can be captured (a host op copies
to the host in the middle of the run); feed shapes are fixed at capture, and a
feed of another shape is refused (make one ``GraphRun`` per batch size).
:meth:`GraphRun.device_time_s` times the graph launch alone with CUDA events.

Needs a GPU: on the host shim, or without CuPy, :class:`GraphRun` refuses with
:class:`~fluid_hw.errors.NoCUDADeviceError`.  ``tests/backends/cuda/test_graph.py``
checks the refusals everywhere and the graph against the CPU executor on a GPU
(``make gpu-check``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import ExecutionError, FeedError, NoCUDADeviceError
from ...ir.program import Program
from ...ir.scope import Scope
from .executor import CUDAExecutor
from .runtime import CuPyRuntime

__all__ = ["GraphRun", "host_steps"]


def host_steps(plan: Any) -> list[str]:
    """The plan's steps that run on the host ("op_type [host]"): none may be captured."""
    return [s.describe for s in plan.steps if getattr(s, "how", None) == "host"]


class GraphRun:
    """``program`` with feeds of the given shapes, fetching ``fetch_names``, captured
    as one CUDA graph on ``executor``'s GPU.  ``scope`` holds the parameters (the
    startup program's or a loaded model's); they are uploaded once, at capture."""

    def __init__(self, executor: CUDAExecutor, program: Program,
                 feeds: Mapping[str, np.ndarray], fetch_names: Sequence[str],
                 scope: Scope) -> None:
        rt = executor.runtime
        if not isinstance(rt, CuPyRuntime):
            raise NoCUDADeviceError(f"a CUDA graph needs a GPU (CuPyRuntime); this executor "
                                    f"runs on the {rt.name!r} runtime")
        cupy = rt.cupy
        self.runtime, self.cupy = rt, cupy
        self.feed_names = list(feeds)
        self.fetch_names = list(fetch_names)
        self.shapes = {k: tuple(np.shape(v)) for k, v in feeds.items()}
        prep = executor.prepare_device(program, self.feed_names, self.fetch_names)
        hosts = host_steps(prep.plan)
        if hosts:
            raise ExecutionError(f"cannot capture the program in a CUDA graph: ops run on the "
                                 f"host in the middle of it: {', '.join(hosts)}; run it with "
                                 "the CUDA executor instead")
        self._prep = prep
        self.pool = cupy.cuda.MemoryPool()
        with rt.activate():
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.pinned_in = {k: cupy.cuda.alloc_pinned_memory(np.asarray(v).nbytes)
                              for k, v in feeds.items()}
            self.host_in = {k: np.frombuffer(self.pinned_in[k], np.asarray(v).dtype,
                                             np.asarray(v).size).reshape(self.shapes[k])
                            for k, v in feeds.items()}
            # one ordinary run: compiles the kernels, uploads the parameters (into the
            # executor's device scope and the default pool: they outlive this graph)
            executor.run(program, feed=dict(feeds), fetch_list=self.fetch_names, scope=scope)
            rt.synchronize()  # the graph's stream does not wait for the legacy stream
            dev = executor._device_scopes[scope]
            self._dev = dev
            # the graph reads these parameter arrays: held here, whatever the executor
            # uploads later
            self.params = {n: dev.scope.vars[n] for n in prep.reads if n in dev.scope.vars}
            with cupy.cuda.using_allocator(self.pool.malloc):
                self.dev_in = {k: cupy.asarray(np.asarray(v)) for k, v in feeds.items()}
                rt.synchronize()
                self._drop_values()
                # one run on the graph's stream (the pool keeps blocks per stream; cuBLAS
                # sets up its workspace), its values freed, then the captured run reuses
                # exactly those blocks: no cudaMalloc while capturing
                with self.stream:
                    self._run_plan()
                self.stream.synchronize()
                self._drop_values()
                with self.stream:
                    self.stream.begin_capture()
                    try:
                        self._run_plan()
                    except Exception as e:
                        self.stream.end_capture()
                        raise ExecutionError(
                            f"capturing the program in a CUDA graph failed "
                            f"({type(e).__name__}: {e}); a kernel of it reads a device value "
                            "on the host: run it with the CUDA executor instead") from e
                    self.graph = self.stream.end_capture()
                self.dev_out = [dev.scope.vars[n] for n in self.fetch_names]
            # the capture's arrays belong to this graph (its pool): out of the executor's
            # scope, so that nothing else holds memory of a pool that goes with the graph
            self._drop_values()
            for k in self.feed_names:
                del dev.scope.vars[k]
            self.pinned_out = [cupy.cuda.alloc_pinned_memory(a.nbytes) for a in self.dev_out]
            self.host_out = [np.frombuffer(p, a.dtype, a.size).reshape(a.shape)
                             for p, a in zip(self.pinned_out, self.dev_out)]
            self.graph.upload(self.stream)
            self.stream.synchronize()

    def _drop_values(self) -> None:
        """Keep only the parameters (read, not computed) and the fixed feed buffers."""
        vars_ = self._dev.scope.vars
        for n in list(vars_):
            if n not in self._prep.reads:
                del vars_[n]
        for k in self.feed_names:
            vars_[k] = self.dev_in[k]

    def _run_plan(self) -> None:
        from .plan import run_plan

        run_plan(self._prep.plan, self._dev.scope)

    def run(self, feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """One inference: feeds in through the pinned buffers, the graph, fetches out."""
        for k in self.feed_names:
            v = np.asarray(feed[k]) if k in feed else None
            if v is None or v.shape != self.shapes[k]:
                raise FeedError(f"GraphRun: feed {k!r} must have the captured shape "
                                f"{list(self.shapes[k])}, got "
                                f"{None if v is None else list(v.shape)}; capture one "
                                "GraphRun per batch size")
            np.copyto(self.host_in[k], v, casting="same_kind")
        s = self.stream
        with self.runtime.activate():
            for k in self.feed_names:
                self.dev_in[k].set(self.host_in[k], stream=s)
            self.graph.launch(s)
            for a, h in zip(self.dev_out, self.host_out):
                a.get(stream=s, out=h, blocking=False)
            s.synchronize()
        return [h.copy() for h in self.host_out]

    def device_time_s(self, repeats: int = 100) -> list[float]:
        """Seconds of each of ``repeats`` graph launches, CUDA events around each."""
        cupy, s = self.cupy, self.stream
        out = []
        with self.runtime.activate():
            for _ in range(repeats):
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(s)
                self.graph.launch(s)
                end.record(s)
                end.synchronize()
                out.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3)
        return out
