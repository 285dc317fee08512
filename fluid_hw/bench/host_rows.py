"""Rows measured on this machine's CPU: the executor (float and the int8 golden
model) and onnxruntime (the model exported to ONNX, float and QDQ int8).

A row is a plain dict (the schema is in :mod:`fluid_hw.bench.run`).  Times are host
to host: the numpy batch in, the fetched outputs back.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu.executor import Executor
from ..errors import BackendUnavailableError, FluidError
from ..tools import Progress, tell
from .energy import EnergyMeter
from .measure import time_calls
from .model import Model, TestSet, batch_of, top1

__all__ = ["Skip", "agreement", "cpu_row", "measure_predict", "onnxruntime_row", "predict_all",
           "skipped_row"]

Predict = Callable[[dict[str, np.ndarray]], np.ndarray]


#: a back end that cannot run here; the message is the reason shown in the table
Skip = BackendUnavailableError


def skipped_row(backend: str, variant: str, reason: str) -> dict[str, Any]:
    return {"backend": backend, "variant": variant, "status": "skipped", "reason": reason}


def predict_all(predict: Predict, test: TestSet, chunk: int = 512) -> np.ndarray:
    """The outputs for the whole test set, in chunks."""
    outs = []
    for i in range(0, test.n, chunk):
        outs.append(np.asarray(predict({k: v[i:i + chunk] for k, v in test.inputs.items()})))
    return np.concatenate(outs)


def measure_predict(predict: Predict, test: TestSet, batches: list[int], budget_s: float,
                    meter: EnergyMeter | None, energy_note: str, progress: Progress,
                    label: str) -> dict[str, Any]:
    """Batch-1 latency (median, p99), throughput at each batch size, and the energy
    per inference at batch 1 and at the largest batch when ``meter`` is given."""
    sweep = []
    energy: dict[str, Any] = {"source": energy_note}
    lat1: dict[str, Any] | None = None
    for b in batches:
        feed = batch_of(test, b)
        if meter is not None and b in (batches[0], batches[-1]):
            meter.start()
            t = time_calls(lambda f=feed: predict(f), budget_s)  # type: ignore[misc]
            joules = meter.stop()
            # the meter also counted the two warm-up calls
            energy[f"j_per_inference_batch{b}"] = joules / ((t.runs + 2) * b)
        else:
            t = time_calls(lambda f=feed: predict(f), budget_s)  # type: ignore[misc]
        if b == 1:
            lat1 = t.as_dict()
        sweep.append({"batch": b, "latency_us": t.median_s * 1e6,
                      "per_s": b / t.median_s, "runs": t.runs})
        tell(progress, f"{label}: batch {b}: {t.median_s * 1e6:.1f} us, "
                       f"{b / t.median_s:,.0f} inferences/s")
    return {"latency_us": {"device": None, "host": lat1}, "throughput": sweep,
            "energy": energy}


def _executor_predict(model: Model) -> Predict:
    exe = Executor()
    fetch = model.fetches[0]

    def predict(feed: dict[str, np.ndarray]) -> np.ndarray:
        (y,) = exe.run(model.program, feed=feed, fetch_list=[fetch], scope=model.scope)
        return np.asarray(y)
    return predict


def cpu_row(model: Model, variant: str, test: TestSet, batches: list[int], budget_s: float,
            meter: tuple[EnergyMeter | None, str], reference: np.ndarray | None,
            progress: Progress) -> tuple[dict[str, Any], np.ndarray]:
    """The CPU executor on ``model``; also returns its test-set outputs."""
    predict = _executor_predict(model)
    outputs = predict_all(predict, test)
    row: dict[str, Any] = {"backend": "cpu", "variant": variant, "status": "measured",
                           "model": str(model.path)}
    row.update(measure_predict(predict, test, batches, budget_s, meter[0], meter[1], progress,
                               f"cpu {variant}"))
    row["accuracy"] = top1(outputs, test.labels)
    row["agreement"] = agreement(outputs, reference)
    return row, outputs


def agreement(outputs: np.ndarray, reference: np.ndarray | None) -> float | None:
    """Share of test inputs whose top-1 class equals the reference's."""
    if reference is None or outputs.ndim < 2 or outputs.shape != reference.shape:
        return None
    o, r = outputs.reshape(len(outputs), -1), reference.reshape(len(reference), -1)
    return float((o.argmax(1) == r.argmax(1)).mean())


def onnxruntime_row(model: Model, variant: str, test: TestSet, batches: list[int],
                    budget_s: float, meter: tuple[EnergyMeter | None, str],
                    reference: np.ndarray | None, onnx_path: Path | None,
                    progress: Progress) -> dict[str, Any]:
    """``model`` exported to ONNX (QDQ for a fixed-point program), run by onnxruntime's
    CPU execution provider.  Raises :class:`Skip` without onnxruntime or when the
    export refuses the program."""
    try:
        ort = importlib.import_module("onnxruntime")  # untyped: Any
    except ImportError:
        raise Skip("onnxruntime is not installed (pip install 'fluid-hw[onnx]')") from None
    from ..frontend.onnx import export

    with tempfile.TemporaryDirectory() as tmp:
        path = onnx_path or Path(tmp) / "model.onnx"
        try:
            export(model.program, path, feed_names=model.feeds, fetch_names=model.fetches,
                   scope=model.scope)
        except (FluidError, ImportError) as e:
            first = str(e).splitlines()[0]
            raise Skip(f"the ONNX export refused the program: {first}") from None
        opts = ort.SessionOptions()
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    out_name = sess.get_outputs()[0].name
    in_names = {i.name for i in sess.get_inputs()}

    def predict(feed: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(sess.run([out_name], {k: v for k, v in feed.items()
                                                if k in in_names})[0])

    outputs = predict_all(predict, test)
    row: dict[str, Any] = {"backend": "onnxruntime", "variant": variant, "status": "measured",
                           "version": ort.__version__,
                           "onnx": str(onnx_path) if onnx_path else None}
    row.update(measure_predict(predict, test, batches, budget_s, meter[0], meter[1], progress,
                               f"onnxruntime {variant}"))
    row["accuracy"] = top1(outputs, test.labels)
    row["agreement"] = agreement(outputs, reference)
    return row
