"""The build folder: one reader and writer for every file in it.

``fluid-hw compile`` makes a build folder, ``simulate`` and ``bitstream`` add to it,
the drivers read it.  All of them go through :class:`BuildDir`, which

* names every file once (:data:`NAMES`, :data:`STEP_FILES`) and every report key by the
  step that writes it (:data:`REPORT_KEYS`);
* reads each file bounded and validated (``fluid_hw.fileio``: regular files only, a
  size limit, ``.npz`` headers checked before allocation, never pickle) and gives typed
  values (``design()``, ``host()``, ``report()``, ``segments()``, ``weights()``,
  ``host_params()``), refusing a malformed one with a :class:`BuildDirError` that names
  the file and says to recompile;
* writes each file atomically (a per-process temporary renamed over it), mode 0644
  less the umask;
* keeps a **manifest** (``manifest.json``): written last by each step (compile,
  simulate, bitstream), it lists the build's files with their sizes and sha256 and the
  build's identity (its design hash).  Every reader checks the folder against it
  first (:meth:`BuildDir.verify`), so a folder that a killed or concurrent step left
  half-written, a truncated file, or a file from another build is refused, naming the
  file, before anything of it is used.  ``compile`` replaces the manifest by an
  in-progress marker before it writes anything, so a compile that does not finish (killed,
  failed, stopped early) over a build leaves a folder no reader takes.  A folder with a
  report.json but no manifest (made before manifests existed, or its manifest deleted)
  is refused too: recompile.  A folder with neither was not made by ``compile`` (files
  put together by hand): its files are only validated as they are read;
* holds an exclusive lock (``fcntl.flock`` on ``.fluid-hw.lock``) while a step
  writes (:meth:`BuildDir.writing`): a second writer fails at once, naming the
  holder's pid and step.  The kernel drops the lock of a process that dies, so a
  stale lock file is simply taken over.

This module is in ``drivers`` (which may not import the FPGA back end) so that both
the back end and the drivers use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import fileio
from ..errors import BuildDirError, BuildLockedError, FluidError

__all__ = ["BuildDir", "BuildDirError", "BuildLockedError", "NAMES", "STEP_FILES",
           "REPORT_KEYS", "MANIFEST", "HostFile", "atomic_write_file", "normalise_modes",
           "to_json"]


#: every file (or folder) of a build folder, by the name the code uses
NAMES: dict[str, str] = {
    "verilog": "accelerator.v",
    "design": "design.json",
    "registers_md": "registers.md",
    "registers_h": "registers.h",
    "lowering": "lowering.json",
    "report": "report.json",
    "weights": "weights.npz",
    "segments": "segments.json",
    "model": "model",
    "float_model": "float_model",
    "host": "host",
    "host_json": "host/host.json",
    "host_params": "host/params.npz",
    "regions": "regions",
    "outputs": "outputs.npy",
    "outputs_npz": "outputs.npz",
    "outputs_lengths": "outputs.lengths.npy",
    "bit": "accelerator.bit",
    "bin": "accelerator.bin",
    "bitstream_json": "bitstream.json",
    "report_html": "report.html",
    "manifest": "manifest.json",
    "lock": ".fluid-hw.lock",
}
MANIFEST = NAMES["manifest"]
MANIFEST_FORMAT = 1

#: the top-level files and folders each step writes (what the manifest covers)
STEP_FILES: dict[str, tuple[str, ...]] = {
    "compile": tuple(NAMES[k] for k in ("verilog", "design", "registers_md", "registers_h",
                                        "lowering", "report", "weights", "segments",
                                        "model", "float_model", "host", "regions")),
    "simulate": (NAMES["outputs"], NAMES["outputs_npz"], NAMES["outputs_lengths"]),
    "bitstream": (NAMES["bit"], NAMES["bin"], NAMES["bitstream_json"]),
}

#: keys of report.json by the step that writes them (shared/DESIGN.md, Build report);
#: ``bitstream`` also restates ``throughput_per_s`` / ``latency_us`` at its Fmax
REPORT_KEYS: dict[str, tuple[str, ...]] = {
    "compile": ("target", "clock_mhz", "weights", "stages", "estimate", "throughput_per_s",
                "latency_us", "design_hash", "lowering_hash", "folding", "fifo_depths", "model",
                "quantized", "partition", "compile_seconds", "autofold"),
    "simulate": ("measured", "bit_exact", "mismatches", "first_mismatch", "inputs", "accuracy",
                 "activations_at_rails", "mac_utilisation", "measured_at_fmax", "debug_stages",
                 "cocotb", "simulate_seconds"),
    "bitstream": ("fmax_mhz", "timing_met", "critical_path", "resources_used",
                  "resources_available", "throughput_per_s", "latency_us",
                  "resources_estimate_vs_actual", "bitstream"),
}

_COVERED = frozenset(n for names in STEP_FILES.values() for n in names)
_JSON_LIMIT = 64 << 20   # report/design/host/segments .json: far below this
_TEXT_KIND = "program"   # fileio's 64 MiB class: Verilog, registers, json
_MODE = 0o666


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def atomic_write_file(path: str | os.PathLike[str], data: bytes) -> None:
    """``fileio.atomic_write`` with the build folder's file mode (0644 less the umask)."""
    fileio.atomic_write(path, data, mode=_MODE & ~_umask())


