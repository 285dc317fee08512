"""Writing files so that no reader ever sees half of one, and reading them so that
no file can hang, exhaust memory or run code.

Like :mod:`fluid_hw.errors`, this leaf module imports nothing of ours but
``errors`` and may be imported from every part of the package (programs,
parameters, checkpoints, Verilog, reports all need it).

Reads (:func:`read_file`, :func:`read_npy`, :func:`read_npz`) accept regular files
only (a FIFO, device, socket or folder is refused before it is opened for
reading), at most :func:`read_limit` bytes for their kind of file, and, given a
``root`` folder, only files that resolve inside it (a symlink that leaves the
folder is refused).  ``.npy`` / ``.npz`` headers are parsed by hand and checked
against the bytes present before anything is allocated; object arrays (which
need pickle) are refused.  Every refusal is a :class:`~fluid_hw.errors.FormatError`
naming the file and the fix.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import stat
import struct
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO

import numpy as np

from .errors import FluidError, FormatError, unknown_name

__all__ = ["LIMITS", "ArrayCheck", "atomic_write", "atomic_write_text", "read_file", "read_limit",
           "read_npy", "read_npz"]


def atomic_write(path: str | os.PathLike[str], data: bytes, *, durable: bool = True,
                 mode: int | None = None) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    A crash leaves either the old file or the new one, never a mix, and no
    temporary behind.  ``durable`` also fsyncs the file and its folder; ``mode``
    (e.g. 0o644) replaces the temporary file's 0600 before the rename.
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
        if mode is not None:
            os.chmod(tmp, mode)
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


# -- bounded, validated reads ------------------------------------------------
_MiB, _GiB = 1 << 20, 1 << 30

#: Default size limit, in bytes, for each kind of file read; ``FLUID_HW_MAX_<KIND>_BYTES``
#: (e.g. ``FLUID_HW_MAX_PARAMS_BYTES=16G``) overrides one for big models.
LIMITS: dict[str, int] = {
    "program": 64 * _MiB,  # a serialised ProgramDesc (``__model__``): ops, not weights
    "params": 2 * _GiB,    # one parameter ``.npy``, or one ``.npz`` of parameters
    "data": 2 * _GiB,      # arrays a user feeds (inputs, labels)
    "onnx": 2 * _GiB,      # an .onnx model (protobuf's limit for one message)
}

#: Array element kinds a file may hold: bool, signed, unsigned, float, complex.
_KINDS = "biufc"
_MAX_HEADER = 10_000  # numpy's own bound on a .npy header
_SUFFIX = {"": 1, "K": 1 << 10, "M": _MiB, "G": _GiB, "T": 1 << 40}

#: ``check(name, dtype, shape)``: called with each array's header, before its data
#: is allocated; raises to refuse it.  ``name`` is the ``.npz`` key (``None`` for a ``.npy``).
ArrayCheck = Callable[[str | None, np.dtype, tuple[int, ...]], None]


def _env_name(kind: str) -> str:
    return f"FLUID_HW_MAX_{kind.upper()}_BYTES"


def read_limit(kind: str) -> int:
    """The byte limit for ``kind`` (a key of :data:`LIMITS`), after the environment override."""
    if kind not in LIMITS:
        raise unknown_name("kind of file", kind, LIMITS)
    env = _env_name(kind)
    text = os.environ.get(env, "").strip()
    if not text:
        return LIMITS[kind]
    m = re.fullmatch(r"(\d+)\s*([KMGT]?)(?:i?B)?", text, re.IGNORECASE)
    value = int(m[1]) * _SUFFIX[m[2].upper()] if m else 0
    if value <= 0:
        raise FluidError(f"{env}={text!r} is not a size; give bytes, optionally with K, M, G "
                         f"or T (binary), e.g. {env}=8G")
    return value


def _fmt_size(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", _GiB), ("MiB", _MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _what_is(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


@contextlib.contextmanager
def _open_regular(path: Path, kind: str, root: str | os.PathLike[str] | None
                  ) -> Iterator[tuple[IO[bytes], int]]:
    """Open ``path`` for reading once it is known to be a regular file within the
    limit (and inside ``root``); yields the file and its size."""
    limit = read_limit(kind)
    try:
        real = Path(os.path.realpath(path))
        if root is not None:
            top = Path(os.path.realpath(root))
            if real != top and top not in real.parents:
                raise FormatError(f"{path}: resolves to {real}, outside the folder {top}; "
                                  "refusing to read it (copy the file into the folder instead "
                                  "of linking to it)")
        st = os.stat(real)
    except FileNotFoundError:
        raise FormatError(f"{path}: file not found") from None
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None
    except ValueError as e:  # an embedded NUL byte
        raise FormatError(f"{path!r}: not a usable file name ({e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise FormatError(f"{path}: is a folder, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise FormatError(f"{path}: is {_what_is(st.st_mode)}, not a regular file; refusing to "
                          "read it (copy the data into a regular file)")
    _check_limit(path, st.st_size, limit, kind)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:  # O_NONBLOCK: a FIFO swapped in after the stat still cannot hang the open
        fd = os.open(real, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{path}: is {_what_is(st.st_mode)}, not a regular file; "
                              "refusing to read it (copy the data into a regular file)")
        _check_limit(path, st.st_size, limit, kind)
        yield f, st.st_size


def _check_limit(path: Path, size: int, limit: int, kind: str, what: str = "is") -> None:
    if size > limit:
        raise FormatError(f"{path}: {what} {_fmt_size(size)}, more than the {_fmt_size(limit)} "
                          f"allowed for a {kind} file; if the file is genuine, raise the limit "
                          f"with {_env_name(kind)}=<bytes> (e.g. 16G)")


def read_file(path: str | os.PathLike[str], *, kind: str,
              root: str | os.PathLike[str] | None = None) -> bytes:
    """The bytes of ``path``: a regular file of at most ``read_limit(kind)`` bytes,
    inside ``root`` when given."""
    p = Path(path)
    with _open_regular(p, kind, root) as (f, size):
        data = f.read(size + 1)
    if len(data) > size:
        raise FormatError(f"{p}: grew while it was read; is another program writing it?")
    return data


def _where(path: Path, member: str | None) -> str:
    return f"{path}" if member is None else f"{path}: array {member!r}"


def _bad(path: Path, member: str | None, detail: str) -> FormatError:
    return FormatError(f"{_where(path, member)}: not a valid .npy array ({detail}); the file "
                       "is truncated or corrupted: save it again")


def _read_exact(f: IO[bytes], n: int, path: Path, member: str | None) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise _bad(path, member, "it ends inside its header")
    return data


def _read_header(f: IO[bytes], path: Path, member: str | None
                 ) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """Parse a .npy header without numpy's parser (which can raise tokenize errors)."""
    magic = f.read(8)
    if len(magic) < 8 or magic[:6] != b"\x93NUMPY":
        raise _bad(path, member, "no .npy magic string at its start")
    major = magic[6]
    if major not in (1, 2, 3):
        raise _bad(path, member, f"unknown .npy format version {major}.{magic[7]}")
    fmt, enc = ("<H", "latin1") if major == 1 else ("<I", "latin1" if major == 2 else "utf8")
    raw = _read_exact(f, struct.calcsize(fmt), path, member)
    (hlen,) = struct.unpack(fmt, raw)
    if hlen > _MAX_HEADER:
        raise _bad(path, member, f"header of {hlen} bytes, more than {_MAX_HEADER}")
    try:
        header = _read_exact(f, hlen, path, member).decode(enc)
        d = ast.literal_eval(header)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise _bad(path, member, f"unreadable header: {type(e).__name__}") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise _bad(path, member, "the header is not a dict of descr, fortran_order and shape")
    descr, fortran, shape = d["descr"], d["fortran_order"], d["shape"]
    if not isinstance(fortran, bool):
        raise _bad(path, member, f"fortran_order is {fortran!r}")
    if not (isinstance(shape, tuple)
            and all(type(n) is int and 0 <= n < 1 << 62 for n in shape)):
        raise _bad(path, member, f"shape {shape!r} is not a tuple of sizes")
    where = _where(path, member)
    if not isinstance(descr, str):
        raise FormatError(f"{where}: is a structured array ({descr!r}); only plain numeric "
                          "arrays are read: save each field as its own array")
    try:
        with warnings.catch_warnings():  # a deprecated spelling is refused, not warned about
            warnings.simplefilter("error")
            dtype = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError, Warning):
        raise _bad(path, member, f"unknown dtype {descr!r}") from None
    if dtype.hasobject:
        raise FormatError(f"{where}: holds Python objects (dtype {descr!r}), which only "
                          "pickle can load, and fluid-hw never unpickles; save numeric arrays "
                          "(np.save(..., allow_pickle=False))")
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise FormatError(f"{where}: holds dtype {descr!r}; only plain numeric or bool "
                          "arrays are read")
    return dtype, tuple(shape), fortran, 8 + len(raw) + hlen


