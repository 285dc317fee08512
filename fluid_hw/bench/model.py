"""What a benchmark runs: a saved inference model and a test set, loaded once.

Every back end gets the same :class:`TestSet` inputs; a batch of size ``b`` is the
first ``b`` test inputs, repeated from the start when ``b`` exceeds the test set.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu.executor import Executor
from ..errors import BenchError, FluidError
from ..frontend import io as fio
from ..ir import dtypes
from ..ir.program import Program
from ..ir.registry import op_has_category
from ..ir.scope import Scope

__all__ = ["Model", "TestSet", "batch_of", "load_model", "load_test_set"]


@dataclass
class Model:
    """A saved inference model: program, parameters, feed and fetch names."""

    path: Path
    program: Program
    scope: Scope
    feeds: list[str]
    fetches: list[str]
    quantized: bool
    fingerprint: str  # sha256 over the model file and its parameter files


def _fingerprint(d: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        h.update(f.relative_to(d).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def is_quantized(program: Program) -> bool:
    """The program holds fixed-point ops (what ``quantize`` writes)."""
    return any(op.type == "quantize" or op_has_category(op.type, "quantised")
               for op in program.global_block().ops)


def load_model(path: str | os.PathLike[str], what: str = "MODEL_DIR") -> Model:
    """The inference model saved in ``path`` (``io.save_inference_model``)."""
    d = Path(path)
    if not d.is_dir():
        raise BenchError(f"{what} {d}: no such folder; give a folder written by "
                         "fluid.io.save_inference_model (e.g. build/demo/mlp_inference)")
    if not (d / "__model__").is_file():
        raise BenchError(f"{what} {d}: no __model__ file, so not a saved inference model; "
                         "give a folder written by fluid.io.save_inference_model")
    scope = Scope()
    try:
        prog, feeds, fetch_vars = fio.load_inference_model(d, Executor(), scope=scope)
    except FluidError as e:
        raise BenchError(f"{what} {d}: cannot load the inference model: {e}") from None
    return Model(d, prog, scope, list(feeds), [v.name for v in fetch_vars],
                 is_quantized(prog), _fingerprint(d))


@dataclass
class TestSet:
    """Inputs by feed name (``n`` examples each) and, when known, integer labels."""

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    source: str

    @property
    def n(self) -> int:
        return len(next(iter(self.inputs.values())))


def _feed_shape(program: Program, name: str) -> tuple[list[int], np.dtype]:
    v = program.global_block().var(name)
    return list(v.shape), np.dtype(dtypes.to_numpy(v.dtype))


def load_test_set(spec: str | os.PathLike[str], model: Model) -> TestSet:
    """``"digits"`` (sklearn's digits test split: 360 images, reshaped to the model's
    input), or an ``.npz`` with one array per feed name and optionally ``labels``, or
    an ``.npy`` of the single input."""
    feeds = model.feeds
    if str(spec) == "digits":
        from ..datasets import load_digits_split

        if len(feeds) != 1:
            raise BenchError(f"the digits test set feeds one input; the model reads {feeds}: "
                             "give --test FILE.npz with one array per input")
        _, xte, _, yte = load_digits_split()
        shape, dt = _feed_shape(model.program, feeds[0])
        per = [s for s in shape[1:]]
        if -1 in per or int(np.prod(per)) != 64:
            raise BenchError(f"the digits test set has 64 pixels per image, but the model's "
                             f"input {feeds[0]!r} has shape {shape}: give --test FILE.npz "
                             "with inputs for this model")
        return TestSet({feeds[0]: xte.reshape(len(xte), *per).astype(dt)}, yte[:, 0],
                       "digits test split (sklearn, 360 images)")
    p = Path(spec)
    if not p.is_file():
        raise BenchError(f"test set {p}: no such file; give 'digits', FILE.npz (one array "
                         "per input name, optional 'labels') or FILE.npy (the single input)")
    try:
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        else:
            arrays = {feeds[0]: np.load(p, allow_pickle=False)} if len(feeds) == 1 else {}
    except (OSError, ValueError) as e:
        raise BenchError(f"test set {p}: unreadable ({e})") from None
    missing = [f for f in feeds if f not in arrays]
    if missing:
        raise BenchError(f"test set {p}: no array for input(s) {missing}; it holds "
                         f"{sorted(arrays)}")
    inputs = {f: np.asarray(arrays[f]) for f in feeds}
    sizes = {len(v) for v in inputs.values()}
    labels = arrays.get("labels")
    if len(sizes) != 1 or (labels is not None and len(labels) not in sizes):
        raise BenchError(f"test set {p}: inputs and labels differ in length "
                         f"({ {k: len(v) for k, v in arrays.items()} })")
    if 0 in sizes:
        raise BenchError(f"test set {p}: holds no examples")
    for f, v in inputs.items():
        _, dt = _feed_shape(model.program, f)
        if v.dtype.kind == "f" and dt.kind == "f":
            inputs[f] = v.astype(dt)
    lab = None if labels is None else np.asarray(labels).reshape(len(labels), -1)[:, 0]
    return TestSet(inputs, lab, str(p))


def batch_of(test: TestSet, b: int) -> dict[str, np.ndarray]:
    """The first ``b`` test inputs (repeated from the start beyond the test set)."""
    idx = np.arange(b) % test.n
    return {k: np.ascontiguousarray(v[idx]) for k, v in test.inputs.items()}


def top1(outputs: Any, labels: np.ndarray | None) -> float | None:
    """Top-1 accuracy of ``outputs`` (``[N, classes]``) against ``labels``."""
    o = np.asarray(outputs)
    if labels is None or o.ndim < 2 or o.shape[-1] < 2:
        return None
    return float((o.reshape(len(o), -1).argmax(1) == labels).mean())