def normalise_modes(path: str | os.PathLike[str]) -> None:
    """Give every file under ``path`` the build folder's file mode (0644 less the umask):
    files some writers make 0600 (``mkstemp``) and others 0644 all read alike."""
    mode = _MODE & ~_umask()
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, f), mode)


def _savez_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    import io

    buf = io.BytesIO()
    named: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}  # not allow_pickle=
    np.savez(buf, **named)
    return buf.getvalue()


def to_json(v: Any) -> Any:
    """numpy scalars/arrays and tuples -> plain JSON values (non-finite floats: null)."""
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [to_json(x) for x in v]
    if isinstance(v, np.ndarray):
        return to_json(v.tolist())
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating | float):
        f = float(v)
        return f if np.isfinite(f) else None
    return v


# -- typed files ------------------------------------------------------------------------

@dataclass(frozen=True)
class HostFile:
    """``host/host.json``: the host side of a single-region build's partition."""

    feeds: list[str]
    fetches: list[str]
    hw_input: str
    hw_output: str
    in_perm: np.ndarray
    out_perm: np.ndarray
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    weights: str
    design_hash: str
    #: the recurrence runs each sequence from its last step (is_reverse): the driver
    #: streams the steps reversed and puts a whole-sequence output back in order
    reverse_sequences: bool = False


def _need(cond: object, what: str) -> None:
    if not cond:
        raise ValueError(what)


def _names(v: Any, what: str) -> list[str]:
    _need(isinstance(v, list) and all(isinstance(x, str) for x in v), f"{what}: not a list "
          "of names")
    return list(v)


def _ints(v: Any, what: str, *, lo: int = 0) -> list[int]:
    _need(isinstance(v, list) and all(type(x) is int and x >= lo for x in v),
          f"{what}: not a list of integers >= {lo}")
    return list(v)


def _perm(v: Any, what: str) -> np.ndarray:
    p = _ints(v, what)
    _need(sorted(p) == list(range(len(p))), f"{what}: not a permutation")
    return np.asarray(p, np.int64)


# -- the lock ---------------------------------------------------------------------------

_HELD: dict[str, list[Any]] = {}   # realpath -> [fd, depth, step] held by this process
_HELD_GUARD = threading.Lock()


