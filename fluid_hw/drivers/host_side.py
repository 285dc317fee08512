"""What every driver does on the host: read a build's host programs and their
parameters, turn a batch into the model's feeds, and run a host program on values that
keep their sequences' LoD across the accelerator's boundaries."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.cpu import Executor
from ..backends.cpu.fetched import fetched
from ..errors import FluidError
from ..fileio import read_file, read_npz
from ..ir import dtypes
from ..ir.lod import LoDTensor
from ..ir.program import Program
from ..ir.scope import Scope
from .transport import DriverError

__all__ = ["read_host_program", "read_host_params", "feed_dict", "host_value",
           "run_host_program", "host_errors"]


def read_host_program(path: Path) -> Program:
    """A host program of a build (``host/*.pb``; bounded read, inside the build folder)."""
    try:
        data = read_file(path, kind="program", root=path.parent.parent)
    except FluidError as e:
        raise DriverError(f"{str(e).removesuffix('.')}; recompile the model") from None
    try:
        return Program.parse_from_string(data, source=str(path))
    except FluidError as e:
        raise DriverError(f"{path}: not a host program ({e}); recompile the model") from None


def read_host_params(path: Path) -> dict[str, np.ndarray]:
    """The parameters the host programs read (``host/params.npz``; none when absent)."""
    if not path.exists():
        return {}
    try:
        return read_npz(path, kind="params", root=path.parent.parent)
    except FluidError as e:
        raise DriverError(f"{path}: unreadable ({e}); recompile the model") from None


def _value(v: Any) -> Any:
    """A feed value: a LoD tensor (variable-length sequences) as it is, else an array."""
    return v if isinstance(v, LoDTensor) and v.lod() else np.asarray(v)


def feed_dict(batch: Any, feeds: Sequence[str], programs: Sequence[Program]
              ) -> dict[str, Any]:
    """The model's inputs by name from ``batch`` (an array for a one-input model, or a
    dict); float arrays converted to the input's float dtype in the first program
    declaring it.  LoD tensors (sequences) stay LoD tensors."""
    if isinstance(batch, Mapping):
        missing = [f for f in feeds if f not in batch]
        if missing:
            raise DriverError(f"run: no value for input(s) {missing}; the model reads "
                              f"{list(feeds)}")
        out = {f: _value(batch[f]) for f in feeds}
    elif len(feeds) != 1:
        raise DriverError(f"run: the model has inputs {list(feeds)}; pass a dict")
    else:
        out = {feeds[0]: _value(batch)}
    for k, v in out.items():
        for prog in programs:
            gb = prog.global_block()
            if gb.has_var(k):
                want = dtypes.to_numpy(gb.var(k).dtype)
                a = np.asarray(v.data) if isinstance(v, LoDTensor) else v
                if a.dtype != want and a.dtype.kind == "f" and want.kind == "f":
                    out[k] = LoDTensor(a.astype(want), v.lod()) \
                        if isinstance(v, LoDTensor) else a.astype(want)
                break
    return out


def host_value(v: Any) -> Any:
    """A value crossing a host/accelerator boundary: a LoD tensor where it holds
    sequences (LoD), else its array (as ``Executor.run(return_numpy=True)`` gives it)."""
    if isinstance(v, LoDTensor):
        return v if v.lod() else fetched(np.asarray(v.data))
    return fetched(np.asarray(v))


def run_host_program(executor: Executor, program: Program, values: Mapping[str, Any],
                     fetch_list: Sequence[str], scope: Scope) -> list[Any]:
    """Run a host program on those of ``values`` it declares; its fetches as
    :func:`host_value` (sequences keep their lengths for the next region or host op)."""
    gb = program.global_block()
    feed = {k: v for k, v in values.items() if gb.has_var(k)}
    outs = executor.run(program, feed=feed, fetch_list=list(fetch_list), scope=scope,
                        return_numpy=False)
    return [host_value(o) for o in outs]


@contextmanager
def host_errors(build_dir: Path) -> Iterator[None]:
    """A host program's failure as a :class:`DriverError` naming the build (driver
    errors pass as they are)."""
    try:
        yield
    except DriverError:
        raise
    except FluidError as e:
        raise DriverError(f"{build_dir}: the host programs failed: {e}") from e
