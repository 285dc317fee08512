"""Writing files so that no reader ever sees half of one.

Like :mod:`fluid_hw.errors`, this leaf module imports nothing of ours and may be
imported from every part of the package (programs, parameters, checkpoints,
Verilog, reports all need it).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_text"]


def atomic_write(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    A crash leaves either the old file or the new one, never a mix, and no
    temporary behind.  ``durable`` also fsyncs the file and its folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        with contextlib.suppress(OSError):  # platforms without directory fds
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    atomic_write(path, text.encode(), durable=durable)