def _read_array(f: IO[bytes], data_size: int, path: Path, member: str | None,
                check: ArrayCheck | None) -> np.ndarray:
    """Read one .npy from ``f``, which holds exactly ``data_size`` bytes after its
    start; the header must account for every one of them."""
    dtype, shape, fortran, header_size = _read_header(f, path, member)
    left = data_size - header_size
    count = 1
    for n in shape:
        count *= n
    need = count * dtype.itemsize
    if need != left:
        raise _bad(path, member, f"the header declares shape {shape} of {dtype}, "
                                 f"{_fmt_size(need)} of data, but {_fmt_size(left)} follow it")
    if check is not None:
        check(member, dtype, shape)
    arr = np.empty(count, dtype)
    view = arr.data.cast("B")
    got = 0
    while got < need:
        n = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise _bad(path, member, f"ends after {got} of {need} data bytes")
        got += n
    if fortran:
        return arr.reshape(shape[::-1]).transpose()
    return arr.reshape(shape)


def read_npy(path: str | os.PathLike[str], *, kind: str = "params",
             root: str | os.PathLike[str] | None = None,
             check: ArrayCheck | None = None) -> np.ndarray:
    """One array from a ``.npy`` file, read as :func:`read_file` reads; its header is
    checked against the file's size (and by ``check``) before the array is allocated."""
    p = Path(path)
    with _open_regular(p, kind, root) as (f, size):
        if f.read(2) == b"PK":
            raise FormatError(f"{p}: is a .npz (zip) archive, expected one .npy array")
        f.seek(0)
        return _read_array(f, size, p, None, check)