class BuildDir:
    """A build folder (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._verified = False

    def __repr__(self) -> str:
        return f"BuildDir({str(self.path)!r})"

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def file(self, key: str) -> Path:
        """The path of a file by its key in :data:`NAMES`."""
        return self.path / NAMES[key]

    @property
    def model_dir(self) -> Path:
        return self.file("model")

    @property
    def is_regioned(self) -> bool:
        """A multi-region build (``segments.json``)."""
        return self.file("segments").exists()

    def region(self, k: int | str) -> BuildDir:
        return BuildDir(self.path / NAMES["regions"] / str(k))

    # -- errors --------------------------------------------------------------------------
    def _error(self, path: Path | str, detail: str) -> BuildDirError:
        return BuildDirError(f"{path}: {detail}; recompile the model into {self.path} "
                             "(`fluid-hw compile MODEL --out BUILD_DIR`)")

    # -- the lock ------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, step: str, *, fresh: bool = False, manifest: bool = True
                ) -> Iterator[BuildDir]:
        """Hold the folder's lock while ``step`` writes; on success write the manifest
        last (unless ``manifest`` is false: a compile stopped early).  ``fresh``
        (compile): replace the manifest by an in-progress marker first, so the folder is
        no build until the step finishes.  A second writer (another process) fails at
        once; a step of this process inside another on the same folder shares its lock."""
        self.path.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(self.path)
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is not None:
                held[1] += 1
        if held is not None:  # this process already writes it (a step inside a step)
            try:
                if fresh:
                    self._mark_writing(step)
                yield self
            finally:
                with _HELD_GUARD:
                    held[1] -= 1
            return
        fd = self._lock(step)
        with _HELD_GUARD:
            _HELD[key] = [fd, 1, step]
        try:
            if fresh:
                self._mark_writing(step)
            try:
                yield self
            except BaseException:
                if fresh:
                    self._unmark_unbuilt()
                raise
            if manifest:
                self.write_manifest(step)
            elif fresh:
                self._unmark_unbuilt()
        finally:
            with _HELD_GUARD:
                _HELD.pop(key, None)
            # removed while still held: a process that opened this file meanwhile finds
            # it unlinked after taking it (_lock) and takes the new one
            with contextlib.suppress(OSError):
                self.file("lock").unlink()
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _unmark_unbuilt(self) -> None:
        """A compile that failed or stopped early in a folder that holds no report.json
        (no compile finished there) removes its marker: the folder is then plainly not a
        build (its readers say which file is missing).  Over an older build the marker
        stays, so the mixture is refused.  A killed compile leaves it in either case."""
        if not self.file("report").exists():
            self.file("manifest").unlink(missing_ok=True)

    def _mark_writing(self, step: str) -> None:
        """Replace the manifest by a marker: the folder is no build until ``step``
        writes the manifest again (a killed step leaves the marker)."""
        doc = {"format": MANIFEST_FORMAT, "state": "writing", "step": step,
               "pid": os.getpid()}
        atomic_write_file(self.file("manifest"), (json.dumps(doc, indent=1) + "\n").encode())
        self._verified = False

    def _lock(self, step: str) -> int:
        path = self.file("lock")
        while True:
            fd = self._try_lock(path, step)
            try:  # the file we locked is still the lock file (not unlinked by its holder)
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    break
            except FileNotFoundError:
                pass
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "step": step}).encode(), 0)
        return fd

    def _try_lock(self, path: Path, step: str) -> int:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise BuildLockedError(f"{path}: cannot open the build folder's lock file "
                                   f"({e.strerror}); is {self.path} writable?") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            except (ValueError, UnicodeDecodeError):
                holder = {}
            os.close(fd)
            raise BuildLockedError(
                f"{self.path}: `fluid-hw {holder.get('step', '?')}` (pid "
                f"{holder.get('pid', '?')}) is writing this build folder; wait for it to "
                "finish, or write into another folder (--out)") from None
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- the manifest --------------------------------------------------------------------
    def _covered_files(self) -> list[str]:
        """Relative paths of the build's files present now (what a manifest lists)."""
        out: list[str] = []
        for name in sorted(_COVERED):
            p = self.path / name
            if p.is_symlink() or p.is_file():
                out.append(name)
            elif p.is_dir():
                for root, dirs, files in os.walk(p):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    for f in sorted(files):
                        if not f.startswith("."):
                            out.append(str(Path(root, f).relative_to(self.path)))
        return out

    def _hash(self, rel: str, size: int | None = None) -> tuple[int, str]:
        """Size and sha256 of a build file: a regular file (no FIFO, device or link
        out of the folder), read in pieces up to ``size`` (+1) bytes when known."""
        p = self.path / rel
        try:
            real = Path(os.path.realpath(p))
            top = Path(os.path.realpath(self.path))
            if top not in real.parents:
                raise self._error(p, f"resolves to {real}, outside the build folder")
            st = os.stat(real)
        except FileNotFoundError:
            raise self._error(p, "missing (listed in manifest.json)") from None
        except OSError as e:
            raise self._error(p, f"cannot be read ({e.strerror})") from None
        if not stat.S_ISREG(st.st_mode):
            raise self._error(p, "is not a regular file")
        if size is not None and st.st_size != size:
            raise self._error(p, f"is {st.st_size} bytes, but the build wrote {size} "
                                 "(truncated, replaced, or from another build)")
        h = hashlib.sha256()
        n = 0
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError as e:
            raise self._error(p, f"cannot be read ({e.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self._error(p, "is not a regular file")
            limit = st.st_size + 1
            while n < limit:
                chunk = f.read(min(1 << 20, limit - n))
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
        if size is not None and n != size:
            raise self._error(p, f"changed while it was read ({n} bytes, expected {size})")
        return n, h.hexdigest()

    def identity(self) -> str:
        """The build's identity: its design hash (design.json; a multi-region build: the
        report's, its regions' hashes joined)."""
        for key in ("design", "report"):
            p = self.file(key)
            if p.is_file():
                try:
                    doc = json.loads(fileio.read_file(p, kind=_TEXT_KIND))
                    h = doc.get("design_hash") if isinstance(doc, dict) else None
                    if isinstance(h, str):
                        return h
                except (FluidError, ValueError, UnicodeDecodeError):
                    pass
        return ""

    def write_manifest(self, step: str) -> dict[str, Any]:
        """List the build's files (sizes, sha256) and identity in ``manifest.json``; the
        last write of every step."""
        old = self._manifest_or_none()
        steps = list(old.get("steps", [])) if old else []
        if step not in steps:
            steps.append(step)
        files = {}
        for rel in self._covered_files():
            size, digest = self._hash(rel)
            files[rel] = {"size": size, "sha256": digest}
        doc = {"format": MANIFEST_FORMAT, "state": "complete", "design_hash": self.identity(),
               "steps": steps, "last_step": step, "files": files}
        atomic_write_file(self.file("manifest"), (json.dumps(doc, indent=1) + "\n").encode())
        self._verified = True
        return doc

    def _manifest_or_none(self) -> dict[str, Any] | None:
        try:
            return self.manifest() or None
        except BuildDirError:
            return None

    def manifest(self) -> dict[str, Any]:
        """``manifest.json``, validated."""
        p = self.file("manifest")
        if not p.exists() and not p.is_symlink():
            if self.file("report").exists() or self.file("report").is_symlink():
                raise self._error(p, "not found: the folder was made by a fluid-hw from "
                                     "before build manifests, or its manifest was deleted, "
                                     "so nothing in it can be checked")
            return {}  # not made by compile (no report.json): hand-made files, see verify
        doc = self._json(p)
        if doc.get("state") == "writing":
            raise self._error(p, f"`fluid-hw {doc.get('step', 'compile')}` (pid "
                                 f"{doc.get('pid', '?')}) began writing this folder and did "
                                 "not finish (killed, failed, stopped early with "
                                 "--stop-after, or still running), so its files may be a "
                                 "mixture of two builds")
        try:
            _need(doc.get("state") == "complete", f"state {doc.get('state')!r}")
            _need(doc.get("format") == MANIFEST_FORMAT, f"unknown format {doc.get('format')!r}")
            _need(isinstance(doc.get("design_hash"), str), "design_hash is not a string")
            files = doc.get("files")
            if not isinstance(files, dict):
                raise ValueError("files is not an object")
            for rel, f in files.items():
                _need(isinstance(f, dict) and type(f.get("size")) is int and f["size"] >= 0
                      and isinstance(f.get("sha256"), str), f"entry {rel!r} is malformed")
                _need(not Path(rel).is_absolute() and ".." not in Path(rel).parts,
                      f"entry {rel!r} leaves the folder")
        except ValueError as e:
            raise self._error(p, f"malformed ({e})") from None
        return doc

    def held_here(self) -> bool:
        """This process holds the folder's lock (a step of it is writing)."""
        return os.path.realpath(self.path) in _HELD

    def verify(self, *, force: bool = False) -> dict[str, Any]:
        """Check the folder against its manifest: every listed file present with its
        size and sha256, no build file the manifest does not list, and the identity
        in design.json / report.json; returns the manifest.  Skipped (``{}``) while this
        process writes the folder, unless ``force``."""
        if not force and self.held_here():  # this process is writing it: checked at
            return {}                          # the start of its step
        doc = self.manifest()
        if self._verified or not doc:  # no manifest and no report.json: not a compiled
            return doc                 # folder, its files are only validated as read
        files: dict[str, Any] = doc["files"]
        for rel, f in files.items():
            _, digest = self._hash(rel, f["size"])
            if digest != f["sha256"]:
                raise self._error(self.path / rel, "differs from the file the build wrote "
                                  "(its sha256 is not the one in manifest.json: edited, "
                                  "replaced or from another build)")
        extra = [rel for rel in self._covered_files() if rel not in files]
        if extra:
            raise self._error(self.path / extra[0], "is not part of this build (not in "
                              "manifest.json): left by an interrupted step or copied from "
                              "another build")
        ident = self.identity()
        if ident != doc["design_hash"]:
            raise self._error(self.file("manifest"), f"names design {doc['design_hash'][:16]!r}"
                              f", but the folder holds {ident[:16]!r} (a mixed folder)")
        self._verified = True
        return doc

    # -- reads ---------------------------------------------------------------------------
    def _json(self, p: Path) -> dict[str, Any]:
        try:
            data = fileio.read_file(p, kind=_TEXT_KIND)
        except FluidError as e:
            raise self._error(p, str(e).removeprefix(f"{p}: ")) from None
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise self._error(p, f"not valid JSON ({type(e).__name__}: {e})") from None
        if not isinstance(doc, dict):
            raise self._error(p, "not a JSON object")
        return doc

    def _checked(self, key: str) -> Path:
        self.verify()
        p = self.file(key)
        if not p.exists():
            raise self._error(p, "not found")
        return p

    def read_json(self, key: str) -> dict[str, Any]:
        """A JSON file of the build (verified against the manifest)."""
        return self._json(self._checked(key))

    def text(self, key: str) -> str:
        p = self._checked(key)
        try:
            return fileio.read_file(p, kind=_TEXT_KIND).decode("utf-8")
        except FluidError as e:
            raise self._error(p, str(e).removeprefix(f"{p}: ")) from None
        except UnicodeDecodeError as e:
            raise self._error(p, f"not UTF-8 text ({e})") from None

    def verilog(self) -> str:
        """``accelerator.v``."""
        p = self.file("verilog")
        if not p.exists() and not self.file("manifest").exists():
            raise self._error(p, "not found: is this a build folder made by `fluid-hw "
                                 "compile`?")
        text = self.text("verilog")
        if not text.rstrip().endswith("endmodule"):
            raise self._error(p, "does not end its last module (truncated)")
        return text

    def design(self) -> dict[str, Any]:
        """``design.json`` (``AcceleratorTop.describe()``), its fields checked."""
        p = self.file("design")
        if not p.exists() and not self.file("manifest").exists():
            raise self._error(p, "not found: is this a build folder made by `fluid-hw "
                                 "compile`?")
        d = self.read_json("design")
        try:
            _need(isinstance(d.get("name"), str) and d["name"].isidentifier(), "name")
            _need(isinstance(d.get("design_hash", ""), str), "design_hash")
            for k in ("in_lanes", "out_lanes", "out_bits"):
                _need(type(d.get(k)) is int and 0 < d[k] <= 1 << 16, k)
            _need(d["out_bits"] % 8 == 0, "out_bits")
            _need(isinstance(d.get("stages", []), list), "stages")
            regs = d.get("registers", {})
            _need(isinstance(regs, dict) and all(type(v) is int and 0 <= v < 1 << 32
                                                 for v in regs.values()), "registers")
            _need(type(d.get("in_len", 1)) is int and type(d.get("out_len", 1)) is int,
                  "in_len / out_len")
            _need(isinstance(d.get("edge_fifo", []), list), "edge_fifo")
            for s in d.get("param_segments", []):
                _need(isinstance(s, dict) and all(type(s.get(k)) is int and s[k] >= 0 for k in
                                                  ("base", "depth", "words_per_entry")),
                      "param_segments")
        except (ValueError, TypeError, KeyError) as e:
            raise self._error(p, f"malformed field {e}") from None
        return d

    def report(self, *, missing_ok: bool = True, check: bool = True) -> dict[str, Any]:
        """``report.json`` (``{}`` when absent and ``missing_ok``); ``check=False``
        reads it without the manifest (a step writing the folder)."""
        p = self.file("report")
        if not p.exists():
            if missing_ok:
                return {}
            raise self._error(p, "not found")
        return self.read_json("report") if check else self._json(p)

    def update_report(self, step: str | None, keys: Mapping[str, Any],
                      drop: Sequence[str] = ()) -> dict[str, Any]:
        """Merge ``keys`` (``step``'s, see :data:`REPORT_KEYS`) into report.json, removing
        ``drop``; atomic; returns the whole report."""
        if step is not None and step not in REPORT_KEYS:
            raise ValueError(f"unknown build step {step!r}")
        report = self.report(check=False)
        for k in drop:
            report.pop(k, None)
        report.update(to_json(dict(keys)))
        self.write_text("report", json.dumps(report, indent=1, sort_keys=False) + "\n")
        return report

    def host(self) -> HostFile:
        """``host/host.json``, its fields checked."""
        p = self.file("host_json")
        if not p.exists() and not self.file("manifest").exists():
            raise self._error(p, f"not found; is {self.path} a build folder made by "
                                 "`fluid-hw compile`?")
        d = self.read_json("host_json")
        try:
            in_shape = tuple(_ints(d["in_shape"], "in_shape"))
            out_shape = tuple(_ints(d["out_shape"], "out_shape"))
            in_perm, out_perm = _perm(d["in_perm"], "in_perm"), _perm(d["out_perm"], "out_perm")
            _need(len(in_perm) == int(np.prod(in_shape)), "in_perm: not one entry an element")
            _need(len(out_perm) == int(np.prod(out_shape)), "out_perm: not one entry an "
                                                            "element")
            for k in ("hw_input", "hw_output", "weights", "design_hash"):
                _need(isinstance(d[k], str), f"{k}: not a string")
            _need(d["weights"] in ("const", "runtime"), "weights: not const or runtime")
            reverse = d.get("reverse_sequences", False)
            _need(isinstance(reverse, bool), "reverse_sequences: not true or false")
            return HostFile(_names(d["feeds"], "feeds"), _names(d["fetches"], "fetches"),
                            d["hw_input"], d["hw_output"], in_perm, out_perm, in_shape,
                            out_shape, d["weights"], d["design_hash"], reverse)
        except KeyError as e:
            raise self._error(p, f"malformed (no {e})") from None
        except ValueError as e:
            raise self._error(p, f"malformed ({e})") from None

    def segments(self) -> dict[str, Any]:
        """``segments.json`` of a multi-region build, its fields checked."""
        p = self.file("segments")
        d = self.read_json("segments")
        try:
            _names(d["feeds"], "feeds")
            _names(d["fetches"], "fetches")
            regions = d["regions"]
            _need(isinstance(regions, list) and regions, "regions: not a list")
            for k, r in enumerate(regions):
                _need(isinstance(r, dict) and r.get("dir") == f"{NAMES['regions']}/{k}"
                      and isinstance(r.get("design_hash"), str), f"regions[{k}]")
            host = _names(d["host"], "host")
            _need(len(host) == len(regions) + 1, f"{len(host)} host programs for "
                                                 f"{len(regions)} regions")
            _need(all(h.startswith("host/") and ".." not in h for h in host), "host")
        except KeyError as e:
            raise self._error(p, f"malformed (no {e})") from None
        except ValueError as e:
            raise self._error(p, f"malformed ({e})") from None
        return d

    def host_program_bytes(self, rel: str) -> bytes:
        """A host program (``host/pre.pb``, ``host/seg<k>.pb``), bounded."""
        self.verify()
        p = self.path / rel
        try:
            return fileio.read_file(p, kind="program", root=self.path)
        except FluidError as e:
            raise self._error(p, str(e).removeprefix(f"{p}: ")) from None

    def _npz(self, key: str, check: Any = None, names: Sequence[str] | None = None
             ) -> dict[str, np.ndarray]:
        p = self._checked(key)
        try:
            return fileio.read_npz(p, kind="params", root=self.path, check=check, names=names)
        except FluidError as e:
            raise self._error(p, str(e).removeprefix(f"{p}: ")) from None

    def host_params(self) -> dict[str, np.ndarray]:
        """``host/params.npz``: the parameters the host programs read (none when absent)."""
        if not self.file("host_params").exists():
            self.verify()
            return {}
        return self._npz("host_params")

    def weights(self) -> list[tuple[int, np.ndarray]]:
        """``weights.npz``: the runtime parameter image, as ``(base, uint32 words)``
        segments, checked against design.json's parameter memories."""
        p = self.file("weights")
        return read_param_image(p, self._npz("weights", names=("bases", "lengths", "words"),
                                             check=_image_check(p)),
                                error=lambda detail: self._error(p, detail))

    # -- writes --------------------------------------------------------------------------
    def write_bytes(self, key_or_rel: str, data: bytes) -> Path:
        p = self.path / NAMES.get(key_or_rel, key_or_rel)
        atomic_write_file(p, data)
        return p

    def write_text(self, key_or_rel: str, text: str) -> Path:
        return self.write_bytes(key_or_rel, text.encode())

    def write_json(self, key_or_rel: str, doc: Any) -> Path:
        return self.write_text(key_or_rel, json.dumps(to_json(doc), indent=1) + "\n")

    def write_npz(self, key_or_rel: str, arrays: Mapping[str, np.ndarray]) -> Path:
        return self.write_bytes(key_or_rel, _savez_bytes(arrays))

    def remove(self, *keys_or_rels: str) -> None:
        import shutil

        for k in keys_or_rels:
            p = self.path / NAMES.get(k, k)
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


_IMAGE_DTYPES = {"bases": "i", "lengths": "i", "words": "u"}


def _image_check(path: Path) -> Any:
    def check(name: str | None, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        want = _IMAGE_DTYPES.get(name or "")
        if want is None or dtype.kind != want or dtype.itemsize not in (4, 8) \
                or len(shape) != 1 or (name == "words" and dtype != np.dtype("<u4")) \
                or (name != "words" and dtype != np.dtype("<i8")):
            raise BuildDirError(f"{path}: array {name!r} is {dtype}{list(shape)}, not a "
                                "parameter image's (bases/lengths int64, words uint32, 1-D); "
                                "recompile with --weights runtime")
    return check


def read_param_image(path: Path, z: Mapping[str, np.ndarray], error: Any
                     ) -> list[tuple[int, np.ndarray]]:
    """``(base, words)`` segments of an image's arrays, their lengths checked."""
    bases, lengths, words = z["bases"], z["lengths"], z["words"]
    if len(bases) != len(lengths) or (lengths < 0).any() or (bases < 0).any() \
            or int(lengths.sum()) != len(words):
        raise error("its bases, lengths and words do not agree (truncated or edited)")
    out, pos = [], 0
    for b, n in zip(bases.tolist(), lengths.tolist()):
        out.append((int(b), words[pos:pos + n].astype(np.uint32)))
        pos += n
    return out
