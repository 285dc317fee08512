"""Checkpoint files: ``<dir>/step_<NNNNNNNN>.npz``, written atomically.

A checkpoint is one ``.npz`` (no pickle) holding every persistable variable of
a server (its parameter blocks, optimizer state, learning-rate counters) or of
trainer 0 (collective mode), plus ``@STEPS@``: the step each trainer had
completed.  It is written to a temporary file in the same folder, flushed,
fsync'ed and renamed, so a file with the final name is always complete; a job
killed mid-write leaves only a temporary file, removed on the next save.  The
newest ``keep`` checkpoints are kept.

On resume every member is checked strictly against the program
(:func:`check_members`): present, same shape, same dtype -- a checkpoint is
never converted.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ...fileio import atomic_write
from .errors import ClusterError

STEPS_KEY = "@STEPS@"
_NAME = re.compile(r"^step_(\d{8,})\.npz$")


def path_for(directory: str | os.PathLike[str], step: int) -> Path:
    return Path(directory) / f"step_{step:08d}.npz"


def steps(directory: str | os.PathLike[str]) -> list[int]:
    """Steps of the complete checkpoints in ``directory``, oldest first."""
    d = Path(directory)
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        m = _NAME.match(p.name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def save(directory: str | os.PathLike[str], step: int, arrays: dict[str, np.ndarray],
         trainer_steps: list[int], keep: int = 2) -> Path:
    """Write one checkpoint; drop all but the newest ``keep`` and stale temporaries."""
    if STEPS_KEY in arrays:
        raise ClusterError(f"a variable may not be called {STEPS_KEY!r}")
    d = Path(directory)
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False,
             **{**{k: np.asarray(v) for k, v in arrays.items()},
                STEPS_KEY: np.asarray(trainer_steps, np.int64)})
    path = path_for(d, step)
    atomic_write(path, buf.getvalue())
    existing = steps(d)
    kept = [s for s in existing if s <= step][-max(keep, 1):]
    for old in existing:  # all but the newest `keep`, and an older run's later steps
        if old not in kept:
            path_for(d, old).unlink(missing_ok=True)
    for p in d.glob(".step_*.tmp"):
        p.unlink(missing_ok=True)
    return path


def clear(directory: str | os.PathLike[str]) -> int:
    """Delete every checkpoint in ``directory`` (a fresh run must not resume into an
    older run's steps); how many there were."""
    old = steps(directory)
    for s in old:
        path_for(directory, s).unlink(missing_ok=True)
    return len(old)


def load(directory: str | os.PathLike[str], step: int) -> tuple[dict[str, np.ndarray], list[int]]:
    """``(arrays, trainer_steps)`` of one checkpoint."""
    path = path_for(directory, step)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise ClusterError(f"{path}: checkpoint not found") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ClusterError(f"{path}: not a valid checkpoint ({e}); delete it to resume from "
                           "the one before") from None
    if STEPS_KEY not in arrays:
        raise ClusterError(f"{path}: has no {STEPS_KEY} entry; not a fluid-hw checkpoint")
    ts = [int(s) for s in arrays.pop(STEPS_KEY).reshape(-1)]
    return arrays, ts


def latest(directory: str | os.PathLike[str]) -> int | None:
    s = steps(directory)
    return s[-1] if s else None


def check_members(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray],
                  expected: Mapping[str, tuple[tuple[int, ...] | None, np.dtype | None]]) -> None:
    """Raise unless ``arrays`` (read from checkpoint ``path``) holds every name of
    ``expected`` -- ``name -> (shape, dtype)``, None for "not declared" -- with
    exactly that shape and dtype."""
    missing = [n for n in expected if n not in arrays]
    if missing:
        raise ClusterError(f"{path} lacks {missing}; it was written by a different program "
                           "or split")
    for n, (shape, dtype) in expected.items():
        a = arrays[n]
        if dtype is not None and a.dtype != dtype:
            raise ClusterError(f"{path}: member {n!r} has dtype {a.dtype}, the program "
                               f"declares {np.dtype(dtype)}; the checkpoint was written by a "
                               "different program -- resume with that program, or start "
                               "afresh without --resume")
        if shape is not None and tuple(a.shape) != tuple(shape):
            raise ClusterError(f"{path}: member {n!r} has shape {list(a.shape)}, the program "
                               f"declares {list(shape)}; the checkpoint was written by a "
                               "different program or split")