_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
               NotImplementedError, RuntimeError, zlib.error, struct.error, KeyError,
               OverflowError, IndexError)


def read_npz(path: str | os.PathLike[str], *, kind: str = "params",
             root: str | os.PathLike[str] | None = None,
             names: Collection[str] | None = None,
             check: ArrayCheck | None = None) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` file (all of them, or ``names``), keyed as ``np.load``
    keys them; the archive's declared sizes are bounded by the limit for ``kind``
    and each header is checked before its array is allocated."""
    p = Path(path)
    with _open_regular(p, kind, root) as (f, _):
        if f.read(6) == b"\x93NUMPY":
            raise FormatError(f"{p}: is a single .npy array, expected a .npz archive of "
                              "named arrays; save them with np.savez")
        f.seek(0)
        try:
            with zipfile.ZipFile(f) as z:
                return _read_members(z, p, kind, names, check)
        except FluidError:
            raise
        except _ZIP_ERRORS as e:
            raise FormatError(f"{p}: not a valid .npz archive ({type(e).__name__}: {e}); the "
                              "file is truncated or corrupted: save it again") from None


def _read_members(z: zipfile.ZipFile, path: Path, kind: str, names: Collection[str] | None,
                  check: ArrayCheck | None) -> dict[str, np.ndarray]:
    infos: dict[str, zipfile.ZipInfo] = {}
    for info in z.infolist():
        key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if key in infos:
            raise FormatError(f"{path}: holds array {key!r} twice; save it again")
        infos[key] = info
    # what the archive unpacks to, read or not, is bounded like the file itself
    _check_limit(path, sum(i.file_size for i in infos.values()), read_limit(kind), kind,
                 "unpacks to")
    if names is not None:
        missing = [n for n in names if n not in infos]
        if missing:
            held = ", ".join(sorted(infos)[:20]) or "nothing"
            raise FormatError(f"{path}: has no array for {', '.join(map(repr, missing))} "
                              f"(it holds: {held})")
        infos = {n: infos[n] for n in names}
    out: dict[str, np.ndarray] = {}
    for key, info in infos.items():
        with z.open(info) as m:
            out[key] = _read_array(m, info.file_size, path, key, check)
            if m.read(1):  # also makes zipfile verify the member's CRC
                raise _bad(path, key, "data after the array")
    return out
