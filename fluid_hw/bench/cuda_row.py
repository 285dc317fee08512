"""The CUDA rows: the model on GPU 0 through the CUDA executor (fused kernels), host
to host, and as one CUDA graph (:class:`fluid_hw.backends.cuda.graph.GraphRun`):
device time from CUDA events around the graph launch, host to host through pinned
buffers.  Energy from NVML or nvidia-smi (:func:`.energy.gpu_meter`).

Without a GPU (or CuPy) :func:`cuda_rows` raises :class:`~.host_rows.Skip` with the
reason; ``make gpu-check`` runs ``fluid-hw bench --backends cuda`` on a GPU machine and
its ``bench.json`` is merged (``--merge``) into the table made here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tools import Progress, tell
from .energy import gpu_meter
from .host_rows import Skip, agreement, measure_predict, predict_all
from .measure import time_calls
from .model import Model, TestSet, batch_of, top1

__all__ = ["cuda_rows", "gpu_status"]


def gpu_status() -> tuple[bool, str]:
    """(present, the GPU's name or why there is none)."""
    try:
        from ..backends.cuda.runtime import require_device

        cupy = require_device(0)
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return True, name.decode() if isinstance(name, bytes) else str(name)
    except Exception as e:  # NoCUDADeviceError, or a broken CuPy install
        return False, f"no GPU ({str(e).removeprefix('no CUDA device visible: ')})"


def cuda_rows(model: Model, test: TestSet, batches: list[int], budget_s: float,
              reference: np.ndarray | None, progress: Progress) -> list[dict[str, Any]]:
    present, name = gpu_status()
    if not present:
        raise Skip(name)
    from ..backends.cpu.place import CUDAPlace
    from ..backends.cuda import CUDAExecutor
    from ..backends.cuda.graph import GraphRun

    exe = CUDAExecutor(CUDAPlace(0), fuse=True)
    fetch = model.fetches[0]

    def predict(feed: dict[str, np.ndarray]) -> np.ndarray:
        (y,) = exe.run(model.program, feed=feed, fetch_list=[fetch], scope=model.scope)
        return np.asarray(y)

    meter, note = gpu_meter(0)
    outputs = predict_all(predict, test)
    plain: dict[str, Any] = {"backend": "cuda", "variant": "float32, fused kernels",
                             "status": "measured", "gpu": name}
    plain.update(measure_predict(predict, test, batches, budget_s, meter, note, progress,
                                 "cuda"))
    plain["accuracy"] = top1(outputs, test.labels)
    plain["agreement"] = agreement(outputs, reference)

    graph: dict[str, Any] = {"backend": "cuda", "variant": "float32, CUDA graph",
                             "status": "measured", "gpu": name, "energy": {"source": note}}
    sweep = []
    for b in batches:
        g = GraphRun(exe, model.program, batch_of(test, b), [fetch], model.scope)
        feed = batch_of(test, b)
        if meter is not None and b in (batches[0], batches[-1]):
            meter.start()
            t = time_calls(lambda g=g, f=feed: g.run(f), budget_s)  # type: ignore[misc]
            graph["energy"][f"j_per_inference_batch{b}"] = meter.stop() / ((t.runs + 2) * b)
        else:
            t = time_calls(lambda g=g, f=feed: g.run(f), budget_s)  # type: ignore[misc]
        dev = np.asarray(g.device_time_s(50 if b <= 64 else 10))
        sweep.append({"batch": b, "latency_us": t.median_s * 1e6, "per_s": b / t.median_s,
                      "device_latency_us": float(np.median(dev)) * 1e6,
                      "device_per_s": b / float(np.median(dev)), "runs": t.runs})
        if b == 1:
            graph["latency_us"] = {
                "device": {"median_us": float(np.median(dev)) * 1e6,
                           "p99_us": float(np.percentile(dev, 99)) * 1e6, "runs": len(dev),
                           "how": "CUDA events around one graph launch"},
                "host": {**t.as_dict(), "how": "pinned feeds -> upload -> graph -> download"}}
            (y,) = g.run(feed)
            (want,) = exe.run(model.program, feed=feed, fetch_list=[fetch], scope=model.scope)
            graph["max_abs_diff_vs_cuda_executor"] = float(np.max(np.abs(y - want)))
        tell(progress, f"cuda graph: batch {b}: {t.median_s * 1e6:.1f} us host to host, "
                       f"{float(np.median(dev)) * 1e6:.1f} us on the device")
    graph["throughput"] = sweep
    graph["accuracy"], graph["agreement"] = plain["accuracy"], plain["agreement"]
    return [plain, graph]

